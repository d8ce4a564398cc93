"""How the pieces of a graph-broken model ran: which graph ran when, for whose parameters, and
which parameters no graph ever received.

Dynamo compiles a frame once and runs the same graph for every later call its guards accept: one
block graph serves every layer of that shape, each run handed that layer's parameters.  And it
runs some code as plain Python (a frame skipped because of a graph break inside a loop, code
between graphs): the parameters used there are in no graph at all.  The capture records every run
of every graph (``JointGraph.runs``) and the frames dynamo skipped (``Capture.eager_frames``); this
module turns those records into facts the doctor, the summary and the overview share.

Plain data; no drawing, no eager run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fxviz.core.errors import InputError
from fxviz.core.graph_facts import joint_node_count
from fxviz.sources.graphs import Capture, graph_of
from fxviz.sources.roles import role_counts

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["PieceRun", "PieceFacts", "PieceSummary", "piece_facts", "piece_summaries", "modules_of",
           "collapse_modules", "ROOT", "run_modules", "run_renames", "check_piece",
           "renamed"]


@dataclass(frozen=True)
class PieceRun:
    """One run of one captured graph."""

    order: int  # position among every graph run of the capture (execution order)
    graph: int
    run: int  # 0 for the graph's first run, 1 for its second...
    parameters: tuple[str, ...]  # the model parameters this run received, by graph input position
    modules: tuple[str, ...]  # the modules owning those parameters, collapsed (``layers.1``)


@dataclass
class PieceFacts:
    """Every run in execution order, and what ran outside every graph."""

    runs: list[PieceRun]
    graphs: int
    outside: list[str] = field(default_factory=list)  # parameters no graph run received
    eager_frames: list[str] = field(default_factory=list)  # frames dynamo skipped (ran as Python)
    recorded: bool = True  # False when the capture has no run records (aot route, a log)
    # a parameter a reused graph received in a later run -> the parameter its first run received
    # at the same input position (whose gradient node returns this one's gradient in that run)
    counterpart: dict[str, str] = field(default_factory=dict)

    def runs_of(self, graph: int) -> list[PieceRun]:
        return [r for r in self.runs if r.graph == graph]

    @property
    def reused(self) -> dict[int, list[PieceRun]]:
        """Graphs that ran more than once, with their runs."""
        out: dict[int, list[PieceRun]] = {}
        for r in self.runs:
            out.setdefault(r.graph, []).append(r)
        return {g: rs for g, rs in out.items() if len(rs) > 1}

    def run_of_parameter(self, name: str) -> PieceRun | None:
        """The (first) run that received ``name``."""
        return next((r for r in self.runs if name in r.parameters), None)


ROOT = "(root)"  # modules_of's name for the root module (parameters without a dot); views name the model


def modules_of(parameters: list[str] | tuple[str, ...], limit: int = 4) -> tuple[str, ...]:
    """The modules owning ``parameters``, collapsed to their deepest common module when they
    share one (``layers.1.experts.0.w1.weight``, ``layers.1.gate.bias`` -> ``layers.1``), else
    one name per top-level module (``embed``, ``head``)."""
    return collapse_modules({p.rsplit(".", 1)[0] if "." in p else ROOT for p in parameters}, limit)


def collapse_modules(modules: set[str] | list[str], limit: int = 4) -> tuple[str, ...]:
    """Module paths collapsed as :func:`modules_of` collapses their parameters' owners."""
    owners = sorted(set(modules))
    if not owners:
        return ()
    if len(owners) == 1:
        return (owners[0],)
    parts = [o.split(".") for o in owners]
    common: list[str] = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    if common:
        return (".".join(common),)
    tops = list(dict.fromkeys(p[0] for p in parts))
    return tuple(tops[:limit]) + (("...",) if len(tops) > limit else ())


def piece_facts(cap: Capture) -> PieceFacts:
    """Facts about every graph run of ``cap`` (see the module docstring)."""
    recorded = any(g.runs for g in cap.graphs)
    model_params = [n for n, _ in cap.model.named_parameters()] if cap.model is not None else []
    known = set(model_params)
    runs: list[PieceRun] = []
    for g in cap.graphs:
        for k, (order, names) in enumerate(g.runs):
            params = tuple(n for n in names if n is not None and n in known)
            runs.append(PieceRun(order=order, graph=g.index, run=k, parameters=params, modules=modules_of(params)))
    runs.sort(key=lambda r: r.order)
    counterpart: dict[str, str] = {}
    for g in cap.graphs:
        first = g.runs[0][1] if g.runs else []
        for _, names in g.runs[1:]:
            for mine, theirs in zip(names, first):
                if mine in known and theirs in known and mine != theirs:
                    counterpart.setdefault(mine, theirs)
    seen = {p for r in runs for p in r.parameters}
    outside = [n for n in model_params if n not in seen] if recorded else []
    return PieceFacts(runs=runs, graphs=len(cap.graphs), outside=outside, eager_frames=list(cap.eager_frames),
                      recorded=recorded, counterpart=counterpart)


def run_modules(facts: PieceFacts, graph: int, run: int) -> dict[str, str]:
    """Module paths of ``graph``'s first run -> the same modules in its ``run``-th run (0-based), read
    off the parameters each run received at the same input positions (``blocks.0.fc.weight`` in run
    0, ``blocks.1.fc.weight`` in run 1: ``blocks.0.fc`` -> ``blocks.1.fc``, ``blocks.0`` ->
    ``blocks.1``).  Paths map component by component where both owners are equally deep."""
    runs = facts.runs_of(graph)
    if not 0 <= run < len(runs):
        raise IndexError(run)
    out: dict[str, str] = {}
    for first, mine in zip(runs[0].parameters, runs[run].parameters):
        a, b = first.split(".")[:-1], mine.split(".")[:-1]
        if len(a) != len(b):
            continue
        for k in range(1, len(a) + 1):
            out.setdefault(".".join(a[:k]), ".".join(b[:k]))
    return out


@dataclass(frozen=True)
class PieceSummary:
    """One piece as the piece selector and the whole-model overview show it."""

    index: int
    label: str  # "graph 2 of 3"
    nodes: int  # joint-graph nodes, its output node not counted (graph_facts.joint_node_count)
    forward_ops: int  # joint-graph forward ops and backward ops: roles.role_counts
    backward_ops: int
    has_backward: bool
    saved_bytes: int | None  # saved activation bytes under ``strategy`` (one run), None if unknown
    strategy: str
    # the (index-1)-th graph break dynamo counted: the break before this piece when each break splits
    # one frame in two; dynamo does not tie a break to a graph, so with skipped frames, resumed
    # frames or nested calls this is the break's position in the count, not a proven link
    reason: str | None
    runs: int  # how often the graph ran in the captured step (0: not recorded)
    modules: tuple[tuple[str, ...], ...]  # per run, the modules whose parameters it received


def piece_summaries(cap: Capture, step: pd.DataFrame, strategy: str,
                    facts: PieceFacts | None = None) -> list[PieceSummary]:
    """One summary per graph of ``cap``; ``step``: the step's memory table of ``strategy`` (its graphs'
    rows give each graph's saved activation bytes); ``facts``: ``piece_facts(cap)`` when the caller
    holds it."""
    import pandas as pd

    facts = piece_facts(cap) if facts is None else facts
    rows = step[(step["piece"] != "total") & (step["strategy"] == strategy)]
    by_graph = {int(p): None if pd.isna(v) else int(v) for p, v in zip(rows["piece"], rows["saved_activation_bytes"])}
    saved = [by_graph.get(g.index) if g.has_backward else None for g in cap.graphs]
    total = len(cap.graphs)
    out = []
    for g in cap.graphs:
        counts = role_counts(g.info.values())
        runs = facts.runs_of(g.index)
        reason = cap.graph_breaks[g.index - 1] if 0 < g.index <= len(cap.graph_breaks) else None
        out.append(PieceSummary(
            index=g.index, label=graph_of(g.index, total), nodes=joint_node_count(g.info.values()),
            forward_ops=counts["forward"], backward_ops=counts["backward"],
            has_backward=g.has_backward, saved_bytes=saved[g.index] if g.index < len(saved) else None,
            strategy=strategy, reason=reason, runs=len(runs), modules=tuple(r.modules for r in runs)))
    return out


def check_piece(index: int, cap: Capture) -> int:
    """``index`` when it is a piece (graph) of ``cap`` (0-based), else an ``InputError`` naming the pieces."""

    n = len(cap.graphs)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
        raise InputError(f"piece={index!r} is not a graph of this trace, which has {n} "
                         f"(graph breaks: {len(cap.graph_breaks)})",
                         f"pass a piece from 0 to {n - 1}" if n > 1 else "this model is one graph: leave piece out")
    return index


def run_renames(facts: PieceFacts, graph: int, run: int) -> dict[str, str]:
    """:func:`run_modules` for a run a user named (``run=k``); an ``InputError`` naming the runs there
    are when ``graph`` has no run ``run``.  A graph whose runs were not recorded renames nothing."""

    runs = len(facts.runs_of(graph))
    if isinstance(run, bool) or not isinstance(run, int) or not 0 <= run < max(runs, 1):
        raise InputError(f"run={run!r} is not a run of this graph, which ran {runs} time(s) in the captured step",
                         f"pass a run from 0 to {max(runs, 1) - 1}" if runs > 1 else "leave run out")
    return run_modules(facts, graph, run) if runs else {}


def renamed(module: str | None, rename: dict[str, str]) -> str | None:
    """``module`` with its longest prefix found in ``rename`` (a :func:`run_modules` map) replaced:
    a module of a reused graph's first run, named as in another run."""
    if not isinstance(module, str) or not rename:
        return module
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        head = ".".join(parts[:k])
        if head in rename:
            return ".".join([rename[head]] + parts[k:])
    return module
