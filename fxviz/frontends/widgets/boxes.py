"""The boxes an explorer has opened (names ``Trace.draw(expand=...)`` takes), in the order they were
opened, and which boxes each view can open (cached per trace, view and grouping)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fxviz.core.errors import FxvizError, InputError
from fxviz.payloads.views import openable_boxes
from fxviz.render.graph.spec import DrawSpec
from fxviz.render.graph.views import box_name

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["OpenBoxes"]


class OpenBoxes:
    """``names``: the boxes open now, in the order opened; kept across views (a view draws those it has)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._openable: dict[tuple[Any, ...], set[str]] = {}

    def openable(self, tr: Trace, trace_id: tuple[Any, ...], vk: DrawSpec) -> set[str]:
        """What ``expand`` takes in the view ``vk`` of ``tr`` describes (empty: it draws no boxes)."""
        side = vk.view if vk.view in ("forward", "backward") else "joint"
        key = (*trace_id, side, vk.strategy if side != "joint" else None, vk.group)
        if key not in self._openable:
            try:
                self._openable[key] = openable_boxes(tr, side, vk.strategy or "default", vk.group)
            except FxvizError:
                self._openable[key] = set()
        return self._openable[key]

    def open(self, name: str, known: set[str]) -> bool:
        """Open the box ``name`` (its module path, function box name or a box record's ``key``) among
        ``known``; True when it was not open yet."""
        if not known:
            raise InputError(f"{name!r}: this view draws no boxes to open", "pick a view drawn with boxes")
        name = box_name(name, known)
        if name in self.names:
            return False
        self.names.append(name)
        return True

    def start(self, opened: list[str], known: set[str]) -> None:
        """The boxes open from the start (``explore(expand=...)``), as ``draw(expand=...)`` names them."""
        if not known:
            raise InputError(f"expand={opened[0]!r}: the first view draws no boxes to open",
                             "leave expand out, or pass group='module'")
        self.names = list(dict.fromkeys(box_name(e, known) for e in opened))

    def close(self, name: str | None) -> bool:
        """Close ``name`` and the boxes opened inside it (``None``: every box); True when one closed."""
        kept = [] if name is None else [e for e in self.names if e != name and not e.startswith(name + ".")]
        changed = kept != self.names
        self.names = kept
        return changed

    def within(self, known: set[str]) -> tuple[str, ...]:
        """The open boxes a view that can open ``known`` draws open, sorted (a ``DrawSpec``'s ``expand``)."""
        return tuple(sorted(e for e in self.names if e in known))
