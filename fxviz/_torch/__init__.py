"""Every torch-internal API and node-meta key fxviz relies on, in one package.

torch's ``_functorch`` / ``_dynamo`` internals change between releases.  Nothing else in fxviz
imports a private torch module or reads ``node.meta``: when torch moves something, this package (and
``tests/test_torch_internals.py``, which names each API) is all that changes.  Its modules:

- ``meta``: the node-meta keys and their readers, the AOT descriptors in fxviz's words, an op's named
  argument, dynamo's module-path text;
- ``partitioners``: torch's partitioners and the helpers fxviz partitions with;
- ``tracing``: the live capture (dynamo with ``aot_eager`` or inductor, ``aot_function``), graph
  breaks, torch's chatter silenced;
- ``eager``: probes beside eager PyTorch (swapped parameters, storage identity, aten-op recorder,
  module hooks);
- ``log_graph``: the torch side of rebuilding a logged graph;
- ``compiled``: the user's real compiled step, run with saved-tensor hooks and under the profiler
  (``Trace.measure``), and once with its graphs marked (the eager tape);
- ``lowering``: inductor's own lowering of a partition, stopped at its wrapper code (the compiled
  step's memory);
- ``profiling``: the profiler's allocation events in time order.
- ``step_settings``: the torch settings an advised script sets (dynamo's checkpoint side effects,
  functorch's activation offloading), set for one trace and restored.

The rest of fxviz imports the names below from here (``from .. import _torch; _torch.meta_val``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from torch._functorch import config as functorch_config
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils import _pytree as pytree

from fxviz._torch.eager import OpRecorder, StorageProbe, record_module_stack, reparametrized, storage_key
from fxviz._torch.log_graph import (
    DESCRIPTOR_CLASSES,
    LogGraphBuilder,
    inductor_joint_passes,
    joint_passes_note,
    meta_tensor,
)
from fxviz._torch.meta import (
    InputKind,
    OutputKind,
    attention_flop_formulas,
    checkpoint_policy,
    checkpoint_region,
    describe_input,
    describe_output,
    fwd_module_stack,
    is_fake,
    meta_val,
    module_path_from_stack_entry,
    module_stack,
    node_desc,
    op_argument,
    output_descs,
    partitioner_tag,
    seq_nr,
    stack_trace,
)

# ``partitioners`` and ``tracing`` import torch._functorch.partitioners (which loads inductor and
# dynamo: 3.5 of import fxviz's 4.4 s in issue 26) and dynamo's backends: they load when a name of
# theirs is first read (``_torch.default_partition``), so ``import fxviz`` costs about ``import torch``.
_LAZY: dict[str, str] = {
    **dict.fromkeys(("BUDGET_SETTING", "budget_config", "budget_setting_code", "copy_graph_module", "cse_like_min_cut",
                     "default_partition", "extract_fwd_bwd_modules", "has_activation_offloading", "is_collective",
                     "is_random", "is_tangent", "min_cut_config_state", "min_cut_partition",
                     "must_be_in_backward", "must_be_in_forward", "partitioner_context", "plain_min_cut_config",
                     "replay_rng", "rng_state_bytes", "step_budget", "torch_size_of"),
                    "partitioners"),
    **dict.fromkeys(("RawJoint", "SeededInterpreter", "capture_with_aot_function", "capture_with_dynamo",
                     "eager_random", "has_backend_random", "quiet_torch", "run_compiled_backward", "skipped_frames",
                     "unimplemented_count"), "tracing"),
    **dict.fromkeys(("LAYOUT_KNOB", "StepRun", "layout_optimization", "run_compiled_step", "step_config_state"),
                    "compiled"),
    **dict.fromkeys(("SIDE_EFFECTS_SETTING", "OFFLOAD_SETTING", "OFFLOAD_BANDWIDTH_SETTING", "OFFLOAD_PASS_SETTING",
                     "KNOWN_SETTINGS", "has_side_effects_setting", "side_effects_code", "settings_patched",
                     "config_restored", "offload_bandwidth", "offload_code", "offloadable"), "step_settings"),
}

if TYPE_CHECKING:
    from fxviz._torch.compiled import LAYOUT_KNOB, StepRun, layout_optimization, run_compiled_step, step_config_state
    from fxviz._torch.partitioners import (
        BUDGET_SETTING,
        budget_config,
        budget_setting_code,
        copy_graph_module,
        cse_like_min_cut,
        default_partition,
        extract_fwd_bwd_modules,
        has_activation_offloading,
        is_collective,
        is_random,
        is_tangent,
        min_cut_config_state,
        min_cut_partition,
        must_be_in_backward,
        must_be_in_forward,
        partitioner_context,
        plain_min_cut_config,
        replay_rng,
        rng_state_bytes,
        step_budget,
        torch_size_of,
    )
    from fxviz._torch.step_settings import (
        KNOWN_SETTINGS,
        OFFLOAD_BANDWIDTH_SETTING,
        OFFLOAD_PASS_SETTING,
        OFFLOAD_SETTING,
        SIDE_EFFECTS_SETTING,
        config_restored,
        has_side_effects_setting,
        offload_bandwidth,
        offload_code,
        offloadable,
        settings_patched,
        side_effects_code,
    )
    from fxviz._torch.tracing import (
        RawJoint,
        SeededInterpreter,
        capture_with_aot_function,
        capture_with_dynamo,
        eager_random,
        has_backend_random,
        quiet_torch,
        run_compiled_backward,
        skipped_frames,
        unimplemented_count,
    )


def __getattr__(name: str) -> Any:
    """A name of ``partitioners`` or ``tracing``, importing that module on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "RawJoint",
    "SeededInterpreter",
    "capture_with_dynamo",
    "unimplemented_count",
    "skipped_frames",
    "CAPTURE_BACKENDS",
    "capture_with_aot_function",
    "run_compiled_backward",
    "eager_random",
    "has_backend_random",
    "quiet_torch",
    "copy_graph_module",
    "default_partition",
    "min_cut_config_state",
    "min_cut_partition",
    "extract_fwd_bwd_modules",
    "reparametrized",
    "pytree",
    "functorch_config",
    "budget_config",
    "BUDGET_SETTING",
    "budget_setting_code",
    "has_activation_offloading",
    "plain_min_cut_config",
    "torch_size_of",
    "partitioner_context",
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
    "replay_rng",
    "rng_state_bytes",
    "attention_flop_formulas",
    "LogGraphBuilder",
    "DESCRIPTOR_CLASSES",
    "inductor_joint_passes",
    "joint_passes_note",
    "meta_tensor",
    "InputKind",
    "OutputKind",
    "module_path_from_stack_entry",
    "record_module_stack",
    "LAYOUT_KNOB",
    "StepRun",
    "layout_optimization",
    "run_compiled_step",
    "step_config_state",
    "step_budget",
    "SIDE_EFFECTS_SETTING",
    "OFFLOAD_SETTING",
    "OFFLOAD_BANDWIDTH_SETTING",
    "OFFLOAD_PASS_SETTING",
    "KNOWN_SETTINGS",
    "has_side_effects_setting",
    "side_effects_code",
    "settings_patched",
    "config_restored",
    "offload_bandwidth",
    "offload_code",
    "offloadable",
]


CAPTURE_BACKENDS: tuple[str, ...] = ("aot_eager", "inductor")
"""torch.compile backends whose joint graph fxviz records: ``aot_eager`` (AOTAutograd's own
decompositions, the graph as traced) and ``inductor`` (torch.compile's default: inductor's
decomposition table and joint-graph passes, min-cut with ``compiler="inductor"``)."""

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
    "torch._functorch.partitioners.has_recomputable_rng_ops",
    "torch._functorch.partitioners.functionalize_rng_ops",
    "torch.utils.flop_counter.flop_registry",
    "torch._functorch.compile_utils.fx_graph_cse",
    "torch._functorch.config.cse",
    "torch._functorch.config.activation_memory_budget",
    "torch._functorch.config.activation_memory_budget_solver",
    "torch._inductor.config.layout_optimization",
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
    "torch._inductor.compile_fx._recursive_joint_graph_passes",
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
    # lowering a partition to inductor's wrapper code (``lowering``)
    "torch._inductor.compile_fx.compile_fx_inner",
    "torch._inductor.compile_fx._recursive_record_user_visible_output_idxs",
    "torch._inductor.graph.GraphLowering",
    "torch._inductor.utils.output_node",
    "torch._inductor.config.keep_output_stride",
    "torch._inductor.config.bw_outputs_user_visible",
    "torch._inductor.select_algorithm.extern_kernels",
    "torch._functorch._aot_autograd.graph_compile.collect_fw_donated_buffer_idxs",
    "torch._functorch._aot_autograd.utils.contain_metadata_mutation_ops",
    "torch._functorch.config.donated_buffer",
    "torch._guards.TracingContext",
    "torch._logging._internal.trace_log",
    "torch._C._dynamo.guards._reinterpret_tensor",
    # the profiler's allocation events (``profiling``)
    "torch._C._profiler._EventType",
)
