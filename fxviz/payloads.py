"""What one view of a trace shows, as plain data: the payloads the notebook explorer and the HTML
report both send to the same front-end code (``fxviz/static/explorer.js``).

A payload is built from analysis objects (partitions, the memory table, the doctor's findings)
that the ``Trace`` computes once and caches; nothing here re-derives a fact.  ``view_payload``
lays out one view (a :class:`ViewPayload`, the one view schema: the widget syncs it as one trait,
the report embeds the same dicts); ``report_data`` gathers every payload one report holds.
This module sits above ``render`` (which never calls the facade) and below the widget and the
report writer, which only ship these payloads.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .analysis.strategies import Strategy, StrategyLike, parse_list
from .capture import graph_name, graph_of
from .errors import Do, FxvizError, InputError, Say
from .graph_facts import joint_node_count
from .render import theme
from .render.embed import SVG_ELEMENTS, clean_svg, page_data
from .render.limits import REPORT_BUDGET
from .render.scene import RECOMPUTED_SUFFIX, format_tensor
from .roles import INPUT_ROLES, PARAMETER_ROLES
from .units import format_bytes, format_flops, is_missing

if TYPE_CHECKING:  # pragma: no cover
    from .analysis.partition import Partition
    from .analysis.pieces import PieceSummary
    from .facade import Trace

__all__ = [
    "VIEWS",
    "ViewKey",
    "ViewPayload",
    "view_payload",
    "page_constants",
    "node_data",
    "status_data",
    "table_data",
    "saved_data",
    "table_notes",
    "doctor_data",
    "legend_data",
    "DIFFERENCES_NODE_LIMIT",
    "openable_boxes",
    "report_data",
    "drawings_within",
    "statuses_within",
    "REPORT_BUDGET",
    "pieces_data",
    "overview_data",
    "piece_options",
    "run_report_data",
]

VIEWS = ("joint", "forward", "backward", "compare")
# A report ships one differences-only drawing per ordered pair of its strategies (A and B are named
# and colored in it) when the joint graph is drawn node by node (at most this many nodes), so its
# "differences only" toggle shows a real relayout; above it, the toggle fades the other nodes of the
# shared layout.  Measured on fxviz's AlexNet (127 nodes, 5 strategies): 20 drawings of 10-70
# nodes, 2.1 MB of SVG, +0.36 MB packed in the page (0.54 -> 0.90 MB, under its 1 MB target) and
# 3.3 s of layout.  A 12-layer GPT's pairs differ in hundreds of nodes each: megabytes, not shipped.
DIFFERENCES_NODE_LIMIT = 150


# --- data for the front-end ----------------------------------------------------------------------
def _gradient_facts(tr: Trace) -> dict[str, dict[str, Any]]:
    """Per parameter node (lifted or captured as a constant) and per gradient node: whether the
    parameter gets a gradient, from the doctor's table (``tr.doctor().table``), by real name."""
    try:
        table = tr.doctor().table
    except FxvizError:
        return {}
    by_param = {str(r["parameter"]): r for r in table.to_dict("records")}
    out: dict[str, dict[str, Any]] = {}
    for name, info in tr.graph.info.items():
        r = by_param.get(info.qualname or "")
        if r is None:
            continue
        if info.role == "gradient":
            out[name] = {"gets": True, "parameter": r["parameter"], "node": None,
                         "reason": f"the gradient of {r['parameter']}"}
        elif info.role in PARAMETER_ROLES:
            out[name] = {"gets": bool(r["gets_gradient"]), "parameter": r["parameter"],
                         "node": r.get("gradient_node") or None, "requires_grad": bool(r["requires_grad"]),
                         "reason": str(r["reason"])}
    return out


def node_data(tr: Trace) -> dict[str, dict[str, Any]]:
    """One record per joint-graph node (output excluded): what the details panel shows, with
    ``gradient`` (does this parameter get a gradient, and which node) where the doctor knows."""
    graph = tr.graph
    grads = _gradient_facts(tr)
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
            "gradient": grads.get(n.name),
        }
    return out


def status_data(p: Partition) -> dict[str, Any]:
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
# (column, short header that fits a 1024 px screen, tooltip saying what and in which unit)
_TABLE_COLUMNS: list[tuple[str, str, str]] = [
    ("strategy", "strategy", "the partition strategy"),
    ("saved_activation_bytes", "saved", "saved activations, bytes of unique storages the backward keeps "
     "(views and aliases count once; parameters and inputs excluded)"),
    ("saved_tensors", "tensors", "saved tensors: values the forward hands to the backward (count)"),
    ("recomputed_ops", "recomp.", "recomputed ops: forward ops the backward runs again (count)"),
    ("recomputed_random_ops", "random", "recomputed random ops (dropout, rand): the backward redraws them, so "
     "its mask differs from the forward's unless the RNG state is replayed (count)"),
    ("recompute_flops", "FLOPs", "FLOPs of the recomputed ops (matmul/conv; pointwise ops count 0)"),
    ("forward_peak_bytes", "fwd peak", "forward peak: live bytes while the forward runs, parameters included"),
    ("backward_peak_bytes", "bwd peak", "backward peak: live bytes while the backward runs"),
]


def table_notes(tr: Trace, keys: Sequence[str]) -> list[str]:
    """Why a row's numbers are what they are, where a reader is surprised: what each strategy
    recomputes (the default recomputes too), and what recompute-all still saves (the outputs of
    random ops, which must not be redrawn), and why a row is empty.  Every name comes from the
    strategy's ``Partition``."""
    notes = []
    failed: dict[str, list[str]] = {}  # why a row is empty (a graph without backward), said once per reason
    for key in keys:
        p = tr.partition(key)
        if p.error:
            failed.setdefault(p.error, []).append(p.label)
            continue
        if p.strategy.kind == "recompute_all":
            kept = [n for n in p.saved if n in tr.graph.info and tr.graph.info[n].role not in INPUT_ROLES]
            if kept:
                notes.append(f"{p.label} saves graph inputs, and the outputs of random ops, which the backward "
                             f"must not draw again: {', '.join(kept[:6])}{' ...' if len(kept) > 6 else ''} "
                             "(its 'saved' column counts those)")
        if p.recomputed and p.strategy.kind != "recompute_all":
            ops = sorted(p.recomputed)
            notes.append(f"{p.label} recomputes {len(ops)}: {', '.join(ops[:6])}{' ...' if len(ops) > 6 else ''} "
                         "(forward ops its backward graph runs again instead of reading a saved value)")
    return [f"{', '.join(labels)}: {error}" for error, labels in failed.items()] + notes


def table_data(df: Any, tr: Trace | None = None) -> dict[str, Any]:
    """The memory table (``tr.memory_table()``) as display strings per strategy row, formatted
    and best-marked exactly as ``fxviz.render.table`` does for the notebook table; given the
    ``Trace``, with :func:`table_notes`."""
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
            "best_note": "bold: the best (lowest) value of each column",
            "notes": table_notes(tr, [str(k) for k in df["strategy"]]) if tr is not None else [],
            "caption": df.attrs.get("caption", "").strip()}


def saved_data(tr: Trace, strategy: StrategyLike) -> dict[str, Any]:
    """The "saved tensors" panel of one strategy: ``tr.saved(strategy)`` as plain records
    (``render.saved_view.saved_records``: name, kind, module, what, tensor, bytes, shares, source),
    the totals per kind and the caption; or a ``message`` where the strategy lists no graph values
    (measured, or failed).  No other strategy is partitioned for it (a view's first picture waits
    for nothing more than its own partition): the page says what the other strategies do from the
    statuses it holds (``status_data``, the ``Partition``'s own sets)."""
    from .render.saved_view import saved_records

    name = Strategy.parse(strategy).name
    try:
        df = tr.saved(strategy, compare=[])
    except FxvizError as exc:
        return {"strategy": name, "message": exc.message}
    sums = df.groupby("kind")["bytes"].sum()
    totals = {k: int(sums.get(k, 0)) for k in ("activation", "parameter", "input")}
    return {"strategy": name, "rows": saved_records(df), "totals": totals,
            "totals_text": {k: format_bytes(v) or "0 B" for k, v in totals.items()},
            "caption": df.attrs.get("caption", "")}


def timeline_data(tr: Trace, strategies: Sequence[str]) -> dict[str, Any] | None:
    """The memory timeline of the report's strategies that have graphs (``tr.memory_timeline``):
    its SVG (``render.timeline_svg``, sanitizer-safe) and a caption naming each peak.  ``None``
    where there is nothing to plot (no backward, every strategy measured or failed) and after
    graph breaks (the page swaps pieces, and one piece's timeline would stand for all of them)."""
    from .render.timeline_svg import timeline_svg

    if not tr.has_backward or len(tr.pieces) > 1:
        return None
    chosen = [s for s in strategies if (p := tr.partition(s)).error is None and not p.measured]
    if not chosen:
        return None
    timeline = tr.memory_timeline(chosen)
    if timeline.empty:
        return None
    skipped = timeline.attrs.get("skipped") or []
    caption = ("Memory held while each node runs, parameters and inputs included: the top of each curve is the "
               "memory table's forward or backward peak (dots; hover for the node and module)."
               + (f" No timeline for {', '.join(skipped)}." if skipped else ""))
    return {"svg": clean_svg(timeline_svg(timeline, timeline.peaks)), "caption": caption}


def doctor_data(tr: Trace, strategy: Any = None) -> dict[str, Any]:
    """The doctor's findings (``tr.doctor()``), grouped as its card groups them, as plain records."""
    from .render.doctor_view import KIND_TITLES

    try:
        result = tr.doctor(strategy)
    except FxvizError as exc:
        return {"message": f"the doctor could not run: {exc.message}", "findings": [], "healthy": None}
    names = {n.name for n in tr.graph.gm.graph.nodes if n.op != "output"}
    groups: dict[tuple[str, str, str], list[Any]] = {}
    for f in result.findings:
        groups.setdefault((f.severity, f.kind, f.fix), []).append(f)
    out = []
    for (severity, kind, fix), fs in groups.items():
        nodes: list[str] = []
        for f in fs:
            if f.graph in (None, tr.index):
                nodes += [n for n in f.nodes if n not in nodes]
        items = [_segments(f.message, names) for f in fs]
        for item in items:  # nodes named in the text (where the path is cut) are nodes of the finding too
            nodes += [seg["node"] for seg in item if "node" in seg and seg["node"] not in nodes]
        out.append({
            "severity": severity,
            "kind": kind,
            "title": KIND_TITLES.get(kind, kind),
            "count": len(fs),
            "items": items,
            "hint": fix,
            "nodes": nodes,
        })
    order = {"error": 0, "warning": 1, "info": 2}
    out.sort(key=lambda g: order.get(str(g["severity"]), 3))
    return {"message": result.headline(), "findings": out, "healthy": bool(result.healthy)}


def _segments(text: str, names: set[str]) -> list[dict[str, str]]:
    """``text`` split into plain runs and joint-node names (``{"node": name}``), so a page can
    make every node a finding names into a link; longest names first, whole words only."""
    if not names:
        return [{"text": text}]
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    out: list[dict[str, str]] = []
    pos = 0
    for m in re.finditer(rf"(?<![\w.])({alternatives})(?![\w])", text):
        if m.start() > pos:
            out.append({"text": text[pos:m.start()]})
        out.append({"node": m.group(1)})
        pos = m.end()
    if pos < len(text):
        out.append({"text": text[pos:]})
    return out


def legend_data() -> dict[str, Any]:
    """The one palette (``theme.as_dict``), for the legend."""
    return theme.as_dict()


@dataclass(frozen=True)
class ViewKey:
    """Everything that decides one drawing (and nothing else): the cache key of a view, and the
    only builder of its text (``text()``: the widget's cache, the report's keys, the page's
    ``data-view-key``; no front end rebuilds or parses it).  ``strategy`` and ``compare`` are
    ``Strategy`` values, parsed once here at the door; ``strategy=None`` is the joint layout drawn
    without any strategy's marks (the report draws every strategy on it as an overlay)."""

    view: str
    strategy: Strategy | None
    compare: Strategy | None
    group: str | None
    depth: int | None
    expand: tuple[str, ...]  # the boxes opened (names ``draw(expand=...)`` takes), sorted
    differences: bool  # the compare view: only the nodes the two strategies treat differently

    def __init__(self, view: str = "joint", strategy: StrategyLike | None = "default",
                 compare: StrategyLike | None = None, group: str | None = None, depth: int | None = None,
                 expand: Sequence[str] = (), differences: bool = False) -> None:
        set_ = object.__setattr__  # frozen: the one place the fields are written
        set_(self, "view", view)
        set_(self, "strategy", None if strategy is None else Strategy.parse(strategy))
        set_(self, "compare", None if compare is None else Strategy.parse(compare))
        set_(self, "group", group)
        set_(self, "depth", depth)
        set_(self, "expand", tuple(expand))
        set_(self, "differences", bool(differences))

    def text(self) -> str:
        """``view|strategy|compare|group|depth``, then ``|+opened,boxes`` and ``|differences``."""
        names = (self.strategy.name if self.strategy else None, self.compare.name if self.compare else None)
        base = "|".join(str(x) if x is not None else "-" for x in (self.view, *names, self.group, self.depth))
        return base + ("|+" + ",".join(self.expand) if self.expand else "") + \
            ("|differences" if self.differences else "")


@dataclass(frozen=True)
class ViewPayload:
    """One rendered view: the one shape both front ends read.  The widget syncs it as one trait
    (``GraphPane.view_data``); the report embeds the same dicts (``data["views"]``, by ``key``);
    ``explorer.js`` reads its fields in ``showView``.  Built only by :func:`view_payload`.

    ``key``: ``ViewKey.text()``.  ``strategy`` / ``compare``: the strategies' names (``None``: none;
    the page finds their marks in the statuses it holds, by these names).  ``svg``: the cleaned
    drawing ("" when it failed: ``error`` says why, with what to do).  ``boxes``: the drawn boxes'
    records (``Group.record``: id, key, label, kind, side, members); ``expanded``: the boxes open.
    ``differences``: the differences-only drawing of a compare.  ``overlay``: drawn without any
    strategy's marks (the report's shared joint layout): the page draws them from the statuses.
    ``saved``: the "saved tensors" panel's data by strategy name (:func:`saved_data`): the view's
    strategy, or on the report's shared layout every strategy it overlays.
    """

    key: str
    view: str
    strategy: str | None
    compare: str | None
    svg: str = ""
    caption: str = ""
    boxes: list[dict[str, Any]] = field(default_factory=list)
    expanded: list[str] = field(default_factory=list)
    differences: bool = False
    overlay: bool = False
    error: str = ""
    saved: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The payload as page data (``render.embed.page_data``: strict JSON values)."""
        data: dict[str, Any] = page_data(dataclasses.asdict(self))
        return data


def _check_view(tr: Trace, key: ViewKey) -> None:
    """Refuse a view that cannot be drawn, with what to do instead (partitions cached on the Trace)."""
    if key.view not in VIEWS:
        raise InputError(f"unknown view {key.view!r}", f"use one of {', '.join(VIEWS)}")
    if key.strategy is None:
        if key.view not in ("joint", "compare") or key.differences:
            raise InputError(f"the {key.view} view needs a strategy", "pass strategy='default'")
        return
    p = tr.partition(key.strategy)
    q = tr.partition(key.compare) if key.view == "compare" and key.compare else None
    if p.error:
        raise InputError(f"strategy {p.label!r} failed: {p.error}", "pick another strategy")
    if q is not None and q.error:
        raise InputError(f"strategy {q.label!r} failed: {q.error}", "pick another strategy")
    if key.view in ("forward", "backward") and (p.forward is None or p.backward is None):
        raise InputError(f"{p.label} has no {key.view} graph to draw: it is measured, not partitioned",
                         "look at the joint view, which marks what it saves")
    if key.differences and q is None:
        raise InputError("differences only needs the compare view and a strategy to compare with",
                         "pick the compare view and a 'compare with' strategy")


def view_payload(tr: Trace, key: ViewKey, timeout: float | None = None) -> ViewPayload:
    """Partition (cached on the Trace), draw and lay out the view ``key`` names: the one builder of
    a :class:`ViewPayload`.  A view that cannot be drawn (or a bug) comes back with ``error`` set
    and no SVG, so one view's failure never sinks the page that shows the others."""
    head = ViewPayload(key=key.text(), view=key.view, strategy=key.strategy.name if key.strategy else None,
                       compare=key.compare.name if key.compare and key.view == "compare" else None,
                       expanded=list(key.expand), differences=key.differences, overlay=key.strategy is None)
    try:
        _check_view(tr, key)
        drawing = tr.draw("joint" if key.view == "compare" else key.view, strategy=key.strategy,
                          compare=key.compare if key.view == "compare" else None, group=key.group,
                          depth=key.depth, expand=list(key.expand), timeout=timeout, differences=key.differences)
        saved = {key.strategy.name: saved_data(tr, key.strategy)} if key.strategy is not None else {}
        return dataclasses.replace(head, svg=clean_svg(drawing.svg()), caption=drawing.caption, boxes=drawing.boxes,
                                   saved=saved)
    except FxvizError as exc:
        return dataclasses.replace(head, error=f"{exc.message}\nWhat to do: {exc.hint}" if exc.hint else exc.message)
    except Exception as exc:  # a bug: said in the pane, not a traceback that loses every other view
        return dataclasses.replace(head, error=f"fxviz could not draw this view: {type(exc).__name__}: {exc}")


def page_constants() -> dict[str, Any]:
    """What ``explorer.js`` needs to know of fxviz's drawings, sent with the data instead of copied
    into the script: the suffix of a recomputed op's backward copy, graphviz's SVG elements the
    page keeps (``render.embed.SVG_ELEMENTS``), and what the page shows for a missing value."""
    return {"recomputed_suffix": RECOMPUTED_SUFFIX, "svg_elements": sorted(SVG_ELEMENTS), "missing": "—"}


def openable_boxes(tr: Trace, view: str, strategy: StrategyLike = "default", group: str | None = None) -> set[str]:
    """The names the ``expand`` of ``view`` takes (module paths, function boxes, the bookkeeping
    box), empty where that view draws no boxes: what a front-end may keep open across views."""
    from .render.views import openable

    side = view if view in ("forward", "backward") else "joint"
    p = tr.partition(strategy) if side != "joint" else None
    if p is not None and p.error:
        return set()
    return openable(tr.graph, side, p, group)


def _index(keys: Sequence[str], views: Sequence[str], group: str | None, depth: int | None,
           layout: str, differences: dict[tuple[str, str], str]) -> list[dict[str, Any]]:
    """Every view the report's controls can ask for: its ``ViewKey`` text (``key``) and the drawing
    that shows it (``drawing``, a key of ``views``).  Joint and compare views share the layout;
    a pair's differences-only entry exists where its drawing was made."""
    out: list[dict[str, Any]] = []

    def add(k: ViewKey, drawing: str) -> None:
        out.append({"view": k.view, "strategy": k.strategy.name if k.strategy else None,
                    "compare": k.compare.name if k.compare else None, "differences": k.differences,
                    "key": k.text(), "drawing": drawing})

    for v in views:
        for a in keys:
            if v in ("forward", "backward"):
                k = ViewKey(v, a, None, group, depth)
                add(k, k.text())
            elif v == "joint":
                add(ViewKey("joint", a, None, group, depth), layout)
            else:
                for b in keys:
                    if a != b:
                        add(ViewKey("compare", a, b, group, depth), layout)
                        if (a, b) in differences:
                            add(ViewKey("compare", a, b, differences=True), differences[(a, b)])
    return out


def _differences_drawings(tr: Trace, keys: Sequence[str], statuses: dict[str, Any], views: Sequence[str],
                          drawn: dict[str, dict[str, Any]], say: Callable[[str], None]) -> dict[tuple[str, str], str]:
    """The differences-only drawing of every ordered pair of usable strategies, into ``drawn``;
    returns (A, B) -> its key.  None above ``DIFFERENCES_NODE_LIMIT`` joint nodes (see there) or
    without the compare view."""
    if "compare" not in views or len(tr.graph.info) - 1 > DIFFERENCES_NODE_LIMIT:  # - 1: the output node
        return {}
    usable = [s for s in keys if not statuses[s]["error"]]
    out: dict[tuple[str, str], str] = {}
    for a in usable:
        for b in usable:
            if a == b:
                continue
            k = ViewKey("compare", a, b, differences=True)
            say(f"drawing: {k.text()}")
            r = view_payload(tr, k)
            drawn[r.key] = r.to_json()
            if not r.error:
                out[(a, b)] = r.key
    return out


def default_compare(strategy: str, offered: Sequence[str]) -> str | None:
    """The partner a compare view opens with (report, widget, a log's explorer): min-cut for any
    other strategy, the default for min-cut; else the first other strategy ``offered``; None when
    there is none.  ``strategy`` and ``offered``: strategy names or kinds (``"min_cut"``)."""
    for partner in ("min_cut", "default"):
        if partner != strategy and partner in offered:
            return partner
    return next((k for k in offered if k != strategy), None)


_LEFT_OUT = "not computed in this report"


def _left_out_text(tr: Trace, budget: float | None, what: str, how: str) -> str:
    nodes = joint_node_count(tr.graph.info.values())
    return (f"{_LEFT_OUT}: {what} would pass the report's budget of {budget or 0:g} s on this {nodes}-node graph\n"
            f"What to do: {how}, or write the report with budget=None ('fxviz report --budget 0' computes and "
            "draws everything)")


MIN_CUT_OVER_DEFAULT = 3.0
"""How much longer than torch's default partition a min-cut partition takes (24.7 s against 7.9 s on
the 10,282-node graph, issue 26): the estimate of the next strategy's cost, from the first one's."""


def statuses_within(tr: Trace, keys: Sequence[str], start: float, budget: float | None,
                    say: Callable[[str], None]) -> dict[str, Any]:
    """Each strategy's status (``status_data``): the first strategy's always, the others' while under
    ``budget`` seconds since ``start``; a strategy past it gets a status whose ``error`` says so and
    how to see it (its partition is not cached, so asking for it later computes it).  "Past it": when
    the time spent plus ``MIN_CUT_OVER_DEFAULT`` times what the first partition took would exceed it."""
    out: dict[str, Any] = {}
    first_cost = 0.0
    for i, s in enumerate(keys):
        if i and budget is not None and time.perf_counter() - start + MIN_CUT_OVER_DEFAULT * first_cost > budget:
            strategy = Strategy.parse(s)
            how = f"see it with 'fxviz table MODEL --strategies {s}' or tr.partition('{s}')"
            out[s] = {"key": s, "label": strategy.label, "saved": [], "recomputed": [], "removed": [], "random": [],
                      "error": _left_out_text(tr, budget, f"partitioning with {strategy.label}", how)}
            continue
        say(f"partitioning: {s}")
        began = time.perf_counter()
        out[s] = status_data(tr.partition(s))
        first_cost = first_cost or time.perf_counter() - began
    return out


def drawings_within(tr: Trace, todo: Sequence[ViewKey], first: ViewKey, start: float, budget: float | None,
                    left_out: set[str], say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """The payload of every view in ``todo``, by key, in order: ``first`` (the view the page opens
    with) always, the others while under ``budget`` seconds since ``start`` and their strategy was
    partitioned (not in ``left_out``); a view left out gets a payload whose ``error`` says so and how
    to draw it.  Past the budget: when the time spent plus what the first drawing took would exceed it."""
    drawn: dict[str, dict[str, Any]] = {}
    first_cost = 0.0
    for k in todo:
        late = budget is not None and time.perf_counter() - start + first_cost > budget
        if k is not first and (late or (k.strategy is not None and k.strategy.name in left_out)):
            head = ViewPayload(key=k.text(), view=k.view, strategy=k.strategy.name if k.strategy else None,
                               compare=None, expanded=list(k.expand), overlay=k.strategy is None)
            side = f"--view {k.view} --strategy {k.strategy.name}" if k.strategy else f"--view {k.view}"
            drawn[k.text()] = dataclasses.replace(head, error=_left_out_text(
                tr, budget, f"drawing the {k.view} view", f"draw it with 'fxviz draw MODEL {side}' or tr.draw(...)")
            ).to_json()
            continue
        say("drawing: the joint layout" if k is first else f"drawing: {k.text()}")
        began = time.perf_counter()
        drawn[k.text()] = view_payload(tr, k).to_json()
        first_cost = first_cost or time.perf_counter() - began
    return drawn


def report_data(tr: Trace, strategies: Iterable[StrategyLike] | None = None,
                views: Iterable[str] = ("joint", "forward", "backward", "compare"),
                compare: Sequence[tuple[StrategyLike, StrategyLike]] | None = None, group: str | None = None,
                depth: int | None = None, title: str | None = None,
                progress: Callable[[str], None] | None = None,
                budget: float | None = REPORT_BUDGET) -> dict[str, Any]:
    """Every payload one report holds: one joint layout (strategies and compares are overlays on
    it, any pair of ``strategies``), each strategy's forward and backward drawing (``views``: one
    :class:`ViewPayload` each, by key), the ``index`` from the controls' state to those keys, the
    node records, the memory table, the doctor's findings and the legend.  ``strategies``: default
    ``tr.offered`` (a log's trace shows what the run saved first).  ``compare``: the pair the
    compare view opens with (its first pair; default: the first strategy and its ``default_compare``).
    ``budget``: seconds after which the report stops partitioning further strategies and drawing
    further views (the first strategy and the opening view always; see :func:`statuses_within`,
    :func:`drawings_within`); None computes and draws everything."""
    keys = [s.name for s in parse_list(list(tr.offered if strategies is None else strategies)) or []]
    if not keys:
        raise InputError("the report needs at least one strategy", "pass strategies=('default', 'min_cut')")
    views = [v for v in views if v in VIEWS]
    if not views:
        raise InputError("the report needs at least one view", f"use views from {', '.join(VIEWS)}")
    pairs = [(Strategy.parse(a).name, Strategy.parse(b).name) for a, b in compare] if compare else []
    pairs = [(a, b) for a, b in pairs if a in keys and b in keys and a != b]
    first_pair = pairs[0] if pairs else (keys[0], default_compare(keys[0], keys))
    say = progress or (lambda _m: None)

    start = time.perf_counter()
    statuses = statuses_within(tr, keys, start, budget, say)
    left_out = {s for s in keys if statuses[s]["error"] and statuses[s]["error"].startswith(_LEFT_OUT)}
    layout = ViewKey("joint", None, None, group, depth)
    todo = [ViewKey(v, s, None, group, depth) for v in views if v in ("forward", "backward") for s in keys]
    if "joint" in views or "compare" in views:
        todo.insert(0, layout)
    drawn = drawings_within(tr, todo, todo[0] if todo else layout, start, budget, left_out, say)
    if layout.text() in drawn and not drawn[layout.text()].get("error"):
        # the shared layout shows every strategy: each partitioned one's saved tensors
        drawn[layout.text()]["saved"] = page_data({s: saved_data(tr, s) for s in keys if s not in left_out})
    differences = _differences_drawings(tr, keys, statuses, views, drawn, say)
    say("memory table")
    try:
        table = table_data(tr.memory_table([s for s in keys if s not in left_out]), tr)
    except FxvizError as exc:
        table = {"message": f"no memory table: {exc.message}"}

    index = _index(keys, views, group, depth, layout.text(), differences)

    def entry(v: str) -> dict[str, Any] | None:
        b = first_pair[1] if v == "compare" else None
        return next((e for e in index if e["view"] == v and e["strategy"] == first_pair[0] and e["compare"] == b
                     and not e["differences"]), None)

    # the view the page opens with: the first one that could be drawn
    first = next((e for e in map(entry, views) if e and drawn[e["drawing"]]["svg"]), None) or entry(views[0])
    return {
        "title": title or f"fxviz report: {tr.title}",
        "name": tr.title,
        "summary": tr.summary(),
        "strategies": [{"key": s, "label": statuses[s]["label"], "error": statuses[s]["error"]} for s in keys],
        "views": list(views),
        "pairs": [list(first_pair)] if first_pair[1] else [],
        "index": index,
        "drawings": drawn,
        "status": statuses,
        "nodes": node_data(tr),
        "table": table,
        "doctor": doctor_data(tr),
        "legend": legend_data(),
        "constants": page_constants(),
        "initial": {"view": first["view"], "strategy": first["strategy"], "compare": first["compare"],
                    "key": first["key"], "drawing": first["drawing"]} if first else
                   {"view": views[0], "strategy": keys[0], "compare": None, "key": None, "drawing": None},
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        # graph breaks: every other piece's own payloads and the whole-model overview (issue 14)
        "pieces": pieces_data(tr, keys, views, pairs, group, depth, say) if tr.index == 0 else [],
        "piece_fields": list(PIECE_FIELDS),  # what the page swaps when another piece is picked
        "overview": overview_data(tr, keys) if tr.index == 0 and len(tr.pieces) > 1 else None,
        "whole_model_option": whole_model_option(len(tr.pieces)),
        # the memory timeline ({"svg", "caption"} or None); report.js shows it under the saved tensors
        "timeline": timeline_data(tr, keys),
    }


# the payload fields that differ from piece to piece (the report swaps them in when one is picked)
PIECE_FIELDS = ("summary", "index", "drawings", "status", "nodes", "table", "initial")


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
            "modules": [list(m) for m in summary.modules], "option": piece_option(summary),
        }
        if piece.index:
            say(graph_of(piece.index, len(pieces)))
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
        shown["strategy"] = [f"{'whole model' if p == 'total' else graph_name(int(p))}: {s}"
                             + (f" (x{r} runs)" if p != "total" and r > 1 else "")
                             for p, s, r in zip(df["piece"], df["strategy"], df["runs"])]
        shown.attrs = dict(df.attrs)
        table = table_data(shown)
    except FxvizError as exc:
        table = {"message": f"no memory table: {exc.message}"}
    view = ViewPayload(key="overview", view="joint", strategy=None, compare=None, svg=clean_svg(drawing.svg()),
                       caption=drawing.caption)
    return {"view": view.to_json(), "table": table}


def piece_options(tr: Trace, strategy: StrategyLike | None = None) -> list[tuple[str, int]]:
    """The piece selector's choices: ``whole model`` (-1, the overview), then each piece with its
    node count, saved bytes, runs and the graph break before it; one graph gives one choice."""
    pieces = tr.pieces
    if len(pieces) < 2:
        return [("graph 1", 0)]
    options = [(whole_model_option(len(pieces)), -1)]
    for p in tr.piece_summaries(strategy):
        text = piece_option(p)
        options.append((text if len(text) <= 90 else text[:88] + "\u2026", p.index))
    return options


def whole_model_option(pieces: int) -> str:
    """The piece selector's first choice (widget and report)."""
    return f"whole model ({pieces} graphs)"


def piece_option(p: PieceSummary) -> str:
    """One piece as the piece selector names it, in full (widget and report): "graph 2 of 3: 14 nodes,
    saves 96 B, ran 2× — after: <the graph break>"."""
    saves = f"saves {format_bytes(p.saved_bytes, missing='—')}" if p.has_backward else "no backward graph"
    text = f"{p.label}: {p.nodes} nodes, {saves}"
    text += f", ran {p.runs}\u00d7" if p.runs > 1 else ""
    return text + (f" \u2014 after: {p.reason}" if p.reason else "")


def run_report_data(graphs: Sequence[tuple[int, str, Trace]], initial: int = 0, title: str | None = None,
                    progress: Callable[[str], None] | None = None, run_summary: str | None = None,
                    **kwargs: Any) -> dict[str, Any]:
    """The payloads of several graphs of a logged run, one ``report_data`` each, for a report
    with a rank and a graph selector.  ``graphs``: (rank, compile id, trace) in display order.
    ``run_summary`` (``Run.summary()``: graphs, eager frames, totals per rank) heads every graph's
    summary, so the whole run is read before any one graph."""
    if not graphs:
        raise InputError("the report needs at least one graph",
                         Say("pick graphs with a backward from ", Do("graphs", on="run", attr=True)))
    say = progress or (lambda _m: None)
    entries: list[dict[str, Any]] = []
    for rank, compile_id, tr in graphs:
        say(f"rank {rank}, graph {compile_id}")
        data = report_data(tr, progress=progress, **kwargs)
        if run_summary:
            data["summary"] = f"{run_summary}\n\nthis graph: {data['summary']}"
        entries.append({"id": f"{rank}|{compile_id}", "rank": rank, "compile_id": compile_id,
                        "label": f"{compile_id} ({tr.title})", "data": data})
    first: dict[str, Any] = entries[initial]["data"]
    # "first" feeds the script-free fallback and is not written into the page's data
    return {"title": title or f"fxviz report: a logged run ({len(entries)} graphs)", "summary": first["summary"],
            "generated": first["generated"], "graphs": entries, "initial": initial, "first": first}
