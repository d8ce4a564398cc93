"""The explorer's content as plain HTML (inline SVG, the memory table, the legend), for viewers
without a kernel or without JavaScript (nbviewer, GitHub, a report opened with scripts off)."""

from __future__ import annotations

import html
from typing import Any

from fxviz.render import theme

__all__ = ["static_html"]


def _table_html(table: dict[str, Any], highlight: str | None) -> str:
    head = "".join(f'<th title="{html.escape(t)}">{html.escape(c)}</th>'
                   for c, t in zip(table["columns"], table["tips"]))
    rows = []
    for r in table.get("rows", []):
        cls = ' class="fxviz-row-selected"' if r["key"] == highlight else ""
        cells = "".join((f"<th>{html.escape(c)}</th>" if i == 0 else f"<td>{html.escape(c)}</td>")
                        for i, c in enumerate(r["cells"]))
        rows.append(f'<tr data-strategy="{html.escape(r["key"])}"{cls}>{cells}</tr>')
    return f'<table class="fxviz-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def static_html(svg: str, table: dict[str, Any] | None, highlight: str | None, caption: str = "",
                title: str = "") -> str:
    """The explorer's content as plain HTML (inline SVG, the memory table, the legend) for
    viewers without a kernel or without JavaScript.  ``svg`` must come from ``clean_svg``."""
    parts = ['<div class="fxviz-static" style="font-family:Helvetica,Arial,sans-serif;font-size:13px">']
    if title:
        parts.append(f"<p><b>{html.escape(title)}</b></p>")
    parts.append('<div style="overflow:auto;max-width:100%;max-height:80vh;border:1px solid #ccc">'
                 f"{svg}</div>")
    if caption:
        parts.append(f'<p style="font-size:11px;color:#555">{html.escape(caption)}</p>')
    if table and table.get("rows"):
        parts.append("<p><b>Memory</b> (highlighted: the strategy shown)</p>")
        parts.append(_table_html(table, highlight).replace(
            'class="fxviz-row-selected"', 'class="fxviz-row-selected" style="background:#dde9f7;font-weight:bold"'))
    parts.append(theme.legend_html())
    parts.append("<p style=\"font-size:11px;color:#777\">static view: run the notebook for the interactive "
                 "explorer</p></div>")
    return "".join(parts)
