"""The torch side of rebuilding a graph from a ``TORCH_TRACE`` log's ``print_readable`` text: fake
tensors with the logged sizes and strides in one shape environment, and node meta under torch's keys."""

from __future__ import annotations

import re
from typing import Any

import torch
import torch.fx as fx
from torch._functorch._aot_autograd import descriptors as _desc
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._dtype_abbrs import dtype_abbrs as _dtype_abbrs

from fxviz._torch.meta import AC_GRAPH_ID_KEY, DESC_KEY, RECOMPUTE_KEY, TAG_KEY, TRACE_KEY, VAL_KEY

DESCRIPTOR_CLASSES: dict[str, type] = {
    name: obj for name, obj in vars(_desc).items()
    if isinstance(obj, type) and (name.endswith("AOTInput") or name.endswith("AOTOutput"))
}
"""The AOT descriptor classes by name: a log's ``# PlainAOTInput(idx=0)`` comments are rebuilt
from these (by a small safe evaluator, never ``eval``)."""

_DTYPES: dict[str, torch.dtype] = {abbr: dt for dt, abbr in _dtype_abbrs.items()}


def meta_tensor(abbr: str, sizes: tuple[int, ...], strides: tuple[int, ...]) -> torch.Tensor | None:
    """A meta tensor (no data) of a logged annotation's dtype abbreviation (``f32``), sizes and strides:
    what a FLOP formula reads of a value; None for a dtype this torch does not know."""
    dtype = _DTYPES.get(abbr)
    return None if dtype is None else torch.empty_strided(sizes, strides, dtype=dtype, device="meta")


_NEW_TENSOR: dict[Any, bool] = {}
_RUN_ANYWAY = frozenset({"_unsafe_view", "lift_fresh", "lift_fresh_copy"})

STAND_IN_KEY = "fxviz_stand_in"
"""Node meta key: the node calls an op this torch lacks; the value is the sentence views show."""
JOINT_PASSES_NOTE = "fxviz_joint_passes"
"""``gm.meta`` key of what :func:`inductor_joint_passes` could not replay as the run did (a sentence), if anything."""


def inductor_joint_passes(gm: fx.GraphModule) -> fx.GraphModule:
    """Inductor's joint-graph passes (``compile_fx._recursive_joint_graph_passes``: pattern rewrites,
    no-op removal, random replacement) on a copy of a joint graph rebuilt from a log, as inductor's
    ``partition_fn`` runs them before min-cut: a log holds the joint graph from before them.  They
    run in the fake mode of the graph's own values; an op they add gets its forward/backward tag
    from what it reads (a tangent-dependent value is backward).

    A graph on a device this torch cannot make real tensors on (a CUDA run's log read on a laptop):
    the passes trace their patterns with real tensors on the graph's device, so they run on a copy
    whose values say ``cpu``, and every value and device argument is put back on the logged device
    afterwards; ``out.meta[JOINT_PASSES_NOTE]`` says so (and, if even that fails, that the passes
    were not replayed: the graph is returned as logged).  The log is never refused for it."""
    from torch._guards import TracingContext, detect_fake_mode, tracing
    from torch._inductor.compile_fx import _recursive_joint_graph_passes
    from torch._inductor.virtualized import V

    from fxviz._torch.partitioners import copy_graph_module

    out = copy_graph_module(gm)
    values = [n.meta.get(VAL_KEY) for n in out.graph.nodes if n.op == "placeholder"]
    mode = detect_fake_mode([v for v in values if isinstance(v, torch.Tensor)])
    devices = [v.device for v in values if isinstance(v, torch.Tensor)]
    device = devices[0] if devices else None
    if device is None or _usable_here(device):
        with tracing(TracingContext(mode)), V.set_fake_mode(mode):
            return _recursive_joint_graph_passes(out, skip_invoke_subgraph=True, input_device=device)
    logged = {n.name: (n.target, n.meta.get(VAL_KEY)) for n in out.graph.nodes}
    try:
        _move_values(out, device, torch.device("cpu"), mode)
        with tracing(TracingContext(mode)), V.set_fake_mode(mode):
            out = _recursive_joint_graph_passes(out, skip_invoke_subgraph=True, input_device=torch.device("cpu"))
        _move_values(out, torch.device("cpu"), device, mode, logged)
    except Exception as exc:  # a pass that cannot run off its device: the strategies say so, the log reads
        kept = copy_graph_module(gm)
        kept.meta[JOINT_PASSES_NOTE] = (
            f"inductor's joint-graph passes could not be replayed for this {device.type} graph on this machine "
            f"({type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}): strategies other than "
            "'logged' partition the graph as logged, before those passes")
        return kept
    out.meta[JOINT_PASSES_NOTE] = (
        f"inductor's joint-graph passes were replayed as for a cpu graph (this torch cannot make {device.type} "
        f"tensors), values kept on {device}: a choice the run made for {device.type} alone (padding a matmul "
        "for the GPU) may differ")
    return out


def joint_passes_note(gm: fx.GraphModule) -> list[str]:
    """What :func:`inductor_joint_passes` could not replay as the run did (none or one sentence)."""
    note = getattr(gm, "meta", {}).get(JOINT_PASSES_NOTE)
    return [note] if isinstance(note, str) else []


def _usable_here(device: torch.device) -> bool:
    """Whether this torch can make a real tensor on ``device`` (inductor's passes do, to trace patterns)."""
    if device.type in ("cpu", "meta"):
        return True
    backend = getattr(torch, device.type, None)
    if callable(getattr(backend, "is_available", None)):  # cuda, xpu, mps: asked without touching a device
        return bool(backend.is_available())  # type: ignore[union-attr]
    try:
        torch.empty(0, device=device)
        return True
    except Exception:
        return False


def _move_values(gm: fx.GraphModule, src: torch.device, dst: torch.device, mode: Any,
                 logged: dict[str, tuple[Any, Any]] | None = None) -> None:
    """Put every fake value and device argument of ``gm`` on ``dst`` (only the label changes; sizes,
    strides and dtypes stay).  With ``logged`` (node name -> (target, value) before the move), a node
    the passes kept gets its logged value back, so views keep sharing their base's storage."""
    def move_arg(a: Any) -> Any:
        return dst if isinstance(a, torch.device) and a.type == src.type else a

    for n in gm.graph.nodes:
        if n.op == "call_function":
            n.args = fx.node.map_aggregate(n.args, move_arg)
            n.kwargs = fx.node.map_aggregate(n.kwargs, move_arg)
        if logged is not None and n.name in logged and logged[n.name][0] == n.target:
            n.meta[VAL_KEY] = logged[n.name][1]
            continue

        def move(v: Any) -> Any:
            if isinstance(v, torch.Tensor) and v.device.type == src.type:
                with mode:
                    return torch.empty_strided(v.shape, v.stride(), dtype=v.dtype, device=dst)
            return v

        n.meta[VAL_KEY] = fx.node.map_aggregate(n.meta.get(VAL_KEY), move)
    gm.recompile()


class LogGraphBuilder:
    """The torch side of rebuilding a logged graph: one fake-tensor mode and shape environment
    shared by the joint, forward and backward graphs of one compile, so a symbolic size such as
    ``s77`` is one symbol in all three, and node metadata written under the keys torch reads.
    """

    def __init__(self, hints: dict[str, int] | None = None) -> None:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        self.shape_env = ShapeEnv()
        self.mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=True)
        self.hints = dict(hints or {})
        self._symbols: dict[str, Any] = {}
        self._devices: dict[str, torch.device] = {}

    def dtype(self, abbr: str) -> torch.dtype | None:
        return _DTYPES.get(abbr)

    def symint(self, expr: str) -> Any:
        """A SymInt for a size expression such as ``s77`` or ``2*s77 + 1`` (an int when constant)."""
        import sympy

        expr = expr.strip()
        if re.fullmatch(r"-?\d+", expr):
            return int(expr)
        names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", expr))
        syms = {n: self._symbol(n) for n in names}
        parsed = sympy.sympify(expr, locals=syms)
        hint = None
        try:
            hint = int(parsed.subs({syms[n]: self.hints[n] for n in names}))
        except (KeyError, TypeError, ValueError):
            hint = None
        return self.shape_env.create_symintnode(parsed, hint=hint)

    def _symbol(self, name: str) -> Any:
        """One sympy symbol per size name, registered with the shape environment as torch does
        for a dynamic dimension (sizes 0 and 1 are specialised, so the range starts at 2; the
        example value from the log's ``create_symbol`` record is its hint)."""
        import sympy

        if name not in self._symbols:
            sym = sympy.Symbol(name, integer=True, positive=True)
            env = self.shape_env
            try:
                env.var_to_range[sym] = env._default_value_range()
                if name in self.hints:
                    env.backed_var_to_val[sym] = sympy.Integer(self.hints[name])
            except AttributeError:  # another torch: symbols stay unconstrained, values come from the log
                pass
            self._symbols[name] = sym
        return self._symbols[name]

    def tensor(self, sizes: list[str], strides: list[str], dtype: torch.dtype, device: str) -> Any:
        """A fake tensor with exactly these sizes and strides (nothing allocated)."""
        with self.mode:
            return torch.empty_strided([self.symint(s) for s in sizes], [self.symint(s) for s in strides],
                                       dtype=dtype, device=torch.device(device))

    def plain_tensor(self, sizes: tuple[int, ...], strides: tuple[int, ...], dtype: torch.dtype, device: str) -> Any:
        """:meth:`tensor` for constant sizes and strides, made without dispatching through the fake
        mode (a meta tensor wrapped as a ``FakeTensor`` of this mode, as the mode wraps an op's
        output): a tenth of the cost, and a 50k-node graph makes one per node.  Its own storage."""
        dev = self._devices.get(device)
        if dev is None:
            dev = self._devices[device] = torch.device(device)
        return FakeTensor(self.mode, torch.empty_strided(sizes, strides, dtype=dtype, device="meta"), dev)

    @staticmethod
    def returns_new_tensor(target: Any) -> bool:
        """Whether ``target`` is an aten op whose schema returns one tensor aliasing none of its
        inputs and writes none of them (``add``, ``mm``; not ``view``, ``t``, ``native_layer_norm``'s
        tuple): its fake value is fully stated by the log's annotation (a fresh storage of the logged
        size, stride, dtype and device), so it need not be run.  ``_unsafe_view`` shares its input's
        storage under fake tensors although its schema says otherwise: it is run."""
        hit = _NEW_TENSOR.get(target)
        if hit is None:
            hit = False
            if isinstance(target, OpOverload) and target.__name__.split(".")[0] not in _RUN_ANYWAY:
                schema = target._schema
                rets = schema.returns
                hit = (len(rets) == 1 and str(rets[0].type) == "Tensor" and rets[0].alias_info is None
                       and not any(a.alias_info is not None for a in schema.arguments))
            _NEW_TENSOR[target] = hit
        return hit

    def run_op(self, target: Any, args: Any, kwargs: Any) -> Any:
        """``target(*args, **kwargs)`` on fake values (what torch itself would have recorded).
        The caller silences torch's shape-guard chatter once for a whole graph (``quiet_torch``)."""
        with self.mode:
            return target(*args, **kwargs)

    @staticmethod
    def graph_module(root: torch.nn.Module, graph: fx.Graph) -> fx.GraphModule:
        """The rebuilt graph's module, its Python code written only when something prints or calls it
        (fx's code generation and ``compile`` of a 50k-node joint graph: ~25 s each, and a view
        needs it rarely)."""
        from torch.fx._lazy_graph_module import _LazyGraphModule

        return _LazyGraphModule(root, graph)

    @staticmethod
    def set_val(node: fx.Node, value: Any) -> None:
        node.meta[VAL_KEY] = value

    @staticmethod
    def set_desc(node: fx.Node, desc: Any) -> None:
        node.meta[DESC_KEY] = desc

    @staticmethod
    def set_stack_trace(node: fx.Node, trace: str) -> None:
        node.meta[TRACE_KEY] = trace

    @staticmethod
    def set_stand_in(node: fx.Node, note: str) -> None:
        """Mark a node whose op this torch lacks (``logs.foreign.stand_in``): its value is the log's."""
        node.meta[STAND_IN_KEY] = note

    @staticmethod
    def stand_in_note(node: fx.Node) -> str | None:
        """The mark :meth:`set_stand_in` left, if any."""
        note = node.meta.get(STAND_IN_KEY)
        return note if isinstance(note, str) else None

    @staticmethod
    def set_checkpoint(node: fx.Node, policy: str | None, region: int | None) -> None:
        """The checkpoint policy (``PREFER_RECOMPUTE``...) and region a log's ``# ac_graph_id: N -
        POLICY`` comment gives a node, under the keys min-cut reads (``recompute``, ``ac_graph_id``)."""
        from torch.utils.checkpoint import CheckpointPolicy

        if policy is not None and policy in CheckpointPolicy.__members__:
            node.meta[RECOMPUTE_KEY] = CheckpointPolicy[policy]
        if region is not None:
            node.meta[AC_GRAPH_ID_KEY] = region

    @staticmethod
    def set_passes_note(gm: fx.GraphModule, note: str) -> None:
        """What inductor's passes could not replay as the run did (:func:`joint_passes_note`), put back on a
        graph their result was kept as text of."""
        gm.meta[JOINT_PASSES_NOTE] = note

    @staticmethod
    def set_tag(node: fx.Node, tag: str) -> None:
        """The partitioner tag (``is_forward``/``is_backward``) AOTAutograd writes on the joint graph it
        traces and a log's text drops: torch's partitioners read it to split the graph."""
        node.meta[TAG_KEY] = tag
