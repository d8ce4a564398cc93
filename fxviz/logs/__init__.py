"""Logs of real ``torch.compile`` runs (``TORCH_TRACE=dir``) read into fxviz, no model needed.

``Run`` and ``load_logs`` load (with torch) on first use; ``fxviz.logs.reader`` streams a log without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .run import Run, load_logs

__all__ = ["Run", "load_logs"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.run"), name)
    globals()[name] = value
    return value
