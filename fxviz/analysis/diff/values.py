"""What one partition saves that another does not, value by value, and why: ``fxviz.diff``'s facts.

Each side is a joint graph and a partition of it (any strategy: a torch partitioner, the run's own
``logged`` partition, or the ``eager`` measurement).  Its saved values carry storage-aware bytes
(``memory.saved_memory``: a storage several saved values view is counted once, at the first of
them), so each side's activation total is exactly its memory table's ``saved_activation_bytes``.
Values are paired across the two graphs by ``match.match_graphs``; a value only one side saves
gets a reason where fxviz can tell one from the other side's graph and partition.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from fxviz.analysis.diff.match import Matching, match_graphs, value_module, value_op
from fxviz.analysis.memory.storage import offloads, saved_memory
from fxviz.analysis.strategy.partition import Partition
from fxviz.sources.graphs import JointGraph
from fxviz.sources.roles import NodeInfo

__all__ = ["SavedValue", "Side", "DIFF_COLUMNS", "BY_MODULE_COLUMNS", "NO_MODULE", "side_of", "diff_table",
           "lone_rows", "module_bytes"]

DIFF_COLUMNS = ["status", "module", "op", "shape_a", "shape_b", "dtype", "kind", "bytes_a", "bytes_b", "name_a",
                "name_b", "match", "why", "offloaded"]
"""The diff table's columns, in the saved table's words (``analysis.saved``): ``module`` (None: no
module), ``op``, ``dtype``, ``kind`` (activation / parameter / input / offloaded), a shape is a tuple
of ints; a column of one side ends in ``_a`` / ``_b`` (None where that side does not save the value).
``status``: both, only A, only B, or offloaded (one side saves the value, the other offloads it:
``kind`` is the saving side's); ``offloaded``: which side offloads the value (A, B, both or None)."""
BY_MODULE_COLUMNS = ["module", "bytes_a", "bytes_b", "change"]
NO_MODULE = "(no module)"
"""What ``by_module`` says for values no module made (a user input; most ops of a log, which records
a module only for ops that read a parameter)."""


@dataclass(frozen=True)
class SavedValue:
    """One value a partition saves for the backward."""

    name: str | None  # the joint-graph node (None: an eager tensor fxviz could not tie to one)
    module: str | None
    op: str
    shape: tuple[int, ...] | None
    dtype: str | None
    kind: str  # activation | parameter | input (the saved table's ``kind``)
    bytes: int  # its storage's bytes, counted at the first saved value that views it (0 for the rest)
    shares: str | None = None  # that first saved value, when this one views its storage too
    offloaded_to: str | None = None  # activation offloading's copy of ``name``: the device it went to


@dataclass
class Side:
    """One side of a diff: a graph, a partition of it, and what the partition saves."""

    letter: str  # "A" or "B"
    label: str  # what the side is, in words ("Net, default, backend aot_eager")
    graph: JointGraph
    partition: Partition
    values: list[SavedValue]

    @property
    def activation_bytes(self) -> int:
        return self.bytes_of("activation")

    def bytes_of(self, kind: str) -> int:
        return sum(v.bytes for v in self.values if v.kind == kind)

    @property
    def saved_names(self) -> set[str]:
        return {v.name for v in self.values if v.name is not None}


def _value(info: NodeInfo | None, name: str | None, op: str, kind: str, nbytes: int,
           shape: tuple[int, ...] | None = None, dtype: str | None = None, shares: str | None = None) -> SavedValue:
    if info is None:
        return SavedValue(name, None, op, shape, dtype, kind, nbytes, shares)
    return SavedValue(name, value_module(info), value_op(info), info.shape, info.dtype, kind, nbytes, shares)


def side_of(letter: str, label: str, graph: JointGraph, p: Partition) -> Side:
    """The saved values of ``p`` (tensors; SymInts hold no storage), in the partition's order."""
    if p.error is not None:
        from fxviz.core.errors import StrategyError

        raise StrategyError(f"strategy {p.name!r} failed on {label}: {p.error}",
                            "diff against a strategy that partitions this graph (Trace.memory_table lists them)")
    values: list[SavedValue] = []
    if p.measurement is not None:  # eager: the tensors autograd saved, each tied to a node where possible
        first: dict[int, str | None] = {}
        for st in p.measurement.saved:
            shared = st.storage in first
            nbytes = 0 if shared else st.storage_bytes
            first.setdefault(st.storage, st.joint)
            info = graph.info.get(st.joint) if st.joint else None
            values.append(_value(info, st.joint, st.op, st.owner, nbytes, st.shape, st.dtype,
                                 first[st.storage] if shared else None))
        return Side(letter, label, graph, p, values)
    counted: dict[str, tuple[str, int, str | None]] = {}
    for use in saved_memory(p, graph).storages:
        for i, name in enumerate(use.names):
            counted.setdefault(name, (use.owner, use.nbytes, None) if i == 0 else (use.owner, 0, use.names[0]))
    moved = {o.name: o for o in offloads(p)}
    for name in dict.fromkeys(p.saved):
        if name in counted:  # a SymInt has no storage and no row
            kind, nbytes, shares = counted[name]
            off = moved.get(name)
            if off is not None and off.wraps in graph.info:  # offloaded: the joint value it holds, and where
                values.append(replace(_value(graph.info[off.wraps], off.wraps, "offloaded", kind, nbytes,
                                             shares=shares), offloaded_to=off.target))
                continue
            made = p.made.get(name)  # an RNG state the partitioner made: no joint node, its kind as op
            values.append(_value(graph.info.get(name), name, made.kind if made else "?", kind, nbytes, shares=shares))
    return Side(letter, label, graph, p, values)


def _missing_op(value: SavedValue, mine: Side, other: Side) -> str:
    """Why a value has no counterpart at all in the other graph."""
    ops = {value_op(i) for i in other.graph.info.values()}
    if value.op not in ops:
        backends = {mine.graph.backend, other.graph.backend}
        if "inductor" in backends and len(backends) == 2:
            there = list(dict.fromkeys(value_op(i) for i in other.graph.info.values() if i.phase == "forward"
                                       and i.op == "call_function" and value_module(i) == value.module))
            instead = f"; its {value.module} runs {', '.join(there[:4])}" if there and value.module else ""
            return f"a decomposition: {other.letter} ({other.graph.backend}) has no {value.op} op{instead}"
        return f"{other.letter}'s graph has no {value.op} op"
    where = f"in {value.module}" if value.module else "at this place"
    return f"{other.letter}'s graph has no matching {value.op} {where}"


def why(value: SavedValue, counterpart: str | None, mine: Side, other: Side, covered: set[str],
        covered_mine: set[str]) -> str:
    """In words, why ``other`` does not save ``value`` (``counterpart``: its node there, if any;
    ``covered``: the other side's nodes whose twins ``mine`` saves too, so no explanation;
    ``covered_mine``: ``mine``'s saved nodes whose twins ``other`` saves)."""
    x = other.letter
    if value.name is None:
        return f"eager saved a {value.op} tensor that no graph node produces here"
    if counterpart is None:
        return _missing_op(value, mine, other)
    if value.shares is not None and value.shares in covered_mine:
        return f"a view of {value.shares}'s storage, which {x} keeps too: no extra bytes"
    info = other.graph.info.get(counterpart)
    policy = info.checkpoint_policy if info is not None else None
    p = other.partition
    if counterpart in p.recomputed:
        return f"{x} recomputes it" + (f" (checkpoint policy {policy})" if policy else "")
    instead = _saved_instead(other, counterpart, other.saved_names - covered)
    if instead is not None:
        return instead
    if counterpart in p.removed:
        return f"{x}'s partition drops it (dead code)"
    if policy:
        return f"{x}'s backward does not read it (checkpoint policy {policy})"
    if p.measurement is not None:
        return f"{x} (eager autograd) does not keep it for the backward"
    return f"{x}'s backward does not read it"


def _saved_instead(other: Side, counterpart: str, saved: set[str]) -> str | None:
    """``other`` saves a value computed from ``counterpart``, or its input, instead of it (None: neither)."""
    node = next((n for n in other.graph.gm.graph.nodes if n.name == counterpart), None)
    if node is None:
        return None
    users = [u.name for u in node.users if u.name in saved]
    if users:
        return f"{other.letter} saves {', '.join(users[:3])}, computed from it, instead"
    inputs = [a.name for a in node.all_input_nodes if a.name in saved]
    return f"{other.letter} saves its input instead ({', '.join(inputs)})" if inputs else None


def _row(status: str, a: SavedValue | None, b: SavedValue | None, rule: str, reason: str) -> dict[str, object]:
    held = [v for v in (a, b) if v is not None]
    first = next((v for v in held if v.offloaded_to is None), held[0])  # the saving side's kind, if one saves
    off = [x for x, v in (("A", a), ("B", b)) if v is not None and v.offloaded_to is not None]
    return {"status": status, "module": first.module or None, "op": first.op,
            "shape_a": _shape(a), "shape_b": _shape(b), "dtype": first.dtype or None, "kind": first.kind,
            "bytes_a": a.bytes if a is not None else 0, "bytes_b": b.bytes if b is not None else 0,
            "name_a": a.name if a is not None else None, "name_b": b.name if b is not None else None,
            "match": rule, "why": reason, "offloaded": "both" if len(off) == 2 else off[0] if off else None}


def _offload_words(a: SavedValue, b: SavedValue) -> str:
    """One side saves the value, the other offloads it: "A saves relu; B offloads it to cpu"."""
    saver, (x, mover) = (("A", a), ("B", b)) if b.offloaded_to is not None else (("B", b), ("A", a))
    return f"{saver[0]} saves {saver[1].name}; {x} offloads it to {mover.offloaded_to}"


def _shape(v: SavedValue | None) -> tuple[int, ...] | None:
    return None if v is None or v.shape is None else tuple(int(s) for s in v.shape)


ALIAS_OPS = ("detach", "alias")
"""Ops whose output is their input under another name (same storage, shape and strides): a partition
that saves ``detach(x)`` keeps ``x``."""


def alias_roots(graph: JointGraph, names: set[str]) -> dict[str, str]:
    """Each of ``names`` that is an alias (``ALIAS_OPS``, through chains) -> the value it aliases."""
    nodes = {n.name: n for n in graph.gm.graph.nodes}
    roots = {}
    for name in names:
        node, root = nodes.get(name), name
        while node is not None and node.op == "call_function" and len(node.all_input_nodes) == 1 \
                and getattr(node.target, "__name__", "").split(".")[0] in ALIAS_OPS:
            node = node.all_input_nodes[0]
            root = node.name
        if root != name:
            roots[name] = root
    return roots


def _alias_twins(a: Side, b: Side, m: Matching) -> dict[str, str]:
    """A saved values whose B twin B does not save but keeps under an alias (or the other way
    round: A saves ``detach(x)``, B saves ``x``): A name -> the B saved value that holds it."""
    b_saved = b.saved_names
    a_roots, b_roots = alias_roots(a.graph, a.saved_names), alias_roots(b.graph, b_saved)
    b_by_root: dict[str, str] = {}
    for name in b_saved:
        b_by_root.setdefault(b_roots.get(name, name), name)
    out: dict[str, str] = {}
    for name in a.saved_names:
        if m.a_to_b.get(name) in b_saved:
            continue
        twin = m.a_to_b.get(a_roots.get(name, name))
        held = b_by_root.get(twin) if twin is not None else None
        if held is not None and held not in out.values() and (name in a_roots or held in b_roots):
            out[name] = held
    return out


def _alias_words(a: Side, b: Side, a_name: str, b_name: str) -> str:
    """Why a pair of differently made values is one storage, e.g. "B saves detach_1, a detach of it"."""
    for side, name in ((b, b_name), (a, a_name)):
        info = side.graph.info.get(name)
        if info is not None and info.short_op in ALIAS_OPS:
            return f"{side.letter} saves {name}, a {info.short_op} of it: one storage"
    return "one storage under two names"


def diff_table(a: Side, b: Side, matching: Matching | None = None) -> pd.DataFrame:
    """One row per saved value of either side (columns ``DIFF_COLUMNS``): A's values in A's order,
    each with its B twin when B saves it (or an alias of it: ``detach(x)`` is ``x``), then the
    values only B saves."""
    m = match_graphs(a.graph, b.graph) if matching is None else matching
    aliased = _alias_twins(a, b, m)
    if aliased:  # pair them as any twin (dropping the pairs they replace): every rule below sees both saved
        kept = {k: v for k, v in m.a_to_b.items() if v not in aliased.values()}
        m = Matching({**kept, **aliased}, {k: r for k, r in m.rule.items() if k in kept or k in aliased}
                     | {n: m.rule.get(n, "op+shape") for n in aliased})
    to_a = m.b_to_a
    b_by_name = {v.name: v for v in b.values if v.name is not None}
    used: set[int] = set()
    covered_b = {m.a_to_b[n] for n in a.saved_names if n in m.a_to_b}
    covered_a = {to_a[n] for n in b.saved_names if n in to_a}
    covered_a_in_a = {n for n in a.saved_names if m.a_to_b.get(n) in b.saved_names}
    covered_b_in_b = {n for n in b.saved_names if to_a.get(n) in a.saved_names}
    rows = []
    for v in a.values:
        twin_name = m.a_to_b.get(v.name) if v.name is not None else None
        rule = m.rule.get(v.name, "unmatched") if v.name is not None else "unmatched"
        twin = b_by_name.get(twin_name) if twin_name is not None else None
        if twin is not None and id(twin) not in used:
            used.add(id(twin))
            if (v.offloaded_to is None) != (twin.offloaded_to is None):  # saved on one side, offloaded on the other
                rows.append(_row("offloaded", v, twin, rule, _offload_words(v, twin)))
                continue
            note = _alias_words(a, b, v.name, twin.name) if v.name in aliased and v.name and twin.name else ""
            rows.append(_row("both", v, twin, rule, note))
        else:
            rows.append(_row("only A", v, None, rule, why(v, twin_name, a, b, covered_b, covered_a_in_a)))
    for v in b.values:
        if id(v) in used:
            continue
        back = to_a.get(v.name) if v.name is not None else None
        rule = m.rule.get(back, "unmatched") if back is not None else "unmatched"
        rows.append(_row("only B", None, v, rule, why(v, back, b, a, covered_a, covered_b_in_b)))
    return _typed(pd.DataFrame(rows, columns=DIFF_COLUMNS))


def _typed(df: pd.DataFrame) -> pd.DataFrame:
    for c in ("bytes_a", "bytes_b"):
        df[c] = df[c].astype("int64")
    for c in ("module", "dtype", "name_a", "name_b", "shape_a", "shape_b", "offloaded"):
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    return df


def lone_rows(side: Side, reason: str) -> pd.DataFrame:
    """A graph with no partner on the other side (a whole-step diff): every value it saves as saved
    by its side only, for ``reason``."""
    status = f"only {side.letter}"
    rows = [_row(status, v, None, "unmatched", reason) if side.letter == "A" else _row(status, None, v, "unmatched",
                                                                                       reason) for v in side.values]
    return _typed(pd.DataFrame(rows, columns=DIFF_COLUMNS))


def module_bytes(table: pd.DataFrame) -> pd.DataFrame:
    """Saved activation bytes per module for A and B and the change (B - A), biggest change first;
    values of no module under :data:`NO_MODULE`."""
    act = table[table["kind"] == "activation"].assign(module=lambda t: t["module"].fillna(NO_MODULE))
    for side in ("a", "b"):  # a copy one side offloads is not among that side's activations
        act.loc[act["offloaded"] == side.upper(), f"bytes_{side}"] = 0
    grouped = act.groupby("module", sort=False)[["bytes_a", "bytes_b"]].sum().reset_index()
    grouped["change"] = grouped["bytes_b"] - grouped["bytes_a"]
    order = grouped["change"].abs().sort_values(ascending=False, kind="stable").index
    out = grouped.loc[order].reset_index(drop=True)
    return out[BY_MODULE_COLUMNS].astype({"bytes_a": "int64", "bytes_b": "int64", "change": "int64"})
