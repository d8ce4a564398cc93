"""The ``eager`` strategy: what plain eager autograd saves for the same model and inputs.

The reference row users compare compilers against.  Measured, not modelled: the model runs once
on clones of its parameters and buffers (``torch.func.functional_call``), from the RNG state of
the capture, with ``torch.autograd.graph.saved_tensors_hooks`` collecting every tensor autograd
packs for the backward.  Bytes count unique storages; storages owned by parameters, buffers or
the inputs are reported apart from activations.

Each saved tensor is traced back to the aten op that produced it (a dispatch-mode recorder sees
the ops eager runs below autograd) and that op is matched, in order, to a forward op of the
joint graph with the same op, output index, shape and dtype (``difflib`` alignment of the two op
sequences, so ops that exist on only one side do not shift the rest).  What cannot be matched is
listed as unmapped.  Eager and compiled graphs legitimately differ: on CPU, eager dropout draws a
float mask (``bernoulli_``, ``div_``, ``mul``) where the traced graph's ``native_dropout`` keeps a
bool mask; in-place ops (``relu_``) are matched to their functional twin (``relu``).

Under ``torch.utils.checkpoint`` the hooks see only part of what eager keeps: inside a region
checkpoint's own hooks win, and a selective-checkpoint policy keeps the values it saves in its own
cache.  So after the forward every storage a forward op produced is probed (``StorageWeakRef``):
one still alive that no hook saw, and that is not an output, a parameter or an input, is held by
checkpoint and counted.  One real backward then measures what checkpoint recomputes: the engine
runs derivative formulas with grad mode off, checkpoint re-runs a region's forward with it on.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.core.collector import old_objects_frozen
from fxviz.core.graph_facts import op_flops, op_traffic
from fxviz.core.state import preserved
from fxviz.sources.graphs import Capture, JointGraph

__all__ = ["SavedTensor", "EagerMeasurement", "measure_eager", "failure_reason"]


@dataclass(frozen=True)
class SavedTensor:
    """One tensor eager autograd saved (unique by storage, offset, shape, stride and dtype)."""

    op: str  # the aten op that produced it in eager ("input"/"parameter" for leaves)
    shape: tuple[int, ...]
    dtype: str
    owner: str  # activation | parameter | input
    storage_bytes: int
    numel_bytes: int
    joint: str | None  # the joint-graph node it corresponds to, when matched
    held_by: str = "autograd"  # autograd (seen by saved_tensors_hooks) | checkpoint (its own cache / inputs)
    storage: int = 0  # which storage it views (equal keys: one storage, its bytes counted once)


@dataclass
class EagerMeasurement:
    """What one eager run of the model saved for its backward (``Partition.measurement`` of the
    eager row: measured on real tensors, no graphs)."""

    saved: list[SavedTensor] = field(default_factory=list)
    saves: int = 0  # pack-hook calls (one tensor may be saved by several ops)
    storages: int = 0
    activation_bytes: int = 0
    param_bytes: int = 0
    input_bytes: int = 0
    estimate_bytes: int = 0  # numel*itemsize over the saved tensors, blind to aliasing (torch's way)
    forward_aten_ops: int = 0  # aten ops eager ran in the forward (and the loss)
    float_mask_bytes: int = 0  # CPU dropout's float masks among the saved activations
    checkpoint_bytes: int = 0  # activation storages held by torch.utils.checkpoint, not seen by the hooks
    checkpoint_storages: int = 0
    recomputed_ops: int | None = None  # forward ops eager checkpointing ran again in the backward
    recompute_flops: int | None = None  # None: not measured
    recompute_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def saved_tensors(self) -> int:
        return len(self.saved)


# the traced graph's functional form of an op -> the op eager runs
_SAME_OP = {
    "_native_batch_norm_legit_functional": "native_batch_norm",
    "_native_batch_norm_legit": "native_batch_norm",
    "_native_batch_norm_legit_no_training": "native_batch_norm",
}


def _op_name(func: Any) -> str:
    """``aten.relu_.default`` -> ``relu`` (in-place ops match their functional twin)."""
    packet = getattr(func, "overloadpacket", None)
    name = getattr(packet, "__name__", "") or getattr(func, "__name__", str(func))
    name = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    return _SAME_OP.get(name, name)


def _dtype(t: torch.Tensor | Any) -> str:
    return str(t.dtype).replace("torch.", "")


def _sig(t: torch.Tensor) -> tuple[Any, ...]:
    """A tensor's identity as a view: same storage, offset, shape, stride and dtype."""
    return (_torch.storage_key(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def _joint_sequence(graph: JointGraph) -> list[tuple[tuple[Any, ...], str | None]]:
    """The joint forward ops' outputs in graph order: ((op, output index, shape, dtype), node name)."""
    seq: list[tuple[tuple[Any, ...], str | None]] = []
    for n in graph.gm.graph.nodes:
        info = graph.info.get(n.name)
        if n.op != "call_function" or info is None or info.phase != "forward":
            continue
        if getattr(n.target, "__name__", "") == "getitem":
            continue
        val = _torch.meta_val(n)
        name = _op_name(n.target)
        if isinstance(val, torch.Tensor):
            seq.append(((name, 0, tuple(int(s) for s in val.shape), _dtype(val)), n.name))
        elif isinstance(val, (tuple, list)):
            items = {u.args[1]: u.name for u in n.users if getattr(u.target, "__name__", "") == "getitem"}
            for i, v in enumerate(val):
                if isinstance(v, torch.Tensor):
                    seq.append(((name, i, tuple(int(s) for s in v.shape), _dtype(v)), items.get(i)))
    return seq


def _clone(t: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    c = t.detach().clone()
    return c.requires_grad_(requires_grad) if c.is_floating_point() or c.is_complex() else c


class _Recorder:
    """What one eager run shows: every op output in order, the storages forward ops made, who owns
    each leaf storage, the unique tensors autograd packed, and what the backward recomputed."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []  # (op, output index, shape, dtype) per op output, in order
        self.producer: dict[tuple[Any, ...], int] = {}  # view signature -> index of the latest event producing it
        self.owners: dict[int, str] = {}  # storage key -> parameter | input
        self.leaf_names: dict[int, str] = {}  # storage key -> joint placeholder name
        self.packed: dict[tuple[Any, ...], torch.Tensor] = {}  # unique saved tensors, in save order
        self.saves = 0
        self.masks: set[int] = set()  # storages of CPU dropout's float masks
        # every storage a forward op produced: (probe, event index, shape, dtype, numel bytes)
        self.probes: dict[int, tuple[_torch.StorageProbe, int, tuple[int, ...], str, int]] = {}
        self.recompute = {"ops": 0, "flops": 0, "bytes": 0}

    def on_op(self, func: Any, args: Any, out: Any, kwargs: Any) -> None:
        first = len(self.events)
        self.record(func, args, out)
        for i, t in enumerate(pytree.tree_leaves(out)):
            if isinstance(t, torch.Tensor) and t.device.type != "meta":
                key = _torch.storage_key(t)
                old = self.probes.get(key)
                if old is None or not old[0].alive():
                    event = self.producer.get(_sig(t), first + i)
                    self.probes[key] = (_torch.StorageProbe(t), event, tuple(t.shape), _dtype(t),
                                        t.numel() * t.element_size())

    def on_backward_op(self, func: Any, args: Any, out: Any, kwargs: Any) -> None:
        # the engine runs backward formulas with grad mode off; torch.utils.checkpoint re-runs a
        # region's forward under enable_grad: a grad-enabled op in the backward is a recomputation
        if not torch.is_grad_enabled() or _op_name(func) in _BOOKKEEPING:
            return
        self.recompute["ops"] += 1
        self.recompute["flops"] += op_flops(func, args, kwargs)
        self.recompute["bytes"] += op_traffic(func, _leaf_tensors(args), _leaf_tensors(out))

    def record(self, func: Any, args: Any, out: Any) -> None:
        events, producer, masks = self.events, self.producer, self.masks
        name = _op_name(func)
        if name == "bernoulli" and isinstance(out, torch.Tensor):
            masks.add(_torch.storage_key(out))  # eager CPU dropout: empty_like().bernoulli_(1-p)
            return
        if isinstance(out, torch.Tensor) and _torch.storage_key(out) in masks:
            return  # mask.div_(1-p): still the mask
        mask = next((a for a in pytree.tree_leaves(args)
                     if isinstance(a, torch.Tensor) and _torch.storage_key(a) in masks), None)
        if name == "mul" and mask is not None and isinstance(out, torch.Tensor):
            # input * mask: record it as the graph's native_dropout (output, bool mask)
            producer[_sig(out)] = len(events)
            events.append(("native_dropout", 0, tuple(out.shape), _dtype(out)))
            producer[_sig(mask)] = len(events)
            events.append(("native_dropout", 1, tuple(mask.shape), "bool"))
            return
        for i, t in enumerate(pytree.tree_leaves(out)):
            if isinstance(t, torch.Tensor):
                producer[_sig(t)] = len(events)
                events.append((name, i, tuple(t.shape), _dtype(t)))

    def pack(self, t: torch.Tensor) -> torch.Tensor:
        self.saves += 1
        self.packed.setdefault(_sig(t), t)
        return t

    @staticmethod
    def unpack(t: torch.Tensor) -> torch.Tensor:
        return t

    def own(self, t: torch.Tensor, owner: str, placeholder_of: dict[int, str], original: torch.Tensor) -> None:
        """``t`` (fxviz's copy of ``original``) is a leaf storage owned by ``owner``."""
        self.owners[_torch.storage_key(t)] = owner
        if id(original) in placeholder_of:
            self.leaf_names[_torch.storage_key(t)] = placeholder_of[id(original)]


def _placeholder_of(graph: JointGraph | None) -> dict[int, str]:
    """id of a placeholder's or constant's example tensor -> its joint node name."""
    placeholder_of: dict[int, str] = {}
    if graph is not None:
        for name, value in graph.placeholder_values.items():
            if isinstance(value, torch.Tensor):
                placeholder_of[id(value)] = name
        for target, value in graph.constant_values.items():
            for n in graph.gm.graph.nodes:
                if n.op == "get_attr" and n.target == target:
                    placeholder_of.setdefault(id(value), n.name)
    return placeholder_of


def _state_copies(model: nn.Module | None, rec: _Recorder, placeholder_of: dict[int, str],
                  closure: bool) -> dict[str, torch.Tensor]:
    """Copies of the model's parameters and buffers the eager run swaps in, each owned by ``rec``."""
    state: dict[str, torch.Tensor] = {}
    if model is None:
        return state
    for qual, p in model.named_parameters():
        state[qual] = _clone(p, p.requires_grad and not closure)
        rec.own(state[qual], "parameter", placeholder_of, p)
    for qual, b in model.named_buffers():
        state[qual] = _clone(b, False)
        rec.own(state[qual], "parameter", placeholder_of, b)
    return state


def _run(cap: Capture, rec: _Recorder, placeholder_of: dict[int, str]
         ) -> list[tuple[int, tuple[_torch.StorageProbe, int, tuple[int, ...], str, int]]]:
    """Run the model once eagerly on copies, forward and backward, recording into ``rec``; returns
    the storages checkpoint holds (alive after the forward, seen by no hook)."""
    closure = cap.params == "closure"
    model = cap.model
    with preserved(model), _torch.quiet_torch():
        state = _state_copies(model, rec, placeholder_of, closure)

        def input_copy(x: Any) -> Any:
            if not isinstance(x, torch.Tensor):
                return x
            c = _clone(x, x.requires_grad or (closure and (x.is_floating_point() or x.is_complex())))
            if c.requires_grad:  # a non-leaf, so a model that writes into its input in place can
                c = c.clone()    # (as it can under AOTAutograd, which functionalizes the write)
            rec.own(c, "input", placeholder_of, x)
            return c

        # every tensor leaf is an input, also inside list, tuple or dict arguments (issue 14)
        inputs = [pytree.tree_map(input_copy, x) for x in cap.example_inputs]
        # the model runs on the clones for the forward AND the backward: checkpoint re-runs
        # regions of the forward during the backward, and must see the same tensors
        swapped = contextlib.ExitStack()
        if model is not None:
            swapped.enter_context(_torch.reparametrized(model, state))
        with swapped:
            with torch.autograd.graph.saved_tensors_hooks(rec.pack, rec.unpack), \
                    _torch.OpRecorder(rec.on_op, with_kwargs=True):
                if model is not None:
                    out = model(*inputs)
                else:
                    assert cap.fn is not None  # a capture without a model was made from its function
                    out = cap.fn(*inputs)
                assert cap.reduce is not None
                loss = cap.reduce(out)
            # what else eager holds for the backward: torch.utils.checkpoint keeps its regions'
            # inputs and a selective-checkpoint policy's saved outputs in its own cache, which
            # saved_tensors_hooks never see (inside a region its own hooks win); any storage a
            # forward op made that is still alive now is held by autograd or by checkpoint; with no
            # region anywhere nothing is (and the collection is not paid)
            held = _held_by_checkpoint(rec, out, loss) if _may_checkpoint(cap) else []
            if loss.requires_grad:
                seed = torch.ones_like(loss)  # made here: backward() would make it under grad mode
                with _torch.OpRecorder(rec.on_backward_op, with_kwargs=True):
                    loss.backward(seed)
            del loss, out
    return held


def _held_by_checkpoint(rec: _Recorder, out: Any, loss: torch.Tensor
                        ) -> list[tuple[int, tuple[_torch.StorageProbe, int, tuple[int, ...], str, int]]]:
    """The storages a forward op made that are alive after the forward, collected, and that no saved-tensor hook,
    output or input holds: held by checkpoint's own cache.  The collection walks what the run made (the caller
    froze what was there before it: a full one walks a session's millions of objects, a second or more)."""
    gc.collect()
    # the outputs hold what they reach: a KV cache object (GPT-2's past_key_values) is no pytree, so its
    # tensors are found by walking it
    outputs = {_torch.storage_key(t) for t in _reachable_tensors((out, loss))}
    hooked = {sig[0] for sig in rec.packed}
    return [(key, probe) for key, probe in rec.probes.items()
            if probe[0].alive() and key not in hooked and key not in outputs and key not in rec.owners]


def _joint_of_events(events: list[tuple[Any, ...]], graph: JointGraph | None) -> dict[int, str | None]:
    """Event index -> the joint node it matches (``difflib`` alignment of the two op sequences)."""
    mapping: dict[int, str | None] = {}
    if graph is not None:
        joint = _joint_sequence(graph)
        matcher = difflib.SequenceMatcher(None, events, [k for k, _ in joint], autojunk=False)
        for block in matcher.get_matching_blocks():
            for k in range(block.size):
                mapping[block.a + k] = joint[block.b + k][1]
    return mapping


def measure_eager(cap: Capture, graph: JointGraph | None = None) -> EagerMeasurement:
    """Run the captured model once eagerly and record every tensor autograd saves.

    In ``params="closure"`` mode the parameters are constants of the traced graph and the floating
    inputs require grad (as the capture marks them); the eager run mirrors that.
    """
    rec = _Recorder()
    with old_objects_frozen():  # what the run leaves in cycles is among its own objects: collected without the rest
        held = _run(cap, rec, _placeholder_of(graph))
    events, producer, owners, masks = rec.events, rec.producer, rec.owners, rec.masks
    mapping = _joint_of_events(events, graph)
    m = EagerMeasurement(saves=rec.saves, forward_aten_ops=_count_ops(events))
    seen_storage: set[int] = set()
    for sig, t in rec.packed.items():
        # resolved now, not at pack time: a saved tensor stays alive, so every record made for
        # its view signature after it was packed is about this same storage (an op may save
        # its inputs before CPU dropout's mask is known to be one)
        event = producer.get(sig)
        key = sig[0]
        owner = owners.get(key, "activation")
        nbytes = int(t.untyped_storage().nbytes())
        numel_bytes = t.numel() * t.element_size()
        if event is not None:
            op = events[event][0]
            joint_name = mapping.get(event)
        else:
            op = owner if owner != "activation" else "?"
            joint_name = None
        if joint_name is None and owner != "activation":
            joint_name = rec.leaf_names.get(key)
        m.saved.append(SavedTensor(op=op, shape=tuple(t.shape), dtype=_dtype(t), owner=owner,
                                   storage_bytes=nbytes, numel_bytes=numel_bytes, joint=joint_name, storage=key))
        m.estimate_bytes += numel_bytes
        if key in seen_storage:
            continue
        seen_storage.add(key)
        if key in masks:
            m.float_mask_bytes += nbytes
        m.storages += 1
        if owner == "parameter":
            m.param_bytes += nbytes
        elif owner == "input":
            m.input_bytes += nbytes
        else:
            m.activation_bytes += nbytes
    rec.packed.clear()
    for key, (probe, event, shape, dtype, numel_bytes) in held:
        joint_name = mapping.get(event) if event < len(events) else None
        op = events[event][0] if event < len(events) else "?"
        m.saved.append(SavedTensor(op=op, shape=shape, dtype=dtype, owner="activation", storage_bytes=probe.nbytes,
                                   numel_bytes=numel_bytes, joint=joint_name, held_by="checkpoint",
                                   storage=key))
        m.estimate_bytes += numel_bytes
        if key in seen_storage:
            continue
        seen_storage.add(key)
        m.storages += 1
        m.activation_bytes += probe.nbytes
        m.checkpoint_bytes += probe.nbytes
        m.checkpoint_storages += 1
    recompute = rec.recompute
    m.recomputed_ops, m.recompute_flops, m.recompute_bytes = recompute["ops"], recompute["flops"], recompute["bytes"]
    m.notes = _notes(m, cap.params == "closure", len(cap.graphs))
    return m


def _may_checkpoint(cap: Capture) -> bool:
    """Whether the model may run ``torch.utils.checkpoint``: a captured graph has a checkpoint
    region, or dynamo split the model (a region can run outside the graphs, as Hugging Face's
    gradient checkpointing does at its graph break)."""
    return bool(cap.graph_breaks) or any(i.checkpoint_region is not None for g in cap.graphs for i in g.info.values())


def _reachable_tensors(root: Any, limit: int = 100_000) -> list[torch.Tensor]:
    """Every tensor reachable from ``root``: through pytree containers, and through the
    attributes of other objects (a ``transformers`` cache keeps its keys and values in lists on
    layer objects); each object once, at most ``limit`` objects."""
    found: list[torch.Tensor] = []
    seen: set[int] = set()
    todo = [root]
    while todo and len(seen) < limit:
        obj = todo.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (str, bytes, int, float, bool, type)):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            found.append(obj)
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo.extend(obj)
        elif hasattr(obj, "__dict__") and not callable(obj):
            todo.extend(vars(obj).values())
    return found


# ops torch.utils.checkpoint itself runs around a recomputation (detaching the saved inputs)
_BOOKKEEPING = {"detach", "alias"}


def _leaf_tensors(tree: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _count_ops(events: list[tuple[Any, ...]]) -> int:
    """Ops, not outputs: an op with several outputs recorded one event per output index."""
    return sum(1 for e in events if e[1] == 0)


def _notes(m: EagerMeasurement, closure: bool, pieces: int) -> list[str]:
    notes = ["eager: measured on real tensors with saved_tensors_hooks and one real backward (no graphs, so no "
             "peaks); its recompute columns are the forward ops torch.utils.checkpoint ran again in that backward."]
    if m.checkpoint_bytes:
        notes.append(f"eager under torch.utils.checkpoint: {m.checkpoint_bytes} bytes in {m.checkpoint_storages} "
                     "storage(s) are held by checkpoint itself (region inputs, a selective-checkpoint policy's "
                     "cache), which saved_tensors_hooks do not see; found as forward storages still alive after "
                     "the forward, and counted in saved_activation_bytes.")
    if m.float_mask_bytes:
        notes.append(f"eager CPU dropout saves float masks ({m.float_mask_bytes} bytes) where the graph's "
                     "native_dropout saves bool masks (a quarter of that): the eager and graph rows "
                     "legitimately differ there.")
    if pieces > 1:
        notes.append("eager: measured over the whole model (every graph of the capture); the graph rows "
                     "cover this graph only.")
    if closure:
        notes.append("eager (closure mode): parameters held constant and floating inputs requiring grad, "
                     "as in the capture.")
    return notes


def _tensors(cap: Capture) -> list[torch.Tensor]:
    found = [t for t in pytree.tree_leaves(cap.example_inputs) if isinstance(t, torch.Tensor)]
    return found + (list(cap.model.parameters()) if cap.model is not None else [])


def failure_reason(cap: Capture, exc: Exception) -> str:
    """Why eager autograd could not measure ``cap``'s model, for the eager row's ``error``."""
    text = " ".join(str(exc).split())
    sparse = [t.layout for t in _tensors(cap) if t.layout != torch.strided]
    if sparse or "Sparse" in text:
        what = f" (a {sparse[0]} input)" if sparse else ""
        return (f"the eager reference cannot measure sparse tensors{what}: it counts the storages autograd "
                "saves, and a sparse tensor exposes none; the graph strategies' rows are exact")
    return f"eager autograd raised {type(exc).__name__}: {text[:300]}"
