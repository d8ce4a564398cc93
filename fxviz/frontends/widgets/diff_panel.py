"""The explorer's "compare with another trace" panel: a ``fxviz.diff`` of the trace shown and
another one (its summary, both sides drawn, bytes per module, every saved value), the same content
as the diff report page."""

from __future__ import annotations

import html

import ipywidgets as widgets

from fxviz.api.diffing import Diff
from fxviz.frontends.report.diff_page import STYLE, diff_body_html

__all__ = ["DiffPanel"]


class DiffPanel(widgets.VBox):
    """A panel that shows one ``Diff`` (or nothing)."""

    def __init__(self) -> None:
        self.title = widgets.HTML()
        self.body = widgets.HTML()
        self.diff: Diff | None = None
        super().__init__([self.title, self.body], layout=widgets.Layout(width="100%"))
        self.add_class("fxviz-diff-panel")

    def show(self, d: Diff | None) -> None:
        """Show ``d``'s content, or empty the panel (``None``)."""
        self.diff = d
        if d is None:
            self.title.value = self.body.value = ""
            return
        self.title.value = (f"<b>Compared with another trace</b>: A = {html.escape(d.a.label)}, "
                            f"B = {html.escape(d.b.label)}")
        self.body.value = f"<style>{STYLE}</style>" + diff_body_html(d)
