"""The optimal partition: an exact MILP over the joint graph, solved with HiGHS.

torch's partitioners are heuristics (min-cut with banned-op rules; a per-op knapsack under a
memory budget).  Checkmate (Jain et al., MLSys 2020) showed that optimal rematerialization is a
MILP; here it is restricted to the one boundary AOTAutograd has, forward -> backward:

- every *forward value* (a joint node that does not depend on a tangent) is saved, recomputed
  in the backward, or neither (``s_v + r_v <= 1``);
- a forward value a backward op reads is saved or recomputed (``s_v + r_v >= 1``); a recomputed
  op needs each forward input saved or recomputed (``s_u + r_u >= r_v``); graph inputs,
  parameters and constants are always available;
- the choices are torch's own: any forward op torch's knapsack may recompute may be recomputed
  (``scaled_dot_product_attention`` included: torch tags CPU attention seeded, but at
  ``dropout_p=0`` it draws nothing), except an op that *draws* random values and whose RNG state
  torch does not replay (``graph_facts.redraws_if_recomputed``: a recomputed dropout would draw a
  new mask, another program), ops torch's extraction pins to the forward (mutations),
  collectives, and nodes a checkpoint policy marks ``must_save``; ``must_recompute`` nodes are
  never saved; a random op torch replays (one a checkpoint policy marks ``must_recompute``) may
  be recomputed at the price of the RNG state torch then saves, and the partition replays it as
  min-cut does (``_torch.replay_rng``);
- a *storage* is paid once: views and aliases share their base's storage variable
  (``m_k >= s_v``), and a view of an input or a parameter costs nothing;
- objective, lexicographically: least recompute FLOPs (``torch.utils.flop_counter``, as the
  memory table counts them), then least recompute bytes moved (so ops whose FLOPs count as zero are
  not recomputed for free), then least saved bytes; subject to saved activation bytes <= budget.

The forward and backward graphs are then cut by torch's own extraction helper (as
``recompute_all`` does), so the result is a real partition torch can run.  A solve that hits its
time limit returns the best partition found and HiGHS's proven bound: status ``"bound"``, never
``"optimal"``.

    >>> import fxviz, torch
    >>> fn = fxviz.partitioner("optimal:0.5")          # usable as partition_fn in aot_function
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import fx

from fxviz import _torch
from fxviz.analysis.strategy.recompute_all import drop_dead_random
from fxviz.core.fx_facts import ancestors
from fxviz.core.graph_facts import (
    Storages,
    alias_base,
    draws_random,
    gradient_slots,
    is_view_op,
    node_flops,
    node_traffic,
    numel_bytes,
    redraws_if_recomputed,
    saved_values,
    tangent_dependent,
    tensors,
)
from fxviz.core.units import format_bytes, format_flops
from fxviz.sources.graphs import JointGraph

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "InfeasibleBudget",
    "OptimalModel",
    "OptimalPartitioner",
    "Solution",
    "extract",
    "fraction_budget",
    "gaps_to_optimal",
    "min_cut_activation_bytes",
    "model_of",
    "model_of_joint",
    "solve",
    "solve_min_bytes",
]

DEFAULT_TIME_LIMIT = 30.0
"""Seconds HiGHS may spend on one partition (its own ``time_limit``, shared by the lexicographic
stages of one solve)."""


class InfeasibleBudget(ValueError):
    """No partition saves that few bytes (the outputs of ops that draw random values, for one,
    must be saved)."""


# --- the model -----------------------------------------------------------------------------------
@dataclass
class OptimalModel:
    """The MILP's data, in joint-graph node names.

    Two views of the forward values that matter (ancestors, within the forward, of a value the
    backward reads).  The *full* one (``inputs_of``, ``cost_of``, ``storage_of``...) describes
    every such node and evaluates any choice exactly, as torch's extraction would run it.  The
    *reduced* one (``names`` and the arrays) is what the MILP decides over: a view of one forward
    value (zero FLOPs, zero bytes moved, the same storage) is available exactly when its base is,
    so it is merged into its base; a free op of inputs only (``t`` of a weight) is always
    available.  Both reductions are exact: saving a view costs its base's storage, which makes the
    base available too.

    ``storage[i]``: index into ``storage_bytes`` of the activation storage value ``i`` lives in,
    or -1 when keeping it costs nothing (a view of an input or a parameter, a SymInt).
    """

    names: list[str]
    flops: np.ndarray
    traffic: np.ndarray
    saveable: np.ndarray
    recomputable: np.ndarray
    needed: np.ndarray
    edges: list[tuple[int, int]]  # (u, v): recomputing v needs u
    storage: np.ndarray
    storage_bytes: np.ndarray
    # the full graph of forward values, for exact evaluation
    inputs_of: dict[str, list[str]] = field(default_factory=dict)  # forward inputs (not free ones)
    cost_of: dict[str, tuple[int, int]] = field(default_factory=dict)
    storage_of: dict[str, int] = field(default_factory=dict)
    read_by_backward: set[str] = field(default_factory=set)
    always: set[str] = field(default_factory=set)  # free to recompute from inputs alone
    backward_tagged: set[str] = field(default_factory=set)  # traced in the backward: running them there is no recompute
    why_fixed: dict[str, str] = field(default_factory=dict)  # name -> why it may not be recomputed/saved
    inputs: list[str] = field(default_factory=list)  # non-tangent placeholders (always available)
    sym_inputs: list[str] = field(default_factory=list)
    sym_values: list[str] = field(default_factory=list)  # SymInt forward values: saved for free
    rng_state_of: dict[str, int] = field(default_factory=dict)  # replayed random op -> its RNG state's storage
    forward_values: int = 0

    @property
    def size(self) -> int:
        return len(self.names)

    def saved_bytes(self, saved: Sequence[str], recomputed: Sequence[str] = ()) -> int:
        """Activation bytes of a set of saved values, each storage once, and of the RNG states
        saved for the replayed random ops among ``recomputed``."""
        keys = {self.storage_of.get(n, -1) for n in saved} | {self.rng_state_of.get(n, -1) for n in recomputed}
        return int(sum(int(self.storage_bytes[k]) for k in keys if k >= 0))

    def recomputed_for(self, saved: Sequence[str]) -> list[str] | None:
        """The forward values the backward must run again when ``saved`` are saved (walking
        back from what it reads through values that are not saved, as torch's extraction does);
        None when that needs a value that may not be recomputed."""
        keep = set(saved)
        out: set[str] = set()
        todo = [n for n in self.read_by_backward if n not in keep]
        while todo:
            n = todo.pop()
            if n in out:
                continue
            if n in self.why_fixed and not self.can_recompute(n):
                return None
            out.add(n)
            todo.extend(u for u in self.inputs_of.get(n, []) if u not in keep)
        return sorted(out)

    def can_recompute(self, name: str) -> bool:
        """Whether the backward may run forward value ``name`` again (not random, a mutation...)."""
        return not self.why_fixed.get(name, "").startswith(_NOT_RECOMPUTABLE)

    def cost(self, recomputed: Sequence[str]) -> tuple[int, int]:
        """(FLOPs, bytes moved) of recomputing these values."""
        pairs = [self.cost_of.get(n, (0, 0)) for n in recomputed]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    def evaluate(self, saved: Sequence[str]) -> tuple[int, int, int] | None:
        """(saved activation bytes, recompute FLOPs, recompute bytes) of saving ``saved``; None
        when infeasible."""
        rec = self.recomputed_for(saved)
        if rec is None:
            return None
        flops, traffic = self.cost(rec)
        return self.saved_bytes(saved, rec), flops, traffic


_NOT_RECOMPUTABLE = "not recomputable: "


def _tensor(value: Any) -> bool:
    return isinstance(value, torch.Tensor)


def model_of_joint(gm: fx.GraphModule, num_fwd_outputs: int) -> OptimalModel:
    """``model_of`` a copy of ``gm`` after min-cut's own clean-up (dead code, CSE), which is the
    graph ``OptimalPartitioner`` partitions: for analyses of a joint graph fxviz must not touch."""
    with _torch.quiet_torch():
        copy = _torch.copy_graph_module(gm)
        _torch.cse_like_min_cut(copy)
    return model_of(copy, num_fwd_outputs)


def model_of(gm: fx.GraphModule, num_fwd_outputs: int) -> OptimalModel:
    """Build the MILP's data from a joint graph (as a partitioner receives it).

    The forward/backward split is torch's (``classify_nodes``, as ``graph_facts.tangent_dependent``
    answers it): the backward is every node reachable from a tangent or from a node that must be in
    the backward; every other
    ``call_function`` is a forward value.  Costs count only ops fxviz calls forward ops (torch tags
    ops traced during the backward ``is_backward``; running those in the backward is not a
    recomputation), exactly as the memory table's ``recompute_flops`` does.
    """
    nodes = list(gm.graph.nodes)
    backward = tangent_dependent(gm)
    bwd_outputs = {o for o in gradient_slots(gm, num_fwd_outputs) if isinstance(o, fx.Node)}
    inputs = [n for n in nodes if n.op == "placeholder" and n not in backward]
    forward = [n for n in nodes if n.op == "call_function" and n not in backward]
    fset = set(forward)
    needed = {n for n in forward if n in bwd_outputs or any(u in backward for u in n.users)}
    relevant = ancestors(needed, lambda a: a in fset)
    chosen = [n for n in forward if n in relevant]

    storages = Storages(gm)
    free_keys: set[int] = set()
    for n in nodes:
        if n.op in ("placeholder", "get_attr") and n not in backward:
            val = _torch.meta_val(n)
            for t in (val if isinstance(val, (tuple, list)) else [val]):
                if _tensor(t):
                    free_keys.add(storages.key(t))
    key_index: dict[int, int] = {}
    storage_bytes: list[int] = []
    model = OptimalModel(names=[], flops=np.zeros(0), traffic=np.zeros(0), saveable=np.zeros(0, bool),
                         recomputable=np.zeros(0, bool), needed=np.zeros(0, bool), edges=[], storage=np.zeros(0),
                         storage_bytes=np.zeros(0), forward_values=len(forward))
    saveable: dict[str, bool] = {}
    for n in chosen:
        val = _torch.meta_val(n)
        flops = traffic = 0
        if _torch.partitioner_tag(n) not in ("is_backward", "must_be_in_backward"):
            flops, traffic = node_flops(n), node_traffic(n)
        else:
            model.backward_tagged.add(n.name)
        model.cost_of[n.name] = (int(flops), int(traffic))
        model.inputs_of[n.name] = [a.name for a in n.all_input_nodes if a in fset]
        saveable[n.name] = False
        model.storage_of[n.name] = -1
        if _tensor(val):
            saveable[n.name] = True
            key = storages.key(val)
            if key not in free_keys:
                if key not in key_index:
                    key_index[key] = len(storage_bytes)
                    storage_bytes.append(storages.nbytes(key))
                model.storage_of[n.name] = key_index[key]
        elif isinstance(val, torch.SymInt):
            saveable[n.name] = True  # a number: saving it is free
            model.sym_values.append(n.name)
        policy = _torch.checkpoint_policy(n)
        if draws_random(n) and not redraws_if_recomputed(n):  # replayed: recomputing saves its RNG state
            model.rng_state_of[n.name] = len(storage_bytes)
            storage_bytes.append(_torch.rng_state_bytes(getattr(val[0] if isinstance(val, (tuple, list)) and val
                                                                else val, "device", None)))
        if redraws_if_recomputed(n):
            model.why_fixed[n.name] = _NOT_RECOMPUTABLE + "it draws random values (recomputing it draws new ones)"
        elif _torch.must_be_in_forward(n):
            model.why_fixed[n.name] = _NOT_RECOMPUTABLE + "torch keeps it in the forward (a mutation)"
        elif _torch.is_collective(n):
            model.why_fixed[n.name] = _NOT_RECOMPUTABLE + "a collective (torch never recomputes one)"
        elif policy == "must_save":
            model.why_fixed[n.name] = _NOT_RECOMPUTABLE + "checkpoint policy MUST_SAVE"
        elif policy == "must_recompute" and saveable[n.name]:
            saveable[n.name] = False
            model.why_fixed[n.name] = "not saveable: checkpoint policy MUST_RECOMPUTE"
    model.read_by_backward = {n.name for n in needed}

    # the reductions: free ops of inputs, views merged into their base
    rep: dict[str, str] = {}
    for n in chosen:
        name = n.name
        zero = model.cost_of[name] == (0, 0) and model.can_recompute(name)
        forward_inputs = model.inputs_of[name]
        if zero and all(a in model.always for a in forward_inputs):
            model.always.add(name)
            continue
        base = alias_base(n)
        if (zero and is_view_op(n.target) and base is not None and base.name in rep
                and forward_inputs == [base.name] and saveable[name] == saveable[base.name]
                and model.storage_of[name] == model.storage_of[base.name]):
            rep[name] = rep[base.name]
            continue
        rep[name] = name
    names = [n.name for n in chosen if rep.get(n.name) == n.name]
    index = {name: i for i, name in enumerate(names)}
    size = len(names)
    model.names = names
    model.flops = np.array([model.cost_of[n][0] for n in names], dtype=np.int64)
    model.traffic = np.array([model.cost_of[n][1] for n in names], dtype=np.int64)
    model.saveable = np.array([saveable[n] for n in names], dtype=bool)
    model.recomputable = np.array([model.can_recompute(n) for n in names], dtype=bool)
    model.storage = np.array([model.storage_of[n] for n in names], dtype=np.int64)
    model.storage_bytes = np.array(storage_bytes, dtype=np.int64)
    needed_mask = np.zeros(size, dtype=bool)
    for n in model.read_by_backward:
        if n in rep:
            needed_mask[index[rep[n]]] = True
    model.needed = needed_mask
    edges = set()
    for name in names:
        for a in model.inputs_of[name]:
            if a in rep and rep[a] != name:
                edges.add((index[rep[a]], index[name]))
    model.edges = sorted(edges)
    model.inputs = [n.name for n in inputs if _tensor(_torch.meta_val(n))]
    model.sym_inputs = [n.name for n in inputs if isinstance(_torch.meta_val(n), torch.SymInt)]
    return model


# --- the solution --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Solution:
    """One solve.  ``status``: ``"optimal"`` (proven), ``"bound"`` (time limit reached: the best
    partition found, with ``bound`` the proven lower bound of the primary objective and
    ``mip_gap`` HiGHS's relative gap), or ``"infeasible"``.

    ``objective`` is ``"recompute"`` (least recompute FLOPs under ``budget_bytes``) or
    ``"memory"`` (least saved bytes under ``flops_cap``).
    """

    status: str
    objective: str
    saved: tuple[str, ...]
    recomputed: tuple[str, ...]
    saved_bytes: int
    recompute_flops: int
    recompute_bytes: int
    budget_bytes: int | None = None
    flops_cap: int | None = None
    reference_bytes: int | None = None  # min-cut's saved activation bytes (fractional budgets)
    bound: float | None = None
    mip_gap: float | None = None
    seconds: float = 0.0
    variables: int = 0
    constraints: int = 0

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"

    def describe(self) -> str:
        """One line a person reads."""
        if self.status == "infeasible":
            return f"infeasible: no partition saves at most {format_bytes(self.budget_bytes)} of activations"
        if self.status == "timeout":
            return f"timeout: HiGHS found no partition within its time limit ({self.seconds:.1f} s)"
        gap = "" if self.mip_gap is None else f"MIP gap {self.mip_gap:.2%}, "
        head = "optimal" if self.optimal else (f"bound (time limit; {gap}proven lower bound "
                                                f"{format_flops(self.bound) or 'unknown'})")
        return (f"{head}: saves {format_bytes(self.saved_bytes) or '0 B'}, recomputes "
                f"{format_flops(self.recompute_flops) or '0 FLOP'} ({format_bytes(self.recompute_bytes) or '0 B'} "
                f"moved); {self.variables} variables, {self.constraints} constraints, {self.seconds:.2f} s")


def _milp(c: np.ndarray, integrality: np.ndarray, lb: np.ndarray, ub: np.ndarray,
          rows: list[tuple[dict[int, float], float, float]],
          time_limit: float) -> Any:
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    r, cidx, vals, lo, hi = [], [], [], [], []
    for i, (coefs, a, b) in enumerate(rows):
        for j, v in coefs.items():
            r.append(i)
            cidx.append(j)
            vals.append(v)
        lo.append(a)
        hi.append(b)
    A = coo_matrix((vals, (r, cidx)), shape=(len(rows), len(c))).tocsr()
    constraints = [LinearConstraint(A, np.array(lo, dtype=float), np.array(hi, dtype=float))] if rows else []
    return milp(c, integrality=integrality, bounds=Bounds(lb, ub), constraints=constraints,
                options={"time_limit": max(time_limit, 0.01), "mip_rel_gap": 0.0, "presolve": True})


class _Program:
    """The structural constraints, shared by every objective: variables ``s`` (saved), ``r``
    (recomputed), ``m`` (storage kept)."""

    def __init__(self, model: OptimalModel) -> None:
        self.model = model
        n, k = model.size, len(model.storage_bytes)
        self.n, self.k = n, k
        self.nvars = 2 * n + k
        self.lb = np.zeros(self.nvars)
        self.ub = np.ones(self.nvars)
        self.ub[:n] = model.saveable.astype(float)
        self.ub[n:2 * n] = model.recomputable.astype(float)
        self.integrality = np.concatenate([np.ones(2 * n), np.zeros(k)])  # m_k is implied by s
        rows: list[tuple[dict[int, float], float, float]] = []
        for i in range(n):  # saved or recomputed (a value the backward reads), never both
            rows.append(({i: 1.0, n + i: 1.0}, 1.0 if model.needed[i] else 0.0, 1.0))
        for u, v in model.edges:  # a recomputed op's forward inputs are there
            rows.append(({u: 1.0, n + u: 1.0, n + v: -1.0}, 0.0, np.inf))
        for i in range(n):  # a saved value keeps its storage
            kk = int(model.storage[i])
            if kk >= 0:
                rows.append(({2 * n + kk: 1.0, i: -1.0}, 0.0, np.inf))
        index = {name: i for i, name in enumerate(model.names)}
        for name, kk in model.rng_state_of.items():  # a replayed random op, recomputed, saves its RNG state
            if name in index:
                rows.append(({2 * n + kk: 1.0, n + index[name]: -1.0}, 0.0, np.inf))
        self.rows = rows

    def bytes_row(self, cap: float) -> tuple[dict[int, float], float, float]:
        return ({2 * self.n + k: float(b) for k, b in enumerate(self.model.storage_bytes)}, -np.inf, cap)

    def vector_row(self, values: np.ndarray, cap: float) -> tuple[dict[int, float], float, float]:
        return ({self.n + i: float(v) for i, v in enumerate(values) if v}, -np.inf, cap)

    def objective(self, which: str) -> np.ndarray:
        c = np.zeros(self.nvars)
        m = self.model
        if which == "flops":
            values = m.flops.astype(float)
            c[self.n:2 * self.n] = values
        elif which == "traffic":
            values = m.traffic.astype(float)
            c[self.n:2 * self.n] = values
        else:
            values = m.storage_bytes.astype(float)
            c[2 * self.n:] = values
        top = float(np.abs(values).max()) if len(values) else 0.0
        return c * (1e6 / top) if top > 0 else c

    def scale(self, which: str) -> float:
        m = self.model
        values = {"flops": m.flops, "traffic": m.traffic}.get(which, m.storage_bytes)
        top = float(np.abs(values).max()) if len(values) else 0.0
        return 1e6 / top if top > 0 else 1.0

    def decode(self, x: np.ndarray) -> tuple[list[str], list[str]]:
        s = np.round(x[:self.n]).astype(bool)
        r = np.round(x[self.n:2 * self.n]).astype(bool)
        return [self.model.names[i] for i in np.flatnonzero(s)], [self.model.names[i] for i in np.flatnonzero(r)]


def _lexicographic(model: OptimalModel, stages: list[str], caps: list[tuple[dict[int, float], float, float]],
                   prog: _Program, time_limit: float) -> tuple[str, np.ndarray | None, float | None, float | None]:
    """Minimize each stage's objective in turn, fixing the earlier ones at their optimum.
    Returns (status, x, bound of the first stage in its own units, gap of the first stage)."""
    start = time.perf_counter()
    rows = list(prog.rows) + caps
    x: np.ndarray | None = None
    bound = gap = None
    for depth, which in enumerate(stages):
        left = time_limit - (time.perf_counter() - start)
        if depth and left <= 0:
            break
        res = _milp(prog.objective(which), prog.integrality, prog.lb, prog.ub, rows, left)
        if res.x is None:
            if depth == 0:
                return ("infeasible" if res.status == 2 else "timeout"), None, None, None
            break
        x = res.x
        if res.status != 0:  # time limit: the best found, and the bound HiGHS proved
            if depth == 0:
                dual = getattr(res, "mip_dual_bound", None)
                bound = None if dual is None else float(dual) / prog.scale(which)
                gap = getattr(res, "mip_gap", None)
                return "bound", x, bound, gap
            break
        # fix this stage at its (exact, integer) optimum for the next
        saved, rec = prog.decode(x)
        if which == "bytes":
            value = model.saved_bytes(saved, rec)
            rows.append(prog.bytes_row(value + 0.5))
        else:
            values = model.flops if which == "flops" else model.traffic
            value = model.cost(rec)[0 if which == "flops" else 1]
            rows.append(prog.vector_row(values, value + 0.5))
    return "optimal", x, bound, gap


def _finish(model: OptimalModel, prog: _Program, status: str, x: np.ndarray | None, objective: str,
            start: float, **extra: Any) -> Solution:
    nvars, ncons = prog.nvars, len(prog.rows) + 1
    if x is None:  # infeasible, or no partition found before the time limit
        return Solution(status if status == "timeout" else "infeasible", objective, (), (), 0, 0, 0,
                        seconds=time.perf_counter() - start, variables=nvars, constraints=ncons, **extra)
    saved, _ = prog.decode(x)
    # what torch's extraction will run again given these saves (zero-cost ties such as views
    # included), evaluated on the full graph
    rec = model.recomputed_for(saved)
    assert rec is not None, "the MILP chose an infeasible partition"
    flops, traffic = model.cost(rec)
    nbytes = model.saved_bytes(saved, rec)
    rec = [n for n in rec if n not in model.backward_tagged]  # as Partition.recomputed counts
    return Solution(status, objective, tuple(saved), tuple(rec), nbytes, flops, traffic,
                    seconds=time.perf_counter() - start, variables=nvars, constraints=ncons, **extra)


def solve(model: OptimalModel, budget_bytes: int, time_limit: float = DEFAULT_TIME_LIMIT,
          reference_bytes: int | None = None) -> Solution:
    """Least recompute FLOPs, then bytes moved, then saved bytes, with saved activation bytes
    at most ``budget_bytes``."""
    start = time.perf_counter()
    prog = _Program(model)
    status, x, bound, gap = _lexicographic(model, ["flops", "traffic", "bytes"], [prog.bytes_row(budget_bytes + 0.5)],
                                           prog, time_limit)
    return _finish(model, prog, status, x, "recompute", start, budget_bytes=int(budget_bytes),
                   reference_bytes=reference_bytes, bound=bound, mip_gap=gap)


def solve_min_bytes(model: OptimalModel, flops_cap: int, time_limit: float = DEFAULT_TIME_LIMIT) -> Solution:
    """Least saved activation bytes (then FLOPs, then bytes moved) with recompute FLOPs at most
    ``flops_cap``: the other side of the trade-off, for ``gap_to_optimal_bytes``."""
    start = time.perf_counter()
    prog = _Program(model)
    status, x, bound, gap = _lexicographic(model, ["bytes", "flops", "traffic"],
                                           [prog.vector_row(model.flops, flops_cap + 0.5)], prog, time_limit)
    return _finish(model, prog, status, x, "memory", start, flops_cap=int(flops_cap), bound=bound, mip_gap=gap)


# --- back to torch -------------------------------------------------------------------------------
def min_cut_activation_bytes(gm: fx.GraphModule, model: OptimalModel, num_fwd_outputs: int,
                             static_lifetime_input_indices: list[int] | None = None) -> int:
    """What torch's min-cut saves, in this model's exact storage bytes (the RNG states it saves to
    replay checkpointed random ops included): the top of the range a fractional budget
    ``optimal:B`` is a fraction of (as ``budget:B`` is of min-cut's)."""
    with _torch.quiet_torch(), _torch.partitioner_context(gm), _torch.plain_min_cut_config():
        copy = _torch.copy_graph_module(gm)
        fwd, _ = _torch.min_cut_partition(copy, None, num_fwd_outputs=num_fwd_outputs,
                                          static_lifetime_input_indices=list(static_lifetime_input_indices or []))
    saved = saved_values(fwd, num_fwd_outputs)
    states = [o for o in saved if _is_rng_state(o)]
    return model.saved_bytes([o.name for o in saved if o not in states]) + \
        sum(numel_bytes(t) for o in states for t in tensors(_torch.meta_val(o)))


def _is_rng_state(node: fx.Node) -> bool:
    """The RNG state min-cut's replay saves (``run_and_save_rng_state(...)[0]``): a value of its
    own, whose name may be a joint node's."""
    src = node.args[0] if node.op == "call_function" and node.args else None
    return isinstance(src, fx.Node) and "run_and_save_rng_state" in str(src.target) and node.args[1:] == (0,)


def fraction_budget(model: OptimalModel, fraction: float, reference: int,
                    time_limit: float = DEFAULT_TIME_LIMIT) -> int:
    """The byte budget of ``optimal:B``: B of the way from the least any partition saves to what
    min-cut saves, as torch's knapsack normalizes ``budget:B`` between its floor (graph inputs
    only) and min-cut.  The floor is 0 bytes unless something cannot be recomputed (the output of a
    random op that draws): then ``optimal:0`` is that least partition, feasible as ``budget:0``."""
    if fraction >= 1:
        return reference
    least = solve_min_bytes(model, int(model.flops.sum()) + 1, time_limit)
    floor = least.saved_bytes if least.status in ("optimal", "bound") else 0
    return floor + math.floor(float(fraction) * max(reference - floor, 0))


def extract(gm: fx.GraphModule, model: OptimalModel, solution: Solution,
            num_fwd_outputs: int) -> tuple[fx.GraphModule, fx.GraphModule]:
    """Forward and backward graphs for a solution, cut by torch's own extraction helper."""

    by_name = {n.name: n for n in gm.graph.nodes}
    wanted = set(solution.saved) - set(model.sym_values)
    saved = [by_name[n] for n in model.inputs] + [n for n in gm.graph.nodes if n.name in wanted]
    sym = [by_name[n] for n in model.sym_inputs + model.sym_values]
    fwd, bwd = _torch.extract_fwd_bwd_modules(gm, saved, sym, num_fwd_outputs=num_fwd_outputs)
    drop_dead_random(bwd)
    return _torch.replay_rng(gm, fwd, bwd, len(sym))


class OptimalPartitioner:
    """A partitioner with torch's signature that saves what the MILP chose.

    ``budget``: a fraction of the range from the least saved activation bytes to min-cut's
    (``fraction_budget``); or ``budget_bytes``: an absolute
    byte budget.  After each call ``solution`` holds the last ``Solution`` (status, bound, gap).
    """

    def __init__(self, budget: float | None = None, budget_bytes: int | None = None,
                 time_limit: float = DEFAULT_TIME_LIMIT) -> None:
        if (budget is None) == (budget_bytes is None):
            raise ValueError("give exactly one of budget (a fraction) and budget_bytes")
        self.budget = budget
        self.budget_bytes = budget_bytes
        self.time_limit = time_limit
        self.solution: Solution | None = None
        self.__qualname__ = (f"optimal_{budget:g}" if budget is not None else f"optimal_{budget_bytes}B")

    def __call__(self, joint: fx.GraphModule, _joint_inputs: Any, *, num_fwd_outputs: int,
                 static_lifetime_input_indices: list[int] | None = None,
                 **_: Any) -> tuple[fx.GraphModule, fx.GraphModule]:
        with _torch.quiet_torch():
            _torch.cse_like_min_cut(joint)  # as min-cut does (partitioners may mutate their joint graph)
        model = model_of(joint, num_fwd_outputs)
        reference = None
        if self.budget_bytes is not None:
            budget = int(self.budget_bytes)
        else:
            reference = min_cut_activation_bytes(joint, model, num_fwd_outputs, static_lifetime_input_indices)
            budget = fraction_budget(model, float(self.budget or 0.0), reference, self.time_limit)
        solution = solve(model, budget, self.time_limit, reference_bytes=reference)
        self.solution = solution
        if solution.status == "timeout":
            raise TimeoutError(f"the optimal partition: {solution.describe()}; raise time_limit "
                               f"(fxviz.partitioner(spec, time_limit=...)) or use a torch strategy")
        if solution.status == "infeasible":
            least = solve_min_bytes(model, int(model.flops.sum()) + 1, self.time_limit)
            pinned = [n for n in least.saved if n in model.storage_of and model.storage_of[n] >= 0
                      and (not model.can_recompute(n) or any(not model.can_recompute(u) for u in model.inputs_of[n]))]
            raise InfeasibleBudget(
                f"no partition saves at most {format_bytes(budget) or '0 B'} of activations; the least possible is "
                f"{format_bytes(least.saved_bytes)}, what must be saved because it cannot be recomputed: "
                f"{', '.join(pinned) or 'none'}")
        return extract(joint, model, solution, num_fwd_outputs)


# --- how far a partition is from the optimum ----------------------------------------------------
def gaps_to_optimal(graph: JointGraph, rows: list[dict[str, Any]]) -> list[str]:
    """Fill the two ``gap_to_optimal`` columns of ``rows`` in place; returns the caption's notes.
    Rows that are measured (eager) or redraw random values are not partitions of the same
    program the optimum is computed for: their gaps stay empty, and the note says why."""
    model = model_of_joint(graph.gm, graph.num_fwd_outputs)
    skipped, bounds = [], []
    for r in rows:
        if r.get("error") is not None or r.get("saved_activation_bytes") is None:
            continue
        if r["backward_graph_ops"] is None or r.get("recomputed_random_ops"):  # measured (eager) or redrawing
            skipped.append(r["strategy"])
            continue
        b, f = int(r["saved_activation_bytes"]), int(r["recompute_flops"])
        at_bytes, at_flops = solve(model, b), solve_min_bytes(model, f)
        if at_bytes.status == "optimal":
            r["gap_to_optimal_flops"] = f - at_bytes.recompute_flops
        if at_flops.status == "optimal":
            r["gap_to_optimal_bytes"] = b - at_flops.saved_bytes
        if not (at_bytes.optimal and at_flops.optimal):
            bounds.append(r["strategy"])
    notes = ["gap_to_optimal_flops: recompute FLOPs above the exact optimum (MILP, HiGHS) at the row's saved "
             "activation bytes; gap_to_optimal_bytes: saved activation bytes above the optimum at the row's "
             "recompute FLOPs, bytes moved not held equal (0: the row is on the optimal frontier)."]
    if skipped:
        notes.append("No gap for " + ", ".join(skipped) + ": measured on the model, or redrawing random values "
                     "in the backward, so not a partition of the same program.")
    if bounds:
        notes.append("Solver time limit reached for " + ", ".join(bounds) + ": those gaps are left empty.")
    return notes
