"""The user's real compiled step, run by fxviz: ``torch.compile`` with a real backend (inductor
generates and runs its kernels, as in the user's own training step), with every tensor the step
saves for its backward caught by ``torch.autograd.graph.saved_tensors_hooks``; and the torch
settings fxviz reads or names in advice (the activation-memory budget, inductor's layout
optimisation).

The step runs three times, each from the RNG state the caller puts back: once to compile (forward
and backward kernels), once timed, and a forward with the hooks.  Dynamo's cache entries and its
per-code-location memory are dropped afterwards (``tracing.fresh_dynamo_caches`` /
``fresh_code_state``), so a later trace or the user's own ``torch.compile`` starts as before.  On
CUDA the allocator's peaks per phase are read too (``torch.cuda.max_memory_allocated``, reset between
phases).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._inductor import config as inductor_config

from fxviz._torch.eager import storage_key
from fxviz._torch.tracing import fresh_code_state, fresh_dynamo_caches

__all__ = ["StepRun", "run_compiled_step", "layout_optimization", "LAYOUT_KNOB"]

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


def run_compiled_step(step: Callable[..., Any], make_call: MakeCall, backend: str, dynamic: bool,
                      restart: Callable[[], None], device: torch.device) -> StepRun:
    """Compile ``step`` with ``backend`` and run it (compiling), then a timed step, then a forward
    with saved-tensor hooks, ``restart()`` (the caller puts its RNG back) before each of the last two.
    ``make_call()`` returns fresh arguments and the leaves the backward accumulates into."""
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
        compiled = torch.compile(step, backend=backend, dynamic=True if dynamic else None)
        start = time.perf_counter()
        args, leaves = make_call()
        _backward(compiled(*args), leaves)
        _sync(device)
        record.compile_seconds = time.perf_counter() - start
        del args, leaves
        _timed(compiled, make_call, restart, device, record)
        restart()
        args, leaves = make_call()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = compiled(*args)
        # no backward for this run: inductor's backward writes into saved buffers it owns (a ReLU's
        # output becomes its gradient in place), and the caller reads the values the forward saved
        record.saved = list(packed.values())
        del loss, args, leaves
    return record


def _timed(compiled: Callable[..., Any], make_call: MakeCall, restart: Callable[[], None], device: torch.device,
           record: StepRun) -> None:
    """One compiled step without hooks (they cost time and keep the saved tensors alive): wall time
    and, on CUDA, the allocator's peak per phase."""
    restart()
    args, leaves = make_call()
    if device.type == "cuda":
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
