"""The self-contained HTML report, and the plain data both interactive views read.

The report and the notebook explorer show the same things with the same front-end code
(``fxviz/static/explorer.js``): SVGs drawn by :mod:`fxviz.render.views`, one record per joint
node (details, producers, users), the saved/recomputed/removed sets of each strategy, the
memory table and the doctor's findings.  This module turns the analysis objects into that data
(never re-deriving a fact), and writes the report as one HTML file with everything inline.

Safety: model strings reach the page only as JSON data (read with ``JSON.parse`` and shown with
``textContent``) or inside graphviz SVG whose labels fxviz escaped; the JSON is escaped so no
``</script>`` or ``<!--`` can end its ``<script>`` element, and every SVG is checked to hold only
graphviz's own elements and attributes.  The only scripts in the file are fxviz's own.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import html
import json
import os
import pathlib
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .._io import write_atomic
from ..errors import FxvizError, InputError, RenderError
from . import theme
from .dot import format_bytes, format_tensor

if TYPE_CHECKING:  # pragma: no cover
    from ..analysis.partition import Partition
    from ..trace import Trace

__all__ = [
    "VIEWS",
    "REPORT_STRATEGIES",
    "STATIC",
    "ViewKey",
    "RenderedView",
    "clean_svg",
    "script_json",
    "node_data",
    "status_data",
    "table_data",
    "memory_frame",
    "doctor_data",
    "legend_data",
    "model_name",
    "render_view",
    "static_html",
    "build_report",
    "report",
]

VIEWS = ("joint", "forward", "backward", "compare")
REPORT_STRATEGIES: tuple[str, ...] = ("default", "min_cut", "budget:0.5", "recompute_all", "eager")
STATIC = pathlib.Path(__file__).resolve().parent.parent / "static"

# graphviz's SVG vocabulary for fxviz drawings; anything else is refused (see clean_svg)
_SVG_ELEMENTS = {"svg", "g", "title", "polygon", "polyline", "path", "ellipse", "circle", "rect", "line", "text",
                 "tspan", "a", "defs", "linearGradient", "radialGradient", "stop"}
_PROLOG = re.compile(r"^\s*(<\?xml[^>]*\?>\s*)?(<!DOCTYPE[^>]*>\s*)?", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_XMLNS = re.compile(r'\s+xmlns(:xlink)?="[^"]*"')


# --- safe embedding ------------------------------------------------------------------------------
def clean_svg(svg: str) -> str:
    """graphviz SVG -> an ``<svg>`` element ready to sit inside HTML: no prolog, no comments, no
    namespace URLs (HTML's parser puts ``<svg>`` in the SVG namespace by itself).

    Raises ``RenderError`` if the SVG holds anything graphviz does not write for fxviz (a script,
    an event-handler attribute, a link): it would mean a model string escaped its escaping.
    """
    try:
        root = ET.fromstring(svg.encode("utf-8"))
    except ET.ParseError as exc:
        raise RenderError(f"graphviz produced SVG that does not parse: {exc}",
                          "this is a bug in fxviz's DOT output; please report it") from exc
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1]
        if tag not in _SVG_ELEMENTS:
            raise RenderError(f"refusing SVG with a <{tag}> element", "please report this model to fxviz")
        for attr, value in el.attrib.items():
            name = attr.rsplit("}", 1)[-1].lower()
            low = value.strip().lower()
            if name.startswith("on") or name == "href" or name == "style" or low.startswith("javascript:") or (
                    "url(" in low and not re.fullmatch(r"url\(#[\w.-]+\)", low)):
                raise RenderError(f"refusing SVG with attribute {name}={value[:40]!r}",
                                  "please report this model to fxviz")
    text = _PROLOG.sub("", svg, count=1)
    text = _COMMENT.sub("", text)
    start = text.find("<svg")
    head_end = text.find(">", start)
    text = text[:start] + _XMLNS.sub("", text[start:head_end]) + text[head_end:]
    return text.strip()


def script_json(data: Any) -> str:
    """JSON that is safe inside ``<script type="application/json">``: ``<``, ``>``, ``&`` and the
    two JavaScript line separators are written as ``\\u`` escapes, so no string can close the
    element or open a comment; ``JSON.parse`` reads back the same values."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# --- data for the front-end ----------------------------------------------------------------------
def model_name(tr: "Trace") -> str:
    """The name the views title the graph with: the model's class, or the function's name."""
    model = tr.capture.model
    if model is not None:
        return type(model).__name__
    return getattr(tr.capture.fn, "__name__", "function")


def node_data(tr: "Trace") -> dict[str, dict[str, Any]]:
    """One record per joint-graph node (output excluded): what the details panel shows."""
    graph = tr.graph
    out: dict[str, dict[str, Any]] = {}
    for n in graph.gm.graph.nodes:
        if n.op == "output":
            continue
        info = graph.info[n.name]
        users = [u.name for u in n.users if u.op != "output"]
        out[n.name] = {
            "name": n.name,
            "role": info.role,
            "role_label": theme.ROLE_LABELS.get(info.role, info.role),
            "phase": info.phase,
            "op": info.short_op,
            "target": info.target,
            "tensor": format_tensor(info),
            "shape": list(info.shape) if info.shape is not None else None,
            "dtype": info.dtype,
            "bytes": info.bytes,
            "bytes_text": format_bytes(info.bytes) if info.bytes is not None else None,
            "module": info.module,
            "qualname": info.qualname,
            "source": info.source,
            "code": info.source_code,
            "inputs": [a.name for a in n.all_input_nodes],
            "users": users,
            "returned": any(u.op == "output" for u in n.users),
        }
    return out


def status_data(p: "Partition") -> dict[str, Any]:
    """What one strategy did, by joint-node name (straight from the ``Partition``)."""
    return {
        "key": p.strategy,
        "label": p.label or p.strategy,
        "error": p.error,
        "saved": list(p.saved),
        "recomputed": sorted(p.recomputed),
        "removed": sorted(p.removed),
        "random": sorted(getattr(p, "recomputed_random", ()) or ()),
    }


# the memory-table columns the side panel shows (the full table is tr.memory_table())
_TABLE_COLUMNS: list[tuple[str, str, str]] = [
    ("strategy", "strategy", "the partition strategy"),
    ("saved_activation_bytes", "saved activations", "bytes of unique storages the backward keeps "
     "(views and aliases count once; parameters and inputs excluded)"),
    ("saved_tensors", "saved tensors", "values the forward hands to the backward"),
    ("recomputed_ops", "recomputed ops", "forward ops the backward runs again"),
    ("recompute_flops", "recompute FLOPs", "FLOPs of the recomputed ops (matmul/conv; pointwise ops count 0)"),
    ("forward_peak_bytes", "forward peak", "peak live bytes while the forward runs, parameters included"),
    ("backward_peak_bytes", "backward peak", "peak live bytes while the backward runs"),
]


def _missing(v: Any) -> bool:
    try:
        import pandas as pd

        return v is None or bool(pd.isna(v))
    except (TypeError, ValueError):
        return v is None


def table_data(df: Any) -> dict[str, Any]:
    """The memory table (``tr.memory_table()``) as display strings per strategy row, formatted
    and best-marked exactly as ``fxviz.render.table`` does for the notebook table."""
    from .table import best_rows, format_bytes as table_bytes, format_flops

    best = best_rows(df)
    rows = []
    for idx, rec in zip(df.index, df.to_dict("records")):
        cells, marks = [], []
        for col, _, _ in _TABLE_COLUMNS:
            v = rec.get(col)
            if _missing(v):
                text = "—"
            elif col.endswith("_bytes"):
                text = table_bytes(v)
            elif col.endswith("_flops"):
                text = format_flops(v)
            else:
                text = str(v)
            cells.append(text)
            marks.append(idx in best.get(col, ()))
        err = rec.get("error")
        rows.append({"key": str(rec["strategy"]), "cells": cells, "best": marks,
                     "error": None if _missing(err) else str(err)})
    return {"columns": [c[1] for c in _TABLE_COLUMNS], "tips": [c[2] for c in _TABLE_COLUMNS], "rows": rows,
            "caption": (df.attrs.get("caption", "") + " Bold: the best value of each column.").strip()}


def memory_frame(tr: "Trace", strategies: Sequence[Any]) -> Any:
    """``tr.memory_table(strategies)`` (cached on the Trace)."""
    return tr.memory_table(list(strategies))


def doctor_data(tr: "Trace", strategy: Any = "default") -> dict[str, Any]:
    """The doctor's findings (``tr.doctor()``), grouped as its card groups them, as plain records."""
    from .doctor_view import KIND_TITLES

    try:
        result = tr.doctor(strategy)
    except FxvizError as exc:
        return {"message": f"the doctor could not run: {exc.message}", "findings": [], "healthy": None}
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for f in result.findings:
        groups.setdefault((f.severity, f.kind, f.fix), []).append(f)
    out = []
    for (severity, kind, fix), fs in groups.items():
        nodes: list[str] = []
        for f in fs:
            if f.graph in (None, tr.index):
                nodes += [n for n in f.nodes if n not in nodes]
        out.append({
            "severity": severity,
            "title": KIND_TITLES.get(kind, kind) + (f" ({len(fs)})" if len(fs) > 1 else ""),
            "items": [f.message for f in fs],
            "hint": fix,
            "nodes": nodes,
        })
    return {"message": result.headline(), "findings": out, "healthy": bool(result.healthy)}


def legend_data() -> dict[str, Any]:
    """The one palette (``theme.as_dict``), for the legend."""
    return theme.as_dict()


# --- drawing one view ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ViewKey:
    """Everything that decides one drawing (and nothing else): the cache key of an SVG."""

    view: str = "joint"
    strategy: str = "default"
    compare: str | None = None
    group: str | None = None
    depth: int | None = None

    def text(self) -> str:
        return "|".join(str(x) if x is not None else "-" for x in
                        (self.view, self.strategy, self.compare, self.group, self.depth))


@dataclass
class RenderedView:
    """One laid-out view: its cleaned SVG and the partitions it shows (the widget caches these)."""

    svg: str
    caption: str
    seconds: float
    partition: "Partition"
    compare: "Partition | None" = None
    notes: list[str] = field(default_factory=list)


def render_view(tr: "Trace", key: ViewKey, timeout: float | None = None) -> RenderedView:
    """Partition (cached on the Trace), draw and lay out one view; returns its cleaned SVG."""
    if key.view not in VIEWS:
        raise InputError(f"unknown view {key.view!r}", f"use one of {', '.join(VIEWS)}")
    t0 = time.perf_counter()
    p = tr.partition(key.strategy)
    q = tr.partition(key.compare) if key.view == "compare" and key.compare else None
    if p.error:
        raise InputError(f"strategy {p.label or p.strategy!r} failed: {p.error}", "pick another strategy")
    if q is not None and q.error:
        raise InputError(f"strategy {q.label or q.strategy!r} failed: {q.error}", "pick another strategy")
    view = "joint" if key.view == "compare" else key.view
    if view in ("forward", "backward") and (p.forward is None or p.backward is None):
        raise InputError(f"{p.label or p.strategy} has no {view} graph to draw: it is measured, not partitioned",
                         "look at the joint view, which marks what it saves")
    drawing = _draw(tr, view, key.strategy, key.compare if key.view == "compare" else None, key.group, key.depth,
                    timeout)
    svg = clean_svg(drawing.svg())
    return RenderedView(svg=svg, caption=drawing.caption, seconds=time.perf_counter() - t0, partition=p,
                        compare=q)


def _draw(tr: "Trace", view: str, strategy: str, compare: str | None, group: str | None, depth: int | None,
          timeout: float | None) -> Any:
    """``tr.draw`` (cached on the Trace: a view drawn once is never laid out again)."""
    return tr.draw(view, strategy=strategy, compare=compare, group=group, depth=depth, timeout=timeout)


# --- static HTML (no script) ---------------------------------------------------------------------
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


# --- the report ----------------------------------------------------------------------------------
def _compare_pairs(strategies: Sequence[str]) -> list[tuple[str, str]]:
    """Each strategy against the default; the default against min-cut."""
    if not strategies:
        return []
    base = strategies[0]
    pairs = [(s, base) for s in strategies[1:]]
    if len(strategies) > 1:
        pairs.insert(0, (base, strategies[1]))
    return pairs


def build_report(tr: "Trace", strategies: Iterable[Any] = REPORT_STRATEGIES,
                 views: Iterable[str] = ("joint", "forward", "backward", "compare"),
                 compare: Sequence[tuple[Any, Any]] | None = None, group: str | None = None,
                 depth: int | None = None, title: str | None = None,
                 progress: Callable[[str], None] | None = None) -> str:
    """The report as one HTML string (see :func:`report`)."""
    from ..analysis.partition import strategy_key

    keys = list(dict.fromkeys(strategy_key(s) for s in strategies))
    if not keys:
        raise InputError("the report needs at least one strategy", "pass strategies=('default', 'min_cut')")
    views = [v for v in views if v in VIEWS]
    if not views:
        raise InputError("the report needs at least one view", f"use views from {', '.join(VIEWS)}")
    pairs = [(strategy_key(a), strategy_key(b)) for a, b in compare] if compare is not None else \
        _compare_pairs(keys)
    name = model_name(tr)
    say = progress or (lambda _m: None)

    svgs: dict[str, str] = {}
    captions: dict[str, str] = {}
    errors: dict[str, str] = {}
    statuses: dict[str, Any] = {}
    for s in keys:
        say(f"partitioning: {s}")
        statuses[s] = status_data(tr.partition(s))
    todo: list[ViewKey] = []
    for v in views:
        if v == "compare":
            todo += [ViewKey("compare", a, b, group, depth) for a, b in pairs if a in keys and b in keys]
        else:
            todo += [ViewKey(v, s, None, group, depth) for s in keys]
    for k in todo:
        say(f"drawing: {k.text()}")
        try:
            r = render_view(tr, k)
        except FxvizError as exc:
            errors[k.text()] = exc.message
            continue
        except Exception as exc:  # one view's bug must not sink the whole report
            errors[k.text()] = f"fxviz could not draw this view: {type(exc).__name__}: {exc}"
            continue
        svgs[k.text()] = r.svg
        captions[k.text()] = r.caption
    say("memory table")
    try:
        table = table_data(memory_frame(tr, keys))
    except FxvizError as exc:
        table = {"message": f"no memory table: {exc.message}"}
    doctor = doctor_data(tr)

    first = next((k for k in todo if k.text() in svgs), None)
    data = {
        "title": title or f"fxviz report: {name}",
        "name": name,
        "summary": tr.summary(),
        "strategies": [{"key": s, "label": statuses[s]["label"], "error": statuses[s]["error"]} for s in keys],
        "views": list(views),
        "pairs": [list(p) for p in pairs if p[0] in keys and p[1] in keys],
        "index": [{"view": k.view, "strategy": k.strategy, "compare": k.compare, "key": k.text()} for k in todo],
        "svgs": svgs,
        "captions": captions,
        "errors": errors,
        "status": statuses,
        "nodes": node_data(tr),
        "table": table,
        "doctor": doctor,
        "legend": legend_data(),
        "initial": {"view": first.view, "strategy": first.strategy, "compare": first.compare} if first else None,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    initial_svg = svgs[first.text()] if first else ""
    initial_table = table if table.get("rows") else None
    fallback = static_html(initial_svg, initial_table, first.strategy if first else None,
                           captions.get(first.text(), "") if first else "")
    return _render_template(data, fallback)


def _asset(name: str) -> str:
    text = (STATIC / name).read_text(encoding="utf-8")
    for closer in ("<script", "</script", "</style", "<!--"):
        if closer in text.lower():
            raise RenderError(f"fxviz/static/{name} contains {closer!r}; it cannot be inlined",
                              "this is a bug in fxviz")
    return text


def _render_template(data: dict[str, Any], fallback: str) -> str:
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(STATIC)), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    template = env.get_template("report.html.j2")
    script = "\n" + _asset("explorer.js") + "\n" + _asset("report.js") + "\n"
    # the page's Content-Security-Policy allows exactly this script (by hash) and no other
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return template.render(
        title=data["title"],
        summary=data["summary"],
        generated=data["generated"],
        palette_css=Markup(theme.css_variables(":root")),
        css=Markup(_asset("explorer.css") + "\n" + _asset("report.css")),
        data_json=Markup(script_json(data)),
        script=Markup(script),
        script_hash=f"sha256-{digest}",
        fallback=Markup(fallback),
    )


def report(tr: "Trace", path: str | os.PathLike[str], **kwargs: Any) -> pathlib.Path:
    """Write the self-contained HTML report of ``tr`` to ``path`` and return the path.

    One file with everything inline (SVGs, CSS, script, data); it loads nothing from the
    network.  It switches strategy and view, shows a node's details on click, searches names,
    ops and modules, and shows the memory table, the doctor's findings and the legend.
    Keyword arguments go to :func:`build_report` (``strategies``, ``views``, ``compare`` pairs,
    ``group``, ``depth``, ``title``).  Written to a temporary file, then renamed into place.
    """
    return write_atomic(path, build_report(tr, **kwargs))
