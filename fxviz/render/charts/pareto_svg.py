"""The budget curve as a small SVG for pages (the HTML report): the same picture as
``MemorySweep.pareto_plot(points=...)``: the sweep's partitions (saved activation bytes against
recompute FLOPs, the Pareto front as a step line, budgets beside the points) with logged runs and
advice options on top, each tagged (``L1``, ``A2``; coinciding points share one tag) and named in a
legend line below.  Written with the elements the page's sanitizer keeps (``embed.SVG_ELEMENTS``), so
it passes ``clean_svg`` and needs no matplotlib."""

from __future__ import annotations

from html import escape

import pandas as pd

from fxviz.core.units import byte_unit, format_bytes, format_flops
from fxviz.render.charts.plots import POINT_STYLE, point_tags
from fxviz.render.theme import EDGE_COLOR, FONT, ROLE_COLORS, STATUS

__all__ = ["pareto_svg"]

_W, _H = 420, 220  # the plot area, px
_LEFT, _TOP, _BOTTOM = 70, 24, 40
_FONT = f'font-family="{FONT}"'


def _marker(kind: str, cx: float, cy: float, tip: str) -> str:
    marker, color = POINT_STYLE.get(kind, ("o", EDGE_COLOR))
    title = f"<title>{escape(tip)}</title>"
    if marker == "s":
        return (f'<rect x="{cx - 5:.1f}" y="{cy - 5:.1f}" width="10" height="10" fill="{color}" fill-opacity="0.7" '
                f'stroke="#000000">{title}</rect>')
    w = 6 if marker == "D" else 4
    pts = f"{cx:.1f},{cy - 6:.1f} {cx + w:.1f},{cy:.1f} {cx:.1f},{cy + 6:.1f} {cx - w:.1f},{cy:.1f}"
    # see-through: a sweep point (the Pareto front's) under a run or an option stays visible
    return f'<polygon points="{pts}" fill="{color}" fill-opacity="0.7" stroke="#000000">{title}</polygon>'


def _words(r: pd.Series, numbers: bool = True) -> str:
    """A point's legend line (``numbers``: with its bytes and FLOPs, as its tooltip says them)."""
    kind = {"logged": "logged run", "advice": "advice", "bound": "advice bound"}.get(str(r["kind"]), str(r["kind"]))
    verdict = "" if r["kind"] == "bound" or r["meets"] is None or pd.isna(r["meets"]) else (
        ": meets the target" if r["meets"] else ": misses the target")
    text = f"{r['tag']} {kind}: {r['label']}{verdict}"
    if not numbers:
        return text
    return (f"{text} (saved {format_bytes(int(r['saved_activation_bytes'])) or '0 B'}, recompute "
            f"{format_flops(int(r['recompute_flops'])) or '0 FLOP'})")


def pareto_svg(sweep: pd.DataFrame, points: pd.DataFrame) -> str:
    """``Trace.memory_sweep()``'s frame and ``budget_points``' frame as one ``<svg>`` that scales to
    its box (see the module docstring); every marker's tooltip gives its bytes and FLOPs."""
    ok = sweep[sweep["error"].isna()] if "error" in sweep else sweep
    xs_all = [float(v) for v in ok["saved_activation_bytes"]] + [float(v) for v in points["saved_activation_bytes"]]
    ys_all = [float(v) for v in ok["recompute_flops"]] + [float(v) for v in points["recompute_flops"]]
    top_x, top_y = (max(xs_all) if xs_all else 0.0) or 1.0, (max(ys_all) if ys_all else 0.0) or 1.0
    unit, scale = byte_unit(top_x)
    x_of = lambda b: _LEFT + 8 + (b / top_x) * (_W - 16)  # noqa: E731
    y_of = lambda f: _TOP + _H - 8 - (f / top_y) * (_H - 16)  # noqa: E731
    body = [f'<rect x="{_LEFT}" y="{_TOP}" width="{_W}" height="{_H}" fill="#ffffff" stroke="#cccccc"/>']
    for frac in (0.0, 0.5, 1.0):  # three gridlines each way, labelled
        y, x = y_of(top_y * frac), x_of(top_x * frac)
        body.append(f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + _W}" y2="{y:.1f}" stroke="#eeeeee"/>')
        body.append(f'<text x="{_LEFT - 4}" y="{y + 4:.1f}" text-anchor="end" font-size="10" {_FONT}>'
                    f'{format_flops(int(top_y * frac)) or "0"}</text>')
        body.append(f'<line x1="{x:.1f}" y1="{_TOP}" x2="{x:.1f}" y2="{_TOP + _H}" stroke="#eeeeee"/>')
        body.append(f'<text x="{x:.1f}" y="{_TOP + _H + 14}" text-anchor="middle" font-size="10" {_FONT}>'
                    f'{top_x * frac / scale:.3g} {unit}</text>')
    body.append(f'<text x="{_LEFT + _W / 2}" y="{_TOP + _H + 30}" text-anchor="middle" font-size="11" {_FONT}>'
                f'saved activation memory ({unit}, storage-aware)</text>')
    body.append(f'<text x="{_LEFT + _W / 2}" y="{_TOP - 8}" text-anchor="middle" font-size="12" {_FONT}>'
                'budget sweep (min-cut, dp) with logged runs and advice: recompute FLOPs</text>')
    front = ok[ok["pareto"].fillna(False).astype(bool)] if "pareto" in ok else ok
    front = front.sort_values("saved_activation_bytes")
    steps: list[str] = []
    for (_, a), (_, b) in zip(front.iterrows(), list(front.iterrows())[1:]):
        steps += [f"{x_of(float(a['saved_activation_bytes'])):.1f},{y_of(float(a['recompute_flops'])):.1f}",
                  f"{x_of(float(b['saved_activation_bytes'])):.1f},{y_of(float(a['recompute_flops'])):.1f}"]
    if len(front):
        last = front.iloc[-1]
        steps.append(f"{x_of(float(last['saved_activation_bytes'])):.1f},{y_of(float(last['recompute_flops'])):.1f}")
        body.append(f'<polyline points="{" ".join(steps)}" fill="none" stroke="{STATUS["saved"].color}" '
                    'stroke-width="1.5"><title>Pareto front of the sweep</title></polyline>')
    for _, r in ok.iterrows():
        on = bool(r["pareto"]) if "pareto" in ok and not pd.isna(r["pareto"]) else True
        budgets = r["budgets"] if isinstance(r["budgets"], list) else [r["budget"]]
        text = f"{budgets[0]:g}" if len(budgets) == 1 else f"{min(budgets):g}–{max(budgets):g}"
        cx, cy = x_of(float(r["saved_activation_bytes"])), y_of(float(r["recompute_flops"]))
        fill = ROLE_COLORS["forward"] if on else EDGE_COLOR
        body.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{fill}" stroke="#000000"><title>budget '
                    f'{escape(text)}: saved {escape(format_bytes(int(r["saved_activation_bytes"])) or "0 B")}, '
                    f'recompute {escape(format_flops(int(r["recompute_flops"])) or "0 FLOP")}</title></circle>')
        ly = cy - 5 if cy - 5 > _TOP + 10 else cy + 3  # at the top edge: beside the point, not on the title
        body.append(f'<text x="{cx + 7:.1f}" y="{ly:.1f}" font-size="9" fill="#555555" {_FONT}>'
                    f'{escape(text)}</text>')
    for _, r in points.iterrows():
        px, py = x_of(float(r["saved_activation_bytes"])), y_of(float(r["recompute_flops"]))
        body.append(_marker(str(r["kind"]), px, py, _words(r)))
    if len(points):
        for x, y, tag in point_tags(points, "recompute_flops", 0.03):
            # below-right of its point (budget labels sit above-right); at the bottom edge above-left instead,
            # never on the axis' tick labels nor on a budget label
            below = y_of(y) + 14 <= _TOP + _H - 3
            tx, ty, anchor = (x_of(x) + 7, y_of(y) + 14, "start") if below else (x_of(x) - 7, y_of(y) - 8, "end")
            body.append(f'<text x="{tx:.1f}" y="{ty:.1f}" text-anchor="{anchor}" font-size="10" font-weight="bold" '
                        f'{_FONT}>{escape(tag)}</text>')
    y = _TOP + _H + _BOTTOM + 14
    widest = 0
    for _, r in points.iterrows():  # the legend: one line per point, by tag (the numbers in its tooltip)
        line = _words(r, numbers=False)
        widest = max(widest, len(line))
        body.append(_marker(str(r["kind"]), _LEFT + 6, y - 4, _words(r)))
        body.append(f'<text x="{_LEFT + 18}" y="{y}" font-size="11" {_FONT}><title>{escape(_words(r))}</title>'
                    f'{escape(line)}</text>')
        y += 16
    # the right margin holds a budget label beside a point at the right edge ("0.1–1": ~40 px)
    width, height = max(_LEFT + _W + 56, _LEFT + 18 + int(widest * 6.2) + 8), y + 4  # ~6.2 px per character
    return (f'<svg width="100%" viewBox="0 0 {width} {height}" class="fxviz-pareto-svg">'
            f'<title>budget curve with logged runs and advice</title>{"".join(body)}</svg>')
