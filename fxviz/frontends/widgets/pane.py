"""The explorer's front-end half: one anywidget whose script is ``fxviz/frontends/static/explorer.js`` (shared
with the HTML report), and the traits the kernel syncs to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anywidget
import traitlets as t

from fxviz.frontends.report.page import STATIC
from fxviz.payloads.panels import page_constants
from fxviz.payloads.views import ViewPayload
from fxviz.render import theme
from fxviz.render.page.embed import page_data

__all__ = ["GraphPane", "SwitchTiming"]

# every synced dict goes through the one page-data conversion (render.embed.page_data): no NaN or
# infinity, no numpy scalar reaches the page, as in the report
_PAGE: dict[str, Any] = {"sync": True, "to_json": lambda value, _widget: page_data(value)}



class GraphPane(anywidget.AnyWidget):
    """The front-end half: one SVG with zoom/pan, details, search, table, doctor, legend.

    The view shown travels as one value, ``view_data`` (a ``payloads.ViewPayload``: the same dict
    the report embeds for that view); ``keep_zoom`` says whether the switch keeps the window, and
    ``statuses`` holds what the strategies it names did (by name, as the report's ``status``).
    The other traits are the trace's (nodes, table, doctor), the page's (legend, constants) or the
    user's (selection, search).  The properties below read the view's fields.
    """

    _esm = STATIC / "explorer.js"
    _css = STATIC / "explorer.css"

    palette_css = t.Unicode(theme.css_variables(".fxviz-explorer")).tag(sync=True)
    constants = t.Dict(page_constants()).tag(**_PAGE)
    view_data = t.Dict().tag(**_PAGE)
    keep_zoom = t.Bool(False).tag(sync=True)
    statuses = t.Dict().tag(**_PAGE)
    nodes = t.Dict().tag(**_PAGE)
    table = t.Dict().tag(**_PAGE)
    doctor = t.Dict().tag(**_PAGE)
    legend = t.Dict().tag(**_PAGE)
    selected = t.Unicode("").tag(sync=True)
    search = t.Unicode("").tag(sync=True)
    matches = t.Int(0).tag(sync=True)
    drawn_matches = t.Int(0).tag(sync=True)
    busy = t.Unicode("").tag(sync=True)
    # an error that is no view's (a box that does not exist, a failed re-trace): shown over the view
    alert = t.Unicode("").tag(sync=True)

    def show(self, payload: ViewPayload, statuses: dict[str, Any], table: dict[str, Any] | None,
             keep_zoom: bool = False) -> None:
        """Show one view: its payload as one value, with what the page reads beside it (the
        statuses of its strategies; the memory table, unless None)."""
        with self.hold_sync():
            self.alert = ""
            self.keep_zoom = keep_zoom
            self.statuses = statuses
            if table is not None:
                self.table = table
            self.view_data = payload.to_json()

    def _field(self, name: str, default: Any = "") -> Any:
        return self.view_data.get(name, default)

    @property
    def svg(self) -> str:
        return str(self._field("svg"))

    @property
    def view_key(self) -> str:
        return str(self._field("key"))

    @property
    def view(self) -> str:
        return str(self._field("view", "joint"))

    @property
    def caption(self) -> str:
        return str(self._field("caption"))

    @property
    def boxes(self) -> list[dict[str, Any]]:
        return list(self._field("boxes", []))

    @property
    def expanded(self) -> list[str]:
        return list(self._field("expanded", []))

    @property
    def differences(self) -> bool:
        return bool(self._field("differences", False))

    @property
    def error(self) -> str:
        """The error shown: one that is no view's (``alert``), else the view's own."""
        return self.alert or str(self._field("error"))

    @property
    def highlight(self) -> str:
        """The strategy shown (A in the compare view): its memory-table row is highlighted."""
        return str(self._field("strategy") or "")

    @property
    def compare_highlight(self) -> str:
        return str(self._field("compare") or "")

    @property
    def status(self) -> dict[str, Any]:
        return dict(self.statuses.get(self.highlight, {}))

    @property
    def compare_status(self) -> dict[str, Any]:
        return dict(self.statuses.get(self.compare_highlight, {})) if self.compare_highlight else {}


@dataclass(frozen=True)
class SwitchTiming:
    """How long one view switch took in the kernel, and whether everything was cached."""

    key: str
    seconds: float
    cached: bool
