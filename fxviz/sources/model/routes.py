"""The capture routes: ``capture()`` picks one (dynamo, aot, closure), runs it on fxviz's copy of the
inputs with the user's state preserved, and names every node of every graph."""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.core.errors import FxvizWarning, InputError, TraceError
from fxviz.core.fx_facts import output_node, output_values
from fxviz.core.graph_facts import gradient_slots
from fxviz.core.state import Snapshot, preserved, private_copy
from fxviz.sources.graphs import Capture, JointGraph, ModelSource, graph_name
from fxviz.sources.model.inputs import (
    all_meta,
    any_meta,
    argument_names,
    bind_keywords,
    check_call,
    eager_output,
    model_raised,
    module_paths,
    named_leaves,
    named_state,
    refuse_compressed,
    refuse_mixed_meta,
    uncompiled,
)
from fxviz.sources.model.loss import (
    LazyLoss,
    LossPlan,
    TracedLoss,
    differentiable,
    make_reducer,
    one_line,
    own_loss,
)
from fxviz.sources.roles import InputName, classify_nodes

# --- the routes ----------------------------------------------------------------------------------
META_NOTE = "on the meta device: aot_function's graph, not torch.compile's"
"""``Capture.route_note`` of a model on the meta device, which torch.compile cannot run: fxviz traces it
with ``aot_function`` over fake tensors, whose graph (AOTAutograd's, ``backend='aot_eager'``) and
partitioner (``default_partition``) are not what a ``torch.compile`` step of the same model runs."""


def capture(model_or_fn: Callable, example_inputs: tuple[Any, ...], *, loss_fn: Callable | None = None,
            params: str = "lifted", route: str = "auto", backend: str | None = None,
            dynamic: bool = False, keyword_inputs: dict[str, Any] | None = None,
            compile_loss: bool = False) -> Capture:
    """Capture the joint graph(s) of ``model_or_fn(*example_inputs, **keyword_inputs)`` and its
    loss without changing the model or the RNG.  Keyword inputs are bound to the parameters they
    name (``inputs.bind_keywords``).  ``compile_loss``: trace ``loss_fn`` into the graph (default:
    applied outside it, as the user's step applies it; see ``loss``).  ``backend=None``: the graph
    the caller's own step partitions: inductor's (torch.compile's default) on the dynamo route,
    AOTAutograd's own on the ``aot`` and ``closure`` routes (what ``aot_function`` traces).  See the
    module docstring for the routes."""
    # the training graph whatever the caller's grad mode (a notebook cell under no_grad/inference_mode)
    with torch.inference_mode(False), torch.enable_grad():
        return _capture(model_or_fn, example_inputs, loss_fn, params, route, backend, dynamic,
                        keyword_inputs or {}, compile_loss)


def recapture(cap: Capture, model_or_fn: Callable | None = None, example_inputs: tuple[Any, ...] | None = None,
              keyword_inputs: dict[str, Any] | None = None) -> Capture:
    """``model_or_fn`` (default: the one ``cap`` traced) captured again as ``cap`` was: its loss and where
    the step applies it, parameter mode, route, backend and dynamic shapes, on ``example_inputs``
    (default: ``cap``'s; keywords bound as ``capture`` binds them).  Advice's changed models and the
    gradient check trace through here, so a re-capture never drifts from the first."""
    fn = cap.fn if model_or_fn is None else model_or_fn
    if fn is None:
        raise InputError("this graph was not traced from a model here (a log's graph): there is nothing to trace "
                         "again", "trace the model with fxviz.trace(model, *inputs)")
    return capture(fn, cap.example_inputs if example_inputs is None else tuple(example_inputs), loss_fn=cap.loss_fn,
                   params=cap.params, route=cap.route if cap.route in ("dynamo", "aot") else "auto",
                   backend=cap.backend, dynamic=cap.dynamic, keyword_inputs=keyword_inputs,
                   compile_loss=cap.loss_fn is not None and not cap.loss_outside)


def _capture(model_or_fn: Callable, example_inputs: tuple[Any, ...], loss_fn: Callable | None, params: str,
             route: str, backend: str | None = None, dynamic: bool = False,
             keyword_inputs: dict[str, Any] | None = None, compile_loss: bool = False) -> Capture:
    model_or_fn = uncompiled(model_or_fn)
    check_call(model_or_fn, params, route, backend, dynamic)
    model = model_or_fn if isinstance(model_or_fn, nn.Module) else None
    fn = model_or_fn
    target_fn = model.forward if model is not None else fn
    example_inputs = bind_keywords(target_fn, tuple(example_inputs), keyword_inputs or {})
    inputs = private_copy(tuple(example_inputs))  # fxviz's own: the caller's tensors are never run
    names = argument_names(target_fn, len(inputs))
    refuse_mixed_meta(model, inputs, names)
    on_meta = any_meta(model, inputs)
    if route == "auto":
        route = ("aot" if (on_meta or params == "closure") and backend in (None, "aot_eager") and not dynamic
                 else "dynamo")
    note = META_NOTE if route == "aot" and on_meta and params != "closure" else ""
    if params == "closure":
        route = "closure"
    elif route == "dynamo" and on_meta:
        raise InputError("capture_route='dynamo' runs the model, and this model or input is on the meta device",
                         "use capture_route='aot' (the default for meta models), which traces with fake tensors")
    if backend is None:  # what the step the user would run partitions: torch.compile's, or aot_function's
        backend = "inductor" if route == "dynamo" else "aot_eager"

    if route in ("aot", "closure"):
        refuse_compressed(model, inputs, names, route)

    with preserved(model, inputs) as snapshot, _torch.quiet_torch():
        found = None
        if route == "dynamo" and not dynamic:
            found = _dynamo_without_probe(fn, inputs, model, names, loss_fn, snapshot, compile_loss, backend)
        if found is not None:
            plan, graphs, breaks, eager_frames = found
        else:
            plan, graphs, breaks, eager_frames = _probe_then_capture(
                fn, inputs, model, names, loss_fn, route, backend, dynamic, on_meta, snapshot, compile_loss)
    notes = _gradient_warnings(graphs, model, params, on_meta, breaks)
    for note in notes:
        warnings.warn(note, FxvizWarning, stacklevel=3)
    source = ModelSource(model=model, fn=fn, example_inputs=inputs, loss_fn=loss_fn, reduce=plan.reduce,
                         input_names=names)
    return Capture(graphs=graphs, source=source, route=route, params=params, loss=plan.desc, graph_breaks=breaks,
                   warnings=notes, eager_frames=eager_frames, backend=backend, dynamic=dynamic,
                   torch_budget=_torch.step_budget(), loss_outside=plan.outside, route_note=note)


def _probe_then_capture(fn: Callable, inputs: tuple[Any, ...], model: nn.Module | None, names: list[str],
                        loss_fn: Callable | None, route: str, backend: str, dynamic: bool, on_meta: bool,
                        snapshot: Snapshot, compile_loss: bool = False
                        ) -> tuple[LossPlan, list[JointGraph], list[str], list[str]]:
    """Learn the output's structure first (a forward on fxviz's own copy of the inputs, fake for
    a meta model), choose the loss from it, restore, then capture by ``route``."""
    # a meta model's default loss is chosen inside aot_function's own first (fake) pass: a
    # separate fake forward first would cost as much again (15% of a 1e9-parameter trace)
    lazy = LazyLoss() if on_meta and loss_fn is None and all_meta(model, inputs) else None
    if lazy is not None:
        plan = LossPlan(lazy, "")  # chosen inside aot_function's first pass; never outside the graph
    else:
        sources: Any = ()  # what the probe's output may be a view of
        try:
            if on_meta:
                out = _fake_output(fn, inputs)
            else:
                probe = private_copy(inputs)
                out = eager_output(fn, probe)
                sources = (probe, list(model.parameters()) + list(model.buffers()) if model is not None else [])
        finally:
            snapshot.restore()  # the traced run starts from the state the user handed us
        plan = make_reducer(out, loss_fn, sources, compile_loss)
    outside = plan.outside
    in_graph: Callable[[Any], Any] = (lambda o: o) if outside else plan.reduce  # outside: the graph is the model's

    def step(*args: Any) -> Any:
        return in_graph(fn(*args))

    failed: TraceError | None = None
    eager_frames: list[str] = []
    try:
        if route == "dynamo":
            before = _torch.unimplemented_count()
            graphs, breaks, _ = _via_dynamo(step, inputs, model, names, backend, dynamic, outside)
            eager_frames = _torch.skipped_frames(before)
        elif route == "aot":
            graphs, breaks = _via_aot(step, fn, inputs, model, names, in_graph)
        else:
            graphs, breaks = _via_closure(step, inputs, model, names, in_graph)
    except TraceError as exc:
        if lazy is None or lazy.plan is not None:
            raise
        failed = exc
    if failed is not None:
        # it failed before the model produced an output: say what the model itself raised
        # (InputError) or why its output has no loss (NoFloatingOutputError), as when probed first
        make_reducer(_fake_output(fn, inputs), None)
        raise failed
    if lazy is not None:
        assert lazy.plan is not None
        plan = lazy.plan
    return plan, graphs, breaks, eager_frames


def _dynamo_without_probe(fn: Callable, inputs: tuple[Any, ...], model: nn.Module | None, names: list[str],
                          loss_fn: Callable | None, snapshot: Snapshot, compile_loss: bool = False,
                          backend: str = "aot_eager"
                          ) -> tuple[LossPlan, list[JointGraph], list[str], list[str]] | None:
    """The dynamo route with the loss chosen inside the traced step (``TracedLoss``):
    no eager probe forward, and no restore of every tensor between a probe and the traced run.

    On AlexNet that probe and that restore were 0.06 of fxviz's 0.15 s over torch alone (wall, load 1.2)
    (a 244 MB compare and a forward); on a 2-layer width-768 GPT 0.15 of 0.22 s.  None (and the
    model put back as the user handed it) where the probe route must decide instead: the trace
    failed (the probe then says whether the model itself rejects the inputs), the output has no
    floating tensor or ``loss_fn`` gave no floating scalar (the probe route's errors), or the
    scalar loss is a view of an input (the probe route's copy)."""
    traced = TracedLoss(loss_fn, compile_loss)
    outside = loss_fn is not None and not compile_loss  # known before the trace; the model's own .loss after

    def step(*args: Any) -> Any:
        return traced(fn(*args))

    before = _torch.unimplemented_count()
    try:
        with _torch.quiet_torch(silent=True):  # a failure here is not the user's to read: the probe route says why
            graphs, breaks, result = _via_dynamo(step, inputs, model, names, backend, outside=outside)
    except Exception:  # the probe route runs the model again and says why
        snapshot.restore()
        return None
    plan = traced.plan()
    state = list(model.parameters()) + list(model.buffers()) if model is not None else []
    if plan is None or traced.aliases(result, (inputs, state)) or not traced.checked(result):
        snapshot.restore()
        return None
    if plan.outside and not outside:  # the model's own loss: its outputs are no loss
        for g in graphs:
            g.info = _renamed_outputs(g)
    return plan, graphs, breaks, _torch.skipped_frames(before)


def _renamed_outputs(g: JointGraph) -> dict[str, Any]:
    """A graph's node infos with its first output no longer called "loss" (the loss is applied
    outside the graph): "output 0", as any other output."""
    out = dict(g.info)
    for name, info in out.items():
        if info.role == "output" and info.qualname == "loss":
            out[name] = dataclasses.replace(info, qualname="output 0")
    return out


def _gradient_inputs(g: JointGraph) -> list[str]:
    """Real names of the graph inputs the backward returns a gradient for.

    The joint graph returns the forward's ``num_fwd_outputs`` outputs, then one gradient (or
    ``None``) per non-tangent input, in placeholder order; a gradient may be a tangent passed
    straight through, so gradient roles alone would miss it.
    """
    if not g.has_backward:
        return []
    out_node = output_node(g.gm)
    descs = _torch.output_descs(out_node)
    if descs:  # by descriptor: effect tokens (linalg.cholesky) are inputs with no gradient slot
        by_desc = {repr(_torch.node_desc(n)): n for n in g.gm.graph.nodes if n.op == "placeholder"}
        names = []
        for desc, out in zip(descs[g.num_fwd_outputs:], gradient_slots(g.gm, g.num_fwd_outputs)):
            kind = _torch.describe_output(desc)
            ph = by_desc.get(repr(getattr(desc, "grad_of", None))) if kind.kind == "grad" else None
            if ph is not None and out is not None:
                names.append(g.info[ph.name].qualname or ph.name)
        return names
    grads = gradient_slots(g.gm, g.num_fwd_outputs)
    primals = [n for n in g.gm.graph.nodes if n.op == "placeholder" and g.info[n.name].role != "tangent"]
    return [g.info[p.name].qualname or p.name for p, out in zip(primals, grads) if out is not None]


def _gradient_warnings(graphs: list[JointGraph], model: nn.Module | None, params: str,
                       on_meta: bool, breaks: Sequence[str] = ()) -> list[str]:
    """Say so when the backward is empty although something requires grad, instead of showing an
    empty backward without comment (the meta-device ``cross_entropy`` quirk, ``no_grad``, ``detach``,
    or an op that ran outside the graphs at a graph break)."""
    got = {name for g in graphs for name in _gradient_inputs(g)}
    if breaks:
        wanted = [n for n, p in model.named_parameters() if p.requires_grad] if model is not None else []
        if wanted and not got.intersection(wanted):
            return [f"the captured graph(s) compute no gradient for the {len(wanted)} parameter(s) that require "
                    f"grad: dynamo split the model at a graph break ({breaks[0]}), and the ops that use them ran "
                    "outside the graphs, where eager autograd differentiates them"]
        return []
    if on_meta:
        why = ("on the meta device some torch ops (nll_loss, hence cross_entropy) have no autograd kernel "
               "and drop the grad_fn" + ("; params='lifted' traces meta tensors as fake CPU tensors, "
                                         "which keeps it" if params == "closure" else
                                         "; trace a small real-device copy of the model"))
    else:
        why = "a torch.no_grad block, .detach() or an op without a derivative cuts them off the loss"
    if params == "lifted" and model is not None:
        wanted = [n for n, p in model.named_parameters() if p.requires_grad]
        if wanted and not got.intersection(wanted):
            return [f"the loss does not require grad although {len(wanted)} parameter(s) do, so the "
                    f"backward computes no parameter gradient: {why}"]
    for g in graphs:
        if g.has_backward and not _gradient_inputs(g):
            where = f"{graph_name(g.index)}'s" if len(graphs) > 1 else "the"
            return [f"{where} backward is empty: the loss does not depend differentiably on any input "
                    f"that requires grad ({why})"]
    return []


def _fake_output(fn: Callable, inputs: tuple[Any, ...]) -> Any:
    mode = _torch.FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with mode, torch.no_grad():
            return fn(*pytree.tree_map(lambda t: mode.from_tensor(t) if isinstance(t, torch.Tensor) else t, inputs))
    except Exception as exc:
        raise model_raised(exc, inputs) from exc


def _data_dependent(exc: BaseException) -> bool:
    """Did tracing stop at Python that depends on tensor values (``.item()``, ``if x.sum() > 0``)?"""
    seen = 0
    while exc is not None and seen < 8:
        name, text = type(exc).__name__, str(exc)
        if ("DataDependent" in name or "DynamicOutputShape" in name or "data-dependent" in text.lower()
                or "_local_scalar_dense" in text):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        seen += 1
    return False


def _trace_failed(exc: Exception, route: str, on_meta: bool = False) -> TraceError:
    """torch's failure as one line, with the way around it that fits the route it was on: a meta
    model has no other route (dynamo runs the model), so it is told what a meta trace needs."""
    if on_meta:
        hint = ("a model on the meta device is traced with fake tensors only (capture_route='aot'); check that "
                "model(*inputs) runs with every tensor on the meta device, or build the model on a real device "
                "(then torch.compile's own capture, capture_route='dynamo', traces it)")
    elif _data_dependent(exc) and route != "dynamo":
        who = "closure capture (plain aot_function)" if route == "closure" else "capture_route='aot'"
        hint = (f"{who} cannot follow Python that depends on tensor values (.item(), if on a tensor), nor an op "
                "whose output shape does (masked_select, nonzero); "
                "use params='lifted' with capture_route='dynamo', which splits the graph there")
    elif route == "dynamo":
        hint = ("check that model(*inputs) runs eagerly; torch.compile could not capture it "
                "(TORCH_LOGS=graph_breaks shows detail); capture_route='aot' is another route")
    else:
        hint = ("check that model(*inputs) runs eagerly; params='lifted' with capture_route='dynamo' "
                "(torch.compile's capture) copes with more Python")
    return TraceError(f"torch could not trace the model ({route}): {type(exc).__name__}: {one_line(exc)}", hint)


def _via_dynamo(step: Callable, inputs: tuple[Any, ...], model: nn.Module | None,
                names: list[str], backend: str = "aot_eager",
                dynamic: bool = False, outside: bool = False) -> tuple[list[JointGraph], list[str], Any]:
    """The joint graphs dynamo captured, the graph-break reasons, and what the step returned."""
    by_id, _, _ = named_state(model)
    for name, t in named_leaves(inputs, names):
        if isinstance(t, torch.Tensor):
            by_id.setdefault(id(t), InputName("primal", name))
    before = _torch.unimplemented_count()
    try:
        raws, breaks, result = _torch.capture_with_dynamo(step, inputs, lambda t: None, backend=backend,
                                                           dynamic=dynamic)
    except Exception as exc:
        raise _trace_failed(exc, "dynamo") from exc
    if not raws:
        raise _no_graph(breaks, bool(_torch.skipped_frames(before)))
    graphs = []
    last = len(raws) - 1
    loss = _loss_output(result, raws, outside)
    for k, raw in enumerate(raws):
        input_names: dict[int, InputName] = {}
        made: list[int] = []  # inputs the step itself made (an earlier graph, eager code at a break)
        for i, (t, src) in enumerate(zip(raw.example_inputs, raw.input_sources + [None] * len(raw.example_inputs))):
            known = by_id.get(id(t))
            input_names[i] = known or InputName("primal", _source_label(src, i, k))
            if known is None and isinstance(t, torch.Tensor) and k > 0:
                made.append(i)
        user_names = {0: "loss"} if k == last and not outside else {}
        g = _joint_graph(raw, input_names, {}, {}, model, k, "torch.compile", user_names)
        g.backend, g.dynamic = backend, dynamic
        g.partitioner_note = "inductor" if backend == "inductor" else ""
        g.runs = [(seq, [by_id[i].qualname if i in by_id else None for i in ids]) for seq, ids in raw.calls]
        g.run_links = {seq: dict(fed) for seq, fed in raw.links.items()}
        g.crossing = frozenset(made) | frozenset(i for fed in raw.links.values() for i in fed)
        g.loss_output = loss if loss is not None and any(seq == loss[0] for seq, _ in raw.calls) else None
        graphs.append(g)
    return graphs, breaks, result


def _loss_output(result: Any, raws: Sequence[_torch.RawJoint], outside: bool) -> tuple[int, int] | None:
    """(run number, output index) of the graph output that is the step's loss: the step's result, or
    the model's own ``.loss``; None where code outside the graphs computes it (a ``loss_fn`` applied
    outside, a reduction of several outputs)."""
    loss = None if outside else (result if isinstance(result, torch.Tensor) else own_loss(result))
    if not isinstance(loss, torch.Tensor):
        return None
    for raw in raws:
        for seq, ids in raw.outputs.items():
            if id(loss) in ids:
                return seq, ids.index(id(loss))
    return None


def _no_graph(breaks: list[str], skipped: bool = True) -> TraceError:
    """Dynamo compiled nothing: say why it skipped the frames (``Attempted to wrap sparse Tensor``),
    or, where it skipped none (``skipped`` False), that the graph breaks left no op in any graph:
    OpInfo's ``corrcoef``/``cov`` samples, whose one op breaks at ``aten.equal`` (data-dependent);
    torch.compile of the same step compiles no graph either (tests/test_compat.py checks it): the
    loss adds no op there (a scalar output used as it is, or a loss applied outside the model)."""
    if not breaks:
        return TraceError("torch.compile captured no graph: the whole model ran as plain Python",
                          "make sure the model calls torch operations on its inputs")
    reasons = "; ".join(dict.fromkeys(breaks))
    if not skipped and not any("sparse" in b.lower() for b in breaks):
        return TraceError(f"torch.compile captured no graph: every op ran outside the graphs, at graph breaks "
                          f"({reasons})",
                          "torch.compile of the same step compiles no graph either (eager autograd runs that "
                          "code, and the loss adds no op to the compiled code); a step that computes a loss with "
                          "an op of its own compiles that op after the break: fxviz.trace(model, *inputs, "
                          "loss_fn=lambda out: out.sum(), compile_loss=True)")
    if any("sparse" in b.lower() for b in breaks):
        hint = ("dynamo cannot take sparse tensors as graph inputs; pass x.to_dense(), or use "
                "capture_route='aot', which traces COO tensors")
    else:
        hint = "dynamo skipped every frame for the reason shown; capture_route='aot' is another route"
    return TraceError(f"torch.compile captured no graph: dynamo ran every frame as plain Python ({reasons})", hint)


def _source_label(source: str | None, i: int, k: int) -> str:
    if source is None:
        return f"{graph_name(k)} input {i}"
    stack = re.fullmatch(r"L\[['\"]___stack(\d+)['\"]\]", source)
    if stack:  # a value dynamo carried across a graph break: computed by code outside the graphs
        return f"value from outside the graph ({stack.group(1)})"
    label = _torch.module_path_from_stack_entry(source) or source
    return label if k == 0 else f"{label} (from {graph_name(k - 1)})"


def _joint_graph(raw: _torch.RawJoint, input_names: dict[int, InputName], constant_names: dict[str, str],
                 constant_values: dict[str, torch.Tensor], model: nn.Module | None, index: int,
                 caller: str, user_names: dict[int, str],
                 values: Sequence[Any] | None = None) -> JointGraph:
    gm = raw.joint if raw.joint is not None else raw.forward_only
    assert gm is not None
    has_backward = raw.joint is not None
    num_fwd = raw.num_fwd_outputs if has_backward else len(output_values(gm))
    info = classify_nodes(gm, num_fwd, input_names, constant_names, module_paths(model),
                          user_output_names=user_names)
    values = list(values if values is not None else raw.example_inputs)
    placeholder_values: dict[str, Any] = {}
    plain_i = 0
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        desc = _torch.node_desc(n)
        kind = _torch.describe_input(desc) if desc is not None else None
        if kind is not None and kind.kind == "plain" and kind.index is not None and kind.index < len(values):
            placeholder_values[n.name] = values[kind.index]
        elif kind is None and info[n.name].role != "tangent" and plain_i < len(values):
            placeholder_values[n.name] = values[plain_i]
        plain_i += 1
    return JointGraph(gm=gm, has_backward=has_backward, num_fwd_outputs=num_fwd,
                      static_lifetime_input_indices=list(raw.static_lifetime_input_indices or []),
                      joint_inputs=raw.joint_inputs, info=info, placeholder_values=placeholder_values,
                      constant_values=constant_values, index=index, partitioner_caller=caller,
                      compiler=raw.compiler, before_joint_passes=raw.before_joint_passes,
                      captured_min_cut=raw.captured_min_cut)


class _Fakes:
    """Real tensors -> fake ones for ``aot_function``, one fake per real tensor (aliasing kept).

    With ``meta_as_cpu``, a meta tensor becomes a fake *CPU* tensor: nothing is allocated either
    way, but CPU kernels have the autograd formulas some meta kernels lack (``nll_loss``).
    """

    def __init__(self, meta_as_cpu: bool = False) -> None:
        self.mode = _torch.FakeTensorMode(allow_non_fake_inputs=True)  # meta tensors made inside forward
        self.meta_as_cpu = meta_as_cpu
        self.memo: dict[tuple[int, bool | None], Any] = {}

    def __call__(self, t: Any, requires_grad: bool | None = None) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        key = (id(t), requires_grad)
        if key not in self.memo:
            grad = t.requires_grad if requires_grad is None else requires_grad
            if self.meta_as_cpu and t.device.type == "meta":
                with self.mode:
                    fake = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="cpu")
                self.memo[key] = fake.requires_grad_(True) if grad else fake
            else:
                if t.requires_grad != grad:
                    t = t.detach().requires_grad_(grad)
                self.memo[key] = self.mode.from_tensor(t)
        return self.memo[key]


def _tensor_leaves(inputs: tuple[Any, ...], names: list[str]
                   ) -> tuple[list[tuple[str, torch.Tensor]], Callable[[Sequence[Any]], tuple[Any, ...]]]:
    """The tensors among the example inputs' leaves (named), and a function that puts new tensors
    back in their places: ``aot_function`` gets flat tensors, the model its own structure, and
    non-tensor leaves (ints, strings) are closed over as constants."""
    named = named_leaves(inputs, names)
    leaves, spec = pytree.tree_flatten(inputs)
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def rebuild(tensors: Sequence[Any]) -> tuple[Any, ...]:
        filled = list(leaves)
        for i, t in zip(positions, tensors):
            filled[i] = t
        return tuple(pytree.tree_unflatten(filled, spec))

    return [named[i] for i in positions], rebuild


def _via_aot(step: Callable, fn: Callable, inputs: tuple[Any, ...], model: nn.Module | None,
             names: list[str], reduce: Callable) -> tuple[list[JointGraph], list[str]]:
    _, params, buffers = named_state(model)
    # dedupe tied weights: functional_call ties them back (named_parameters already dedupes)
    p_names = [n for n, _ in params]
    b_names = [n for n, _ in buffers]
    tensors, rebuild = _tensor_leaves(inputs, names)
    flat_real = [p for _, p in params] + [b for _, b in buffers] + [t for _, t in tensors]

    def functional_step(*flat: Any) -> torch.Tensor:
        np_, nb = len(p_names), len(b_names)
        args = rebuild(flat[np_ + nb:])
        if model is None:
            return step(*args)
        state = dict(zip(p_names, flat[:np_]))
        state.update(zip(b_names, flat[np_:np_ + nb]))
        return reduce(torch.func.functional_call(model, state, args))

    input_names = {i: InputName("parameter", n) for i, n in enumerate(p_names)}
    input_names.update({len(p_names) + i: InputName("buffer", n) for i, n in enumerate(b_names)})
    input_names.update({len(p_names) + len(b_names) + i: InputName("primal", n)
                        for i, (n, _) in enumerate(tensors)})
    # meta tensors: first as fake CPU tensors (full autograd), then as they are if the model
    # insists on the meta device somewhere inside its forward
    attempts = (True, False) if any(t.device.type == "meta" for t in flat_real) else (False,)
    for k, meta_as_cpu in enumerate(attempts):
        fakes = _Fakes(meta_as_cpu)
        try:
            with _torch.record_module_stack(model):
                raw = _torch.capture_with_aot_function(functional_step, [fakes(t) for t in flat_real])
            break
        except Exception as exc:
            if k == len(attempts) - 1:
                raise _trace_failed(exc, "aot", on_meta=len(attempts) > 1) from exc
    return [_joint_graph(raw, input_names, {}, {}, model, 0, "aot_function", {0: "loss"}, values=flat_real)], []


def _via_closure(step: Callable, inputs: tuple[Any, ...], model: nn.Module | None,
                 names: list[str], reduce: Callable) -> tuple[list[JointGraph], list[str]]:
    """``aot_function`` on a function that closes over the model's parameters.

    Parameters stay real tensors inside the traced function, so torch bakes them in as
    ``_param_constant`` ``get_attr`` nodes.  Buffers are passed as inputs (BatchNorm's in-place
    running-stat updates cannot be traced on a captured constant).  Floating user inputs are marked
    as requiring grad: with nothing requiring grad, ``aot_function`` builds no backward at all.
    """
    _, params, buffers = named_state(model)
    b_names = [n for n, _ in buffers]
    tensors, rebuild = _tensor_leaves(inputs, names)

    def closure_step(*flat: Any) -> torch.Tensor:
        args = rebuild(flat[len(b_names):])
        if model is None:
            return step(*args)
        state = dict(zip(b_names, flat[:len(b_names)]))
        return reduce(torch.func.functional_call(model, state, args))

    values = [b for _, b in buffers] + [t for _, t in tensors]
    input_names = {i: InputName("buffer", n) for i, n in enumerate(b_names)}
    input_names.update({len(b_names) + i: InputName("primal", n) for i, (n, _) in enumerate(tensors)})
    fakes = _Fakes()  # parameters are real constants here, so meta stays meta
    flat_fakes = [fakes(b) for _, b in buffers]
    flat_fakes += [fakes(t, True if differentiable(t) else None) for _, t in tensors]
    try:
        with _torch.record_module_stack(model):
            raw = _torch.capture_with_aot_function(closure_step, flat_fakes)
    except Exception as exc:
        raise _trace_failed(exc, "closure") from exc
    by_id = {id(t): name for name, t in params + buffers}
    gm = raw.joint if raw.joint is not None else raw.forward_only
    assert gm is not None
    constant_names: dict[str, str] = {}
    constant_values: dict[str, torch.Tensor] = {}
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            value = getattr(gm, str(n.target), None)
            if isinstance(value, torch.Tensor):
                constant_values[str(n.target)] = value
                if id(value) in by_id:
                    constant_names[str(n.target)] = by_id[id(value)]
    graph = _joint_graph(raw, input_names, constant_names, constant_values, model, 0, "aot_function",
                         {0: "loss"}, values=values)
    return [graph], []
