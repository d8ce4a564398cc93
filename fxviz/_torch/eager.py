"""Probes fxviz runs beside eager PyTorch: the user's model with swapped parameters, storage
identity and liveness, every aten op eager autograd executes, and module hooks that record the module
nesting while ``aot_function`` traces (dynamo records it itself)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.nn.utils.stateless import _reparametrize_module
from torch.utils._python_dispatch import TorchDispatchMode as _TorchDispatchMode

from fxviz._torch.meta import STACK_KEY


def reparametrized(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> contextlib.AbstractContextManager:
    """``model`` with its parameters and buffers swapped for ``state`` while the block runs: what
    ``torch.func.functional_call`` does for one call, kept open so that a backward that re-runs the
    forward (``torch.utils.checkpoint``) sees the same tensors as the forward did."""
    return _reparametrize_module(model, state, tie_weights=True, strict=False)


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
        stacks.append(meta.get(STACK_KEY))
        stack = dict(meta.get(STACK_KEY) or {})
        stack[str(id(module))] = (names[id(module)], type(module))
        meta[STACK_KEY] = stack

    def post(module: torch.nn.Module, args: Any, output: Any) -> None:
        if id(module) not in names or not fx_traceback.has_preserved_node_meta() or not stacks:
            return
        previous = stacks.pop()
        meta = fx_traceback.current_meta
        if previous is None:
            meta.pop(STACK_KEY, None)
        else:
            meta[STACK_KEY] = previous

    handles = [register_module_forward_pre_hook(pre), register_module_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
