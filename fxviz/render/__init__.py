"""Presentation layer: the one palette (``theme``), graph + overlays -> DOT (``dot``), and the
displayable, savable ``Drawing``.  Reads analysis objects; never recomputes them.

The names below load on first use (``import fxviz.render.limits`` stays free of torch: issue 26).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from . import theme
    from .drawing import Drawing
    from .limits import NODE_LIMIT
    from .views import draw

__all__ = ["theme", "Drawing", "draw", "NODE_LIMIT"]

_HOMES = {"theme": "theme", "Drawing": "drawing", "draw": "views", "NODE_LIMIT": "limits"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{home}")
    value = module if name == home else getattr(module, name)
    globals()[name] = value
    return value
