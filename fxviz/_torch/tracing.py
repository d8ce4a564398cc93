"""Tracing a step now: TorchDynamo with the ``aot_eager`` or inductor backend (recording every joint
graph as its partitioner receives it, the runs of a reused graph, graph breaks and skipped frames,
with dynamo's caches and code state left as they were), ``aot_function`` over fake inputs, and
torch's chatter silenced while fxviz drives it."""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch._dynamo.backends.common import aot_autograd as _aot_autograd_backend
from torch._functorch import config as functorch_config
from torch._functorch.aot_autograd import aot_function as _aot_function
from torch._functorch.aot_autograd import make_boxed_func as _make_boxed_func

from fxviz._torch.partitioners import copy_graph_module, default_partition, min_cut_config_state, min_cut_partition


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
    # run number -> {input index: (run number, output index)}: inputs an earlier graph run returned
    links: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)
    outputs: dict[int, list[int]] = field(default_factory=dict)  # run number -> ids of what it returned
    compiler: str | None = None  # the ``compiler`` argument the partitioner got (inductor passes "inductor")
    before_joint_passes: fx.GraphModule | None = None  # inductor only: the joint graph before its rewrites
    # inductor only: the (forward, backward) min-cut returned for this joint graph during the capture,
    # copied before inductor touched them, its seconds and the caller's partitioner settings then
    # (``min_cut_config_state``); None when a memory budget was in force (min-cut solved a knapsack)
    captured_min_cut: tuple[fx.GraphModule, fx.GraphModule, float, bytes] | None = None


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
        links=dict(record.get("links") or {}),
        outputs=dict(record.get("outputs") or {}),
        compiler=record.get("compiler"),
        before_joint_passes=record.get("before_joint_passes"),
        captured_min_cut=record.get("min_cut"),
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
def fresh_dynamo_caches() -> Iterator[None]:
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


def _recording_runs(compiled: Callable, record: dict[str, Any], counter: Iterator[int],
                    produced: dict[int, tuple[int, int, Any]]) -> Callable:
    """``compiled``, noting each time dynamo runs it: (global run number, ids of its inputs), and
    which of its inputs an earlier run returned (``record["links"]``: run number -> {input index:
    (producer's run number, output index)}: a value crossing a graph break, by identity, a weak
    reference guarding against a reused id).  A graph dynamo compiled once runs again for every call
    its guards accept (one block's graph for every layer of the same shape); the ids say whose
    parameters each run received.  ``produced``: every run's outputs, shared by all graphs."""
    import weakref

    calls: list[tuple[int, list[int]]] = record.setdefault("calls", [])
    links: dict[int, dict[int, tuple[int, int]]] = record.setdefault("links", {})
    outputs: dict[int, list[int]] = record.setdefault("outputs", {})

    def run(*args: Any) -> Any:
        flat = args[0] if boxed and len(args) == 1 and isinstance(args[0], list) else args
        seq = next(counter)
        calls.append((seq, [id(a) for a in flat]))
        fed = {}
        for i, a in enumerate(flat):
            known = produced.get(id(a))
            if known is not None and known[2]() is a:
                fed[i] = (known[0], known[1])
        if fed:
            links[seq] = fed
        out = compiled(*args)
        flat_out = list(out) if isinstance(out, (list, tuple)) else [out]
        outputs[seq] = [id(o) for o in flat_out]
        for j, o in enumerate(flat_out):
            if isinstance(o, torch.Tensor):
                produced[id(o)] = (seq, j, weakref.ref(o))
        return out

    boxed = bool(getattr(compiled, "_boxed_call", False))
    functools.update_wrapper(run, compiled, updated=())
    if boxed:
        run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _inductor_backend(records: list[dict[str, Any]], user_config: bytes
                      ) -> tuple[Callable, contextlib.AbstractContextManager]:
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
    Caches are off so that every trace reaches the partitioner.  A plain min-cut's result (no
    memory budget in force) is kept with ``user_config``, the caller's functorch config before
    the capture patched it, for strategy ``min_cut`` to reuse while that config holds.
    """
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.custom_graph_pass import CustomPartitionerFn, get_custom_graph_passes

    class _RecordingPartitioner(CustomPartitionerFn):
        def __call__(self, gm: fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
            _record_partitioner_call(records[-1], gm, joint_inputs, kwargs)
            start = time.perf_counter()
            fwd, bwd = min_cut_partition(gm, joint_inputs, **kwargs)
            seconds = time.perf_counter() - start
            if functorch_config.activation_memory_budget >= 1:  # plain min-cut: strategy ``min_cut`` reuses it
                # copied now: inductor's forward compiler rewrites the graphs it is handed (view -> reshape)
                records[-1]["min_cut"] = (copy_graph_module(fwd), copy_graph_module(bwd), seconds, user_config)
            return fwd, bwd

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
def fresh_code_state() -> Iterator[None]:
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
    produced: dict[int, tuple[int, int, Any]] = {}
    patches: contextlib.AbstractContextManager = contextlib.nullcontext()
    if backend == "inductor":
        inner, patches = _inductor_backend(records, min_cut_config_state())
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
        return _recording_runs(inner(gm, example_inputs), record, runs, produced)

    # a first compile: no profile-guided dynamism from sizes torch saw in earlier processes
    # (kept on disk per code location), which would make the capture depend on history
    shapes: dict[str, Any] = {"automatic_dynamic_local_pgo": False}
    if not dynamic:
        shapes.update(automatic_dynamic_shapes=False, assume_static_by_default=True)
    before = _graph_break_count()
    first_reason = len(_break_reasons())
    with fresh_dynamo_caches(), fresh_code_state(), patches, \
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
    with fresh_dynamo_caches(), torch._dynamo.config.patch(
        automatic_dynamic_shapes=False, assume_static_by_default=True, suppress_errors=False
    ):
        result = torch.compile(step, backend=backend, dynamic=False)(*inputs)
        if result.requires_grad:  # nothing requiring grad reaches the loss: no backward to run
            result.backward()
    return result


_BACKEND_RANDOM = ("inductor_random", "inductor_randint", "inductor_seeds", "inductor_lookup_seed")


def has_backend_random(gm: fx.GraphModule) -> bool:
    """Does ``gm`` draw with inductor's own random ops (its joint pass ``replace_random_passes``
    turns ``rand``/dropout into ``prims.inductor_random`` with seeds of its own)?  Those draw other
    values than eager's ops from the same RNG state."""
    return any(n.op == "call_function" and getattr(n.target, "_opname", None) in _BACKEND_RANDOM
               and str(getattr(n.target, "namespace", "")) == "prims" for n in gm.graph.nodes)


class SeededInterpreter(fx.Interpreter):
    """``fx.Interpreter`` that runs inductor's random ops as its compiled code does: their values are a
    function of their seed (a forward's draw and a backward's recomputation from the saved seed agree).
    Their eager implementations, which tracing uses, ignore the seed and draw from the global RNG."""

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        name = getattr(target, "_opname", None)
        if name in ("inductor_random", "inductor_randint") and str(getattr(target, "namespace", "")) == "prims":
            return _seeded_draw(name, args)
        return super().call_function(target, args, kwargs)


def _seeded_draw(name: str, args: Any) -> Any:
    seed = args[1] if name == "inductor_random" else args[3]
    generator = torch.Generator(device=seed.device).manual_seed(int(seed))
    if name == "inductor_random":
        size, _, mode = args[:3]
        return getattr(torch, mode)(list(size), generator=generator, device=seed.device, dtype=torch.float32)
    low, high, size = args[:3]
    return torch.randint(low, high, list(size), generator=generator, device=seed.device)


@contextlib.contextmanager
def eager_random() -> Iterator[None]:
    """Inductor's capture with eager's random ops (``torch._inductor.config.fallback_random``, torch's
    own switch "for testing, use the same random as eager"): no random decompositions, no
    ``replace_random_passes``, so dropout draws eager's masks from the same RNG state."""
    from torch._inductor import config as inductor_config

    with inductor_config.patch(fallback_random=True):
        yield


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
    # only the loggers not at the level already: each setLevel clears the cache of every logger the process has
    # (hundreds of torch's), and these blocks nest
    target = logging.CRITICAL + 1 if silent else logging.ERROR
    changed = [(lg, lg.level) for lg in loggers if lg.level != target]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"torch\.")
        warnings.filterwarnings("ignore", module="copyreg")
        warnings.filterwarnings("ignore", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*boxed arguments.*")
        for lg, _level in changed:
            lg.setLevel(target)
        try:
            yield
        finally:
            for lg, level in changed:
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
