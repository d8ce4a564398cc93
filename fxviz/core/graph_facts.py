"""Facts about the nodes of AOTAutograd's graphs, each answered once, below everything that asks.

"Is this op a view", "is this placeholder a tangent", "which nodes must run in the backward",
"which outputs are saved", "which storage does this tensor live in", "how many FLOPs / bytes does
this op cost", "where in the user's code was this op traced": every module that needs one of these
reads it from here (floor 1: torch's metadata through ``fxviz._torch``, public fx API otherwise).

Counts have one definition each, and a name that says what they count:

- ``joint_node_count``: nodes of a joint graph, its ``output`` node not counted (a drawing's nodes);
- *forward ops* / *backward ops* of a joint graph: nodes whose **role** is ``forward`` /
  ``backward`` (``roles.role_counts``; forward outputs and gradients are roles of their own);
- ``graph_op_count``: ops of one graph of a partition (its forward graph, its backward graph),
  ``getitem`` not counted: the memory table's ``forward_graph_ops`` / ``backward_graph_ops``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

import torch
import torch.fx as fx
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from fxviz import _torch
from fxviz.core.fx_facts import output_values

__all__ = [
    "CAST_OPS", "draws_random", "redraws_if_recomputed", "concrete", "tensors", "numel_bytes", "is_view_op",
    "alias_base", "is_cast", "is_tangent", "tangents", "tangent_dependent", "traced_phases", "forward_outputs",
    "gradient_slots", "saved_values", "input_devices", "storage_key", "Storages", "ATTENTION_FORMULAS",
    "counts_flops", "op_flops", "op_traffic", "node_flops", "node_traffic", "graph_flops",
    "graph_op_count", "joint_node_count", "stack_frames", "innermost_frame",
]


# --- sizes ---------------------------------------------------------------------------------------
def concrete(v: Any) -> int:
    """An int, evaluating a SymInt at the example size it was traced with."""
    if isinstance(v, torch.SymInt):
        hint = getattr(v.node, "hint", None)
        if hint is None:
            raise ValueError(f"symbolic size {v} has no example value")
        return int(hint)
    return int(v)


def input_devices(gm: fx.GraphModule) -> list[str]:
    """The devices of a graph's inputs ("cpu", "cuda:0"), read from their traced values: a graph read
    from a log has them too (its annotations name the device), though it has no real tensors."""
    found = (getattr(_torch.meta_val(n), "device", None) for n in gm.graph.find_nodes(op="placeholder"))
    return sorted({str(d) for d in found if d is not None})


def tensors(value: Any) -> list[torch.Tensor]:
    """The tensors in a node's value (a tensor, or a tuple/list of them, nested)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in tensors(v)]
    return []


def numel_bytes(t: torch.Tensor) -> int:
    """``numel * itemsize`` of ``t`` (sizes evaluated at their example values)."""
    n = 1
    for s in t.shape:
        n *= concrete(s)
    return n * t.element_size()


# --- views, aliases, casts -----------------------------------------------------------------------
def is_view_op(target: Any) -> bool:
    """An aten op whose output aliases an input, by its schema (``t``, ``view``, ``detach``,
    ``expand``...).  A copy (``clone``, ``contiguous``'s copy) or a cast (``_to_copy``) is not."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return False
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


def alias_base(node: fx.Node) -> fx.Node | None:
    """The input node whose storage ``node``'s output aliases, by the op's schema (or None);
    in-place ops alias the tensor they write."""
    if node.op != "call_function":
        return None
    slot = _alias_slot(node.target)
    if slot is None:
        return None
    i, name = slot
    value = node.args[i] if i < len(node.args) else node.kwargs.get(name)
    return value if isinstance(value, fx.Node) else None


_ALIAS_SLOTS: dict[Any, tuple[int, str] | None] = {}


def _alias_slot(target: Any) -> tuple[int, str] | None:
    """(position, name) of the argument an op's output aliases, by its schema, once per op (the
    schema walk per node was 1.9 of a 60-layer GPT's 16 s first picture)."""
    try:
        return _ALIAS_SLOTS[target]
    except KeyError:
        pass
    except TypeError:  # an unhashable target: read its schema every time
        return _schema_alias_slot(target)
    slot = _ALIAS_SLOTS[target] = _schema_alias_slot(target)
    return slot


def _schema_alias_slot(target: Any) -> tuple[int, str] | None:
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.returns:
        return None
    ret = schema.returns[0].alias_info
    if ret is None:
        return None
    wanted = set(ret.before_set)
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or (wanted and not wanted & set(arg.alias_info.before_set)):
            continue
        return i, arg.name
    return None


CAST_OPS = frozenset({"_to_copy", "to", "convert_element_type", "type", "_to_dtype", "long", "int", "bool"})
"""Ops that convert a value to another dtype: same values, a new tensor (not a view)."""


def is_cast(node: fx.Node) -> bool:
    """A dtype conversion (``_to_copy``, ``convert_element_type``...): a new tensor, not a view."""
    target = getattr(node.target, "overloadpacket", node.target)
    return node.op == "call_function" and getattr(target, "__name__", "") in CAST_OPS


# --- the forward/backward split ------------------------------------------------------------------
_DRAW_PROBABILITY = ("dropout_p", "p")  # the argument that says how much a random op draws


def draws_random(node: fx.Node) -> bool:
    """Whether running ``node`` draws random numbers: a seeded random op (torch's
    ``nondeterministic_seeded`` tag) whose drop probability is not a literal 0.  torch tags CPU
    attention (``_scaled_dot_product_flash_attention_for_cpu``) as seeded even with ``dropout_p=0``,
    which draws nothing (and ``native_dropout`` with ``train=False`` draws nothing either): a tag is
    not a draw."""
    if node.op != "call_function" or not _torch.is_random(node):
        return False
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return True
    values: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            values[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            values[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
    if values.get("train", True) is False:
        return False
    for name in _DRAW_PROBABILITY:
        p = values.get(name)
        if isinstance(p, (int, float)) and not isinstance(p, bool):
            return p != 0
    return True


_REPLAYED = ("must_recompute", "prefer_recompute")  # policies whose random ops torch recomputes with their RNG state


def redraws_if_recomputed(node: fx.Node) -> bool:
    """Whether running ``node`` again in the backward would draw other values than the forward
    drew, so a partition that does so computes other gradients: it draws (``draws_random``) and
    torch does not replay its RNG state.  torch's min-cut replays it (``functionalize_rng_ops``:
    ``run_and_save_rng_state`` in the forward, ``run_with_rng_state`` in the backward) only for a
    random op a checkpoint policy marks ``must_recompute``/``prefer_recompute``; its knapsack
    recomputes others (dropout included) without.  What torch may recompute, fxviz's optimum may
    too, unless it redraws."""
    return draws_random(node) and _torch.checkpoint_policy(node) not in _REPLAYED


def is_tangent(node: fx.Node) -> bool:
    """A joint-graph placeholder that is an incoming gradient: by its AOT descriptor where torch
    recorded one, else by torch's own test (its name)."""
    if node.op != "placeholder":
        return False
    desc = _torch.node_desc(node)
    if desc is not None:
        return _torch.describe_input(desc).kind == "tangent"
    return _torch.is_tangent(node)


def tangents(gm: fx.GraphModule | fx.Graph) -> list[fx.Node]:
    """The tangent placeholders, in order."""
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    return [n for n in graph.nodes if is_tangent(n)]


def tangent_dependent(gm: fx.GraphModule | fx.Graph) -> set[fx.Node]:
    """The nodes a partitioner must put in the backward (torch's ``classify_nodes``): tangents,
    nodes torch pins to the backward, and everything they reach (the ``output`` node excluded).
    Every other node is a forward value: saved, recomputed, or not needed by the backward."""
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    backward: set[fx.Node] = set()
    for n in graph.nodes:
        if n.op == "output":
            continue
        if is_tangent(n) or (n.op == "call_function" and _torch.must_be_in_backward(n)) \
                or any(a in backward for a in n.all_input_nodes):
            backward.add(n)
    return backward


def traced_phases(gm: fx.GraphModule) -> dict[fx.Node, str]:
    """The phase AOTAutograd traced each op in, for a joint graph whose partitioner tags were
    lost (one read from a log): it traces the forward, then the backward, so the graph's order is
    its phases: the ops from the first op that reads a tangent (directly or through ops that do)
    on are ``"backward"``, the ops before it ``"forward"``."""
    seen: set[fx.Node] = set(tangents(gm))
    phases: dict[fx.Node, str] = {}
    backward = False
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        reads_tangent = any(a in seen for a in n.all_input_nodes)
        backward = backward or reads_tangent
        if reads_tangent:
            seen.add(n)
        phases[n] = "backward" if backward else "forward"
    return phases


def forward_outputs(gm: fx.GraphModule, num_fwd_outputs: int) -> list[fx.Node]:
    """A joint graph's forward outputs (the loss, updated buffers, a piece's outputs)."""
    return [a for a in output_values(gm)[:num_fwd_outputs] if isinstance(a, fx.Node)]


def gradient_slots(gm: fx.GraphModule, num_fwd_outputs: int) -> list[Any]:
    """A joint graph's gradient outputs, one slot per differentiable input (``None`` where the
    input gets no gradient)."""
    return output_values(gm)[num_fwd_outputs:]


def saved_values(forward: fx.GraphModule, num_fwd_outputs: int) -> list[fx.Node]:
    """What the backward reads: a forward graph's outputs after the first ``num_fwd_outputs``."""
    return [o for o in output_values(forward)[num_fwd_outputs:] if isinstance(o, fx.Node)]


# --- storages ------------------------------------------------------------------------------------
def storage_key(t: torch.Tensor) -> int:
    """Identity of the storage under ``t``, fake or real (views of one storage share it)."""
    return _torch.storage_key(t)


class Storages:
    """Which storage every value of some graphs lives in, and how big it is.

    Identity comes from the fake tensors torch recorded (``meta["val"]``), which keep the traced
    program's aliasing, joined with the graphs' own view edges (an op whose schema says its
    output aliases an input: ``t``, ``view``, ``expand``, in-place ops).  The edges matter where
    the fakes cannot know: a ``get_attr`` constant (parameters captured in a closure) gets a
    fresh fake of its own, so its transpose ``t`` would otherwise look like a new tensor; and
    two ``get_attr`` reads of one attribute are one tensor.
    """

    def __init__(self, *gms: fx.GraphModule | None) -> None:
        self._parent: dict[int, int] = {}
        self._size: dict[int, int] = {}
        self._attrs: dict[str, int] = {}
        self._seen: dict[int, tuple[torch.Tensor, int]] = {}  # id -> (the tensor, kept alive so the id stays its, key)
        for gm in gms:
            if gm is not None:
                self.add(gm)

    def _find(self, k: int) -> int:
        root = k
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        while k != root:
            self._parent[k], k = root, self._parent.get(k, k)
        return root

    def _raw(self, t: torch.Tensor) -> int:
        seen = self._seen.get(id(t))
        if seen is not None:  # a value read again as an op's base: asking torch costs more than the lookup
            return seen[1]
        k = storage_key(t)
        self._seen[id(t)] = (t, k)
        if k not in self._parent:
            self._parent[k] = k
            self._size[k] = concrete(t.untyped_storage().nbytes())
        return k

    def _union(self, a: int, b: int) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[rb] = ra
            self._size[ra] = max(self._size[ra], self._size.pop(rb))

    def add(self, gm: fx.GraphModule) -> None:
        raw, meta_val = self._raw, _torch.meta_val
        for n in gm.graph.nodes:
            value = meta_val(n)
            keys = [raw(value)] if isinstance(value, torch.Tensor) else [raw(t) for t in tensors(value)]
            if n.op == "get_attr" and keys:  # every read of one attribute is one tensor
                self._union(self._attrs.setdefault(str(n.target), keys[0]), keys[0])
            base = alias_base(n) if n.op == "call_function" else None
            base_values = tensors(meta_val(base)) if base is not None else []
            if base_values:
                base_key = raw(base_values[0])
                for k in keys:
                    self._union(base_key, k)

    def key(self, t: torch.Tensor) -> int:
        """The storage of ``t`` (views and aliases of one storage share the key)."""
        return self._find(self._raw(t))

    def nbytes(self, key: int) -> int:
        return self._size[self._find(key)]


# --- cost of an op -------------------------------------------------------------------------------
def _meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty_strided([concrete(s) for s in value.shape], [concrete(s) for s in value.stride()],
                                   dtype=value.dtype, device="meta")
    if isinstance(value, torch.SymInt):
        return concrete(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_meta(v) for v in value)
    return value


# FLOPs by (op, argument shapes/dtypes, other arguments): twelve identical layers are counted once
# (gpt12's memory table spent 3.8 of 5.35 s re-running each matmul on meta tensors)
_FLOPS: dict[Any, int] = {}
_FLOPS_LIMIT = 65536


def _flop_key(node: fx.Node) -> Any:
    """A hashable description of what decides a node's FLOP count, or None if it has none."""
    def describe(a: Any) -> Any:
        if isinstance(a, fx.Node):
            v = _torch.meta_val(a)
            if isinstance(v, torch.Tensor):
                return ("t", tuple(str(d) for d in v.shape), tuple(str(d) for d in v.stride()), str(v.dtype))
            return ("v", str(v))
        if isinstance(a, (list, tuple)):
            return tuple(describe(x) for x in a)
        if isinstance(a, dict):
            return tuple(sorted((k, describe(x)) for k, x in a.items()))
        return repr(a)

    try:
        key = (node.target, describe(node.args), describe(node.kwargs))
        hash(key)
    except Exception:  # an argument that cannot be described: count afresh
        return None
    return key


ATTENTION_FORMULAS: dict[Any, Any] = _torch.attention_flop_formulas()
"""The ops fxviz counts FLOPs of beyond ``torch.utils.flop_counter``'s registry: CPU attention, by torch's
SDPA formulas (``_torch.attention_flop_formulas``); without them it counted 0 (``forward_flops`` was the
Linears' alone)."""


def counts_flops(packet: Any) -> bool:
    """Whether FLOPs are counted for this op (``flop_counter``'s registry, or CPU attention)."""
    return packet in flop_registry or packet in ATTENTION_FORMULAS


def node_flops(node: fx.Node) -> int:
    """FLOPs of one node as ``torch.utils.flop_counter`` counts them (pointwise ops count 0; CPU
    attention by torch's SDPA formula), run on meta tensors of the recorded shapes: nothing is
    computed."""
    packet = getattr(node.target, "overloadpacket", None)
    if node.op != "call_function" or not counts_flops(packet):
        return 0
    key = _flop_key(node)
    if key is not None and key in _FLOPS:
        return _FLOPS[key]
    args = fx.node.map_arg(node.args, _torch.meta_val)
    kwargs = fx.node.map_arg(node.kwargs, _torch.meta_val)
    flops = op_flops(node.target, args, kwargs)
    if key is not None:
        if len(_FLOPS) >= _FLOPS_LIMIT:
            _FLOPS.clear()
        _FLOPS[key] = flops
    return flops


def op_flops(func: Any, args: Any, kwargs: Any) -> int:
    """FLOPs of one aten op call as ``torch.utils.flop_counter`` counts them (pointwise ops count
    0; CPU attention by torch's SDPA formula), run on meta copies of its tensors (fake, real or
    meta): nothing is computed."""
    packet = getattr(func, "overloadpacket", None)
    if not counts_flops(packet):
        return 0
    extra = {packet: ATTENTION_FORMULAS[packet]} if packet in ATTENTION_FORMULAS else None
    counter = FlopCounterMode(display=False, custom_mapping=extra)
    with counter:
        func(*_meta(tuple(args)), **{k: _meta(v) for k, v in kwargs.items()})
    return int(counter.get_total_flops())


def op_traffic(func: Any, inputs: Iterable[torch.Tensor], outputs: Iterable[torch.Tensor]) -> int:
    """Bytes an op call reads and writes (``numel * itemsize`` of its tensors); 0 for a view or an
    op without a schema, which move nothing."""
    if is_view_op(func) or not hasattr(func, "_schema"):
        return 0
    return sum(numel_bytes(t) for t in inputs) + sum(numel_bytes(t) for t in outputs)


def node_traffic(node: fx.Node) -> int:
    """Bytes an op reads and writes (``numel * itemsize`` of its tensor inputs and outputs);
    0 for views, which move nothing."""
    if node.op != "call_function":
        return 0
    return op_traffic(node.target, [t for a in node.all_input_nodes for t in tensors(_torch.meta_val(a))],
                      tensors(_torch.meta_val(node)))


def graph_flops(gm: fx.GraphModule) -> int:
    """FLOPs of every op of ``gm`` (``node_flops`` summed)."""
    return sum(node_flops(n) for n in gm.graph.nodes)


# --- counts --------------------------------------------------------------------------------------
def graph_op_count(gm: fx.GraphModule | None) -> int:
    """Ops of one graph of a partition: ``call_function`` nodes, not counting ``getitem`` (which
    only unpacks a tuple).  The memory table's ``forward_graph_ops`` / ``backward_graph_ops``."""
    if gm is None:
        return 0
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "__name__", "") != "getitem")


def joint_node_count(nodes: Iterable[Any]) -> int:
    """Nodes of a joint graph as every drawing and summary counts them: its ``output`` node is not
    one.  ``nodes``: ``fx.Node``\\ s or ``NodeInfo`` rows (anything with an ``op``)."""
    return sum(1 for n in nodes if n.op != "output")


# --- where an op was traced ----------------------------------------------------------------------
_FRAME = re.compile(r'File "([^"]+)", line (\d+)(?:, in ([\w<>.]+))?')


def stack_frames(trace: str | None) -> list[tuple[str, int, str | None, str | None]]:
    """The frames of a recorded stack trace, outermost first: (file path, line, function or None,
    the code on that line or None)."""
    if not trace:
        return []
    lines = trace.splitlines()
    frames = []
    for i, line in enumerate(lines):
        m = _FRAME.search(line)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) else None
            frames.append((m.group(1), int(m.group(2)), m.group(3), code))
    return frames


def innermost_frame(trace: str | None) -> tuple[str | None, str | None]:
    """Innermost user frame of a recorded stack trace: ('file.py:12', 'code on that line')."""
    frames = stack_frames(trace)
    if not frames:
        return None, None
    path, line, _fn, code = frames[-1]
    return f"{os.path.basename(path)}:{line}", code
