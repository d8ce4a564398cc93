"""Which value of one joint graph is which value of another: the matching ``fxviz.diff`` reads.

Node names are no identity across runs (``addmm_4`` in one compile is ``addmm_3`` in the next once
an op is added, and two ranks name alike values alike whatever their shapes), so a value is matched
on what it is, in this order, and every pair says which rule made it:

- ``name``: the same graph (a trace under two strategies), or the same parameter / input name, or
  a pair the module alignment below made whose node names also agree;
- ``module+op+position``: the same module, op and dtype at the same place among that module's
  forward ops (``difflib`` alignment of the two op sequences, so an op inserted or dropped on one
  side shifts nothing else; shapes may differ: two ranks with different batches);
- ``op+shape``: what is left, by op, shape and dtype, in graph order;
- unmatched: no counterpart (the other graph has no such op there).

Only forward values are matched: saved values are forward values.  A log records a module only for
ops that read a parameter; every other op's module is ``None`` there, aligned as one sequence.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass, field

from fxviz.sources.graphs import JointGraph
from fxviz.sources.roles import NodeInfo

__all__ = ["RULES", "Matching", "match_graphs", "value_op", "value_module"]

RULES: tuple[str, ...] = ("name", "module+op+position", "op+shape", "unmatched")
"""How a value was matched, in the order the rules are tried (the diff table's ``match`` column)."""


@dataclass
class Matching:
    """A one-to-one map between the forward values of graph A and graph B."""

    a_to_b: dict[str, str] = field(default_factory=dict)
    rule: dict[str, str] = field(default_factory=dict)  # A name -> rule that matched it

    @property
    def b_to_a(self) -> dict[str, str]:
        return {b: a for a, b in self.a_to_b.items()}

    def add(self, a: str, b: str, rule: str) -> None:
        self.a_to_b[a] = b
        self.rule[a] = rule


def value_op(info: NodeInfo) -> str:
    """What made a value: its aten op (``addmm``), or its role for a graph input (``parameter``; a
    user's input is ``input``, as the saved table says it, not the graph role's ``primal``)."""
    if info.op in ("placeholder", "get_attr"):
        return "input" if info.role == "primal" else info.role
    return info.short_op


def value_module(info: NodeInfo) -> str | None:
    """The module that made a value; a parameter or buffer belongs to the module that owns it."""
    if info.module:
        return info.module
    if info.op in ("placeholder", "get_attr") and info.qualname and "." in info.qualname and info.role != "primal":
        return info.qualname.rsplit(".", 1)[0]
    return None


def _forward_ops(graph: JointGraph) -> dict[str | None, list[NodeInfo]]:
    """Forward ops per module, in graph order."""
    out: dict[str | None, list[NodeInfo]] = defaultdict(list)
    for info in _in_order(graph):
        out[info.module].append(info)
    return out


def _in_order(graph: JointGraph) -> list[NodeInfo]:
    return [i for i in graph.info.values() if i.op == "call_function" and i.phase == "forward"]


def _inputs(graph: JointGraph) -> dict[tuple[str, str], str]:
    """(role, real name) -> node name, for the graph's inputs (parameters, buffers, user inputs)."""
    out: dict[tuple[str, str], str] = {}
    for info in graph.info.values():
        if info.op in ("placeholder", "get_attr") and info.phase == "forward" and info.qualname:
            out.setdefault((info.role, info.qualname), info.name)
    return out


def _match_in_order(m: Matching, seq_a: list[NodeInfo], seq_b: list[NodeInfo]) -> None:
    """One module's forward ops of A and B paired in order where their ops and dtypes run alike."""
    tokens_a = [(i.short_op, i.dtype) for i in seq_a]
    tokens_b = [(i.short_op, i.dtype) for i in seq_b]
    matcher = difflib.SequenceMatcher(None, tokens_a, tokens_b, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            x, y = seq_a[block.a + k], seq_b[block.b + k]
            same = x.name == y.name and x.shape == y.shape
            m.add(x.name, y.name, "name" if same else "module+op+position")


def match_graphs(a: JointGraph, b: JointGraph) -> Matching:
    """Match the forward values of ``a`` and ``b`` (see the module docstring for the rules)."""
    m = Matching()
    if a is b:
        for info in a.info.values():
            if info.phase == "forward" and info.op != "output":
                m.add(info.name, info.name, "name")
        return m
    inputs_b = _inputs(b)
    for key, name in _inputs(a).items():
        if key in inputs_b:
            m.add(name, inputs_b[key], "name")
    ops_a, ops_b = _forward_ops(a), _forward_ops(b)
    for module, seq_a in ops_a.items():
        _match_in_order(m, seq_a, ops_b.get(module, []))
    _match_by_op_and_shape(m, a, b)
    return m


def _match_by_op_and_shape(m: Matching, a: JointGraph, b: JointGraph) -> None:
    """Values still unmatched paired by op, shape and dtype, in run order (the last rule)."""
    taken = set(m.a_to_b.values())
    left: dict[tuple[object, ...], list[str]] = defaultdict(list)
    for info in _in_order(b):
        if info.name not in taken:
            left[(info.short_op, info.shape, info.dtype)].append(info.name)
    for info in _in_order(a):
        candidates = left.get((info.short_op, info.shape, info.dtype))
        if info.name not in m.a_to_b and candidates:
            m.add(info.name, candidates.pop(0), "op+shape")
