"""fxviz: see what PyTorch's AOTAutograd does to your model.

Trace a model into its joint forward+backward graph, color every node by role, partition it with
every strategy torch has, tabulate what each saves, and diagnose missing gradients.

The names below load when first used (issue 26): ``import fxviz`` costs about what ``import torch``
does, and ``fxviz --help`` or an argument error imports no torch at all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# first: refuses a torch older than the supported range, without importing it
from fxviz.core import supported as _supported  # noqa: F401
from fxviz.core.errors import (
    FxvizError,
    InputError,
    LogError,
    NoFloatingOutputError,
    OutputError,
    RenderError,
    StrategyError,
    TraceError,
)

if TYPE_CHECKING:
    from fxviz import examples
    from fxviz.analysis.strategy.partition import partitioner
    from fxviz.api.diffing import Diff, StepDiff, diff
    from fxviz.api.facade import Trace
    from fxviz.api.run import Run, load_logs
    from fxviz.api.tracing import trace
    from fxviz.frontends.report.page import report
    from fxviz.frontends.widgets import explore
    from fxviz.payloads.pareto import budget_points

__all__ = [
    "trace",
    "Trace",
    "diff",
    "Diff",
    "StepDiff",
    "load_logs",
    "Run",
    "explore",
    "report",
    "budget_points",
    "partitioner",
    "examples",
    "FxvizError",
    "InputError",
    "TraceError",
    "NoFloatingOutputError",
    "StrategyError",
    "RenderError",
    "LogError",
    "OutputError",
]

__version__ = "0.1.0"

# public name -> the module that defines it (relative to this package).  No module is named like a
# public function (``tracing`` defines ``trace``, ``diffing`` defines ``diff``): a submodule binds its
# name on the package when it loads, which would hide the function.
_HOMES = {
    "trace": "api.tracing", "Trace": "api.facade", "diff": "api.diffing", "Diff": "api.diffing",
    "StepDiff": "api.diffing", "load_logs": "api.run", "Run": "api.run", "explore": "frontends.widgets",
    "report": "frontends.report.page", "budget_points": "payloads.pareto",
    "partitioner": "analysis.strategy.partition", "examples": "examples",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{home}")
    value = module if name == "examples" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """What a notebook's Tab offers: the public names, loaded or not (and nothing this module imports)."""
    return sorted(__all__)
