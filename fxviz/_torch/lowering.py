"""Inductor's own lowering of a partition's forward and backward graphs, stopped at the wrapper code.

``compile_fx_inner`` (torch's, nothing copied) runs view-to-reshape, fake-tensor propagation, the
post-grad passes, ``GraphLowering``, the scheduler (fusion, ``reorder_for_peak_memory``), kernel
source generation (which drops buffers a fused kernel keeps local) and the wrapper's memory planning
(``# reuse``, ``del bufN``).  ``GraphLowering.compile_to_module`` is where it would *load* that code,
which compiles the kernels: it is replaced for the call by one that keeps the code text and stops.
The text is what a ``TORCH_TRACE`` log's ``inductor_output_code`` record holds, so a model's graphs
and a log's share one reader (``analysis.memory.compiled``).

Two inputs change the backward's code and are easy to miss: the donated buffers (saved values no
forward input, user output or gradient aliases, which inductor may reuse in place:
``collect_fw_donated_buffer_idxs``, handed over through a ``TracingContext`` as AOTAutograd does)
and the strides the compiled forward gave the saved values (``_aot_stage2b_bw_compile`` restrides
the backward's inputs to them: AlexNet's channels-last weights).

Nothing is left behind: caches off for the call, configs restored, structured tracing silenced (a
user's active ``TORCH_TRACE`` log gets no record of fxviz's lowering), the RNG untouched
(``codegen_and_compile`` keeps it), the graphs copied.  Inductor's counters do count the call.
Measured on mini_gpt (2 layers, CPU, torch 2.13): about 3 s once per process (the vector-ISA check
compiles a test program with the C++ compiler), then 1-4 s per graph, most of it kernel source
generation and scheduling (the time grows with the number of fused kernels).
"""

from __future__ import annotations

import collections
import contextlib
import copy
import time
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

__all__ = ["LoweredGraph", "LoweringFailed", "lower_partition", "extern_call_namespace", "bw_donated_idxs"]

_DTYPE_BYTES_FALLBACK = 4


class LoweringFailed(Exception):
    """Inductor could not lower a graph here (no C++ compiler, a CUDA graph without Triton, an op it
    refuses): the reason, in one line."""


@dataclass
class LoweredGraph:
    """One graph as inductor's wrapper code runs it: the code text and the IR facts the text leaves out.

    ``buffers``: bytes of each buffer's storage (from its IR layout, at the example sizes);
    ``dtypes``: each buffer's dtype (``torch.float32``); ``origins``: the post-grad FX nodes a buffer
    computes, its primary node first (the graph is a copy of the partition's, so the names are the
    partition's, plus any node a post-grad pass made); ``output_strides``: per graph output, the
    strides inductor gives it (None for a non-tensor)."""

    code: str
    buffers: dict[str, int] = field(default_factory=dict)
    dtypes: dict[str, str] = field(default_factory=dict)
    origins: dict[str, tuple[str, ...]] = field(default_factory=dict)
    output_strides: list[tuple[int, ...] | None] = field(default_factory=list)
    seconds: float = 0.0


class _Stop(Exception):
    """Raised where inductor would load (compile) the generated module."""


def _placeholder_values(gm: fx.GraphModule) -> list[Any]:
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


@contextlib.contextmanager
def _stop_after_codegen(box: dict[str, Any]) -> Iterator[None]:
    from torch._inductor.graph import GraphLowering

    original = GraphLowering.compile_to_module

    def compile_to_module(self: Any) -> Any:
        code, _ = self.codegen()
        box["graph"], box["code"] = self, code.value
        raise _Stop()

    GraphLowering.compile_to_module = compile_to_module  # type: ignore[method-assign]
    try:
        yield
    finally:
        GraphLowering.compile_to_module = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _no_structured_trace() -> Iterator[None]:
    """No ``TORCH_TRACE`` record while fxviz lowers (torch writes one when the trace log has handlers)."""
    from torch._logging._internal import trace_log

    handlers = list(trace_log.handlers)
    trace_log.handlers = []
    try:
        yield
    finally:
        trace_log.handlers = handlers


def _storage_bytes(size: Sequence[int], stride: Sequence[int], itemsize: int, offset: int = 0) -> int:
    if any(s == 0 for s in size):
        return 0
    return (1 + offset + sum((s - 1) * st for s, st in zip(size, stride))) * itemsize


def _hint(graph: Any, x: Any) -> int:
    """A size at its example value (``optimization_hint`` in 2.13, ``size_hint`` before)."""
    sizevars = graph.sizevars
    read = getattr(sizevars, "optimization_hint", None) or getattr(sizevars, "size_hint", None)
    return int(read(x, fallback=1)) if read is not None else int(x)


def _buffer_facts(graph: Any) -> tuple[dict[str, int], dict[str, str], dict[str, tuple[str, ...]]]:
    """Bytes, dtype and FX origins of every buffer the lowered graph names (sizes at their hints)."""
    from torch._inductor import ir

    def hint(x: Any) -> int:
        return _hint(graph, x)

    sizes: dict[str, int] = {}
    dtypes: dict[str, str] = {}
    origins: dict[str, tuple[str, ...]] = {}
    for name, buf in list(graph.name_to_buffer.items()):
        try:
            layout = buf.get_output_spec()
        except Exception:
            continue
        if isinstance(layout, ir.Layout) and not isinstance(layout, (ir.MultiOutputLayout, ir.NoneLayout)):
            dtype = layout.dtype
            itemsize = dtype.itemsize if isinstance(dtype, torch.dtype) else _DTYPE_BYTES_FALLBACK
            try:
                sizes[name] = _storage_bytes([hint(s) for s in layout.size], [hint(s) for s in layout.stride],
                                             itemsize, hint(layout.offset))
                dtypes[name] = str(dtype)
            except Exception:
                pass
        primary = getattr(buf, "get_origin_node", lambda: None)()
        names = sorted(o.name for o in (getattr(buf, "origins", None) or ()))
        first = [primary.name] if primary is not None else []
        origins[name] = tuple(first + [n for n in names if n not in first])
    return sizes, dtypes, origins


def _output_strides(graph: Any) -> list[tuple[int, ...] | None]:
    out: list[tuple[int, ...] | None] = []
    for o in graph.graph_outputs or []:
        try:
            out.append(tuple(_hint(graph, s) for s in o.get_layout().stride)
                       if o.has_tensor_output() else None)
        except Exception:
            out.append(None)
    return out


def _user_visible(gm: fx.GraphModule, is_backward: bool, user_outputs: int | None) -> None:
    """``compile_fx_forward`` / ``compile_fx_backward``'s marking of the outputs whose strides a user
    sees (``keep_output_stride``, ``bw_outputs_user_visible``), which decides their layouts."""
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import _recursive_record_user_visible_output_idxs
    from torch._inductor.utils import output_node

    out = output_node(gm)
    args: Any = out.args[0]
    if is_backward:
        visible = [i for i, a in enumerate(args) if isinstance(a, fx.Node)] \
            if inductor_config.bw_outputs_user_visible else []
    else:
        k = len(args) if user_outputs is None else user_outputs
        visible = [i for i in range(k) if isinstance(args[i], fx.Node)] if inductor_config.keep_output_stride else []
    out.meta["user_visible_output_idxs"] = visible
    _recursive_record_user_visible_output_idxs(gm)


def _lower(gm: fx.GraphModule, example_inputs: list[Any], *, is_backward: bool, user_outputs: int | None = None,
           static_input_idxs: Sequence[int] = (), donated: Sequence[int] = ()) -> LoweredGraph:
    from torch._functorch import config as functorch_config
    from torch._guards import TracingContext, detect_fake_mode, tracing
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._subclasses.fake_tensor import FakeTensorMode

    gm = copy.deepcopy(gm)
    _user_visible(gm, is_backward, user_outputs)
    box: dict[str, Any] = {}
    context: contextlib.AbstractContextManager = contextlib.nullcontext()
    if donated:  # inductor reads them from the TracingContext (utils.get_donated_idxs)
        tc = TracingContext(detect_fake_mode(example_inputs) or FakeTensorMode())
        tc.fw_metadata = types.SimpleNamespace(  # type: ignore[assignment]
            bw_donated_idxs=list(donated), static_input_indices=[])
        context = tracing(tc)
    start = time.perf_counter()
    with context, _stop_after_codegen(box), _no_structured_trace(), \
            inductor_config.patch(fx_graph_cache=False, fx_graph_remote_cache=False), \
            functorch_config.patch(enable_autograd_cache=False):
        try:
            compile_fx_inner(gm, list(example_inputs), static_input_idxs=list(static_input_idxs),
                             is_backward=is_backward)
        except _Stop:
            pass
        except Exception as exc:
            if not isinstance(getattr(exc, "inner_exception", None), _Stop) and "graph" not in box:
                raise LoweringFailed(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from exc
    if "graph" not in box:
        raise LoweringFailed("inductor returned without generating code")
    graph = box.pop("graph")
    sizes, dtypes, origins = _buffer_facts(graph)
    return LoweredGraph(box["code"], sizes, dtypes, origins, _output_strides(graph), time.perf_counter() - start)


def bw_donated_idxs(fwd: fx.GraphModule, bwd: fx.GraphModule, num_fwd_outputs: int) -> list[int]:
    """AOTAutograd's ``bw_donated_idxs`` (``collect_bw_donated_buffer_idxs``): the backward inputs
    (saved values) that alias no forward input, user output or gradient, as torch's own helper finds
    them; empty where functorch's ``donated_buffer`` is off or a graph mutates metadata."""
    from torch._functorch import config as functorch_config
    from torch._functorch._aot_autograd.graph_compile import collect_fw_donated_buffer_idxs
    from torch._functorch._aot_autograd.utils import contain_metadata_mutation_ops

    if not functorch_config.donated_buffer or contain_metadata_mutation_ops(fwd) or contain_metadata_mutation_ops(bwd):
        return []

    def val(n: Any) -> Any:
        return n.meta.get("val") if isinstance(n, fx.Node) else None

    fw_ins = [val(n) for n in fwd.graph.find_nodes(op="placeholder")]
    fw_outs = [val(n) for n in list(fwd.graph.nodes)[-1].args[0]]
    bw_outs = [val(n) for n in list(bwd.graph.nodes)[-1].args[0]]
    saved = fw_outs[num_fwd_outputs:]
    tensors = [t for t in saved if isinstance(t, torch.Tensor)]
    symints = len(saved) - len(tensors)
    return [symints + i for i in collect_fw_donated_buffer_idxs(
        fw_ins, fw_outs[:num_fwd_outputs], bw_outs, tensors)]  # type: ignore[arg-type]


def _restrided(values: list[Any], fwd: fx.GraphModule, strides: list[tuple[int, ...] | None],
               num_fwd_outputs: int) -> list[Any]:
    """The backward's inputs with each saved tensor given the strides the compiled forward gave it
    (saved SymInts come first among the backward's inputs, last among the forward's outputs)."""
    saved = list(fwd.graph.nodes)[-1].args[0][num_fwd_outputs:]
    saved_strides = strides[num_fwd_outputs:]
    symints = sum(1 for a in saved if not isinstance(a.meta.get("val"), torch.Tensor))
    out = list(values)
    for j, s in enumerate(saved_strides[:len(saved) - symints]):
        i = symints + j
        v = out[i] if i < len(out) else None
        if isinstance(v, torch.Tensor) and s is not None and tuple(v.stride()) != tuple(s):
            out[i] = v.as_strided(v.size(), s)
    return out


def _value_key(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return (tuple(str(s) for s in v.shape), tuple(str(s) for s in v.stride()), str(v.dtype), str(v.device))
    if isinstance(v, (list, tuple)):
        return tuple(_value_key(x) for x in v)
    return str(v) if v is not None else None


def _graph_key(gm: fx.GraphModule | None) -> Any:
    """A graph as what its lowering depends on: its code, and every value's shape, strides and dtype."""
    if gm is None:
        return None
    return gm.code, tuple((n.name, _value_key(n.meta.get("val"))) for n in gm.graph.nodes)


_LOWERED: collections.OrderedDict[Any, tuple[LoweredGraph, LoweredGraph | None]] = collections.OrderedDict()
_KEEP = 32
"""Partitions lowered in this process, by graph and config (a trace made again, a partition several
strategies share): the latest ``_KEEP``.  Lowering is inductor's own, deterministic in these."""


def lower_partition(fwd: fx.GraphModule, bwd: fx.GraphModule | None, num_fwd_outputs: int,
                    static_input_idxs: Sequence[int] = ()) -> tuple[LoweredGraph, LoweredGraph | None]:
    """The forward, then the backward with its saved inputs restrided as the forward's code left them
    and the donated buffers AOTAutograd would hand inductor.  Raises ``LoweringFailed``.  A partition
    lowered before in this process, under the same configs, is not lowered again."""
    from torch._functorch import config as functorch_config
    from torch._inductor import config as inductor_config

    key = (_graph_key(fwd), _graph_key(bwd), num_fwd_outputs, tuple(static_input_idxs),
           functorch_config.save_config(), inductor_config.save_config())
    if key in _LOWERED:
        _LOWERED.move_to_end(key)
        return _LOWERED[key]
    result = _lower_partition(fwd, bwd, num_fwd_outputs, static_input_idxs)
    _LOWERED[key] = result
    while len(_LOWERED) > _KEEP:
        _LOWERED.popitem(last=False)
    return result


def _lower_partition(fwd: fx.GraphModule, bwd: fx.GraphModule | None, num_fwd_outputs: int,
                     static_input_idxs: Sequence[int]) -> tuple[LoweredGraph, LoweredGraph | None]:
    with torch.random.fork_rng(devices=[]):  # nothing here draws; kept so nothing can
        fw = _lower(fwd, _placeholder_values(fwd), is_backward=False, user_outputs=num_fwd_outputs,
                    static_input_idxs=static_input_idxs)
        if bwd is None:
            return fw, None
        values = _restrided(_placeholder_values(bwd), fwd, fw.output_strides, num_fwd_outputs)
        bw = _lower(bwd, values, is_backward=True, donated=bw_donated_idxs(fwd, bwd, num_fwd_outputs))
    return fw, bw


def extern_call_namespace() -> dict[str, Any]:
    """The names inductor's wrapper code calls extern kernels through (``extern_kernels.mm``,
    ``reinterpret_tensor``, ``aten``), to run one line of it on real tensors."""
    from torch._inductor.select_algorithm import extern_kernels

    return {"torch": torch, "aten": torch.ops.aten, "extern_kernels": extern_kernels,
            "reinterpret_tensor": torch._C._dynamo.guards._reinterpret_tensor,  # type: ignore[attr-defined]
            "inf": float("inf"),
            "nan": float("nan"), "device": torch.device}
