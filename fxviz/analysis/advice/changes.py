"""The changes an advice can make to a training step, as code a user pastes: torch's
``activation_memory_budget``, ``torch.utils.checkpoint`` around named submodules, and a
selective-checkpoint policy for ``create_selective_checkpoint_contexts``.

A change is its code: ``apply`` runs that very code on a deep copy of the model, so what fxviz
traces after applying it is what the pasted code does (the user's model is never touched).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fxviz import _torch

if TYPE_CHECKING:  # pragma: no cover
    import torch.nn as nn

__all__ = ["Change", "budget_change", "checkpoint_change", "repeated_blocks", "span_name", "MATMUL_OPS"]

MATMUL_OPS: tuple[str, ...] = ("mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_dot_product_flash_attention",
                               "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention")
"""The ops a selective-checkpoint policy saves (aten names): the expensive ones; everything else
(pointwise, norms, softmax) is recomputed."""

_WRAP = '''import torch.utils.checkpoint


def checkpointed(module, context_fn=None):
    """Run module's forward under torch.utils.checkpoint (non-reentrant)."""
    forward = module.forward
    extra = {} if context_fn is None else {"context_fn": context_fn}

    def checkpointed_forward(*args, **kwargs):
        return torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False, **extra,
                                                 **kwargs)

    module.forward = checkpointed_forward
'''

_POLICY = '''

import functools

SAVE = {{
{ops}
}}


def save_matmuls(ctx, op, *args, **kwargs):
    """Keep the matmuls' outputs, recompute the rest (pointwise ops, norms, softmax)."""
    name = getattr(getattr(op, "overloadpacket", op), "__name__", "")
    if name in SAVE:
        return torch.utils.checkpoint.CheckpointPolicy.MUST_SAVE
    return torch.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE


policy = functools.partial(torch.utils.checkpoint.create_selective_checkpoint_contexts,
                           save_matmuls)
'''


def _save_set() -> str:
    """The policy's ops, one sorted line each: the same code on every run (a set's repr is not)."""
    return "\n".join(f"    {op!r}," for op in sorted(MATMUL_OPS))


@dataclass(frozen=True)
class Change:
    """One change to the step: ``kind`` (``budget``, ``checkpoint``, ``selective``), its ``code``
    (Python run with the model bound to ``model``), the torch ``config`` values it sets, and for a
    checkpoint the wrapped ``modules``."""

    kind: str
    name: str
    code: str
    config: dict[str, Any] = field(default_factory=dict)
    modules: tuple[str, ...] = ()
    budget: float | None = None

    def apply(self, model: nn.Module) -> nn.Module:
        """A deep copy of ``model`` with the change made by running :attr:`code` on it; ``model`` is
        left as it was.  Config values are not set here (see :attr:`config`)."""
        out = copy.deepcopy(model)
        if self.modules:
            exec(compile(self.code, f"<fxviz advice: {self.name}>", "exec"), {"model": out})
        return out


def budget_change(budget: float) -> Change:
    """torch.compile's min-cut as a knapsack under ``activation_memory_budget=budget``."""

    return Change("budget", f"activation_memory_budget={budget:g}", _torch.budget_setting_code(budget),
                  {_torch.BUDGET_SETTING: budget}, budget=budget)


def span_name(prefix: str, indices: Sequence[int]) -> str:
    """``model.layers.0-5`` for consecutive indices, ``model.layers.0,2`` otherwise."""
    idx = list(indices)
    if len(idx) > 1 and idx == list(range(idx[0], idx[-1] + 1)):
        return f"{prefix}.{idx[0]}-{idx[-1]}"
    return f"{prefix}.{','.join(str(i) for i in idx)}"


def checkpoint_change(prefix: str, indices: Sequence[int], selective: bool) -> Change:
    """Wrap ``{prefix}.{i}`` for each of ``indices`` in ``torch.utils.checkpoint`` (``selective``:
    with the policy that saves matmuls)."""
    idx = list(indices)
    loop = f"range({idx[0]}, {idx[-1] + 1})" if idx == list(range(idx[0], idx[-1] + 1)) else repr(idx)
    code = _WRAP + (_POLICY.format(ops=_save_set()) if selective else "")
    arg = ", context_fn=policy" if selective else ""
    code += f"\n\nfor i in {loop}:\n    checkpointed(model.get_submodule(f\"{prefix}.{{i}}\"){arg})\n"
    what = "selective checkpoint (save matmuls)" if selective else "checkpoint"
    return Change("selective" if selective else "checkpoint", f"{what} {span_name(prefix, idx)}", code,
                  modules=tuple(f"{prefix}.{i}" for i in idx))


def repeated_blocks(model: nn.Module) -> tuple[str, int] | None:
    """The model's stack of identical layers: the ``ModuleList``/``Sequential`` path with the most
    children of one class (at least two), and how many; None when there is none."""
    import torch.nn as nn

    best: tuple[str, int] | None = None
    for name, m in model.named_modules():
        if not name or not isinstance(m, (nn.ModuleList, nn.Sequential)):
            continue
        if not all(part.isidentifier() for part in name.split(".")):  # it goes into code that runs: names only
            continue
        children = list(m.children())
        if len(children) < 2 or len({type(c) for c in children}) != 1:
            continue
        if any(not k.isdigit() for k, _ in m.named_children()):
            continue
        if best is None or len(children) > best[1]:
            best = (name, len(children))
    return best
