"""The whole step of two runs side by side: which graph of A is which graph of B, one name for each
parameter across graph breaks, and the value rows of every pair joined into one step table
(``fxviz.diff`` of traces or logs with several graphs).

A step is a sequence of graphs (pieces).  Graph breaks need not fall in the same places on both
sides (Hugging Face checkpointing splits a step a plain run compiles whole), so graphs are paired
by what they hold, not by position: the parameters they read, the modules their ops ran in, the
frame dynamo compiled (a log names it), then, for graphs with no parameter at all (the loss), by
order.  A graph left without a partner saves values the other side saves in some other graph or
not at all; the step table re-pairs such values across graphs by module, op, shape and dtype.

Names: dynamo names a parameter from the frame it compiled, so after a break inside a submodule the
same weight is ``layers.0.q.weight`` in one graph and ``model.layers.0.q.weight`` in another.
The one rule: a graph whose every parameter name is a dotted suffix of a parameter name of equal
shape elsewhere in the two steps, all under one prefix, is named with that prefix (its modules
too).  A model trace names every parameter by ``named_parameters()`` already, so the rule only
acts on logs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from fxviz.sources.graphs import JointGraph
from fxviz.sources.roles import NodeInfo

__all__ = ["PieceKey", "piece_key", "prefixes", "rooted", "pair_pieces", "join_step_rows", "ACROSS_GRAPHS",
           "outside_notes"]

ACROSS_GRAPHS = "module+op+shape, another graph"
"""The diff table's ``match`` for a value each side saves in graphs that are not a pair."""


@dataclass(frozen=True)
class PieceKey:
    """What a graph of a step holds, for pairing: its parameters (name -> shape), the modules its
    forward ops ran in, the frame dynamo compiled (None when not recorded), how often it ran."""

    index: int
    params: dict[str, tuple[int, ...] | None]
    modules: frozenset[str]
    frame: str | None
    runs: int = 1


def piece_key(index: int, graph: JointGraph, frame: str | None = None, runs: int = 1) -> PieceKey:
    """Piece ``index`` of a step (its position there) as :class:`PieceKey`."""
    params = {i.qualname: i.shape for i in graph.info.values()
              if i.op in ("placeholder", "get_attr") and i.role in ("parameter", "buffer") and i.qualname}
    modules = frozenset(i.module for i in graph.info.values() if i.module and i.phase == "forward")
    return PieceKey(index, params, modules, frame, max(1, runs))


def _prefix_of(name: str, shape: tuple[int, ...] | None, names: dict[str, tuple[int, ...] | None]) -> set[str]:
    return {m[: -len(name)] for m, s in names.items() if m != name and m.endswith("." + name) and s == shape}


def prefixes(keys: Sequence[PieceKey]) -> list[str]:
    """Per piece (in ``keys`` order), the prefix that roots its names ("" for none): the one prefix
    shared by every parameter of the piece, each a dotted suffix of a name of equal shape elsewhere
    (none where two prefixes would fit: fxviz does not guess)."""
    every: dict[str, tuple[int, ...] | None] = {}
    for k in keys:
        every.update(k.params)
    out = []
    for k in keys:
        found = [_prefix_of(n, s, every) for n, s in k.params.items()]
        common = set.intersection(*found) if found and all(found) else set()
        out.append(next(iter(common)) if len(common) == 1 else "")  # two roots would be a guess
    return out


def rooted(graph: JointGraph, prefix: str) -> JointGraph:
    """``graph`` with its parameters' and modules' names under ``prefix`` (the same nodes)."""
    if not prefix:
        return graph

    def fix(i: NodeInfo) -> NodeInfo:
        qual = prefix + i.qualname if i.qualname and i.role in ("parameter", "buffer") else i.qualname
        return dataclasses.replace(i, module=prefix + i.module if i.module else i.module, qualname=qual)

    return dataclasses.replace(graph, info={n: fix(i) for n, i in graph.info.items()})


def _score(a: PieceKey, b: PieceKey) -> int:
    return 2 * len(a.params.keys() & b.params.keys()) + len(a.modules & b.modules) \
        + (1 if a.frame is not None and a.frame == b.frame else 0)


def _best(x: PieceKey, others: Sequence[PieceKey]) -> int | None:
    scores = [(_score(x, y), -abs(x.index - y.index), -j) for j, y in enumerate(others)]
    if not scores or max(scores)[0] <= 0:
        return None
    return -max(scores)[2]


def pair_pieces(a: Sequence[PieceKey], b: Sequence[PieceKey]) -> list[tuple[int | None, int | None]]:
    """The pairs to compare, as positions in ``a`` and ``b``: every graph with the graph of the
    other side it shares most parameters, modules and frame with (so one graph of a run that did not
    break can pair with two of a run that did); graphs with no parameter and no module (a loss) in
    order; a graph with no partner alone (None on the other side).  In A's run order."""
    edges = {(i, j) for i, x in enumerate(a) if (j := _best(x, b)) is not None}
    edges |= {(i, j) for j, y in enumerate(b) if (i := _best(y, a)) is not None}
    bare_a = [i for i, x in enumerate(a) if not x.params and not x.modules and all(e[0] != i for e in edges)]
    bare_b = [j for j, y in enumerate(b) if not y.params and not y.modules and all(e[1] != j for e in edges)]
    edges |= set(zip(bare_a, bare_b))
    out: list[tuple[int | None, int | None]] = sorted(edges)
    out += [(i, None) for i in range(len(a)) if all(e[0] != i for e in edges)]
    out += [(None, j) for j in range(len(b)) if all(e[1] != j for e in edges)]  # placed by _after below
    return sorted(out, key=lambda e: (e[0] if e[0] is not None else _after(out, e), e[1] if e[1] is not None else -1))


def _after(edges: list[tuple[int | None, int | None]], e: tuple[int | None, int | None]) -> float:
    """Where a graph of B alone sorts among A's: just after the A graph paired with B's previous graph."""
    prev = [i for i, j in edges if i is not None and j is not None and e[1] is not None and j < e[1]]
    return max(prev) + 0.5 if prev else -0.5


def _lone_rows(rows: list[dict[str, Any]], used: set[tuple[str, Any, Any]],
               modules: tuple[Sequence[frozenset[str]], Sequence[frozenset[str]]]) -> list[dict[str, Any]]:
    """Each value one side alone saves, once: the row of the pair whose other graph holds its module,
    else its first (``join_step_rows``)."""
    lone: dict[tuple[str, Any, Any], dict[str, Any]] = {}
    for r in rows:
        if r["status"] == "both":
            continue
        s = "a" if r["status"] == "only A" else "b"
        key = (s, r[f"graph_{s}"], r[f"name_{s}"])
        if key in used:
            continue
        other = modules[1 if s == "a" else 0]
        holds = r["_other"] is not None and r["module"] in other[r["_other"]]
        if key not in lone or (holds and not lone[key]["_holds"]):
            lone[key] = {**r, "_holds": holds}
    return list(lone.values())


def join_step_rows(tables: Sequence[tuple[int | None, int | None, pd.DataFrame]],
                   modules: tuple[Sequence[frozenset[str]], Sequence[frozenset[str]]]) -> pd.DataFrame:
    """The pairs' diff tables as one, each saved value of either step once, with ``graph_a``/
    ``graph_b`` (piece positions; None where that side does not save it).  A graph in several pairs
    has each value once: its row where the other side saves a twin, else the row of the pair whose
    other graph holds the value's module, else its first.  Then values saved only by A in one pair
    and only by B in another are joined when module, op, shape and dtype agree (a value the other
    side keeps in a graph that is not this one's partner)."""
    rows: list[dict[str, Any]] = []
    for ia, ib, t in tables:
        for rec in t.to_dict("records"):
            r: dict[str, Any] = {str(k): v for k, v in rec.items()}
            r["graph_a"] = ia if r["status"] != "only B" else None
            r["graph_b"] = ib if r["status"] != "only A" else None
            r["_other"] = ib if r["status"] == "only A" else ia
            r["_order"] = len(rows)
            rows.append(r)
    used: set[tuple[str, Any, Any]] = set()
    kept: list[dict[str, Any]] = []
    for r in rows:  # twins first: a value both sides save is kept once, as a twin
        if r["status"] == "both" and ("a", r["graph_a"], r["name_a"]) not in used \
                and ("b", r["graph_b"], r["name_b"]) not in used:
            used |= {("a", r["graph_a"], r["name_a"]), ("b", r["graph_b"], r["name_b"])}
            kept.append(r)
    kept = sorted(kept + _lone_rows(rows, used, modules), key=lambda r: int(r["_order"]))
    if not kept:
        return pd.DataFrame()
    df = pd.DataFrame(_across(kept)).drop(columns=["_other", "_holds", "_order"], errors="ignore")
    cols = ["graph_a", "graph_b"] + [c for c in df.columns if c not in ("graph_a", "graph_b")]
    df = df[cols]
    for c in ("module", "dtype", "name_a", "name_b", "shape_a", "shape_b", "why"):
        df[c] = df[c].astype(object).where(df[c].notna(), None)
    for c in ("graph_a", "graph_b"):
        df[c] = pd.Series([None if v is None or pd.isna(v) else int(v) for v in df[c]], index=df.index, dtype=object)
    return df.reset_index(drop=True)


def _across(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Join a value only A saves with one only B saves in a graph that is not its pair's, when
    module, op, dtype, kind and shape agree."""
    key = ("module", "op", "dtype", "kind")
    taken: set[int] = set()
    for r in rows:
        if r["status"] != "only A":
            continue
        for k, o in enumerate(rows):
            if k in taken or o["status"] != "only B" or o["shape_b"] != r["shape_a"] \
                    or any(o[c] != r[c] for c in key):
                continue
            r.update({c: o[c] for c in ("shape_b", "bytes_b", "name_b", "graph_b")})
            r.update(status="both", match=ACROSS_GRAPHS, why="")
            taken.add(k)
            break
    return [r for k, r in enumerate(rows) if k not in taken]


def outside_notes(keys_a: Sequence[PieceKey], keys_b: Sequence[PieceKey]) -> tuple[list[str], dict[str, str]]:
    """Parameters one step's graphs read and no graph of the other does: that side ran the code using
    them outside every graph it compiled (dynamo ran the frame as plain Python), so what it saved there
    is in none of its graphs and in no total.  Returns the summary's lines and, per module that owns
    such parameters, the reason a value saved there has no twin (``why``)."""
    lines: list[str] = []
    why: dict[str, str] = {}
    for mine, theirs, x in ((keys_a, keys_b, "B"), (keys_b, keys_a, "A")):
        read = {n for k in theirs for n in k.params}
        missing = sorted({n for k in mine for n in k.params} - read)
        if not missing:
            continue
        owners = sorted({n.rsplit(".", 1)[0] for n in missing if "." in n})
        top = [n for n in missing if "." not in n]  # the root module's own parameters: no module path to name
        owners += [f"the model itself ({', '.join(top[:3])}{', ...' if len(top) > 3 else ''})"] if top else []
        shown = ", ".join(owners[:4]) + (f" and {len(owners) - 4} more" if len(owners) > 4 else "")
        lines.append(f"{x}'s graphs read none of {len(missing)} parameter(s) of {shown}: {x} ran that code "
                     "outside every graph it compiled, and what it saved there is in no total")
        for n in missing:  # the owner and every enclosing module none of whose parameters the other side reads
            parts = n.split(".")[:-1]
            for k in range(len(parts), 0, -1):
                module = ".".join(parts[:k])
                if any(r.startswith(module + ".") for r in read):
                    break
                why[module] = f"{x} ran {module} outside its compiled graphs (no graph of {x} reads its parameters)"
    return lines, why
