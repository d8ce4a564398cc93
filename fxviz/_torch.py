"""Every torch-internal API and node-meta key fxviz relies on, in one place.

torch's ``_functorch`` / ``_dynamo`` internals change between releases.  Nothing else in fxviz
imports a private torch module or reads ``node.meta``: when torch moves something, this file (and
``tests/test_torch_internals.py``, which names each API) is all that changes.
"""

from __future__ import annotations

import contextlib
import copy
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

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
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode as _TorchDispatchMode

__all__ = [
    "SUPPORTED_TORCH",
    "RawJoint",
    "capture_with_dynamo",
    "capture_with_aot_function",
    "run_compiled_backward",
    "quiet_torch",
    "copy_graph_module",
    "default_partition",
    "min_cut_partition",
    "extract_fwd_bwd_modules",
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
]

SUPPORTED_TORCH = ">=2.9,<2.15"

# Names checked by tests/test_torch_internals.py so a torch upgrade fails loudly, naming the API.
REQUIRED_INTERNALS: tuple[str, ...] = (
    "torch.utils._python_dispatch.TorchDispatchMode",
    "torch._functorch.partitioners.default_partition",
    "torch._functorch.partitioners.min_cut_rematerialization_partition",
    "torch._functorch.partitioners._size_of",
    "torch._functorch.partitioners._extract_fwd_bwd_modules",
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
)

# --- node meta keys ---------------------------------------------------------------------------
_VAL = "val"
_TAG = "partitioner_tag"
_SEQ = "seq_nr"
_STACK = "nn_module_stack"
_FWD_STACK = "fwd_nn_module_stack"
_TRACE = "stack_trace"
_DESC = "desc"


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
        out.append((str(k), str(path), typ))
    return out


def module_stack(node: fx.Node) -> list[tuple[str, str, Any]]:
    """The module nesting dynamo recorded for a forward op."""
    return _stack(node, _STACK)


def fwd_module_stack(node: fx.Node) -> list[tuple[str, str, Any]]:
    """For a backward op: the module nesting of the forward op it differentiates."""
    return _stack(node, _FWD_STACK)


def stack_trace(node: fx.Node) -> str | None:
    return node.meta.get(_TRACE)


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


def copy_graph_module(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy a partitioner may mutate freely.

    The graph and every node's meta dict are copied (``Graph.__deepcopy__`` copies meta
    shallowly, so fake tensors are shared, not duplicated); tensor attributes (``get_attr``
    constants, which are the user's real parameters in closure mode) are shared by reference, so
    copying never doubles the weights and constants keep their identity.
    """
    copied = fx.GraphModule(gm, copy.deepcopy(gm.graph))
    copied.meta = dict(getattr(gm, "meta", {}))
    return copied


def _boxed_nop(gm: fx.GraphModule, example_inputs: Any) -> Callable:
    return _make_boxed_func(gm.forward)


def _recording_partition_fn(record: dict[str, Any]) -> Callable:
    def partition_fn(joint: fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
        record["joint"] = copy_graph_module(joint)
        record["joint_inputs"] = joint_inputs
        record["num_fwd_outputs"] = kwargs.get("num_fwd_outputs")
        record["static_lifetime_input_indices"] = list(kwargs.get("static_lifetime_input_indices") or [])
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
    )


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
            tracker.add = outer  # type: ignore[method-assign,assignment]
        else:
            del tracker.add
        for key, (code, n) in entries().items():
            if n > before.get(key, 0):
                handed[key] = code
        for code in handed.values():
            reset_code(code)


def capture_with_dynamo(step: Callable, inputs: Sequence[Any], name_of: Callable[[Any], str | None]
                        ) -> tuple[list[RawJoint], list[str], Any]:
    """Run ``step(*inputs)`` under TorchDynamo with an AOTAutograd backend that records every
    joint graph.  Returns (graphs in execution order, graph-break reasons, step's result).
    """
    import torch._dynamo

    records: list[dict[str, Any]] = []

    def backend(gm: fx.GraphModule, example_inputs: list[Any]) -> Callable:
        record: dict[str, Any] = {"example_inputs": list(example_inputs)}
        sources = []
        for n in gm.graph.nodes:
            if n.op == "placeholder":
                arg = n.meta.get("grapharg")
                source = getattr(arg, "source", None)
                sources.append(source.name if source is not None and hasattr(source, "name") else None)
        record["input_sources"] = sources
        records.append(record)
        inner = _aot_autograd_backend(
            fw_compiler=_boxed_nop,
            bw_compiler=_boxed_nop,
            inference_compiler=_recording_inference_compiler(record),
            partition_fn=_recording_partition_fn(record),
        )
        return inner(gm, example_inputs)

    before = _graph_break_count()
    first_reason = len(_break_reasons())
    with _fresh_dynamo_caches(), torch._dynamo.config.patch(
        automatic_dynamic_shapes=False, assume_static_by_default=True, suppress_errors=False
    ):
        compiled = torch.compile(step, backend=backend, dynamic=False)
        result = compiled(*inputs)
    after = _graph_break_count()
    counted = [_first_line(k) for k, v in after.items() if v > before.get(k, 0)]
    reasons = _distinct_breaks(_break_reasons()[first_reason:], counted)
    return [_raw_from_record(r) for r in records], reasons, result


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
def quiet_torch() -> Iterator[None]:
    """Silence torch's own chatter while fxviz drives it (deprecation warnings from internals,
    dynamo's graph-break log lines: fxviz reports graph breaks itself).  Restored afterwards."""
    import logging
    import warnings

    loggers = [logging.getLogger(n) for n in ("torch._dynamo", "torch._functorch", "torch.fx",
                                                 "torch._subclasses")]
    levels = [lg.level for lg in loggers]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"torch\.")
        warnings.filterwarnings("ignore", module="copyreg")
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*boxed arguments.*")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
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
    autograd actually executes: in-place ops, CPU dropout's ``bernoulli_``...)."""

    def __init__(self, on_op: Callable[[Any, Any, Any], None]) -> None:
        super().__init__()
        self.on_op = on_op

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        self.on_op(func, args, out)
        return out


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
