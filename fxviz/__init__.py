"""fxviz: see what PyTorch's AOTAutograd does to your model.

Trace a model into its joint forward+backward graph, color every node by role, partition it with
every strategy torch has, tabulate what each saves, and diagnose missing gradients.
"""

from __future__ import annotations

from . import (
    _supported,  # noqa: F401  (first: refuses a torch older than the supported range)
    examples,
)
from .analysis.partition import partitioner
from .diff import Diff, diff
from .errors import FxvizError, InputError, LogError, NoFloatingOutputError, RenderError, StrategyError, TraceError
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
