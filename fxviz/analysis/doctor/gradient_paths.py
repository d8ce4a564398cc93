"""Where the path from a parameter to the loss is cut: the facts the doctor explains.

Two sources, each used for what it sees:

* the **joint graph** (static): which forward values are data-dependent on a parameter, which of
  them can carry a gradient, and the node that stops it (``detach``, an integer/bool result, an
  in-place overwrite, a zero-derivative op such as ``round``); and whether a gradient output
  depends on the incoming gradient at all (a gradient built from ``zeros_like`` is always zero);
* **eager autograd** (a probe run of the real model under a ``TorchFunctionMode``): what the joint
  graph cannot show, because torch compiled it away: ``torch.no_grad()`` regions (their ops look
  like any other forward op), parameters never touched, and outputs the loss ignores (dynamo and
  AOTAutograd delete the ops that compute them).

Plain data only; the doctor (``doctor.py``) turns these facts into findings.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import torch
import torch.fx as fx
from torch.overrides import TorchFunctionMode

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.core.graph_facts import CAST_OPS, alias_base, is_view_op
from fxviz.core.graph_facts import forward_outputs as graph_forward_outputs
from fxviz.core.state import preserved
from fxviz.sources.graphs import Capture, JointGraph
from fxviz.sources.roles import STATE_ROLES, short_op

__all__ = [
    "Cut",
    "GraphPaths",
    "EagerPath",
    "graph_paths",
    "tangent_valued",
    "forward_outputs",
    "data_args",
    "resolve_state",
    "is_view_of",
    "eager_paths",
]

# ops whose result depends only on the *shape* of their tensor arguments, never on the values
SHAPE_ONLY = frozenset({
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
    "new_zeros", "new_ones", "new_empty", "new_full", "new_empty_strided", "sym_size", "sym_numel",
    "sym_stride", "sym_storage_offset", "size", "numel", "stride", "dim",
})
# ops whose derivative is zero everywhere: a gradient through them is always zero
ZERO_DERIVATIVE = frozenset({"round", "floor", "ceil", "trunc", "sign", "bucketize", "searchsorted"})
COMPARISONS = frozenset({"gt", "lt", "ge", "le", "eq", "ne", "logical_and", "logical_or", "logical_not",
                         "logical_xor", "isnan", "isinf", "isfinite", "isclose", "bitwise_not"})
ARG_INDEX = frozenset({"argmax", "argmin", "argsort", "topk", "sort", "max", "min", "nonzero", "unique"})
@dataclass(frozen=True)
class Cut:
    """A joint-graph node where a parameter's gradient path stops, and why."""

    node: str
    cause: str  # detach | cast | argmax | comparison | integer | overwrite | zero_derivative | no_grad
    op: str
    graph: int = 0
    module: str | None = None
    source: str | None = None
    source_code: str | None = None


@dataclass
class GraphPaths:
    """What one joint graph says about one parameter's forward values."""

    graph: int
    sources: list[str]  # the parameter's nodes in this graph
    used: bool  # some forward op reads the parameter
    reaches_output: bool  # the parameter's values flow (by data) into a forward output
    differentiable: bool  # ... through ops that pass a gradient
    cuts: list[Cut] = field(default_factory=list)  # cut nodes whose results still reach an output
    slice: list[str] = field(default_factory=list)  # forward nodes data-dependent on it, in order


def data_args(node: fx.Node) -> list[fx.Node]:
    """The input nodes whose *values* flow into ``node``'s result (an overwrite drops its target,
    a ``zeros_like`` keeps only the shape)."""
    op = short_op(node)
    if op in SHAPE_ONLY:
        return []
    if op in ("zero",):
        return []
    if op in ("copy", "fill"):  # copy(self, src), fill.Tensor(self, value): self is overwritten
        return [a for a in node.args[1:] if isinstance(a, fx.Node)]
    return list(node.all_input_nodes)


def forward_outputs(graph: JointGraph) -> list[fx.Node]:
    """The joint graph's forward outputs (the loss, updated buffers, a piece's outputs)."""
    return graph_forward_outputs(graph.gm, graph.num_fwd_outputs)


def is_view_of(node: fx.Node) -> fx.Node | None:
    """The node ``node`` is a view of (same storage, by the op's schema), or None."""
    return alias_base(node) if node.op == "call_function" and is_view_op(node.target) else None


def _is_float(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and (value.is_floating_point() or value.is_complex())


def _cut_cause(node: fx.Node) -> str | None:
    op = short_op(node)
    if op == "detach":
        return "detach"
    value = _torch.meta_val(node)
    if isinstance(value, (tuple, list)):
        return None  # decided at the getitem that picks an element
    if not isinstance(value, torch.Tensor):
        return "integer"  # a Python number / SymInt computed from the tensor
    if not _is_float(value):
        if op in COMPARISONS:
            return "comparison"
        if op in ARG_INDEX or (op == "getitem" and short_op(node.args[0]) in ARG_INDEX):  # type: ignore[arg-type]
            return "argmax"
        if op in CAST_OPS:
            return "cast"
        return "integer"
    if op in ZERO_DERIVATIVE:
        return "zero_derivative"
    return None


def _reaching(graph: JointGraph, targets: Iterable[fx.Node]) -> set[str]:
    """Forward nodes whose values reach ``targets`` by data (inclusive)."""
    seen: set[str] = set()
    todo = list(targets)
    while todo:
        n = todo.pop()
        if n.name in seen:
            continue
        seen.add(n.name)
        if n.op == "call_function":
            todo.extend(data_args(n))
    return seen


def graph_paths(graph: JointGraph, sources: list[str]) -> GraphPaths:
    """Follow one parameter (its placeholder or constant nodes ``sources``) through the forward
    part of ``graph``: where its values go, whether a gradient could flow back along them, and the
    nodes that stop it on the way to an output."""
    info = graph.info
    to_out = _reaching(graph, forward_outputs(graph))
    src = set(sources)
    slice_: set[str] = set(src)
    carrying: set[str] = set(src)
    cuts: list[Cut] = []
    order: list[str] = []
    used = False
    for n in graph.gm.graph.nodes:
        if n.op != "call_function" or info[n.name].phase != "forward":
            continue
        inputs = {a.name for a in n.all_input_nodes}
        if inputs & src:
            used = True
        dargs = {a.name for a in data_args(n)}
        if dargs & slice_:
            slice_.add(n.name)
            order.append(n.name)
        carrying_in = dargs & carrying
        if not carrying_in:
            if inputs & carrying and n.name in to_out:  # overwritten in place, or only its shape used
                op = short_op(n)
                cuts.append(_cut(graph, n, "overwrite" if op in ("copy", "fill", "zero") else "shape_only"))
            continue
        cause = _cut_cause(n)
        if cause is None:
            carrying.add(n.name)
        elif n.name in to_out:
            cuts.append(_cut(graph, n, cause))
    outs = {o.name for o in forward_outputs(graph)}
    return GraphPaths(graph=graph.index, sources=list(sources), used=used,
                      reaches_output=bool(outs & slice_), differentiable=bool(outs & carrying),
                      cuts=cuts, slice=order)


def _cut(graph: JointGraph, node: fx.Node, cause: str) -> Cut:
    i = graph.info[node.name]
    return Cut(node=node.name, cause=cause, op=i.short_op, graph=graph.index, module=i.module,
               source=i.source, source_code=i.source_code)


def tangent_valued(graph: JointGraph) -> set[str]:
    """Nodes whose *values* depend on an incoming gradient (a tangent), by data (a ``zeros_like``
    of one does not; ``graph_facts.tangent_dependent`` is the partitioner's split, by any edge).
    A gradient output outside this set is a constant: zeros, whatever the loss does."""
    dep = {n for n, i in graph.info.items() if i.role == "tangent"}
    for n in graph.gm.graph.nodes:
        if n.op == "call_function" and any(a.name in dep for a in data_args(n)):
            dep.add(n.name)
    return dep


def resolve_state(graph: JointGraph, node: fx.Node) -> str | None:
    """The parameter/buffer/constant behind ``node`` through view ops (``t``, ``view``...: the op
    schema's aliasing, ``graph_facts.is_view_op``; a copy or a cast is a new tensor), as a joint
    node name, or None when it is an activation."""
    seen = 0
    while (base := is_view_of(node)) is not None and seen < 32:
        node, seen = base, seen + 1
    role = graph.info[node.name].role
    return node.name if role in STATE_ROLES else None


# --- eager autograd probe -------------------------------------------------------------------------
@dataclass(frozen=True)
class EagerCut:
    """A torch call in the eager run where a parameter's value stops requiring grad."""

    func: str
    cause: str  # no_grad | detach | data | cast | argmax | comparison | integer | other
    module: str | None
    source: str | None
    source_code: str | None


@dataclass
class EagerPath:
    """One parameter in a real eager run: touched? reaches the loss? cut where?"""

    parameter: str
    used: bool = False
    reaches_loss: bool = False
    gets_gradient: bool = False  # its autograd leaf is reachable from the loss
    cuts: list[EagerCut] = field(default_factory=list)  # cuts whose results reach the loss
    last_module: str | None = None  # where its values were last computed (when they are ignored)
    last_source: str | None = None
    last_source_code: str | None = None
    first_use: tuple[str | None, str | None, str | None] | None = None  # (module, source, code) of its first op


_TORCH_DIR = os.path.dirname(torch.__file__)
_FXVIZ_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_USER_FILES_IN_FXVIZ = {os.path.join(_FXVIZ_DIR, "examples.py")}


def _user_frame() -> tuple[str | None, str | None]:
    """('file.py:12', code) of the innermost frame outside torch and fxviz's own machinery."""
    import linecache

    frame: FrameType | None = sys._getframe(2)  # noqa: SLF001 - CPython's documented frame access
    while frame is not None:
        fname = frame.f_code.co_filename
        inside_torch = fname.startswith(_TORCH_DIR)
        inside_fxviz = fname.startswith(_FXVIZ_DIR) and fname not in _USER_FILES_IN_FXVIZ
        if not (inside_torch or inside_fxviz or fname.startswith("<frozen")):
            code = linecache.getline(fname, frame.f_lineno).strip() or None
            return f"{os.path.basename(fname)}:{frame.f_lineno}", code
        frame = frame.f_back
    return None, None


def _func_name(func: Any) -> str:
    name = getattr(func, "__name__", str(func))
    if name == "__get__":  # a property such as Tensor.data
        owner = getattr(func, "__self__", None)
        name = getattr(owner, "__name__", name)
    return name


class _Probe(TorchFunctionMode):
    """Tags every tensor with the tracked parameters it depends on, and records the calls where a
    value depending on one stops requiring grad."""

    def __init__(self, tracked: dict[int, str], modules: list[str]) -> None:
        super().__init__()
        self.deps: dict[int, frozenset[Any]] = {pid: frozenset({name}) for pid, name in tracked.items()}
        self.keep: list[Any] = []  # keeps tagged tensors alive so ids stay unique during the run
        self.modules = modules  # the module stack, maintained by global module hooks
        self.cuts: list[tuple[EagerCut, frozenset[str]]] = []
        self.used: set[str] = set()
        self.last: dict[str, tuple[str | None, str | None, str | None]] = {}
        self.tracked_names = frozenset(tracked.values())
        self.param_ids = dict(tracked)
        self.first: dict[str, tuple[str | None, str | None, str | None]] = {}

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        ins = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        dep: frozenset[Any] = frozenset()
        for t in ins:
            dep |= self.deps.get(id(t), frozenset())
        params = dep & self.tracked_names
        if not params:
            return out
        direct = {self.param_ids[id(t)] for t in ins if id(t) in self.param_ids}
        self.used |= direct
        outs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
        carrying = frozenset(p for t in ins if t.requires_grad
                             for p in self.deps.get(id(t), frozenset()) & self.tracked_names)
        name = _func_name(func)
        module = self.modules[-1] if self.modules else None
        source, code = _user_frame()
        for p in direct:
            self.first.setdefault(p, (module, source, code))
        for o in outs:
            tag = dep
            if carrying and not o.requires_grad:
                cut = EagerCut(name, self._cause(name, o), module, source, code)
                key = ("cut", len(self.cuts))
                self.cuts.append((cut, carrying))
                tag = dep | {key}
            self.deps[id(o)] = tag
            self.keep.append(o)
        for p in params:
            self.last[p] = (module, source, code)
        return out

    @staticmethod
    def _cause(name: str, out: torch.Tensor) -> str:
        if not torch.is_grad_enabled():
            return "no_grad"
        if name in ("detach", "detach_"):
            return "detach"
        if name == "data":
            return "data"
        if not (out.is_floating_point() or out.is_complex()):
            if name in COMPARISONS or name in ("__gt__", "__lt__", "__ge__", "__le__", "__eq__", "__ne__"):
                return "comparison"
            if name in ARG_INDEX:
                return "argmax"
            if name in CAST_OPS or name in ("to", "long", "int", "bool", "short", "byte"):
                return "cast"
            return "integer"
        return "other"


def eager_paths(cap: Capture, names: list[str]) -> dict[str, EagerPath]:
    """Run the model once eagerly (on its own parameters; nothing is changed, no backward runs)
    and follow the named parameters to the loss.  Used only for parameters the joint graph cannot
    explain, so ordinary models never pay for it."""
    model = cap.model
    result = {n: EagerPath(n) for n in names}
    if model is None or not names:
        return result
    assert cap.fn is not None and cap.reduce is not None  # set whenever the model is
    params = dict(model.named_parameters())
    tracked = {id(params[n]): n for n in names if n in params}
    paths = {id(m): p for p, m in model.named_modules()}
    stack: list[str] = []

    def pre(module: Any, _args: Any) -> None:
        stack.append(paths.get(id(module), stack[-1] if stack else ""))

    def post(module: Any, _args: Any, _out: Any) -> None:
        if stack:
            stack.pop()

    handles = [torch.nn.modules.module.register_module_forward_pre_hook(pre),
               torch.nn.modules.module.register_module_forward_hook(post)]
    probe = _Probe(tracked, stack)
    try:
        with preserved(model), _torch.quiet_torch(), torch.enable_grad():
            with probe:
                loss = cap.reduce(cap.fn(*cap.example_inputs))
            loss_dep = probe.deps.get(id(loss), frozenset())
            leaves = _reachable_leaves(loss)
    finally:
        for h in handles:
            h.remove()
    for n, path in result.items():
        p = params.get(n)
        path.used = n in probe.used
        path.reaches_loss = n in loss_dep
        path.gets_gradient = p is not None and id(p) in leaves
        path.cuts = [c for k, (c, who) in enumerate(probe.cuts) if n in who and ("cut", k) in loss_dep]
        if n in probe.last:
            path.last_module, path.last_source, path.last_source_code = probe.last[n]
        path.first_use = probe.first.get(n)
    probe.keep.clear()
    return result


def _reachable_leaves(loss: Any) -> set[int]:
    """ids of the leaf tensors whose gradient ``loss.backward()`` would fill."""
    if not isinstance(loss, torch.Tensor) or loss.grad_fn is None:
        return set()
    seen: set[Any] = set()
    leaves: set[int] = set()
    todo: list[torch.autograd.graph.Node | None] = [loss.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        var = getattr(fn, "variable", None)
        if isinstance(var, torch.Tensor):
            leaves.add(id(var))
        todo.extend(f for f, _ in fn.next_functions)
    return leaves
