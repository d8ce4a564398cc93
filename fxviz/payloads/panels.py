"""The panels' records: what the details panel, the memory table, the saved-tensors panel, the
timeline, the doctor's findings and the legend show, as plain data built from analysis objects (a
partition, the memory table, the doctor's ``Diagnosis``); and what each strategy did (:class:`Status`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from fxviz.analysis.strategy.strategies import Strategy, StrategyLike
from fxviz.core.errors import FxvizError
from fxviz.core.units import format_bytes, is_missing
from fxviz.render import theme
from fxviz.render.graph.limits import READABLE_PX
from fxviz.render.graph.scene import RECOMPUTED_SUFFIX, format_tensor
from fxviz.render.page.embed import SVG_ELEMENTS, clean_svg
from fxviz.sources.roles import INPUT_ROLES, PARAMETER_ROLES

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fxviz.analysis.real.measure import Measured
    from fxviz.analysis.strategy.partition import Partition
    from fxviz.api.facade import Trace

MISSING = "\u2014"
"""What a page shows for a value that is missing (no gradient node, a failed row's cells)."""

__all__ = ["Status", "StatusState", "status_data", "node_data", "table_data", "table_notes", "saved_data",
           "timeline_data", "doctor_data", "legend_data", "page_constants"]


def _gradient_facts(tr: Trace, strategy: StrategyLike | None = None) -> dict[str, dict[str, Any]]:
    """Per parameter node (lifted or captured as a constant) and per gradient node: whether the
    parameter gets a gradient, from the doctor's table (``tr.doctor(strategy).diagnosis.table``), by real name."""
    try:
        table = tr.doctor(strategy).diagnosis.table
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


def node_data(tr: Trace, strategy: StrategyLike | None = None) -> dict[str, dict[str, Any]]:
    """One record per joint-graph node (output excluded): what the details panel shows, with
    ``gradient`` (does this parameter get a gradient, and which node) where the doctor knows
    (the doctor checking ``strategy``'s backward graphs: a report passes one it partitioned,
    ``graph.doctor_strategy``, so that no strategy its budget left out is partitioned for it)."""
    graph = tr.graph
    grads = _gradient_facts(tr, strategy)
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


StatusState = Literal["done", "failed", "left_out"]
"""What became of one strategy in a view or report: computed (partitioned, or measured), failed
(``error`` says why), or left out by the report's time budget (``error`` says how to see it)."""


@dataclass(frozen=True)
class Status:
    """What one strategy did, by joint-node name (straight from its ``Partition``): the page marks
    each node from these sets.  Built by :meth:`of` (a partition) or :meth:`left_out` (the budget)."""

    key: str
    label: str
    state: StatusState
    error: str | None = None
    saved: tuple[str, ...] = ()
    recomputed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    random: tuple[str, ...] = ()
    offloaded: tuple[str, ...] = ()  # joint values saved as activation offloading's copies

    @classmethod
    def of(cls, p: Partition) -> Status:
        moved = tuple(sorted(m.wraps for m in p.made.values() if m.kind == "offloaded" and m.wraps is not None))
        return cls(p.name, p.label, "failed" if p.error else "done", p.error, tuple(p.saved),
                   tuple(sorted(p.recomputed)), tuple(sorted(p.removed)), tuple(sorted(p.recomputed_random)), moved)

    @classmethod
    def left_out(cls, strategy: Strategy, error: str) -> Status:
        """Not partitioned: the report's budget ran out before it (``error``: what to do)."""
        return cls(strategy.name, strategy.label, "left_out", error)

    def to_json(self) -> dict[str, Any]:
        """The status as page data (the report's ``status``, the widget's ``statuses``)."""
        return {"key": self.key, "label": self.label, "state": self.state, "error": self.error,
                "saved": list(self.saved), "recomputed": list(self.recomputed), "removed": list(self.removed),
                "random": list(self.random), **({"offloaded": list(self.offloaded)} if self.offloaded else {})}


def status_data(p: Partition) -> dict[str, Any]:
    """What one strategy did, as page data (:class:`Status` of its ``Partition``)."""
    return Status.of(p).to_json()


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


def table_data(df: pd.DataFrame, tr: Trace | None = None, measured: Measured | None = None) -> dict[str, Any]:
    """The memory table (``tr.memory_table()``) as display strings per strategy row, formatted
    and best-marked exactly as ``fxviz.render.text.table`` does for the notebook table; given the
    ``Trace``, with :func:`table_notes`.  A table with the measured twin (``memory_table(measured=m)``)
    shows its two columns; ``measured`` adds the step itself (``render.measured_view.measured_data``)."""
    from fxviz.render.text.table import COLUMN_WORDS, PANEL_COLUMNS, best_rows, format_cell

    best = best_rows(df)
    # a measured step's twin (its difference and reason are under the table: one column more is what the
    # panel has room for); offloaded bytes beside 'saved' where a strategy offloads
    columns = [*PANEL_COLUMNS, *(c for c in ("measured_saved_bytes",) if c in df.columns)]
    if "offloaded_bytes" in df and df["offloaded_bytes"].fillna(0).astype(bool).any():
        columns.insert(2, "offloaded_bytes")
    rows = []
    for idx, rec in zip(df.index, df.to_dict("records")):
        cells = [format_cell(col, rec.get(col), MISSING) for col in columns]
        marks = [idx in best.get(col, ()) for col in columns]
        err = rec.get("error")
        rows.append({"key": str(rec["strategy"]), "cells": cells, "best": marks,
                     "error": None if is_missing(err) else str(err)})
    out = {"columns": [COLUMN_WORDS[c][0] for c in columns], "tips": [COLUMN_WORDS[c][1] for c in columns],
           "rows": rows,
           "best_note": "bold: the best (lowest) value of each column",
           "notes": table_notes(tr, [str(k) for k in df["strategy"]]) if tr is not None else [],
           "caption": df.attrs.get("caption", "").strip()}
    if measured is not None:
        from fxviz.render.text.measured_view import measured_data

        out["measured"] = measured_data(measured)
    return out


def saved_data(tr: Trace, strategy: StrategyLike) -> dict[str, Any]:
    """The "saved tensors" panel of one strategy: ``tr.saved(strategy)`` as plain records
    (``render.saved_view.saved_records``: name, kind, module, what, tensor, bytes, shares, source),
    the totals per kind and the caption; or a ``message`` where the strategy lists no graph values
    (measured, or failed).  No other strategy is partitioned for it (a view's first picture waits
    for nothing more than its own partition): the page says what the other strategies do from the
    statuses it holds (``status_data``, the ``Partition``'s own sets)."""
    from fxviz.render.text.saved_view import saved_records

    name = Strategy.parse(strategy).name
    try:
        df = tr.saved(strategy, compare=[])
    except FxvizError as exc:
        return {"strategy": name, "message": exc.message}
    sums = df.groupby("kind")["bytes"].sum()
    totals = {k: int(sums.get(k, 0)) for k in ("activation", "parameter", "input")}
    if sums.get("offloaded", 0):  # activation offloading's copies: off the device, a total of their own
        totals["offloaded"] = int(sums["offloaded"])
    made = tr.partition(strategy).made
    records = saved_records(df)
    for r in records:  # an offloaded copy: the joint value it holds, for the other strategies' fates
        if r["kind"] == "offloaded" and r["name"] in made and made[r["name"]].wraps:
            r["holds"] = made[r["name"]].wraps
    return {"strategy": name, "rows": records, "totals": totals,
            "totals_text": {k: format_bytes(v) or "0 B" for k, v in totals.items()},
            "caption": df.attrs.get("caption", "")}


def timeline_data(tr: Trace, strategies: Sequence[str]) -> dict[str, Any] | None:
    """The memory timeline of the report's strategies that have graphs (``tr.memory_timeline``):
    its SVG (``render.timeline_svg``, sanitizer-safe) and a caption naming each peak.  ``None``
    where there is nothing to plot (no backward, every strategy measured or failed) and after
    graph breaks (the page swaps pieces, and one piece's timeline would stand for all of them)."""
    from fxviz.analysis.memory.program import compiles
    from fxviz.render.charts.timeline_svg import timeline_svg

    if not tr.graph.has_backward or len(tr.pieces) > 1:
        return None
    chosen = [s for s in strategies if (p := tr.partition(s)).error is None and not p.reference]
    code = compiles(tr.graph)
    if code:  # inductor's code: one strategy (each costs a lowering): the step's own, else the first shown
        own = [s for s in chosen if tr.partition(s).strategy == tr.default_strategy]
        chosen = own or chosen[:1]
    if not chosen:
        return None
    timeline = tr.memory_timeline(chosen)
    if timeline.empty:
        return None
    skipped = timeline.attrs.get("skipped") or []
    name = tr.partition(chosen[0]).strategy.name
    what = (f"at each line of inductor's generated code for {name} that allocates or frees" if code
            else "while each node runs")
    caption = (f"Memory held {what}, parameters and inputs included: the top of each curve is the "
               "memory table's forward or backward peak (dots; hover for the node and module)."
               + (f" No timeline for {', '.join(skipped)}." if skipped else ""))
    return {"svg": clean_svg(timeline_svg(timeline, timeline.peaks)), "caption": caption}


def doctor_data(tr: Trace, strategy: StrategyLike | None = None, measured: Measured | None = None) -> dict[str, Any]:
    """The doctor's findings (``tr.doctor().diagnosis``; with ``measured``, also what the real step
    keeps beyond the partition), grouped as its card groups them, as plain records."""
    from fxviz.render.text.doctor_view import KIND_TITLES

    try:
        report = tr.doctor(strategy, measured=measured)
    except FxvizError as exc:
        return {"message": f"the doctor could not run: {exc.message}", "findings": [], "healthy": None}
    names = {n.name for n in tr.graph.gm.graph.nodes if n.op != "output"}
    groups: dict[tuple[str, str, str], list[Any]] = {}
    result = report.diagnosis  # the data; the headline is the report's prose
    for f in result.findings:
        groups.setdefault((f.severity, f.kind, f.fix), []).append(f)
    out = []
    for (severity, kind, fix), fs in groups.items():
        nodes: list[str] = []
        for f in fs:
            if f.graph in (None, tr.graph.index):
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
    return {"message": report.headline(), "findings": out, "healthy": bool(result.healthy)}


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



def page_constants() -> dict[str, Any]:
    """What ``explorer.js`` needs to know of fxviz's drawings, sent with the data instead of copied
    into the script: the suffix of a recomputed op's backward copy, graphviz's SVG elements the
    page keeps (``render.embed.SVG_ELEMENTS``), what the page shows for a missing value, and how tall a
    label must be on screen to be read (``render.graph.limits.READABLE_PX``: the opening zoom)."""
    return {"recomputed_suffix": RECOMPUTED_SUFFIX, "svg_elements": sorted(SVG_ELEMENTS), "missing": MISSING,
            "readable_px": READABLE_PX}
