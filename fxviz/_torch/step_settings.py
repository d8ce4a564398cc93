"""torch settings an advised training script sets beside its model change, in one place: dynamo's
setting that keeps a checkpointed layer with Python side effects in the graph, functorch's activation
offloading; the lines a script runs to set them, and a context that sets them for one trace and puts
dynamo's and functorch's whole config back afterwards (advice runs the user's pasted code, never
leaving a setting behind in the session).

Why the side-effect setting (torch 2.13): transformers' attention modules carry the ``kernels`` wrapper,
which sets a context variable while running; inside a ``torch.utils.checkpoint`` region dynamo refuses
that ("HOP: Unsafe side effect"), breaks the graph and runs the layer eagerly, its recompute outside
every graph.  ``skip_fwd_side_effects_in_bwd_under_checkpoint`` lets dynamo keep the region in the
graph and apply the side effect once, in the forward.  It is global to the script.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings
from collections.abc import Iterator
from typing import Any

import torch._dynamo.config as dynamo_config
from torch._functorch import config as functorch_config

__all__ = ["SIDE_EFFECTS_SETTING", "OFFLOAD_SETTING", "OFFLOAD_BANDWIDTH_SETTING", "OFFLOAD_PASS_SETTING",
           "KNOWN_SETTINGS", "has_side_effects_setting", "side_effects_code", "settings_patched", "config_restored",
           "offload_bandwidth", "offload_code", "offloadable"]

SIDE_EFFECTS_SETTING = "torch._dynamo.config.skip_fwd_side_effects_in_bwd_under_checkpoint"
"""Dynamo keeps a checkpointed region whose Python side effects it applies once, in the forward."""

OFFLOAD_SETTING = "torch._functorch.config.enable_activation_offloading"
OFFLOAD_BANDWIDTH_SETTING = "torch._functorch.config.activation_offload_cpu_gpu_bw"
OFFLOAD_PASS_SETTING = "torch._functorch.config.joint_custom_pass"

KNOWN_SETTINGS: tuple[str, ...] = (SIDE_EFFECTS_SETTING, OFFLOAD_SETTING, OFFLOAD_BANDWIDTH_SETTING,
                                   OFFLOAD_PASS_SETTING, "torch._functorch.config.activation_memory_budget",
                                   "torch._functorch.config.activation_memory_budget_solver")
"""The settings fxviz sets for a trace of an advised change (and restores)."""

_MODULES = {"torch._dynamo.config": dynamo_config, "torch._functorch.config": functorch_config}


def _split(dotted: str) -> tuple[Any, str]:
    module, _, name = dotted.rpartition(".")
    return _MODULES.get(module) or importlib.import_module(module), name


def has_side_effects_setting() -> bool:
    """Whether this torch's dynamo has :data:`SIDE_EFFECTS_SETTING` (2.13 has it)."""
    return hasattr(dynamo_config, SIDE_EFFECTS_SETTING.rpartition(".")[2])


def side_effects_code(why: str) -> tuple[str, str]:
    """The import and the lines that set :data:`SIDE_EFFECTS_SETTING` (``why``: the comment above them,
    one ``#`` line each), or ``("", "")`` where this torch lacks it."""
    if not has_side_effects_setting():
        return "", ""
    module, _, name = SIDE_EFFECTS_SETTING.rpartition(".")
    comment = "".join(f"# {line}\n" for line in why.splitlines())
    return f"import {module.rpartition('.')[0]}", f"{comment}{module}.{name} = True"


@contextlib.contextmanager
def settings_patched(config: dict[str, Any]) -> Iterator[None]:
    """Each ``module.setting`` of ``config`` set (``KNOWN_SETTINGS``), every one put back on exit."""
    with contextlib.ExitStack() as stack:
        for dotted, value in config.items():
            module, name = _split(dotted)
            stack.enter_context(module.patch(**{name: value}))
        yield


@contextlib.contextmanager
def config_restored() -> Iterator[None]:
    """dynamo's and functorch's config as they were on entry, whatever the code run inside sets (a
    pasted option's code sets torch's config; fxviz runs it on a copy of the model, never for keeps)."""
    with warnings.catch_warnings():  # reading a deprecated setting warns
        warnings.simplefilter("ignore")
        saved = [(m, m.get_config_copy()) for m in _MODULES.values()]
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for m, values in saved:
                for k, v in values.items():
                    now = getattr(m, k)
                    if now is not v and now != v:
                        setattr(m, k, v)


def offload_bandwidth() -> float:
    """torch's assumed host-device bandwidth in bytes per second (its ``activation_offload_cpu_gpu_bw``,
    in GB/s, which its offloading pass schedules prefetches with)."""
    return float(getattr(functorch_config, OFFLOAD_BANDWIDTH_SETTING.rpartition(".")[2], 50.0)) * 1e9


def offload_code() -> str:
    """A training script's lines that turn on torch's activation offloading for every saved activation
    its pass can move: torch offloads only the forward values a joint pass marks ``should_offload``
    (2.13 marks none itself), of those it can (saved, contiguous, not a view or a model output)."""
    flag = OFFLOAD_SETTING.rpartition(".")[2]
    hook = OFFLOAD_PASS_SETTING.rpartition(".")[2]
    return f'''import torch._functorch.config


def mark_offloads(joint, joint_inputs):
    """Mark every op of the joint graph: torch.compile moves each value it saves for the backward to the
    host after its last forward use, and back before the backward reads it (views and outputs stay)."""
    for node in joint.graph.nodes:
        if node.op == "call_function":
            node.meta["should_offload"] = True
    return joint


torch._functorch.config.{flag} = True
torch._functorch.config.{hook} = mark_offloads
'''


def offloadable(forward: Any, num_fwd_outputs: int) -> list[str]:
    """The forward graph's nodes torch's activation offloading moves to the host when a joint pass
    marks every op (``can_offload``: a saved output of the forward that is not a model output, a
    view, a getitem or non-contiguous), by name; the graph is only read."""
    from torch._functorch._activation_offloading.activation_offloading import can_offload
    from torch.utils._ordered_set import OrderedSet

    outputs = list(forward.graph.find_nodes(op="output")[0].args[0])
    every, model = OrderedSet(outputs), OrderedSet(outputs[:num_fwd_outputs])
    return [n.name for n in forward.graph.nodes
            if n.op == "call_function" and can_offload(n, every, model, OrderedSet())]
