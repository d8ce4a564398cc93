"""fxviz: see what PyTorch's AOTAutograd does to your model.

Trace a model into its joint forward+backward graph, color every node by role, partition it with
every strategy torch has, tabulate what each saves, and diagnose missing gradients.

The names below load when first used (issue 26): ``import fxviz`` costs about what ``import torch``
does, and ``fxviz --help`` or an argument error imports no torch at all.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

from . import _supported  # noqa: F401  (first: refuses a torch older than the supported range, without importing it)
from .errors import FxvizError, InputError, LogError, NoFloatingOutputError, RenderError, StrategyError, TraceError

if TYPE_CHECKING:
    from . import examples
    from .analysis.partition import partitioner
    from .diff import Diff, diff
    from .html_report import report
    from .logs import Run, load_logs
    from .trace import Trace, trace
    from .widgets import explore

__all__ = [
    "trace",
    "Trace",
    "diff",
    "Diff",
    "load_logs",
    "Run",
    "explore",
    "report",
    "partitioner",
    "examples",
    "FxvizError",
    "InputError",
    "TraceError",
    "NoFloatingOutputError",
    "StrategyError",
    "RenderError",
    "LogError",
]

__version__ = "0.1.0"

# public name -> the module that defines it (relative to this package)
_HOMES = {
    "trace": "trace", "Trace": "trace", "diff": "diff", "Diff": "diff", "load_logs": "logs", "Run": "logs",
    "explore": "widgets", "report": "html_report", "partitioner": "analysis.partition", "examples": "examples",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{home}")
    value = module if name == "examples" else getattr(module, name)
    globals()[name] = value
    return value


class _Package(types.ModuleType):
    """``fxviz.trace`` and ``fxviz.diff`` are the functions, never the modules ``fxviz/trace.py`` and
    ``fxviz/diff.py``: Python binds a submodule to its package's attribute when the submodule first
    loads, which would hide the function (before issue 26 ``from .trace import trace`` ran last and
    won; now it loads lazily, at any time)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("trace", "diff") and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
