"""The user's training step, as fxviz runs it for real (``Trace.measure()``, the eager tape): on a deep
copy of the model and fresh copies of the inputs every run, the loss the trace chose, the backward
into fxviz's copies only.  The user's model, ``.grad``, RNG and inputs are left as they were (the
callers run under ``core.state.preserved``)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.core.errors import FxvizError
from fxviz.core.state import private_copy
from fxviz.sources.graphs import Capture
from fxviz.sources.roles import STATE_ROLES

__all__ = ["StepCall", "refuse", "model_copy", "function_state", "step_device"]


def refuse(cap: Capture, who: str) -> None:
    """An ``FxvizError`` where the step cannot run here: a log (no model), the meta device."""
    if cap.fn is None:
        raise FxvizError(f"{who} runs the model's compiled training step, and a log of a run has no model",
                         "trace the model itself: fxviz.trace(model, *inputs, backend='inductor').measure(); "
                         "a log's own forward and backward graphs are what its run saved (strategy 'logged')")
    tensors = [t for t in pytree.tree_leaves(cap.example_inputs) if isinstance(t, torch.Tensor)]
    tensors += list(cap.model.parameters()) if cap.model is not None else []
    if any(t.device.type == "meta" for t in tensors):
        raise FxvizError(f"{who} runs the compiled step on real tensors, and this model or input is on the "
                         "meta device", "build the model on a real device (cpu, cuda) to measure it")


def model_copy(cap: Capture, who: str) -> nn.Module | None:
    """A deep copy of the model (None for a traced function), or an ``FxvizError`` saying why not."""
    try:
        return copy.deepcopy(cap.model) if cap.model is not None else None
    except Exception as exc:
        raise FxvizError(f"{who} compiles a copy of the model, and copy.deepcopy raised "
                         f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}",
                         "make the model deep-copyable (no open files or locks as attributes)") from exc


class StepCall:
    """fxviz's copy of the model and inputs, made afresh for every run of the compiled step."""

    def __init__(self, cap: Capture, model: nn.Module | None) -> None:
        self.cap, self.model = cap, model
        self.closure = cap.params == "closure"
        if model is not None and self.closure:  # parameters are constants there: no gradient
            for p in model.parameters():
                p.requires_grad_(False)
        self.inputs: list[torch.Tensor] = []  # the latest run's input leaves
        self.buffers: dict[str, torch.Tensor] = {}  # the model's buffers as the latest run began

    def __call__(self, *args: Any) -> Any:
        """What ``torch.compile`` compiles: the model, and the loss too unless the user's step applies
        it outside the compiled model (``Capture.loss_outside``: then ``outside`` does)."""
        fn = self.model if self.model is not None else self.cap.fn
        assert fn is not None and self.cap.reduce is not None
        return fn(*args) if self.cap.loss_outside else self.cap.reduce(fn(*args))

    @property
    def outside(self) -> Callable[[Any], Any] | None:
        """The loss applied to the compiled region's result, where the user's step applies it outside."""
        return self.cap.reduce if self.cap.loss_outside else None

    def make_call(self) -> tuple[Sequence[Any], Sequence[torch.Tensor]]:
        args = private_copy(tuple(self.cap.example_inputs))
        if self.closure:
            args = pytree.tree_map(lambda t: t.detach().requires_grad_(True)
                                   if isinstance(t, torch.Tensor) and t.is_floating_point() else t, args)
        self.inputs = [t for t in pytree.tree_leaves(args) if isinstance(t, torch.Tensor)]
        leaves = [t for t in self.inputs if t.requires_grad and t.is_leaf]
        if self.model is not None:
            self.buffers = {n: b.detach().clone() for n, b in self.model.named_buffers()}
            leaves += [p for p in self.model.parameters() if p.requires_grad]
        return args, leaves


def function_state(cap: Capture) -> list[tuple[str, torch.Tensor, str]]:
    """A traced function's module state (no model to copy): (name, the real tensor, its joint
    placeholder) for every graph input that is neither a user input nor made at run time.  The step
    runs on these tensors as they are; ``preserved`` puts their values back, and the backward never
    accumulates into them (it goes into fxviz's copies of the inputs only)."""
    if cap.model is not None:
        return []
    user = {id(t) for t in pytree.tree_leaves(cap.example_inputs)}
    found: dict[int, tuple[str, torch.Tensor, str]] = {}
    for g in cap.graphs:
        for name, value in g.placeholder_values.items():
            info = g.info.get(name)
            if (info is not None and info.role in (*STATE_ROLES, "primal") and isinstance(value, torch.Tensor)
                    and id(value) not in user and not _torch.is_fake(value) and value.device.type != "meta"):
                qual = (info.qualname or name).replace("._parameters.", ".").replace("._buffers.", ".")
                found.setdefault(id(value), (qual, value, name))
    return list(found.values())


def step_device(cap: Capture) -> torch.device:
    """Where the step runs (whose allocator peaks to read): the model's device, else the inputs'."""
    tensors: list[torch.Tensor] = list(cap.model.parameters()) if cap.model is not None else []
    tensors += [t for t in pytree.tree_leaves(cap.example_inputs) if isinstance(t, torch.Tensor)]
    return tensors[0].device if tensors else torch.device("cpu")
