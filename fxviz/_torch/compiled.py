"""The user's real compiled step, run by fxviz: ``torch.compile`` with a real backend (inductor
generates and runs its kernels, as in the user's own training step), with every tensor the step
saves for its backward caught by ``torch.autograd.graph.saved_tensors_hooks``; and the torch
settings fxviz reads or names in advice (the activation-memory budget, inductor's layout
optimisation).

The step runs up to four times, each from the RNG state the caller puts back and with the gradients
dropped before it (as ``optimizer.zero_grad()`` does): once to compile (forward and backward
kernels), once timed, on CPU once under the profiler, and a forward with the hooks.  Dynamo's cache
entries and its per-code-location memory are dropped afterwards (``tracing.fresh_dynamo_caches`` /
``fresh_code_state``), so a later trace or the user's own ``torch.compile`` starts as before.

Each phase's peak, bytes above the state before the step (parameters and inputs allocated): on CPU
from the profiler's allocation events in time order (``profiling``; the profiler's per-op
``self_cpu_memory_usage`` would book a whole compiled graph's allocations at its start and show the
memory after each graph instead of its peak); on CUDA ``torch.cuda.max_memory_allocated``, reset
between phases (the caching allocator counts blocks rounded up to 512 B).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._inductor import config as inductor_config

from fxviz._torch.eager import storage_key
from fxviz._torch.profiling import Allocation, MemoryTrace, allocations_by_pointer, mark, profiled
from fxviz._torch.tracing import fresh_code_state, fresh_dynamo_caches

__all__ = ["StepRun", "run_compiled_step", "layout_optimization", "LAYOUT_KNOB", "MarkedRun", "run_marked_step"]

LAYOUT_KNOB = "torch._inductor.config.layout_optimization"
"""Inductor's switch for changing convolution layouts (channels-last on CPU with mkldnn, and on GPU
for conv-heavy graphs): with it on, a convolution weight saved for the backward is saved as a
channels-last copy.  Measured on AlexNet, batch 1, CPU (torch 2.13): on, the step keeps 11,814,400 B
(five conv weights and the input copied, 10,476,288 B); off, 1,338,112 B, min-cut's own figure."""


def step_config_state() -> bytes:
    """The settings a compiled step runs under (functorch's config, the partitioner's; inductor's, its
    layouts and fusions), as torch saves them: the same bytes then and now mean a step measured then
    is the step that would run now (``Trace.measure`` caches by them)."""
    from torch._functorch import config as functorch_config

    return functorch_config.save_config() + inductor_config.save_config()


def layout_optimization() -> bool:
    """Whether inductor may change convolution layouts (``LAYOUT_KNOB``) in this session."""
    return bool(inductor_config.layout_optimization)


@dataclass
class StepRun:
    """What one measured run of the compiled step showed."""

    saved: list[torch.Tensor] = field(default_factory=list)  # one per distinct view packed, in save order
    saves: int = 0  # pack-hook calls
    compile_seconds: float = 0.0  # the first step: compiling forward and backward, and running them
    forward_seconds: float = 0.0  # the measured step's forward (and loss)
    backward_seconds: float | None = None  # None: nothing required grad, no backward ran
    peaks: dict[str, int] = field(default_factory=dict)  # CUDA only: allocator bytes per phase
    # bytes above the state before the step (parameters and inputs allocated, no gradients): each
    # phase's highest point and what was held when the backward began; how they were read
    forward_peak: int | None = None
    backward_peak: int | None = None
    after_forward: int | None = None
    peak_method: str = ""


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _backward(loss: Any, leaves: Sequence[torch.Tensor]) -> bool:
    """Backward into ``leaves`` only (fxviz's copies): a function that closes over the user's
    parameters must not accumulate into their ``.grad``."""
    if not isinstance(loss, torch.Tensor) or not loss.requires_grad or not leaves:
        return False
    loss.backward(inputs=list(leaves))
    return True


def _cuda_peaks(device: torch.device, phase: str, peaks: dict[str, int]) -> None:
    if device.type != "cuda":
        return
    peaks[f"{phase}_peak_bytes"] = int(torch.cuda.max_memory_allocated(device))
    peaks[f"after_{phase}_bytes"] = int(torch.cuda.memory_allocated(device))
    torch.cuda.reset_peak_memory_stats(device)


MakeCall = Callable[[], tuple[Sequence[Any], Sequence[torch.Tensor]]]


def _applied(compiled: Callable[..., Any], outside: Callable[[Any], Any] | None) -> Callable[..., Any]:
    """The compiled callable with ``outside`` (the loss, applied outside the compiled region) after it."""
    if outside is None:
        return compiled
    return lambda *args: outside(compiled(*args))


def run_compiled_step(step: Callable[..., Any], make_call: MakeCall, backend: str, dynamic: bool,
                      restart: Callable[[], None], device: torch.device,
                      outside: Callable[[Any], Any] | None = None) -> StepRun:
    """Compile ``step`` with ``backend`` and run it (compiling), then a timed step, then a forward
    with saved-tensor hooks, ``restart()`` (the caller puts its RNG back) before each of the last two.
    ``make_call()`` returns fresh arguments and the leaves the backward accumulates into; ``outside``
    makes the loss from the compiled region's result where the user's step does it outside."""
    import torch._dynamo

    record = StepRun()
    packed: dict[tuple[Any, ...], torch.Tensor] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        record.saves += 1
        sig = (storage_key(t), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        packed.setdefault(sig, t)
        return t

    with fresh_dynamo_caches(), fresh_code_state(), torch._dynamo.config.patch(
            suppress_errors=False, automatic_dynamic_local_pgo=False):
        compiled = _applied(torch.compile(step, backend=backend, dynamic=True if dynamic else None), outside)
        start = time.perf_counter()
        args, leaves = make_call()
        _backward(compiled(*args), leaves)
        _sync(device)
        record.compile_seconds = time.perf_counter() - start
        del args
        _no_grads(leaves)
        del leaves
        _timed(compiled, make_call, restart, device, record)
        if device.type == "cpu":
            _profiled(compiled, make_call, restart, record)
        restart()
        args, leaves = make_call()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = compiled(*args)
        # no backward for this run: inductor's backward writes into saved buffers it owns (a ReLU's
        # output becomes its gradient in place), and the caller reads the values the forward saved
        record.saved = list(packed.values())
        del loss, args, leaves
    return record


def _no_grads(leaves: Sequence[torch.Tensor]) -> None:
    """The leaves' gradients dropped, as ``optimizer.zero_grad()`` does: the next backward allocates
    them afresh (accumulating into kept ones would hide their bytes from its peak)."""
    for t in leaves:
        t.grad = None


def _timed(compiled: Callable[..., Any], make_call: MakeCall, restart: Callable[[], None], device: torch.device,
           record: StepRun) -> None:
    """One compiled step without hooks (they cost time and keep the saved tensors alive): wall time
    and, on CUDA, the allocator's peak per phase (``max_memory_allocated``, reset between phases),
    above what was allocated before the step."""
    restart()
    args, leaves = make_call()
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        record.peaks["before_forward_bytes"] = int(torch.cuda.memory_allocated(device))
    start = time.perf_counter()
    loss = compiled(*args)
    _sync(device)
    record.forward_seconds = time.perf_counter() - start
    _cuda_peaks(device, "forward", record.peaks)
    start = time.perf_counter()
    if _backward(loss, leaves):
        _sync(device)
        record.backward_seconds = time.perf_counter() - start
        _cuda_peaks(device, "backward", record.peaks)
    if device.type == "cuda":
        base = record.peaks["before_forward_bytes"]
        record.forward_peak = record.peaks["forward_peak_bytes"] - base
        record.after_forward = record.peaks["after_forward_bytes"] - base
        if "backward_peak_bytes" in record.peaks:
            record.backward_peak = record.peaks["backward_peak_bytes"] - base
        record.peak_method = ("torch.cuda.max_memory_allocated per phase, above memory_allocated() before the step "
                              "(the caching allocator rounds every block up to a multiple of 512 B)")
    _no_grads(leaves)


def _profiled(compiled: Callable[..., Any], make_call: MakeCall, restart: Callable[[], None],
              record: StepRun) -> None:
    """One compiled CPU step under the profiler: each phase's highest point from the allocator's
    events in time order (``profiling.profiled``), above the state before the step."""
    restart()
    args, leaves = make_call()
    gc.collect()
    with profiled() as trace:
        with mark("fxviz::forward"):
            loss = compiled(*args)
        with mark("fxviz::backward"):
            ran = _backward(loss, leaves)
        del loss
    forward = trace.phase("fxviz::forward")
    backward = trace.phase("fxviz::backward") if ran else None
    if forward is not None:
        record.forward_peak, record.after_forward = forward
    if backward is not None:
        record.backward_peak = backward[0]
    record.peak_method = ("the profiler's allocation events in time order (torch.profiler, profile_memory=True), "
                          "above the state before the step")
    _no_grads(leaves)


@dataclass
class MarkedRun:
    """One real step whose graphs ran as FX graphs inside named profiler ranges: every allocation
    and free with its pointer (``profiling.allocations_by_pointer``), and the ranges:
    ``fxviz::graph::K::fw|bw`` graph K's code, ``fxviz::dead::R::J`` run R's output J lost its last
    reference, ``fxviz::forward`` / ``fxviz::backward`` the phases."""

    trace: MemoryTrace
    allocations: list[Allocation]


def _marking_backend(counter: dict[str, int], armed: list[bool]) -> Callable[..., Any]:
    """aot_eager with every graph's code run inside a named range, and a death mark on every output."""
    import weakref

    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func

    from fxviz._torch.partitioners import min_cut_partition

    def dead(r: int, j: int) -> None:
        if armed[0]:
            with mark(f"fxviz::dead::{r}::{j}"):
                pass

    def backend(gm: Any, example_inputs: Any) -> Any:
        k = counter["graphs"]
        counter["graphs"] += 1

        def compiler(phase: str) -> Callable[..., Any]:
            def compile_graph(graph: Any, _: Any) -> Any:
                run = make_boxed_func(graph.forward)

                def marked(args: Any) -> Any:
                    with mark(f"fxviz::graph::{k}::{phase}"):
                        return run(args)

                marked._boxed_call = True  # type: ignore[attr-defined]
                return marked
            return compile_graph

        compiled = aot_autograd(fw_compiler=compiler("fw"), bw_compiler=compiler("bw"),
                                partition_fn=min_cut_partition)(gm, example_inputs)

        def call(*args: Any) -> Any:
            outs = compiled(*args)
            r = counter["runs"]
            counter["runs"] += 1
            for j, o in enumerate(outs if isinstance(outs, (list, tuple)) else [outs]):
                if isinstance(o, torch.Tensor):
                    weakref.finalize(o, dead, r, j)
            return outs

        return call

    return backend


def run_marked_step(step: Callable[..., Any], make_call: MakeCall, restart: Callable[[], None],
                    outside: Callable[[Any], Any] | None = None) -> MarkedRun:
    """Compile ``step`` with the marking backend, run it once (compiling), then once profiled
    (``outside``: the loss from the compiled region's result, as ``run_compiled_step``)."""
    import torch._dynamo

    counter = {"graphs": 0, "runs": 0}
    armed = [False]
    with fresh_dynamo_caches(), fresh_code_state(), torch._dynamo.config.patch(
            suppress_errors=False, automatic_dynamic_local_pgo=False, automatic_dynamic_shapes=False,
            assume_static_by_default=True):
        compiled = _applied(torch.compile(step, backend=_marking_backend(counter, armed)), outside)
        args, leaves = make_call()
        _backward(compiled(*args), leaves)
        _no_grads(leaves)
        del args, leaves
        restart()
        args, leaves = make_call()
        gc.collect()
        counter["runs"] = 0
        armed[0] = True
        try:
            with profiled() as trace:
                with mark("fxviz::forward"):
                    loss = compiled(*args)
                with mark("fxviz::backward"):
                    _backward(loss, leaves)
                del loss
        finally:
            armed[0] = False
        _no_grads(leaves)
    return MarkedRun(trace, allocations_by_pointer(trace))
