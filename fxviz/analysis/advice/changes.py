"""The changes an advice can make to a training step, as code a user pastes: torch's
``activation_memory_budget``, activation checkpointing of named layers (a Hugging Face model's own knob,
or ``torch.utils.checkpoint`` around each layer), a selective-checkpoint policy for
``create_selective_checkpoint_contexts``, torch's activation offloading.

A change is its code: ``apply`` runs that very code on a deep copy of the model (torch's config put
back afterwards), so what fxviz traces after applying it is what the pasted code does; the settings
the code sets are also its ``config``, set for the trace of the change and restored.  The user's
model and session are never touched.

Checkpointed code runs twice, and the second run must not repeat what the first did to the model's
state: a layer that updates a KV cache (transformers' ``DynamicCache`` with ``use_cache`` at its
default) updates it again in the recompute; eager attention then fails on a mask of the old length,
and selective checkpointing fails to find the recomputed ``slice`` among the ops it stored ("invocation
index ... not found in storage": it replays by op index per overload).  So the code turns the cache off
(``model.config.use_cache = False`` for transformers, as its own knob does in training; fxviz's wrapper
drops a layer's cache arguments, as transformers' ``GradientCheckpointingLayer`` does).
"""

from __future__ import annotations

import copy
import inspect
import sys
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fxviz import _torch

if TYPE_CHECKING:  # pragma: no cover
    import torch.nn as nn

__all__ = ["Change", "budget_change", "checkpoint_change", "offload_change", "repeated_blocks", "span_name",
           "hf_checkpointing", "MATMUL_OPS", "CACHE_ARGUMENTS", "SIDE_EFFECTS_WHY"]

MATMUL_OPS: tuple[str, ...] = ("mm", "addmm", "bmm", "baddbmm", "convolution", "_scaled_dot_product_flash_attention",
                               "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
                               "_scaled_dot_product_cudnn_attention")
"""The ops a selective-checkpoint policy saves (aten names): the expensive ones (attention on every
device, the CPU's flash kernel included); everything else (pointwise, norms, softmax) is recomputed."""

CACHE_ARGUMENTS: tuple[str, ...] = ("cache", "past_key_value", "past_key_values", "layer_past")
"""A layer's arguments that carry a cache it updates (transformers' names): checkpointing drops them."""

SIDE_EFFECTS_WHY = ("torch.compile keeps a checkpointed layer in its graph only where it may apply the layer's\n"
                    "Python side effects once, in the forward (transformers' attention sets a context variable);\n"
                    "without this it breaks the graph there and runs the layer outside it. The setting is\n"
                    "global: a checkpointed function whose side effect must happen again in the recompute (a\n"
                    "counter) no longer repeats it.")
"""The comment above the side-effect setting in an option's code."""

_WRAP = '''def checkpointed(module, context_fn=None):
    """Run module's forward under torch.utils.checkpoint (non-reentrant)."""
    forward = module.forward
    extra = {{}} if context_fn is None else {{"context_fn": context_fn}}

    def checkpointed_forward(*args, **kwargs):{cache}
        return torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False, **extra,
                                                 **kwargs)

    module.forward = checkpointed_forward'''

_CACHE_LINES = '''
        # the recompute would update the cache the forward updated: the layer runs without one
        for name in {names!r}:
            if kwargs.get(name) is not None:
                kwargs[name] = None
        if kwargs.get("use_cache"):
            kwargs["use_cache"] = False'''

_POLICY = '''SAVE = {{
{ops}
}}


def save_matmuls(ctx, op, *args, **kwargs):
    """Keep the matmuls' outputs, recompute the rest (pointwise ops, norms, softmax)."""
    name = getattr(getattr(op, "overloadpacket", op), "__name__", "")
    if name in SAVE:
        return torch.utils.checkpoint.CheckpointPolicy.MUST_SAVE
    return torch.utils.checkpoint.CheckpointPolicy.PREFER_RECOMPUTE


policy = functools.partial(torch.utils.checkpoint.create_selective_checkpoint_contexts,
                           save_matmuls)'''


def _save_set() -> str:
    """The policy's ops, one sorted line each: the same code on every run (a set's repr is not)."""
    return "\n".join(f"    {op!r}," for op in sorted(MATMUL_OPS))


@dataclass(frozen=True)
class Change:
    """One change to the step: ``kind`` (``budget``, ``checkpoint``, ``selective``, ``offload``), its
    ``code`` (Python run with the model bound to ``model``), the torch ``config`` values it sets, and
    for a checkpoint the checkpointed ``modules``."""

    kind: str
    name: str
    code: str
    config: dict[str, Any] = field(default_factory=dict)
    modules: tuple[str, ...] = ()
    budget: float | None = None

    def apply(self, model: nn.Module) -> nn.Module:
        """A deep copy of ``model`` with the change made by running :attr:`code` on it; ``model`` is
        left as it was, and so is torch's config (what the code sets there is :attr:`config`)."""
        out = copy.deepcopy(model)
        if self.modules:
            with _torch.config_restored():
                exec(compile(self.code, f"<fxviz advice: {self.name}>", "exec"), {"model": out})
        return out

    def settings(self) -> AbstractContextManager[None]:
        """torch's config as :attr:`config` says, restored on exit (what a trace of the change runs under)."""
        return _torch.settings_patched(self.config)


def budget_change(budget: float) -> Change:
    """torch.compile's min-cut as a knapsack under ``activation_memory_budget=budget``."""

    return Change("budget", f"activation_memory_budget={budget:g}", _torch.budget_setting_code(budget),
                  {_torch.BUDGET_SETTING: budget}, budget=budget)


def offload_change() -> Change:
    """torch's activation offloading of every saved activation its pass can move (an accelerator's
    step: ``_torch.offload_code``)."""
    return Change("offload", "offload saved activations to the host", _torch.offload_code(),
                  {_torch.OFFLOAD_SETTING: True})


def span_name(prefix: str, indices: Sequence[int]) -> str:
    """``model.layers.0-5`` for consecutive indices, ``model.layers.0,2`` otherwise."""
    idx = list(indices)
    if len(idx) > 1 and idx == list(range(idx[0], idx[-1] + 1)):
        return f"{prefix}.{idx[0]}-{idx[-1]}"
    return f"{prefix}.{','.join(str(i) for i in idx)}"


def checkpoint_change(prefix: str, indices: Sequence[int], selective: bool, model: nn.Module | None = None,
                      side_effects: bool | None = None) -> Change:
    """Checkpoint ``{prefix}.{i}`` for each of ``indices`` (``selective``: with the policy that saves
    matmuls): a transformers model whose layers are ``GradientCheckpointingLayer`` with its own knob
    (:func:`hf_checkpointing`), any other model with fxviz's wrapper around each layer, which drops the
    cache arguments the layer takes.  ``side_effects``: also set dynamo's side-effect setting (default:
    for a transformers model; ``_torch.SIDE_EFFECTS_SETTING``), in :attr:`Change.config` too."""
    idx = list(indices)
    what = "selective checkpoint (save matmuls)" if selective else "checkpoint"
    if side_effects is None:
        side_effects = model is not None and _is_transformers(model)
    imports, blocks = [], []
    flag_import, flag = _torch.side_effects_code(SIDE_EFFECTS_WHY) if side_effects else ("", "")
    if flag:
        imports.append(flag_import)
        blocks.append(flag)
    if selective:
        imports += ["import functools", "import torch.utils.checkpoint"]
        blocks.append(_POLICY.format(ops=_save_set()))
    method = hf_checkpointing(model, prefix) if model is not None else None
    if model is not None and method is not None:
        blocks.append(_hf_code(model, prefix, idx, selective, method))
    else:
        imports.append("import torch.utils.checkpoint")
        names = _cache_arguments(model, prefix) if model is not None else ()
        blocks.append(_WRAP.format(cache=_CACHE_LINES.format(names=names) if names else ""))
        loop = f"range({idx[0]}, {idx[-1] + 1})" if idx == list(range(idx[0], idx[-1] + 1)) else repr(idx)
        arg = ", context_fn=policy" if selective else ""
        blocks.append(f"for i in {loop}:\n    checkpointed(model.get_submodule(f\"{prefix}.{{i}}\"){arg})")
    code = "\n".join(sorted(set(imports))) + "\n\n\n" + "\n\n\n".join(blocks) + "\n"
    config = {_torch.SIDE_EFFECTS_SETTING: True} if flag else {}
    return Change("selective" if selective else "checkpoint", f"{what} {span_name(prefix, idx)}", code, config,
                  modules=tuple(f"{prefix}.{i}" for i in idx))


def _is_transformers(model: nn.Module) -> bool:
    return type(model).__module__.split(".")[0] == "transformers" and "transformers" in sys.modules


def _cache_arguments(model: nn.Module, prefix: str) -> tuple[str, ...]:
    """The cache arguments (``CACHE_ARGUMENTS``) the forward of ``{prefix}.0`` takes."""
    try:
        params = inspect.signature(model.get_submodule(f"{prefix}.0").forward).parameters
    except (AttributeError, TypeError, ValueError):
        return ()
    return tuple(n for n in CACHE_ARGUMENTS if n in params)


def hf_checkpointing(model: nn.Module, prefix: str) -> str | None:
    """transformers' method that turns activation checkpointing on (``activation_checkpointing_enable``
    where transformers has it, ``gradient_checkpointing_enable`` before), when ``model`` is a
    transformers model in training mode (the knob acts in training only) whose checkpointable layers
    (``GradientCheckpointingLayer``) are exactly the children of ``prefix``; else None."""
    if not _is_transformers(model) or not model.training:
        return None
    try:
        from transformers import PreTrainedModel
        from transformers.modeling_layers import GradientCheckpointingLayer
    except ImportError:  # a transformers before GradientCheckpointingLayer: fxviz's wrapper
        return None
    if not isinstance(model, PreTrainedModel) or not getattr(model, "supports_gradient_checkpointing", False):
        return None
    layers = list(model.get_submodule(prefix).children())
    checkpointable = [m for m in model.modules() if isinstance(m, GradientCheckpointingLayer)]
    if not layers or {id(m) for m in layers} != {id(m) for m in checkpointable}:
        return None
    for method in ("activation_checkpointing_enable", "gradient_checkpointing_enable"):
        if callable(getattr(type(model), method, None)):
            return method
    return None


def _hf_code(model: nn.Module, prefix: str, idx: list[int], selective: bool, method: str) -> str:
    """transformers' own knob, on the layers ``idx`` of ``prefix`` only, with the cache off in the
    model's config (the knob turns it off in training too, but says so with a logger call that breaks
    torch.compile's graph)."""
    count = len(list(model.get_submodule(prefix).children()))
    kwargs_name = "activation_checkpointing_kwargs" if method == "activation_checkpointing_enable" \
        else "gradient_checkpointing_kwargs"
    lines = []
    if getattr(getattr(model, "config", None), "use_cache", None) is not None:
        lines += ["# the recompute would update the KV cache the forward updated: off in the config (a generate()",
                  "# after training passes use_cache=True), not left to the knob, whose warning (a logger call)",
                  "# would break torch.compile's graph",
                  "model.config.use_cache = False"]
    call = '{"use_reentrant": False' + (', "context_fn": policy' if selective else "") + "}"
    lines.append(f"model.{method}({kwargs_name}={call})")
    if idx != list(range(count)):
        chosen = f"i < {idx[-1] + 1}" if idx == list(range(idx[-1] + 1)) else f"i in {sorted(set(idx))!r}"
        lines += ["# only these layers: each layer's own flag (transformers' GradientCheckpointingLayer reads it; an",
                  "# internal, not a documented API: every_n_layers= is the documented, coarser choice)",
                  f"for i, layer in enumerate(model.get_submodule({prefix!r})):",
                  f"    layer.gradient_checkpointing = {chosen}"]
    return "\n".join(lines)


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
