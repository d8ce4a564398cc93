"""What one view of a trace shows, as plain data: the payloads the notebook explorer and the HTML
report both send to the same front-end code (``fxviz/static/explorer.js``).

A payload is built from analysis objects (partitions, the memory table, the doctor's findings)
that the ``Trace`` computes once and caches; nothing here re-derives a fact.  ``render_view``
lays out one view (its SVG, cleaned for embedding); ``report_data`` gathers every payload one
report holds.  This module sits above ``render`` (which never calls the facade) and below the
widget and the report writer, which only ship these payloads.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .analysis.strategies import Strategy, StrategyLike, parse_list
from .errors import FxvizError, InputError
from .render import theme
from .render.embed import clean_svg
from .render.scene import format_tensor
from .units import format_bytes, format_flops, is_missing

if TYPE_CHECKING:  # pragma: no cover
    from .analysis.partition import Partition
    from .trace import Trace

__all__ = [
    "VIEWS",
    "ViewKey",
    "RenderedView",
    "node_data",
    "status_data",
    "table_data",
    "doctor_data",
    "legend_data",
    "render_view",
    "report_data",
    "pieces_data",
    "overview_data",
    "piece_options",
    "run_report_data",
]

VIEWS = ("joint", "forward", "backward", "compare")


# --- data for the front-end ----------------------------------------------------------------------
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
            "bytes_text": format_bytes(info.bytes) or None,
            "module": info.module,
            "qualname": info.qualname,
            "source": info.source,
            "code": info.source_code,
            "symbolic_shape": info.symbolic_shape,
            "checkpoint_policy": info.checkpoint_policy,
            "checkpoint_region": info.checkpoint_region,
            "inputs": [a.name for a in n.all_input_nodes],
            "users": users,
            "returned": any(u.op == "output" for u in n.users),
        }
    return out


def status_data(p: "Partition") -> dict[str, Any]:
    """What one strategy did, by joint-node name (straight from the ``Partition``)."""
    return {
        "key": p.name,
        "label": p.label,
        "error": p.error,
        "saved": list(p.saved),
        "recomputed": sorted(p.recomputed),
        "removed": sorted(p.removed),
        "random": sorted(p.recomputed_random),
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


def table_data(df: Any) -> dict[str, Any]:
    """The memory table (``tr.memory_table()``) as display strings per strategy row, formatted
    and best-marked exactly as ``fxviz.render.table`` does for the notebook table."""
    from .render.table import best_rows

    best = best_rows(df)
    rows = []
    for idx, rec in zip(df.index, df.to_dict("records")):
        cells, marks = [], []
        for col, _, _ in _TABLE_COLUMNS:
            v = rec.get(col)
            if col.endswith("_bytes"):
                text = format_bytes(v, missing="—")
            elif col.endswith("_flops"):
                text = format_flops(v, missing="—")
            else:
                text = "—" if is_missing(v) else str(v)
            cells.append(text)
            marks.append(idx in best.get(col, ()))
        err = rec.get("error")
        rows.append({"key": str(rec["strategy"]), "cells": cells, "best": marks,
                     "error": None if is_missing(err) else str(err)})
    return {"columns": [c[1] for c in _TABLE_COLUMNS], "tips": [c[2] for c in _TABLE_COLUMNS], "rows": rows,
            "caption": (df.attrs.get("caption", "") + " Bold: the best value of each column.").strip()}


def doctor_data(tr: "Trace", strategy: Any = "default") -> dict[str, Any]:
    """The doctor's findings (``tr.doctor()``), grouped as its card groups them, as plain records."""
    from .render.doctor_view import KIND_TITLES

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
        raise InputError(f"strategy {p.label!r} failed: {p.error}", "pick another strategy")
    if q is not None and q.error:
        raise InputError(f"strategy {q.label!r} failed: {q.error}", "pick another strategy")
    view = "joint" if key.view == "compare" else key.view
    if view in ("forward", "backward") and (p.forward is None or p.backward is None):
        raise InputError(f"{p.label} has no {view} graph to draw: it is measured, not partitioned",
                         "look at the joint view, which marks what it saves")
    drawing = tr.draw(view, strategy=key.strategy, compare=key.compare if key.view == "compare" else None,
                      group=key.group, depth=key.depth, timeout=timeout)
    svg = clean_svg(drawing.svg())
    return RenderedView(svg=svg, caption=drawing.caption, seconds=time.perf_counter() - t0, partition=p,
                        compare=q)


def _compare_pairs(strategies: Sequence[str]) -> list[tuple[str, str]]:
    """Each strategy against the default; the default against min-cut."""
    if not strategies:
        return []
    base = strategies[0]
    pairs = [(s, base) for s in strategies[1:]]
    if len(strategies) > 1:
        pairs.insert(0, (base, strategies[1]))
    return pairs


def report_data(tr: "Trace", strategies: Iterable[StrategyLike] | None = None,
                views: Iterable[str] = ("joint", "forward", "backward", "compare"),
                compare: Sequence[tuple[StrategyLike, StrategyLike]] | None = None, group: str | None = None,
                depth: int | None = None, title: str | None = None,
                progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Every payload one report holds: each view of each strategy (and each compare pair), the
    node records, the memory table, the doctor's findings and the legend.  ``strategies``:
    default ``tr.offered`` (a log's trace shows what the run saved first)."""
    keys = [s.name for s in parse_list(list(tr.offered if strategies is None else strategies)) or []]
    if not keys:
        raise InputError("the report needs at least one strategy", "pass strategies=('default', 'min_cut')")
    views = [v for v in views if v in VIEWS]
    if not views:
        raise InputError("the report needs at least one view", f"use views from {', '.join(VIEWS)}")
    pairs = ([(Strategy.parse(a).name, Strategy.parse(b).name) for a, b in compare] if compare is not None
             else _compare_pairs(keys))
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
        table = table_data(tr.memory_table(keys))
    except FxvizError as exc:
        table = {"message": f"no memory table: {exc.message}"}

    first = next((k for k in todo if k.text() in svgs), None)
    return {
        "title": title or f"fxviz report: {tr.title}",
        "name": tr.title,
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
        "doctor": doctor_data(tr),
        "legend": legend_data(),
        "initial": ({"view": first.view, "strategy": first.strategy, "compare": first.compare, "key": first.text()}
                    if first else None),
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        # graph breaks: every other piece's own payloads and the whole-model overview (issue 14)
        "pieces": pieces_data(tr, keys, views, pairs, group, depth, say) if tr.index == 0 else [],
        "overview": overview_data(tr, keys) if tr.index == 0 and len(tr.pieces) > 1 else None,
    }


# the payload fields that differ from piece to piece (the report swaps them in when one is picked)
PIECE_FIELDS = ("summary", "index", "svgs", "captions", "errors", "status", "nodes", "table", "initial")


def pieces_data(tr: Trace, keys: Sequence[str], views: Sequence[str], pairs: Sequence[tuple[str, str]],
                group: str | None, depth: int | None, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """One entry per piece of a graph-broken model (empty for one graph): what the piece selector
    shows (label, break reason, node counts, saved bytes, runs) and, for every piece but the
    first (whose payloads are the report's own), the same view payloads ``report_data`` builds."""
    pieces = tr.pieces
    if len(pieces) < 2:
        return []
    out = []
    for summary, piece in zip(tr.piece_summaries(keys[0]), pieces):
        entry: dict[str, Any] = {
            "piece": piece.index, "label": summary.label, "reason": summary.reason, "nodes": summary.nodes,
            "forward_ops": summary.forward_ops, "backward_ops": summary.backward_ops,
            "has_backward": summary.has_backward, "saved": format_bytes(summary.saved_bytes, missing="—"),
            "saved_bytes": summary.saved_bytes, "strategy": summary.strategy, "runs": summary.runs,
            "modules": [list(m) for m in summary.modules],
        }
        if piece.index:
            say(f"graph {piece.index + 1} of {len(pieces)}")
            data = report_data(piece, strategies=keys, views=views, compare=list(pairs), group=group,
                               depth=depth, progress=say)
            entry["payload"] = {k: data[k] for k in PIECE_FIELDS}
        out.append(entry)
    return out


def overview_data(tr: Trace, keys: Sequence[str]) -> dict[str, Any]:
    """The whole-model view: the overview drawing and the per-piece memory table with totals."""
    drawing = tr.overview(keys[0])
    try:
        df = tr.memory_table_by_piece(keys)
        shown = df.copy()
        shown["strategy"] = [f"{'whole model' if p == 'total' else f'graph {int(p) + 1}'}: {s}"
                             + (f" (x{r} runs)" if p != "total" and r > 1 else "")
                             for p, s, r in zip(df["piece"], df["strategy"], df["runs"])]
        shown.attrs = dict(df.attrs)
        table = table_data(shown)
    except FxvizError as exc:
        table = {"message": f"no memory table: {exc.message}"}
    return {"svg": clean_svg(drawing.svg()), "caption": drawing.caption, "table": table}


def piece_options(tr: Trace, strategy: StrategyLike = "default") -> list[tuple[str, int]]:
    """The piece selector's choices: ``whole model`` (-1, the overview), then each piece with its
    node count, saved bytes, runs and the graph break before it; one graph gives one choice."""
    pieces = tr.pieces
    if len(pieces) < 2:
        return [("graph 1", 0)]
    options = [(f"whole model ({len(pieces)} graphs)", -1)]
    for p in tr.piece_summaries(strategy):
        saves = f"saves {format_bytes(p.saved_bytes, missing='—')}" if p.has_backward else "no backward graph"
        text = f"{p.label}: {p.nodes} nodes, {saves}"
        text += f", ran {p.runs}\u00d7" if p.runs > 1 else ""
        text += f" \u2014 after: {p.reason}" if p.reason else ""
        options.append((text if len(text) <= 90 else text[:88] + "\u2026", p.index))
    return options
def run_report_data(graphs: Sequence[tuple[int, str, "Trace"]], initial: int = 0, title: str | None = None,
                    progress: Callable[[str], None] | None = None, **kwargs: Any) -> dict[str, Any]:
    """The payloads of several graphs of a logged run, one ``report_data`` each, for a report
    with a rank and a graph selector.  ``graphs``: (rank, compile id, trace) in display order."""
    if not graphs:
        raise InputError("the report needs at least one graph", "pick graphs with a backward from run.graphs")
    say = progress or (lambda _m: None)
    entries: list[dict[str, Any]] = []
    for rank, compile_id, tr in graphs:
        say(f"rank {rank}, graph {compile_id}")
        data = report_data(tr, progress=progress, **kwargs)
        entries.append({"id": f"{rank}|{compile_id}", "rank": rank, "compile_id": compile_id,
                        "label": f"{compile_id} ({tr.title})", "data": data})
    first: dict[str, Any] = entries[initial]["data"]
    # "first" feeds the script-free fallback and is not written into the page's data
    return {"title": title or f"fxviz report: a logged run ({len(entries)} graphs)", "summary": first["summary"],
            "generated": first["generated"], "graphs": entries, "initial": initial, "first": first}
