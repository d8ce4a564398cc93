"""fxviz: see what PyTorch's AOTAutograd does to your model.

Trace a model into its joint forward+backward graph, color every node by role, partition it with
every strategy torch has, tabulate what each saves, and diagnose missing gradients.

The names below load when first used (issue 26): ``import fxviz`` costs about what ``import torch``
does, and ``fxviz --help`` or an argument error imports no torch at all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _supported  # noqa: F401  (first: refuses a torch older than the supported range, without importing it)
from .errors import (
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
    from . import examples
    from .analysis.partition import partitioner
    from .diffing import Diff, StepDiff, diff
    from .facade import Trace
    from .html_report import report
    from .logs import Run, load_logs
    from .payloads.pareto import budget_points
    from .tracing import trace
    from .widgets import explore

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
    "trace": "tracing", "Trace": "facade", "diff": "diffing", "Diff": "diffing", "StepDiff": "diffing",
    "load_logs": "logs", "Run": "logs",
    "explore": "widgets", "report": "html_report", "budget_points": "payloads.pareto",
    "partitioner": "analysis.partition", "examples": "examples",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{home}")
    value = module if name == "examples" else getattr(module, name)
    globals()[name] = value
    return value
