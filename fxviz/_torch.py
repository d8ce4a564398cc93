"""Every torch-internal API and node-meta key fxviz relies on, in one place.

torch's ``_functorch`` / ``_dynamo`` internals change between releases.  Nothing else in fxviz
imports a private torch module or reads ``node.meta``: when torch moves something, this file (and
``tests/test_torch_internals.py``, which names each API) is all that changes.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

# --- private imports: the complete list ------------------------------------------------------
from torch._dynamo.backends.common import aot_autograd as _aot_autograd_backend
from torch._functorch import config as functorch_config
from torch._functorch import partitioners as _partitioners
from torch._functorch._aot_autograd import descriptors as _desc
from torch._functorch.aot_autograd import aot_function as _aot_function
from torch._functorch.aot_autograd import make_boxed_func as _make_boxed_func
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx._lazy_graph_module import _LazyGraphModule
from torch.nn.utils.stateless import _reparametrize_module
from torch.utils import _pytree as pytree
from torch.utils._dtype_abbrs import dtype_abbrs as _dtype_abbrs
from torch.utils._python_dispatch import TorchDispatchMode as _TorchDispatchMode

__all__ = [
    "SUPPORTED_TORCH",
    "RawJoint",
    "capture_with_dynamo",
    "unimplemented_count",
    "skipped_frames",
    "CAPTURE_BACKENDS",
    "capture_with_aot_function",
    "run_compiled_backward",
    "quiet_torch",
    "copy_graph_module",
    "default_partition",
    "min_cut_partition",
    "extract_fwd_bwd_modules",
    "reparametrized",
    "pytree",
    "functorch_config",
    "budget_config",
    "torch_size_of",
    "meta_val",
    "partitioner_tag",
    "seq_nr",
    "module_stack",
    "fwd_module_stack",
    "stack_trace",
    "checkpoint_policy",
    "checkpoint_region",
    "node_desc",
    "output_descs",
    "describe_input",
    "describe_output",
    "is_fake",
    "op_argument",
    "FakeTensorMode",
    "REQUIRED_INTERNALS",
    "storage_key",
    "OpRecorder",
    "StorageProbe",
    "is_random",
    "is_tangent",
    "must_be_in_forward",
    "must_be_in_backward",
    "is_collective",
    "cse_like_min_cut",
    "LogGraphBuilder",
    "DESCRIPTOR_CLASSES",
]

SUPPORTED_TORCH = ">=2.9,<2.15"

# Names checked by tests/test_torch_internals.py so a torch upgrade fails loudly, naming the API.
REQUIRED_INTERNALS: tuple[str, ...] = (
    "torch.utils._python_dispatch.TorchDispatchMode",
    "torch.fx._lazy_graph_module._LazyGraphModule",
    "torch.nn.utils.stateless._reparametrize_module",
    "torch._functorch.partitioners.default_partition",
    "torch._functorch.partitioners.min_cut_rematerialization_partition",
    "torch._functorch.partitioners._size_of",
    "torch._functorch.partitioners._extract_fwd_bwd_modules",
    "torch._functorch.partitioners._is_tangent",
    "torch._functorch.partitioners._must_be_in_forward",
    "torch._functorch.partitioners._must_be_in_backward",
    "torch._functorch.compile_utils.fx_graph_cse",
    "torch._functorch.config.cse",
    "torch._functorch.config.activation_memory_budget",
    "torch._functorch.config.activation_memory_budget_solver",
    "torch._functorch._aot_autograd.descriptors.PlainAOTInput",
    "torch._functorch._aot_autograd.descriptors.ParamAOTInput",
    "torch._functorch._aot_autograd.descriptors.BufferAOTInput",
    "torch._functorch._aot_autograd.descriptors.TangentAOTInput",
    "torch._functorch._aot_autograd.descriptors.GradAOTOutput",
    "torch._functorch._aot_autograd.descriptors.PlainAOTOutput",
    "torch._functorch._aot_autograd.descriptors.InputMutationAOTOutput",
    "torch._functorch.aot_autograd.aot_function",
    "torch._dynamo.backends.common.aot_autograd",
    "torch._dynamo.utils.counters",
    "torch._dynamo.utils.graph_break_reasons",
    "torch._dynamo.convert_frame.input_codes",
    "torch._dynamo.convert_frame.Tracker",
    "torch._dynamo.eval_frame.reset_code",
    "torch._C._dynamo.eval_frame._debug_get_cache_entry_list",
    "torch._inductor.compile_fx.compile_fx",
    "torch._inductor.custom_graph_pass.CustomPartitionerFn",
    "torch._inductor.config.custom_partitioner_fn",
    "torch._inductor.config.joint_custom_pre_pass",
    "torch._inductor.config.fx_graph_cache",
    "torch._functorch.config.enable_autograd_cache",
    "torch._dynamo.pgo._CODE_STATE",
    "torch._dynamo.pgo._INIT_CODE_STATE",
    "torch._dynamo.config.automatic_dynamic_local_pgo",
    "torch.utils._dtype_abbrs.dtype_abbrs",
    "torch._functorch._aot_autograd.descriptors.SavedForBackwardsAOTOutput",
    "torch.fx.experimental.symbolic_shapes.ShapeEnv",
)

# --- node meta keys ---------------------------------------------------------------------------
_VAL = "val"
_TAG = "partitioner_tag"
_SEQ = "seq_nr"
_STACK = "nn_module_stack"
_FWD_STACK = "fwd_nn_module_stack"
_TRACE = "stack_trace"
_DESC = "desc"
_RECOMPUTE = "recompute"  # a torch.utils.checkpoint.CheckpointPolicy, set inside checkpoint regions
_AC_GRAPH_ID = "ac_graph_id"  # which checkpoint call (region) an op was traced in


def meta_val(node: fx.Node) -> Any:
    """The fake tensor (or SymInt, or tuple of them) torch recorded for ``node``."""
    return node.meta.get(_VAL)


def partitioner_tag(node: fx.Node) -> str | None:
    """``is_forward`` / ``is_backward`` / ``must_be_in_forward`` / ``must_be_in_backward``."""
    return node.meta.get(_TAG)


def seq_nr(node: fx.Node) -> int | None:
    value = node.meta.get(_SEQ)
    return int(value) if value is not None else None


def _stack(node: fx.Node, key: str) -> list[tuple[str, str, Any]]:
    """``[(key, path, module_type), ...]`` outermost first."""
    raw = node.meta.get(key) or {}
    out = []
    for k, v in raw.items():
        path, typ = (v[0], v[1]) if isinstance(v, tuple) else (str(v), None)
        # dynamo keys the n-th call of one module "<id>@n" (torch/_dynamo/variables/nn_module.py
        # record_nn_module_stack): the module is still the one with that id
        out.append((str(k).split("@")[0], str(path), typ))
    return out


def module_stack(node: fx.Node) -> list[tuple[str, str, Any]]:
    """The module nesting dynamo recorded for a forward op."""
    return _stack(node, _STACK)


def fwd_module_stack(node: fx.Node) -> list[tuple[str, str, Any]]:
    """For a backward op: the module nesting of the forward op it differentiates."""
    return _stack(node, _FWD_STACK)


def stack_trace(node: fx.Node) -> str | None:
    return node.meta.get(_TRACE)


def checkpoint_policy(node: fx.Node) -> str | None:
    """The checkpoint policy torch tagged ``node`` with (``must_save``, ``prefer_recompute``...),
    as traced (the partitioner later adds ``must_save`` tags of its own on its private copy)."""
    policy = node.meta.get(_RECOMPUTE)
    if policy is None:
        return None
    return str(getattr(policy, "name", policy)).lower()


def checkpoint_region(node: fx.Node) -> int | None:
    """Which ``torch.utils.checkpoint`` call ``node`` ran in (torch's ``ac_graph_id``), or None."""
    value = node.meta.get(_AC_GRAPH_ID)
    return int(value) if value is not None else None


def node_desc(node: fx.Node) -> Any:
    """The AOT descriptor of a placeholder (``PlainAOTInput(idx=0)``, ``TangentAOTInput``...)."""
    return node.meta.get(_DESC)


def output_descs(output_node: fx.Node) -> list[Any]:
    descs = output_node.meta.get(_DESC)
    return list(descs) if descs is not None else []


def is_fake(value: Any) -> bool:
    return isinstance(value, FakeTensor)


# --- descriptors, in fxviz's words ---------------------------------------------------------------
@dataclass(frozen=True)
class InputKind:
    """What a joint-graph placeholder is: ``kind`` in plain/param/buffer/tangent/rng/token/other."""

    kind: str
    index: int | None = None  # PlainAOTInput index into the flat example inputs
    target: str | None = None  # qualified name for Param/BufferAOTInput
    tangent_of: Any = None  # the output descriptor a tangent belongs to


def describe_input(desc: Any) -> InputKind:
    if isinstance(desc, _desc.ParamAOTInput):
        return InputKind("param", target=desc.target)
    if isinstance(desc, _desc.BufferAOTInput):
        return InputKind("buffer", target=desc.target)
    if isinstance(desc, _desc.PlainAOTInput):
        return InputKind("plain", index=desc.idx)
    if isinstance(desc, _desc.TangentAOTInput):
        return InputKind("tangent", tangent_of=desc.output)
    if isinstance(desc, (_desc.ViewBaseAOTInput, _desc.SyntheticBaseAOTInput)):
        return describe_input(desc.base_of)
    name = type(desc).__name__
    if "Philox" in name:
        return InputKind("rng")
    if "Token" in name:
        return InputKind("token")
    return InputKind("other")


@dataclass(frozen=True)
class OutputKind:
    """What a joint-graph output is: ``kind`` in user/mutation/grad/other."""

    kind: str
    index: int | None = None
    of: InputKind | None = None  # the input a gradient or a mutation belongs to


def describe_output(desc: Any) -> OutputKind:
    if isinstance(desc, _desc.PlainAOTOutput):
        return OutputKind("user", index=desc.idx)
    if isinstance(desc, _desc.InputMutationAOTOutput):
        return OutputKind("mutation", of=describe_input(desc.mutated_input))
    if isinstance(desc, _desc.GradAOTOutput):
        return OutputKind("grad", of=describe_input(desc.grad_of))
    return OutputKind("other")


# --- partitioners ---------------------------------------------------------------------------------
default_partition = _partitioners.default_partition
min_cut_partition = _partitioners.min_cut_rematerialization_partition


def extract_fwd_bwd_modules(joint: fx.GraphModule, saved_values: list[fx.Node], saved_sym_nodes: list[fx.Node],
                            *, num_fwd_outputs: int) -> tuple[fx.GraphModule, fx.GraphModule]:
    """torch's own helper that cuts a joint graph into forward and backward graphs, given what
    the forward saves: partitions built by fxviz are shaped exactly as torch's."""
    return _partitioners._extract_fwd_bwd_modules(joint, saved_values, saved_sym_nodes,
                                                  num_fwd_outputs=num_fwd_outputs)


def is_random(node: fx.Node) -> bool:
    """A seeded random op (dropout, rand, bernoulli...): recomputing it redraws its values."""
    return _is_random(node)


def _is_random(node: fx.Node) -> bool:
    tags = getattr(node.target, "tags", ())
    return torch.Tag.nondeterministic_seeded in tags


def is_tangent(node: fx.Node) -> bool:
    """A joint-graph placeholder that is an incoming gradient (torch's own test: its name)."""
    return bool(_partitioners._is_tangent(node))


def must_be_in_forward(node: fx.Node) -> bool:
    """torch's extraction refuses to put this node in the backward (a mutation of the forward,
    or tagged ``must_be_in_forward``): it can never be recomputed."""
    return bool(_partitioners._must_be_in_forward(node))


def must_be_in_backward(node: fx.Node) -> bool:
    """torch's extraction puts this node only in the backward (tagged, or a backward mutation)."""
    return bool(_partitioners._must_be_in_backward(node))


def is_collective(node: fx.Node) -> bool:
    """A functional collective (``_c10d_functional``): torch never recomputes one, not even under
    an activation-memory budget (``ban_recomputation_if_allowed``)."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and target.namespace == "_c10d_functional"


def cse_like_min_cut(joint: fx.GraphModule) -> None:
    """What min-cut does to the joint graph before it partitions (in place): drop dead code and,
    when ``torch._functorch.config.cse`` is on (the default), merge common subexpressions (two
    layers' identical causal masks become one), so a partition built from the result is compared
    with min-cut on the same graph."""
    from torch._functorch.compile_utils import fx_graph_cse

    joint.graph.eliminate_dead_code()
    if functorch_config.cse:
        joint.graph = fx_graph_cse(joint.graph)


def torch_size_of(node: fx.Node) -> int:
    """torch's own per-node byte estimate (``numel * itemsize``, blind to aliasing)."""
    try:
        return int(_partitioners._size_of(node))
    except Exception:  # nodes without a tensor value
        return 0


@contextlib.contextmanager
def budget_config(budget: float, solver: str) -> Iterator[None]:
    """Set the activation-memory budget and its solver for one partitioner call only."""
    with functorch_config.patch(
        activation_memory_budget=float(budget), activation_memory_budget_solver=solver
    ):
        yield


# --- capture --------------------------------------------------------------------------------------
@dataclass
class RawJoint:
    """One graph exactly as AOTAutograd handed it to the partitioner (a pristine copy).

    ``example_inputs`` are the real tensors behind ``PlainAOTInput(idx)`` (dynamo's graph inputs:
    parameters, user inputs, activations crossing a graph break); ``input_sources`` are dynamo's
    names for them.  ``joint`` is ``None`` for a graph that needed no backward (inference only).
    """

    joint: fx.GraphModule | None
    forward_only: fx.GraphModule | None
    num_fwd_outputs: int
    static_lifetime_input_indices: list[int] | None
    joint_inputs: Any
    example_inputs: list[Any]
    input_sources: list[str | None] = field(default_factory=list)
    calls: list[tuple[int, list[int]]] = field(default_factory=list)  # (run number, input ids) per run
    compiler: str | None = None  # the ``compiler`` argument the partitioner got (inductor passes "inductor")
    before_joint_passes: fx.GraphModule | None = None  # inductor only: the joint graph before its rewrites


def reparametrized(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> contextlib.AbstractContextManager:
    """``model`` with its parameters and buffers swapped for ``state`` while the block runs: what
    ``torch.func.functional_call`` does for one call, kept open so that a backward that re-runs the
    forward (``torch.utils.checkpoint``) sees the same tensors as the forward did."""
    return _reparametrize_module(model, state, tie_weights=True, strict=False)


def copy_graph_module(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy a partitioner may mutate freely.

    The graph and every node's meta dict are copied (``Graph.__deepcopy__`` copies meta
    shallowly, so fake tensors are shared, not duplicated); tensor attributes (``get_attr``
    constants, which are the user's real parameters in closure mode) are shared by reference, so
    copying never doubles the weights and constants keep their identity.
    """
    # a lazy GraphModule writes its Python code only when something calls or prints it: the
    # partitioners never do (0.2 s per copy on a 12-layer GPT, 2.3 s on a 3342-node graph)
    copied = _LazyGraphModule(gm, copy.deepcopy(gm.graph))
    copied.meta = dict(getattr(gm, "meta", {}))
    return copied


def _boxed_nop(gm: fx.GraphModule, example_inputs: Any) -> Callable:
    return _make_boxed_func(gm.forward)


def _record_partitioner_call(record: dict[str, Any], joint: fx.GraphModule, joint_inputs: Any,
                             kwargs: dict[str, Any]) -> None:
    record["joint"] = copy_graph_module(joint)
    record["joint_inputs"] = joint_inputs
    record["num_fwd_outputs"] = kwargs.get("num_fwd_outputs")
    record["static_lifetime_input_indices"] = list(kwargs.get("static_lifetime_input_indices") or [])
    record["compiler"] = kwargs.get("compiler")


def _recording_partition_fn(record: dict[str, Any]) -> Callable:
    def partition_fn(joint: fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
        _record_partitioner_call(record, joint, joint_inputs, kwargs)
        return default_partition(joint, joint_inputs, **kwargs)

    return partition_fn


def _recording_inference_compiler(record: dict[str, Any]) -> Callable:
    def compiler(gm: fx.GraphModule, example_inputs: Any) -> Callable:
        record["forward_only"] = copy_graph_module(gm)
        return _make_boxed_func(gm.forward)

    return compiler


def _raw_from_record(record: dict[str, Any]) -> RawJoint:
    return RawJoint(
        joint=record.get("joint"),
        forward_only=record.get("forward_only"),
        num_fwd_outputs=int(record.get("num_fwd_outputs") or 0),
        static_lifetime_input_indices=record.get("static_lifetime_input_indices"),
        joint_inputs=record.get("joint_inputs"),
        example_inputs=list(record.get("example_inputs") or []),
        input_sources=list(record.get("input_sources") or []),
        calls=list(record.get("calls") or []),
        compiler=record.get("compiler"),
        before_joint_passes=record.get("before_joint_passes"),
    )


def unimplemented_count() -> dict[str, int]:
    """How often dynamo gave up on something, by its full message (a snapshot for
    :func:`skipped_frames`)."""
    from torch._dynamo.utils import counters

    return dict(counters["unimplemented"])


_SKIPPED = re.compile(r"frame skipped: (\S+) \((.*) line (\d+)\)")


def skipped_frames(before: dict[str, int]) -> list[str]:
    """Python frames dynamo skipped since ``before`` and ran as plain eager Python (a graph break
    inside a for/while loop skips the whole frame, torch/_dynamo/symbolic_convert.py
    raise_loop_graph_break): ``forward (model.py:20)``, each once."""
    import os

    found: list[str] = []
    for message, n in unimplemented_count().items():
        if n <= before.get(message, 0):
            continue
        for m in _SKIPPED.finditer(message):
            frame = f"{m.group(1)} ({os.path.basename(m.group(2))}:{m.group(3)})"
            if frame not in found:
                found.append(frame)
    return found


def _graph_break_count() -> dict[str, int]:
    from torch._dynamo.utils import counters

    return dict(counters["graph_break"])


def _break_reasons() -> list[Any]:
    from torch._dynamo.utils import graph_break_reasons

    return graph_break_reasons


def _distinct_breaks(reasons: Sequence[Any], counted: list[str]) -> list[str]:
    """One line per place the program was split, ``reason (file.py:line)``.

    Dynamo records a break once in every frame it passes through on the way to the op (fxviz's
    wrapper calling the model, the model calling a helper), so ``counters["graph_break"]`` gave
    one ``torch._dynamo.graph_break()`` as two to four breaks; the innermost user frame of each
    ``GraphCompileReason`` names the place itself.  Reasons dynamo counted without a compile
    reason (a frame skipped whole) are kept as counted.
    """
    out: dict[tuple[str, Any], str] = {}
    for r in reasons:
        first = _first_line(getattr(r, "reason", ""))
        stack = list(getattr(r, "user_stack", None) or [])
        where = (stack[-1].filename, stack[-1].lineno) if stack else None
        label = f"{first} ({where[0].rsplit('/', 1)[-1]}:{where[1]})" if where else first
        out.setdefault((first, where), label)
    seen = {first for first, _ in out}
    for first in counted:
        if first not in seen:
            seen.add(first)
            out.setdefault((first, None), first)
    return list(out.values())


@contextlib.contextmanager
def _fresh_dynamo_caches() -> Iterator[None]:
    """Afterwards, forget everything dynamo stored on the code objects it saw during the block.

    fxviz compiles its wrapper (and, at graph breaks, the user's own frames) with its own
    backend.  Left behind, those cache entries would pile up until dynamo's recompile limit made a
    later trace silently run eagerly, and would keep fxviz's backend attached to the user's code.
    Dynamo also marks a frame it could not compile (a sparse input it cannot wrap, a frame that
    produced no graph) "skip from now on": that mark adds no cache entry, so every code object
    dynamo was handed (``convert_frame.input_codes.add`` is called for each) is reset, not only
    those whose entry count grew.  Without this one sparse-input trace made every later trace of
    the session capture only the loss.
    """
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    from torch._dynamo import convert_frame
    from torch._dynamo.eval_frame import reset_code

    def entries() -> dict[int, tuple[Any, int]]:
        out = {}
        for ref in list(convert_frame.input_codes.seen) + list(convert_frame.output_codes.seen):
            code = ref()
            if code is not None:
                out[id(code)] = (code, len(_debug_get_cache_entry_list(code)))
        return out

    tracker = convert_frame.input_codes
    handed: dict[int, Any] = {}
    outer = tracker.__dict__.get("add")  # a recorder of an enclosing block, if nested
    track = tracker.add

    def add(code: Any) -> None:
        handed[id(code)] = code
        track(code)

    before = {k: n for k, (_, n) in entries().items()}
    tracker.add = add  # type: ignore[method-assign,assignment]  # an instance attribute, removed below
    try:
        yield
    finally:
        if outer is not None:
            tracker.add = outer  # type: ignore[method-assign]
        else:
            del tracker.add
        for key, (code, n) in entries().items():
            if n > before.get(key, 0):
                handed[key] = code
        for code in handed.values():
            reset_code(code)


def _recording_runs(compiled: Callable, record: dict[str, Any], counter: Iterator[int]) -> Callable:
    """``compiled``, noting each time dynamo runs it: (global run number, ids of its inputs).  A
    graph dynamo compiled once runs again for every call its guards accept (one block's graph
    for every layer of the same shape); the ids say whose parameters each run received."""
    calls: list[tuple[int, list[int]]] = record.setdefault("calls", [])

    def run(*args: Any) -> Any:
        flat = args[0] if boxed and len(args) == 1 and isinstance(args[0], list) else args
        calls.append((next(counter), [id(a) for a in flat]))
        return compiled(*args)

    boxed = bool(getattr(compiled, "_boxed_call", False))
    functools.update_wrapper(run, compiled, updated=())
    if boxed:
        run._boxed_call = True  # type: ignore[attr-defined]
    return run


CAPTURE_BACKENDS: tuple[str, ...] = ("aot_eager", "inductor")
"""torch.compile backends whose joint graph fxviz records: ``aot_eager`` (AOTAutograd's own
decompositions, the graph as traced) and ``inductor`` (torch.compile's default: inductor's
decomposition table and joint-graph passes, min-cut with ``compiler="inductor"``)."""


def _inductor_backend(records: list[dict[str, Any]]) -> tuple[Callable, contextlib.AbstractContextManager]:
    """A dynamo backend that is inductor's own ``compile_fx`` up to and including partitioning, and
    a context (config patches) to run it in.

    Nothing of inductor's logic is copied: ``compile_fx`` traces with its decomposition table and
    calls its own ``partition_fn``, which runs ``joint_graph_passes`` and then, because
    ``config.custom_partitioner_fn`` is set, calls our recorder with exactly the arguments it would
    give ``min_cut_rematerialization_partition`` (``compiler="inductor"``, the static-lifetime
    indices); the recorder copies the graph and calls min-cut with them.  ``joint_custom_pre_pass``
    (run first inside ``joint_graph_passes``) keeps the graph as AOTAutograd traced it (what a
    ``TORCH_TRACE`` log prints as ``aot_joint_graph``).  ``inner_compile`` is replaced by one that
    runs the partitioned FX graphs as they are, so no kernel is generated and no C++ compiler runs.
    Caches are off so that every trace reaches the partitioner.
    """
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.custom_graph_pass import CustomPartitionerFn, get_custom_graph_passes

    class _RecordingPartitioner(CustomPartitionerFn):
        def __call__(self, gm: fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
            _record_partitioner_call(records[-1], gm, joint_inputs, kwargs)
            return min_cut_partition(gm, joint_inputs, **kwargs)

        def uuid(self) -> Any:
            return None  # never cached

    def before_passes(graph: fx.Graph) -> None:
        owner = graph.owning_module
        if records and owner is not None and "before_joint_passes" not in records[-1]:
            records[-1]["before_joint_passes"] = copy_graph_module(owner)

    def inner_compile(gm: fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        if kwargs.get("is_inference") and records:
            records[-1]["forward_only"] = copy_graph_module(gm)
        return _make_boxed_func(gm.forward)

    def backend(gm: fx.GraphModule, example_inputs: list[Any]) -> Any:
        return compile_fx(gm, example_inputs, inner_compile=inner_compile)

    user_pre = list(get_custom_graph_passes(inductor_config.joint_custom_pre_pass))
    patches = contextlib.ExitStack()
    patches.enter_context(inductor_config.patch(
        custom_partitioner_fn=_RecordingPartitioner(), joint_custom_pre_pass=[before_passes] + user_pre,
        fx_graph_cache=False))
    patches.enter_context(functorch_config.patch(enable_autograd_cache=False))
    return backend, patches


@contextlib.contextmanager
def _fresh_code_state() -> Iterator[None]:
    """Compile as a fresh process would: without the sizes dynamo remembers per code location
    (its in-memory "automatic dynamic" code state, shared by every trace of fxviz's own step
    function).  Under ``dynamic=True`` that memory decides which sizes share a symbol and which
    Python floats become graph inputs, so a capture would depend on earlier ones.  The caller's
    state is put back afterwards."""
    from torch._dynamo import pgo

    saved = (pgo._CODE_STATE, pgo._INIT_CODE_STATE)
    pgo._CODE_STATE, pgo._INIT_CODE_STATE = None, None
    try:
        yield
    finally:
        pgo._CODE_STATE, pgo._INIT_CODE_STATE = saved


def capture_with_dynamo(step: Callable, inputs: Sequence[Any], name_of: Callable[[Any], str | None],
                        backend: str = "aot_eager", dynamic: bool = False
                        ) -> tuple[list[RawJoint], list[str], Any]:
    """Run ``step(*inputs)`` under TorchDynamo with ``backend``'s AOTAutograd path, recording every
    joint graph as that backend's partitioner receives it.  ``dynamic`` is torch.compile's flag
    (symbolic sizes).  Returns (graphs in execution order, graph-break reasons, step's result).
    """
    import torch._dynamo

    records: list[dict[str, Any]] = []
    runs = itertools.count()
    patches: contextlib.AbstractContextManager = contextlib.nullcontext()
    if backend == "inductor":
        inner, patches = _inductor_backend(records)
    else:
        def inner(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable:
            return _aot_autograd_backend(
                fw_compiler=_boxed_nop,
                bw_compiler=_boxed_nop,
                inference_compiler=_recording_inference_compiler(records[-1]),
                partition_fn=_recording_partition_fn(records[-1]),
            )(gm, example_inputs)

    def recording_backend(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable:
        record: dict[str, Any] = {"example_inputs": list(example_inputs)}
        sources = []
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                arg = n.meta.get("grapharg")
                source = getattr(arg, "source", None)
                name = getattr(source, "name", None) if source is not None else None
                # torch 2.9: Source.name() is a method (2.10+: a property holding the string)
                sources.append(name() if callable(name) else name)
        record["input_sources"] = sources
        records.append(record)
        return _recording_runs(inner(gm, example_inputs), record, runs)

    # a first compile: no profile-guided dynamism from sizes torch saw in earlier processes
    # (kept on disk per code location), which would make the capture depend on history
    shapes: dict[str, Any] = {"automatic_dynamic_local_pgo": False}
    if not dynamic:
        shapes.update(automatic_dynamic_shapes=False, assume_static_by_default=True)
    before = _graph_break_count()
    first_reason = len(_break_reasons())
    with _fresh_dynamo_caches(), _fresh_code_state(), patches, \
            torch._dynamo.config.patch(suppress_errors=False, **shapes):
        compiled = torch.compile(step, backend=recording_backend, dynamic=dynamic)
        result = compiled(*inputs)
    after = _graph_break_count()
    counted = [_first_line(k) for k, v in after.items() if v > before.get(k, 0)]
    reasons = _distinct_breaks(_break_reasons()[first_reason:], counted)
    # a compile dynamo restarted (a new attempt, e.g. after inductor specialized a dynamic size)
    # leaves a record that never reached a partitioner: the retry has its own
    reached = [r for r in records if "joint" in r or "forward_only" in r]
    return [_raw_from_record(r) for r in reached], reasons, result


def run_compiled_backward(step: Callable, inputs: Sequence[Any], partition_fn: Callable | None = None) -> Any:
    """Run ``step(*inputs)`` through torch.compile + AOTAutograd (no inductor) and call
    ``.backward()`` on its scalar result: the same graphs fxviz captured, executed by torch's own
    runtime, used where several graphs (graph breaks) must be chained by dynamo's glue code."""
    import torch._dynamo

    backend = _aot_autograd_backend(fw_compiler=_boxed_nop, bw_compiler=_boxed_nop,
                                    partition_fn=partition_fn or default_partition)
    with _fresh_dynamo_caches(), torch._dynamo.config.patch(
        automatic_dynamic_shapes=False, assume_static_by_default=True, suppress_errors=False
    ):
        result = torch.compile(step, backend=backend, dynamic=False)(*inputs)
        if result.requires_grad:  # nothing requiring grad reaches the loss: no backward to run
            result.backward()
    return result


@contextlib.contextmanager
def quiet_torch(silent: bool = False) -> Iterator[None]:
    """Silence torch's own chatter while fxviz drives it (deprecation warnings from internals,
    dynamo's graph-break log lines: fxviz reports graph breaks itself).  Restored afterwards.
    ``silent``: its error lines too (an attempt whose failure fxviz handles and reports itself)."""
    import logging
    import warnings

    # torch._higher_order_ops: "Detected that context_fn is passed to torch.utils.checkpoint under
    # torch.compile" (selective checkpointing), said about fxviz's own compile, not the user's
    loggers = [logging.getLogger(n) for n in ("torch._dynamo", "torch._functorch", "torch.fx", "torch._inductor",
                                              "torch._higher_order_ops", "torch._subclasses")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"torch\.")
        warnings.filterwarnings("ignore", module="copyreg")
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*boxed arguments.*")
        for lg in loggers:
            lg.setLevel(logging.CRITICAL + 1 if silent else logging.ERROR)
        try:
            yield
        finally:
            for lg, level in zip(loggers, levels):
                lg.setLevel(level)


def _first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()
    return str(text)


def capture_with_aot_function(step: Callable, fake_inputs: Sequence[Any]) -> RawJoint:
    """Trace ``step`` with ``aot_function`` over fake inputs; real tensors ``step`` closes over
    (the model's parameters) become ``get_attr`` constants, exactly as in fxviz's founding story.
    """
    record: dict[str, Any] = {"example_inputs": list(fake_inputs)}
    compiled = _aot_function(
        step,
        fw_compiler=_boxed_nop,
        bw_compiler=_boxed_nop,
        inference_compiler=_recording_inference_compiler(record),
        partition_fn=_recording_partition_fn(record),
    )
    compiled(*fake_inputs)
    return _raw_from_record(record)


def module_path_from_stack_entry(path: str) -> str:
    """Turn dynamo's ``L['self'].features[0]`` / ``L['self']._modules['features']`` into
    ``features.0`` (used only when the module object cannot be matched by identity)."""
    path = re.sub(r"^[LG]\[['\"][^'\"]+['\"]\]\.?", "", path)
    # a class with its own __getattr__ (diffusers' ModelMixin) makes dynamo spell the submodule
    # dict lookup out: L['fn'].__dict__['_modules']['blocks']
    path = re.sub(r"(^|\.)__dict__\[['\"](_modules|_parameters|_buffers)['\"]\]", r"\1\2", path)
    path = re.sub(r"(^|\.)__dict__\.", r"\1", path)
    path = re.sub(r"\._modules\[['\"]([^'\"]+)['\"]\]", r".\1", "." + path)
    path = re.sub(r"\[['\"]?([^\]'\"]+)['\"]?\]", r".\1", path)
    return path.strip(".")


# --- memory (issue 3): storage identity, the aten ops eager autograd runs ----------------------------
def storage_key(t: torch.Tensor) -> int:
    """Identity of the storage under ``t``, fake or real: views and aliases of one storage share
    it (fake tensors keep the aliasing of the traced program, so this works on ``meta["val"]``)."""
    return int(t.untyped_storage()._cdata)


class OpRecorder(_TorchDispatchMode):
    """Calls ``on_op(func, args, out)`` after every aten op that runs below autograd (what eager
    autograd actually executes: in-place ops, CPU dropout's ``bernoulli_``...); with
    ``with_kwargs``, ``on_op(func, args, out, kwargs)``."""

    def __init__(self, on_op: Callable[..., None], with_kwargs: bool = False) -> None:
        super().__init__()
        self.on_op = on_op
        self.with_kwargs = with_kwargs

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if self.with_kwargs:
            self.on_op(func, args, out, kwargs or {})
        else:
            self.on_op(func, args, out)
        return out


class StorageProbe:
    """Tells later whether a tensor's storage is still alive, without keeping it alive (torch's
    ``StorageWeakRef``): how fxviz finds what eager holds outside ``saved_tensors_hooks``."""

    def __init__(self, t: torch.Tensor) -> None:
        from torch.multiprocessing.reductions import StorageWeakRef

        self._ref = StorageWeakRef(t.untyped_storage())
        self.nbytes = int(t.untyped_storage().nbytes())

    def alive(self) -> bool:
        return not self._ref.expired()


# --- module paths for the aot and closure routes ------------------------------------------------
@contextlib.contextmanager
def record_module_stack(model: torch.nn.Module | None) -> Iterator[None]:
    """While AOTAutograd traces ``model`` without dynamo, tell it which module is running.

    ``aot_function`` copies ``torch.fx.traceback.current_meta`` into every node it creates (it
    traces under ``preserve_node_meta``); dynamo normally fills in ``nn_module_stack``.  Global
    forward hooks, installed only for the duration of the trace, fill it in the same format
    (``{id(module): (qualified name, type)}``) so ``roles`` finds module paths on every route.
    """
    import torch.fx.traceback as fx_traceback
    from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

    if model is None:
        yield
        return
    names = {id(m): name for name, m in model.named_modules() if name}
    stacks: list[Any] = []

    def pre(module: torch.nn.Module, args: Any) -> None:
        if id(module) not in names or not fx_traceback.has_preserved_node_meta():
            return
        meta = fx_traceback.current_meta
        stacks.append(meta.get(_STACK))
        stack = dict(meta.get(_STACK) or {})
        stack[str(id(module))] = (names[id(module)], type(module))
        meta[_STACK] = stack

    def post(module: torch.nn.Module, args: Any, output: Any) -> None:
        if id(module) not in names or not fx_traceback.has_preserved_node_meta() or not stacks:
            return
        previous = stacks.pop()
        meta = fx_traceback.current_meta
        if previous is None:
            meta.pop(_STACK, None)
        else:
            meta[_STACK] = previous

    handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


# --- doctor (issue 5): named arguments of an aten op -----------------------------------------------
def op_argument(node: fx.Node, name: str) -> Any:
    """The value of ``node``'s argument called ``name`` in its op's schema (e.g. the
    ``output_mask`` of ``convolution_backward``: which gradients the op computes), or None."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return None
    for i, arg in enumerate(schema.arguments):
        if arg.name == name:
            if name in node.kwargs:
                return node.kwargs[name]
            return node.args[i] if i < len(node.args) else None
    return None


# --- logs of real runs (issue 13): rebuilding graphs from print_readable text ----------------------
DESCRIPTOR_CLASSES: dict[str, type] = {
    name: obj for name, obj in vars(_desc).items()
    if isinstance(obj, type) and (name.endswith("AOTInput") or name.endswith("AOTOutput"))
}
"""The AOT descriptor classes by name: a log's ``# PlainAOTInput(idx=0)`` comments are rebuilt
from these (by a small safe evaluator, never ``eval``)."""

_DTYPES: dict[str, torch.dtype] = {abbr: dt for dt, abbr in _dtype_abbrs.items()}


class LogGraphBuilder:
    """The torch side of rebuilding a logged graph: one fake-tensor mode and shape environment
    shared by the joint, forward and backward graphs of one compile, so a symbolic size such as
    ``s77`` is one symbol in all three, and node metadata written under the keys torch reads.
    """

    def __init__(self, hints: dict[str, int] | None = None) -> None:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        self.shape_env = ShapeEnv()
        self.mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=True)
        self.hints = dict(hints or {})
        self._symbols: dict[str, Any] = {}

    def dtype(self, abbr: str) -> torch.dtype | None:
        return _DTYPES.get(abbr)

    def symint(self, expr: str) -> Any:
        """A SymInt for a size expression such as ``s77`` or ``2*s77 + 1`` (an int when constant)."""
        import sympy

        expr = expr.strip()
        if re.fullmatch(r"-?\d+", expr):
            return int(expr)
        names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", expr))
        syms = {n: self._symbol(n) for n in names}
        parsed = sympy.sympify(expr, locals=syms)
        hint = None
        try:
            hint = int(parsed.subs({syms[n]: self.hints[n] for n in names}))
        except (KeyError, TypeError, ValueError):
            hint = None
        return self.shape_env.create_symintnode(parsed, hint=hint)

    def _symbol(self, name: str) -> Any:
        """One sympy symbol per size name, registered with the shape environment as torch does
        for a dynamic dimension (sizes 0 and 1 are specialised, so the range starts at 2; the
        example value from the log's ``create_symbol`` record is its hint)."""
        import sympy

        if name not in self._symbols:
            sym = sympy.Symbol(name, integer=True, positive=True)
            env = self.shape_env
            try:
                env.var_to_range[sym] = env._default_value_range()
                if name in self.hints:
                    env.backed_var_to_val[sym] = sympy.Integer(self.hints[name])
            except AttributeError:  # another torch: symbols stay unconstrained, values come from the log
                pass
            self._symbols[name] = sym
        return self._symbols[name]

    def tensor(self, sizes: list[str], strides: list[str], dtype: torch.dtype, device: str) -> Any:
        """A fake tensor with exactly these sizes and strides (nothing allocated)."""
        with self.mode:
            return torch.empty_strided([self.symint(s) for s in sizes], [self.symint(s) for s in strides],
                                       dtype=dtype, device=torch.device(device))

    def run_op(self, target: Any, args: Any, kwargs: Any) -> Any:
        """``target(*args, **kwargs)`` on fake values (what torch itself would have recorded).
        The caller silences torch's shape-guard chatter once for a whole graph (``quiet_torch``)."""
        with self.mode:
            return target(*args, **kwargs)

    @staticmethod
    def set_val(node: fx.Node, value: Any) -> None:
        node.meta[_VAL] = value

    @staticmethod
    def set_desc(node: fx.Node, desc: Any) -> None:
        node.meta[_DESC] = desc

    @staticmethod
    def set_stack_trace(node: fx.Node, trace: str) -> None:
        node.meta[_TRACE] = trace

    @staticmethod
    def set_tag(node: fx.Node, tag: str) -> None:
        node.meta[_TAG] = tag

    @staticmethod
    def set_module(node: fx.Node, path: str, forward: bool = True) -> None:
        node.meta[_STACK if forward else _FWD_STACK] = {path: (path, None)}
