"""The memory timeline as a small SVG for pages (the HTML report): the same two panels as
``MemoryTimeline.plot()`` (forward and backward, one step curve per strategy, each peak marked and
named), written with the handful of SVG elements the page's sanitizer keeps (``embed.SVG_ELEMENTS``:
no styles, no ``<use>``, no clip paths), so it passes ``clean_svg`` and needs no matplotlib.
"""

from __future__ import annotations

from html import escape

import pandas as pd

from fxviz.core.units import byte_unit
from fxviz.render.theme import EDGE_COLOR, FONT, TIMELINE_COLORS

__all__ = ["timeline_svg"]

_PANEL_W, _PANEL_H = 400, 150  # one panel's plot area, px: the two stack, to fit a side panel
_LEFT, _TOP, _GAP, _BOTTOM = 64, 22, 52, 30
_FONT = f'font-family="{FONT}"'
# what the curves count, said under them (analysis.timeline's docstring): not what a fused step holds
_COUNTED = "one storage per node of the unfused graph; a fusing backend (inductor) peaks lower"


def _fmt(value: float, scale: float) -> str:
    return f"{value / scale:.4g}"


def _panel(df: pd.DataFrame, phase: str, top: float, top_bytes: float, strategies: list[str],
           peaks: pd.DataFrame, unit: str, scale: float) -> list[str]:
    """One phase's axes, curves and peak marks, with its plot area's top edge at ``top``."""
    x0 = _LEFT
    y_of = lambda b: top + _PANEL_H - (b / top_bytes) * _PANEL_H  # noqa: E731
    out = [f'<rect x="{x0}" y="{top}" width="{_PANEL_W}" height="{_PANEL_H}" fill="#ffffff" stroke="#cccccc"/>',
           f'<text x="{x0 + _PANEL_W / 2}" y="{top - 7}" text-anchor="middle" font-size="12" {_FONT}>'
           f'{phase} graph</text>']
    for frac in (0.0, 0.5, 1.0):  # three gridlines, labelled on the left panel's axis
        y = y_of(top_bytes * frac)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + _PANEL_W}" y2="{y:.1f}" stroke="#eeeeee"/>')
        out.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10" {_FONT}>'
                   f'{_fmt(top_bytes * frac, scale)} {unit}</text>')
    resident = float(df["resident_bytes"].max()) if len(df) else 0.0
    y = y_of(resident)
    out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0 + _PANEL_W}" y2="{y:.1f}" stroke="{EDGE_COLOR}" '
               f'stroke-dasharray="2,3"><title>parameters + inputs (resident): {_fmt(resident, scale)} {unit}'
               f'</title></line>')
    for k, name in enumerate(strategies):
        rows = df[(df["strategy"] == name) & (df["phase"] == phase)]
        if rows.empty:
            continue
        color = TIMELINE_COLORS[k % len(TIMELINE_COLORS)]
        width = _PANEL_W / max(len(rows), 1)
        points: list[str] = []
        for i, total in enumerate(rows["total_bytes"]):  # a step per node: flat while it runs
            y = y_of(float(total))
            points += [f"{x0 + i * width:.1f},{y:.1f}", f"{x0 + (i + 1) * width:.1f},{y:.1f}"]
        out.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{color}" stroke-width="1.6">'
                   f'<title>{escape(name)}</title></polyline>')
        for _, r in peaks[(peaks["strategy"] == name) & (peaks["phase"] == phase)].iterrows():
            cx, cy = x0 + (int(r["step"]) + 0.5) * width, y_of(float(r["total_bytes"]))
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{color}" stroke="#000000">'
                       f'<title>{escape(_peak_words(r, unit, scale))}</title></circle>')
    out.append(f'<text x="{x0 + _PANEL_W / 2}" y="{top + _PANEL_H + 14}" text-anchor="middle" font-size="10" '
               f'{_FONT}>node (graph order)</text>')
    return out


def _peak_words(r: pd.Series, unit: str, scale: float) -> str:
    module = r["module"] if isinstance(r["module"], str) and r["module"] else None
    where = f"{r['node']} ({module})" if module else str(r["node"])
    return f"{r['strategy']}: {r['phase']} peak {_fmt(float(r['total_bytes']), scale)} {unit} at {where}"


def timeline_svg(df: pd.DataFrame, peaks: pd.DataFrame) -> str:
    """``Trace.memory_timeline()``'s frame and its peaks as one ``<svg>`` that scales to its box:
    the forward panel above the backward one, sharing the y scale (bytes held, parameters and
    inputs included: each curve's top is the memory table's peak), a legend line per strategy with
    its two peaks (each dot's tooltip names the node and module)."""
    strategies = list(dict.fromkeys(df["strategy"]))
    top_bytes = float(df["total_bytes"].max()) if len(df) else 1.0
    top_bytes = top_bytes or 1.0
    unit, scale = byte_unit(top_bytes)
    width = _LEFT + _PANEL_W + 16
    body: list[str] = []
    for i, phase in enumerate(("forward", "backward")):
        body += _panel(df, phase, _TOP + i * (_PANEL_H + _GAP), top_bytes, strategies, peaks, unit, scale)
    y = _TOP + 2 * _PANEL_H + _GAP + _BOTTOM
    for k, name in enumerate(strategies):
        color = TIMELINE_COLORS[k % len(TIMELINE_COLORS)]
        said = [f"{r['phase']} {_fmt(float(r['total_bytes']), scale)} {unit}"
                for _, r in peaks[peaks["strategy"] == name].iterrows()]
        body.append(f'<line x1="{_LEFT}" y1="{y - 4}" x2="{_LEFT + 22}" y2="{y - 4}" stroke="{color}" '
                    f'stroke-width="2.5"/>')
        body.append(f'<text x="{_LEFT + 28}" y="{y}" font-size="11" {_FONT}>{escape(name)}: peaks '
                    f'{escape(", ".join(said))}</text>')
        y += 16
    body.append(f'<line x1="{_LEFT}" y1="{y - 4}" x2="{_LEFT + 22}" y2="{y - 4}" stroke="{EDGE_COLOR}" '
                f'stroke-dasharray="2,3"/>')
    body.append(f'<text x="{_LEFT + 28}" y="{y}" font-size="11" {_FONT}>parameters + inputs (resident)</text>')
    y += 16
    body.append(f'<text x="{_LEFT}" y="{y}" font-size="10" fill="#555555" {_FONT}>{_COUNTED}</text>')
    height = y + 8
    return (f'<svg width="100%" viewBox="0 0 {width} {height}" class="fxviz-timeline-svg">'
            f'<title>memory timeline</title>{"".join(body)}</svg>')
