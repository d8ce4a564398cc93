"""Presentation layer: the one palette (``theme``), graph + overlays -> DOT (``dot``), and the
displayable, savable ``Drawing``.  Reads analysis objects; never recomputes them."""

from __future__ import annotations

from . import theme
from .drawing import Drawing
from .views import NODE_LIMIT, draw

__all__ = ["theme", "Drawing", "draw", "NODE_LIMIT"]
