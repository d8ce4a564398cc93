"""Model or function + example inputs -> joint forward+backward graph(s) with every node named.

Three routes, all ending in the graph AOTAutograd hands its partitioner:

* ``dynamo`` (default for ``params="lifted"``): ``torch.compile`` with an AOTAutograd backend, as
  ``torch.compile`` users run it.  Parameters are graph inputs; module paths and source lines are
  recorded; data-dependent Python (``.item()``, ``if x.sum() > 0``) becomes graph breaks and
  several joint graphs instead of an error.
* ``aot``: ``aot_function`` over ``torch.func.functional_call`` with fake tensors: no weights are
  touched or computed, so meta-device and billion-parameter models trace in little memory; no
  module paths, no graph breaks (data-dependent Python is an error).
* ``params="closure"``: ``aot_function`` on a function that closes over the model, the situation
  of fxviz's founding story: parameters become ``_param_constant`` ``get_attr`` nodes and get no
  gradient.

Whatever the route, fxviz runs the model on its own copy of the example inputs (a forward that
writes into its inputs never reaches the caller's tensors) inside ``preserved`` (parameters,
buffers, ``.grad``, flags and RNG are put back bitwise).  The default loss depends on what the
model returns: on the dynamo route it is chosen (and ``loss_fn`` checked) inside the traced step
itself (``_TracedLoss``); otherwise (meta models, the aot and closure routes, inductor, dynamic
shapes, and whenever the traced choice cannot decide) one forward first learns the output's
structure (an eager one on fxviz's copy of the inputs, fake on meta) and the state is restored
before the trace.

Meta-device tensors are traced as fake CPU tensors: on the meta device some ops (``nll_loss``, so
``cross_entropy``) have no autograd kernel and would silently drop the whole backward.  When the
loss still ends up independent of every parameter that requires grad, ``Capture.warnings`` says so
instead of showing an empty backward without comment.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from . import _torch
from ._fx import output_node, output_values
from ._state import Snapshot, preserved, private_copy
from ._torch import pytree
from .errors import FxvizWarning, InputError, NoFloatingOutputError, TraceError
from .roles import InputName, NodeInfo, classify_nodes

__all__ = ["JointGraph", "Capture", "capture", "PARAM_MODES", "CAPTURE_ROUTES", "BACKENDS"]

PARAM_MODES = ("lifted", "closure")
CAPTURE_ROUTES = ("auto", "dynamo", "aot")
BACKENDS = _torch.CAPTURE_BACKENDS


@dataclass
class JointGraph:
    """One joint graph and everything fxviz knows about its nodes.  Treat as read-only."""

    gm: fx.GraphModule
    has_backward: bool
    num_fwd_outputs: int
    static_lifetime_input_indices: list[int]
    joint_inputs: Any
    info: dict[str, NodeInfo]
    placeholder_values: dict[str, Any]  # placeholder name -> real (or meta) tensor; tangents absent
    constant_values: dict[str, torch.Tensor]  # get_attr target -> the real tensor it stands for
    index: int = 0
    partitioner_caller: str = "torch.compile"  # whose partitioner arguments were recorded
    # every time the compiled graph ran during capture (dynamo reuses one graph for each call its
    # guards accept): (run number across all graphs, the model state / user input each graph
    # input received, None for a tensor computed at run time).  Empty when not recorded.
    runs: list[tuple[int, list[str | None]]] = field(default_factory=list)
    compiler: str | None = None  # the ``compiler`` argument the partitioner got ("inductor" under inductor)
    backend: str = "aot_eager"  # which torch.compile backend's joint graph this is
    dynamic: bool = False  # traced with symbolic sizes
    before_joint_passes: fx.GraphModule | None = None  # inductor: the graph before its joint-graph passes
    # a graph read from a log: the forward and backward graphs the run itself used (strategy "logged")
    logged: tuple[fx.GraphModule, fx.GraphModule] | None = None


@dataclass
class Capture:
    """The result of capturing: the graphs in execution order and how they were made."""

    graphs: list[JointGraph]
    route: str
    params: str
    loss: str
    graph_breaks: list[str]
    model: nn.Module | None
    fn: Callable | None  # None when the graphs came from somewhere without the model (a log)
    example_inputs: tuple[Any, ...]
    loss_fn: Callable | None
    reduce: Callable[[Any], torch.Tensor] | None
    input_names: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # things a user must know to read the graph
    # Python frames dynamo skipped and ran as plain eager code (``forward (model.py:20)``): what
    # they compute is in no captured graph
    eager_frames: list[str] = field(default_factory=list)
    backend: str = "aot_eager"  # whose joint graph this is: "aot_eager" or "inductor" (torch.compile's default)
    dynamic: bool = False  # traced with symbolic sizes (torch.compile(dynamic=True))

    @property
    def backend_label(self) -> str:
        """Which capture the views show, in the words of every caption."""
        label = ("backend='inductor' (torch.compile's default: inductor decompositions and joint-graph passes)"
                 if self.backend == "inductor" else "backend='aot_eager' (AOTAutograd's graph, no inductor passes)")
        return label + (", dynamic shapes" if self.dynamic else "")
    name: str | None = None  # a log's frame name (no model, no function to name it after)
    origin: str | None = None  # a log: which rank and compile the graph came from
    # a log: the parameters its graphs name, as meta tensors with the logged shape, dtype and
    # requires_grad (what the doctor and the parameter table read when there is no model)
    state: list[tuple[str, torch.Tensor]] = field(default_factory=list)

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        """The model's parameters, or (a log) the parameters the log describes."""
        return list(self.model.named_parameters()) if self.model is not None else list(self.state)

    @property
    def title(self) -> str:
        """What views call the model: its class, the traced function's name, or a log's frame."""
        if self.model is not None:
            return type(self.model).__name__
        if self.name is not None:
            return self.name
        return getattr(self.fn, "__name__", None) or "function"


# --- the loss ------------------------------------------------------------------------------------
def _leaves(out: Any) -> list[tuple[str, Any]]:
    """(path, leaf) of an output structure; dataclasses are walked field by field."""
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        res = []
        for f in dataclasses.fields(out):
            res += [(f".{f.name}{p}", v) for p, v in _leaves(getattr(out, f.name))]
        return res
    leaves, _ = pytree.tree_flatten_with_path(out)
    return [(pytree.keystr(path), leaf) for path, leaf in leaves]


def _differentiable(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _as_loss_part(t: torch.Tensor) -> torch.Tensor:
    # view_as_real refuses a lazily conjugated tensor (torch.fft.ifft's output): resolve it first
    return torch.view_as_real(t.resolve_conj()).sum() if t.is_complex() else t.sum()


def _storages(x: Any) -> set[int]:
    keys = set()
    for t in pytree.tree_leaves(x):
        if isinstance(t, torch.Tensor) and t.layout == torch.strided and t.device.type != "meta":
            keys.add(_torch.storage_key(t))
    return keys


def _own_copy(scalar: Callable[[Any], torch.Tensor]) -> Callable[[Any], torch.Tensor]:
    """A loss that is a view of an input (``x.squeeze()`` of a 1x1 x) is handled by AOTAutograd
    outside the graph, which then has no backward; a copy makes it a value of the graph."""
    return lambda o: scalar(o).clone()


def _make_reducer(out: Any, loss_fn: Callable | None, inputs: Any = ()
                  ) -> tuple[Callable[[Any], torch.Tensor], str]:
    """The loss: ``loss_fn``, the output itself when it is a scalar, else the sum of every
    floating output.  ``inputs`` are the tensors ``out`` was computed from (to spot a loss that
    is a view of one of them)."""
    reduce, desc = _reducer(out, loss_fn)
    if loss_fn is not None or _is_scalar_loss(out):
        loss = loss_fn(out) if loss_fn is not None else out
        if isinstance(loss, torch.Tensor) and _storages(loss) & _storages(inputs):
            return _own_copy(reduce), desc
    return reduce, desc


def _reducer(out: Any, loss_fn: Callable | None) -> tuple[Callable[[Any], torch.Tensor], str]:
    if loss_fn is not None:
        try:
            loss = loss_fn(out)
        except Exception as exc:  # the user's code, not ours
            raise InputError(f"loss_fn raised {type(exc).__name__} on the model's outputs: {_one_line(exc)}",
                             f"loss_fn receives what the model returns ({_describe(out)}); make it map "
                             "that to a scalar") from exc
        if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and _differentiable(loss)):
            raise InputError(f"loss_fn returned {_describe(loss)}, not a floating scalar tensor",
                             "make loss_fn return one floating-point number, e.g. out.sum()")
        return (lambda o: _user_loss(loss_fn(o))), _USER_DESC
    if _is_scalar_loss(out):
        return _scalar_loss, _SCALAR_DESC
    paths = [p or "output" for p, v in _leaves(out) if _differentiable(v)]
    if not paths:
        raise NoFloatingOutputError(f"the model returned {_describe(out)}: no floating tensor to "
                                    "differentiate")

    desc = _sum_desc(paths)
    if isinstance(out, torch.Tensor):
        # one tensor: the same sum without walking an output structure, which dynamo would trace
        # too (+30% on an MLP's capture)
        return _as_loss_part, desc

    def reduce(o: Any) -> torch.Tensor:
        total, _ = _floating_sum(o)
        assert total is not None, "the output has a floating tensor (checked when the loss was chosen)"
        return total

    return reduce, desc


_SCALAR_DESC = "loss = the model's output (a scalar)"
_USER_DESC = "loss = loss_fn(outputs)"


def _user_loss(loss: torch.Tensor) -> torch.Tensor:
    return loss.reshape(())


def _is_scalar_loss(out: Any) -> bool:
    return isinstance(out, torch.Tensor) and out.numel() == 1 and out.is_floating_point()


def _scalar_loss(o: torch.Tensor) -> torch.Tensor:
    return o if o.dim() == 0 else o.reshape(())


def _sum_desc(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:4]) + (" ..." if len(paths) > 4 else "")
    return f"loss = sum of every floating output ({len(paths)}: {shown})"


def _floating_sum(o: Any) -> tuple[torch.Tensor | None, list[str]]:
    """The sum of every floating leaf of an output structure, and the leaves' paths."""
    total = None
    paths = []
    for path, v in _leaves(o):
        if _differentiable(v):
            paths.append(path or "output")
            part = _as_loss_part(v)
            total = part if total is None else total + part
    return total, paths


class _LazyLoss:
    """The default loss, built from the output of the first call (made by the tracer itself)."""

    def __init__(self) -> None:
        self.reduce: Callable[[Any], torch.Tensor] | None = None
        self.desc = ""

    def __call__(self, out: Any) -> torch.Tensor:
        if self.reduce is None:
            self.reduce, self.desc = _make_reducer(out, None)
        return self.reduce(out)


class _TracedLoss:
    """The loss, chosen inside the traced step itself (dynamo route): no eager probe forward runs
    first to learn the output's structure or to check ``loss_fn``.

    The choice reads only what dynamo knows while tracing (tensor or structure, ``numel``,
    dtype), so it adds no op and no graph break; the ops are those of ``_reducer``'s loss, from
    the same functions.  ``seen`` keeps what the traced call found (dynamo replays the dict writes
    after the graph runs).  ``desc()`` is None where the probe route must decide instead: no
    floating output, ``loss_fn`` not returning a floating scalar (their errors), or not traced at
    all.  A scalar loss that is a view of an input is found afterwards from the compiled step's
    result (``aliases``).
    """

    def __init__(self, loss_fn: Callable | None = None) -> None:
        self.loss_fn = loss_fn
        self.seen: dict[str, Any] = {}

    def __call__(self, out: Any) -> Any:
        seen = self.seen
        if self.loss_fn is not None:
            loss = self.loss_fn(out)
            fit = isinstance(loss, torch.Tensor) and loss.numel() == 1 and _differentiable(loss)
            seen["scalar"] = fit
            return _user_loss(loss) if fit else None
        if isinstance(out, torch.Tensor):
            if out.numel() == 1 and out.is_floating_point():
                seen["scalar"] = True
                return _scalar_loss(out)
            seen["scalar"] = False
            seen["paths"] = ("output",) if _differentiable(out) else ()
            return _as_loss_part(out)
        total, paths = _floating_sum(out)
        seen["scalar"] = False
        seen["paths"] = tuple(paths)
        return total

    def desc(self) -> str | None:
        if self.seen.get("scalar"):
            return _USER_DESC if self.loss_fn is not None else _SCALAR_DESC
        paths = self.seen.get("paths")
        return _sum_desc(paths) if paths and self.loss_fn is None else None

    def aliases(self, result: Any, sources: Any) -> bool:
        """Is the step's result (a scalar loss) a view of one of ``sources``?  ``_make_reducer``'s
        check, made on the compiled step's result: AOTAutograd hands back an output that aliases
        an input as a view of that very input."""
        return bool(self.seen.get("scalar")) and bool(_storages(result) & _storages(sources))


def _describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    name = type(x).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


# --- names ---------------------------------------------------------------------------------------
def _input_names(fn: Callable, n: int) -> list[str]:
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        params = []
    names = []
    for i in range(n):
        if i < len(params) and params[i].kind != params[i].VAR_POSITIONAL:
            names.append(params[i].name)
        else:
            names.append(f"input{i}")
    return names


def _named_state(model: nn.Module | None) -> tuple[dict[int, InputName], list[tuple[str, torch.Tensor]],
                                                   list[tuple[str, torch.Tensor]]]:
    by_id: dict[int, InputName] = {}
    params: list[tuple[str, torch.Tensor]] = []
    buffers: list[tuple[str, torch.Tensor]] = []
    if model is None:
        return by_id, params, buffers
    for name, p in model.named_parameters():
        by_id.setdefault(id(p), InputName("parameter", name))
        params.append((name, p))
    for name, b in model.named_buffers():
        by_id.setdefault(id(b), InputName("buffer", name))
        buffers.append((name, b))
    return by_id, params, buffers


def _named_leaves(inputs: tuple[Any, ...], names: list[str]) -> list[tuple[str, Any]]:
    """(real name, leaf) of every example input leaf: ``x``, or ``xs[0]`` inside a list argument."""
    out = []
    for i, arg in enumerate(inputs):
        leaves, _ = pytree.tree_flatten_with_path(arg)
        for path, leaf in leaves:
            out.append((names[i] + pytree.keystr(path), leaf))
    return out


def _module_paths(model: nn.Module | None) -> dict[str, str]:
    if model is None:
        return {}
    return {str(id(m)): name for name, m in model.named_modules() if name}


# --- validation ----------------------------------------------------------------------------------
def _check_call(model_or_fn: Any, params: str, route: str, backend: str = "aot_eager", dynamic: bool = False) -> None:
    if not callable(model_or_fn):
        raise InputError(f"fxviz.trace needs an nn.Module or a function, got {_describe(model_or_fn)}",
                         "call fxviz.trace(model, *example_inputs)")
    if params not in PARAM_MODES:
        raise InputError(f"params={params!r} is not one of {PARAM_MODES}",
                         "use params='lifted' (parameters as graph inputs) or params='closure'")
    if route not in CAPTURE_ROUTES:
        raise InputError(f"capture_route={route!r} is not one of {CAPTURE_ROUTES}",
                         "use capture_route='auto' (default), 'dynamo' (torch.compile's capture) or "
                         "'aot' (fake tensors, no graph breaks)")
    if backend not in BACKENDS:
        raise InputError(f"backend={backend!r} is not one of {BACKENDS}",
                         "use backend='aot_eager' (the graph AOTAutograd traces) or backend='inductor' "
                         "(the graph torch.compile's default backend partitions)")
    if (backend != "aot_eager" or dynamic) and (params == "closure" or route == "aot"):
        what = f"backend={backend!r}" if backend != "aot_eager" else "dynamic=True"
        raise InputError(f"{what} needs torch.compile's capture (capture_route='dynamo', params='lifted')",
                         "drop params='closure' / capture_route='aot', or trace with backend='aot_eager', "
                         "dynamic=False")
    if isinstance(model_or_fn, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        raise InputError(f"{type(model_or_fn).__name__} is TorchScript, which torch.compile and AOTAutograd "
                         "cannot see into (the joint graph would hold nothing of it)",
                         "trace the Python nn.Module or function, before torch.jit.script / torch.jit.trace")


def _uncompiled(model_or_fn: Any) -> Any:
    """The model or function under a ``torch.compile`` wrapper (tracing the wrapper would nest
    dynamo in dynamo, name every parameter ``_orig_mod.*``, and break closure capture)."""
    for _ in range(4):  # compiled twice is possible
        inner = getattr(model_or_fn, "_orig_mod", None) if isinstance(model_or_fn, nn.Module) else \
            getattr(model_or_fn, "_torchdynamo_orig_callable", None)
        if inner is None or not callable(inner):
            return model_or_fn
        model_or_fn = inner
    return model_or_fn


def _model_raised(exc: Exception, inputs: tuple[Any, ...]) -> InputError:
    """The user's forward rejected the example inputs: say why, and what usually fixes it."""
    text = _one_line(exc)
    if isinstance(exc, TypeError) and "keyword" in text:
        hint = ("fxviz.trace passes example inputs positionally; bind keyword arguments with a wrapper: "
                "fxviz.trace(lambda x: model(x, key=value), x)")
    elif isinstance(exc, TypeError) and "positional argument" in text:
        hint = f"pass exactly the inputs model.forward takes (got {len(inputs)}): fxviz.trace(model, *inputs)"
    elif "device" in text and ("meta" in text or "same device" in text):
        hint = "put the example inputs on the model's device (torch.device('meta') for a meta model)"
    elif "dtype" in text or "scalar type" in text.lower() or "Long" in text:
        hint = ("give the example inputs the dtypes the model expects "
                "(float for activations, torch.long for token ids)")
    else:
        hint = "check that model(*example_inputs) runs, and the inputs' number, shapes and dtypes"
    return InputError(f"the model raised {type(exc).__name__} on the example inputs: {text}", hint)


def _eager_output(fn: Callable, inputs: tuple[Any, ...]) -> Any:
    """Run once eagerly (no grad) so a model that rejects its inputs fails here, clearly."""
    try:
        with torch.no_grad():
            return fn(*inputs)
    except Exception as exc:  # the user's code, not ours
        raise _model_raised(exc, inputs) from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("..." if len(text) > 300 else "")


def _on_meta(model: nn.Module | None, inputs: Sequence[Any]) -> bool:
    tensors = [t for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    if model is not None:
        tensors += list(model.parameters()) + list(model.buffers())
    return any(t.device.type == "meta" for t in tensors)


def _all_meta(model: nn.Module | None, inputs: Sequence[Any]) -> bool:
    """Every tensor on the meta device (a mix is an error the model's own forward reports)."""
    tensors = [t for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    if model is not None:
        tensors += list(model.parameters()) + list(model.buffers())
    return all(t.device.type == "meta" for t in tensors)


_COMPRESSED = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)


def _refuse_compressed(model: nn.Module | None, inputs: tuple[Any, ...], names: list[str], route: str) -> None:
    """The fake-tensor routes cannot take compressed sparse tensors: torch's fake CSR tensors abort
    the whole Python process (torch 2.13, reproducible with ``aot_function`` alone), so they are
    refused before torch sees them.  COO tensors trace."""
    named = _named_leaves(inputs, names)
    if model is not None:
        named += list(model.named_parameters()) + list(model.named_buffers())
    for name, t in named:
        if isinstance(t, torch.Tensor) and t.layout in _COMPRESSED:
            who = "params='closure'" if route == "closure" else "capture_route='aot'"
            layout = str(t.layout).replace("torch.", "")
            raise InputError(f"{name} is a {layout} tensor, and {who} traces with fake tensors, which "
                             f"crash the process on {layout} tensors (a torch bug)",
                             f"pass {name}.to_dense() (or .to_sparse() for COO), or use params='lifted' with "
                             "capture_route='dynamo', which runs sparse ops outside the graph")


# --- the routes ----------------------------------------------------------------------------------
def capture(model_or_fn: Callable, example_inputs: tuple[Any, ...], *, loss_fn: Callable | None = None,
            params: str = "lifted", route: str = "auto", backend: str = "aot_eager",
            dynamic: bool = False) -> Capture:
    """Capture the joint graph(s) of ``loss(model_or_fn(*example_inputs))`` without changing the
    model or the RNG.  See the module docstring for the routes."""
    # the training graph whatever the caller's grad mode (a notebook cell under no_grad/inference_mode)
    with torch.inference_mode(False), torch.enable_grad():
        return _capture(model_or_fn, example_inputs, loss_fn, params, route, backend, dynamic)


def _capture(model_or_fn: Callable, example_inputs: tuple[Any, ...], loss_fn: Callable | None, params: str,
             route: str, backend: str = "aot_eager", dynamic: bool = False) -> Capture:
    model_or_fn = _uncompiled(model_or_fn)
    _check_call(model_or_fn, params, route, backend, dynamic)
    model = model_or_fn if isinstance(model_or_fn, nn.Module) else None
    fn = model_or_fn
    inputs = private_copy(tuple(example_inputs))  # fxviz's own: the caller's tensors are never run
    target_fn = model.forward if model is not None else fn
    names = _input_names(target_fn, len(inputs))
    on_meta = _on_meta(model, inputs)
    if route == "auto":
        route = "aot" if (on_meta or params == "closure") and backend == "aot_eager" and not dynamic else "dynamo"
    if params == "closure":
        route = "closure"
    elif route == "dynamo" and on_meta:
        raise InputError("capture_route='dynamo' runs the model, and this model or input is on the meta device",
                         "use capture_route='aot' (the default for meta models), which traces with fake tensors")

    if route in ("aot", "closure"):
        _refuse_compressed(model, inputs, names, route)

    reduce: Callable[[Any], torch.Tensor]
    with preserved(model, inputs) as snapshot, _torch.quiet_torch():
        found = None
        if route == "dynamo" and backend == "aot_eager" and not dynamic:
            found = _dynamo_without_probe(fn, inputs, model, names, loss_fn, snapshot)
        if found is not None:
            reduce, loss_desc, graphs, breaks, eager_frames = found
        else:
            reduce, loss_desc, graphs, breaks, eager_frames = _probe_then_capture(
                fn, inputs, model, names, loss_fn, route, backend, dynamic, on_meta, snapshot)
    notes = _gradient_warnings(graphs, model, params, on_meta, breaks)
    for note in notes:
        warnings.warn(note, FxvizWarning, stacklevel=3)
    return Capture(graphs=graphs, route=route, params=params, loss=loss_desc, graph_breaks=breaks,
                   model=model, fn=fn, example_inputs=inputs, loss_fn=loss_fn, reduce=reduce,
                   input_names=names, warnings=notes, eager_frames=eager_frames, backend=backend, dynamic=dynamic)


def _probe_then_capture(fn: Callable, inputs: tuple[Any, ...], model: nn.Module | None, names: list[str],
                        loss_fn: Callable | None, route: str, backend: str, dynamic: bool, on_meta: bool,
                        snapshot: Snapshot
                        ) -> tuple[Callable[[Any], torch.Tensor], str, list[JointGraph], list[str], list[str]]:
    """Learn the output's structure first (a forward on fxviz's own copy of the inputs, fake for
    a meta model), choose the loss from it, restore, then capture by ``route``."""
    # a meta model's default loss is chosen inside aot_function's own first (fake) pass: a
    # separate fake forward first would cost as much again (15% of a 1e9-parameter trace)
    lazy = _LazyLoss() if on_meta and loss_fn is None and _all_meta(model, inputs) else None
    reduce: Callable[[Any], torch.Tensor]
    if lazy is not None:
        reduce = lazy
        loss_desc = ""
    else:
        sources: Any = ()  # what the probe's output may be a view of
        try:
            if on_meta:
                out = _fake_output(fn, inputs)
            else:
                probe = private_copy(inputs)
                out = _eager_output(fn, probe)
                sources = (probe, list(model.parameters()) + list(model.buffers()) if model is not None else [])
        finally:
            snapshot.restore()  # the traced run starts from the state the user handed us
        reduce, loss_desc = _make_reducer(out, loss_fn, sources)

    def step(*args: Any) -> torch.Tensor:
        return reduce(fn(*args))

    failed: TraceError | None = None
    eager_frames: list[str] = []
    try:
        if route == "dynamo":
            before = _torch.unimplemented_count()
            graphs, breaks, _ = _via_dynamo(step, inputs, model, names, backend, dynamic)
            eager_frames = _torch.skipped_frames(before)
        elif route == "aot":
            graphs, breaks = _via_aot(step, fn, inputs, model, names, reduce)
        else:
            graphs, breaks = _via_closure(step, inputs, model, names, reduce)
    except TraceError as exc:
        if lazy is None or lazy.reduce is not None:
            raise
        failed = exc
    if failed is not None:
        # it failed before the model produced an output: say what the model itself raised
        # (InputError) or why its output has no loss (NoFloatingOutputError), as when probed first
        _make_reducer(_fake_output(fn, inputs), None)
        raise failed
    if lazy is not None:
        assert lazy.reduce is not None
        reduce, loss_desc = lazy.reduce, lazy.desc
    return reduce, loss_desc, graphs, breaks, eager_frames


def _dynamo_without_probe(fn: Callable, inputs: tuple[Any, ...], model: nn.Module | None, names: list[str],
                          loss_fn: Callable | None, snapshot: Snapshot
                          ) -> tuple[_TracedLoss, str, list[JointGraph], list[str], list[str]] | None:
    """The dynamo route with the loss chosen inside the traced step (``_TracedLoss``):
    no eager probe forward, and no restore of every tensor between a probe and the traced run.

    On AlexNet that probe and that restore were 0.06 of fxviz's 0.15 s over torch alone (wall, load 1.2)
    (a 244 MB compare and a forward); on a 2-layer width-768 GPT 0.15 of 0.22 s.  None (and the
    model put back as the user handed it) where the probe route must decide instead: the trace
    failed (the probe then says whether the model itself rejects the inputs), the output has no
    floating tensor or ``loss_fn`` gave no floating scalar (the probe route's errors), or the
    scalar loss is a view of an input (the probe route's copy)."""
    traced = _TracedLoss(loss_fn)

    def step(*args: Any) -> Any:
        return traced(fn(*args))

    before = _torch.unimplemented_count()
    try:
        with _torch.quiet_torch(silent=True):  # a failure here is not the user's to read: the probe route says why
            graphs, breaks, result = _via_dynamo(step, inputs, model, names)
    except Exception:  # the probe route runs the model again and says why
        snapshot.restore()
        return None
    desc = traced.desc()
    state = list(model.parameters()) + list(model.buffers()) if model is not None else []
    if desc is None or traced.aliases(result, (inputs, state)):
        snapshot.restore()
        return None
    return traced, desc, graphs, breaks, _torch.skipped_frames(before)


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
        for desc, out in list(zip(descs, output_values(g.gm)))[g.num_fwd_outputs:]:
            kind = _torch.describe_output(desc)
            ph = by_desc.get(repr(getattr(desc, "grad_of", None))) if kind.kind == "grad" else None
            if ph is not None and out is not None:
                names.append(g.info[ph.name].qualname or ph.name)
        return names
    grads = output_values(g.gm)[g.num_fwd_outputs:]
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
        raise _model_raised(exc, inputs) from exc


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


def _trace_failed(exc: Exception, route: str) -> TraceError:
    if _data_dependent(exc) and route != "dynamo":
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
    return TraceError(f"torch could not trace the model ({route}): {type(exc).__name__}: {_one_line(exc)}", hint)


def _via_dynamo(step: Callable, inputs: tuple[Any, ...], model: nn.Module | None,
                names: list[str], backend: str = "aot_eager",
                dynamic: bool = False) -> tuple[list[JointGraph], list[str], Any]:
    """The joint graphs dynamo captured, the graph-break reasons, and what the step returned."""
    by_id, _, _ = _named_state(model)
    for name, t in _named_leaves(inputs, names):
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
    for k, raw in enumerate(raws):
        input_names: dict[int, InputName] = {}
        for i, (t, src) in enumerate(zip(raw.example_inputs, raw.input_sources + [None] * len(raw.example_inputs))):
            known = by_id.get(id(t))
            input_names[i] = known or InputName("primal", _source_label(src, i, k))
        user_names = {0: "loss"} if k == last else {}
        caller = "torch.compile (inductor)" if backend == "inductor" else "torch.compile"
        g = _joint_graph(raw, input_names, {}, {}, model, k, caller, user_names)
        g.backend, g.dynamic = backend, dynamic
        g.runs = [(seq, [by_id[i].qualname if i in by_id else None for i in ids]) for seq, ids in raw.calls]
        graphs.append(g)
    return graphs, breaks, result


def _no_graph(breaks: list[str], skipped: bool = True) -> TraceError:
    """Dynamo compiled nothing: say why it skipped the frames (``Attempted to wrap sparse Tensor``),
    or, where it skipped none (``skipped`` False), that the graph breaks left no op in any graph:
    OpInfo's ``corrcoef``/``cov`` samples, whose one op breaks at ``aten.equal`` (data-dependent);
    torch.compile of the same step compiles no graph either."""
    if not breaks:
        return TraceError("torch.compile captured no graph: the whole model ran as plain Python",
                          "make sure the model calls torch operations on its inputs")
    reasons = "; ".join(dict.fromkeys(breaks))
    if not skipped and not any("sparse" in b.lower() for b in breaks):
        return TraceError(f"torch.compile captured no graph: every op ran outside the graphs, at graph breaks "
                          f"({reasons})",
                          "torch.compile of the same step compiles no graph either (eager autograd runs that "
                          "code); a loss_fn with an op of its own (lambda out: out.sum()) is captured after the "
                          "break")
    if any("sparse" in b.lower() for b in breaks):
        hint = ("dynamo cannot take sparse tensors as graph inputs; pass x.to_dense(), or use "
                "capture_route='aot', which traces COO tensors")
    else:
        hint = "dynamo skipped every frame for the reason shown; capture_route='aot' is another route"
    return TraceError(f"torch.compile captured no graph: dynamo ran every frame as plain Python ({reasons})", hint)


def graph_name(index: int) -> str:
    """How fxviz names piece ``index`` (0-based, as ``draw(piece=...)`` takes it) to a person: "graph 1"
    is the first, as the piece selector, the CLI's ``--piece``, the memory table and the doctor count."""
    return f"graph {index + 1}"


def _source_label(source: str | None, i: int, k: int) -> str:
    if source is None:
        return f"{graph_name(k)} input {i}"
    stack = re.fullmatch(r"L\[['\"]___stack(\d+)['\"]\]", source)
    if stack:  # a value dynamo carried across a graph break: computed by code outside the graphs
        return f"value from outside the graph ({stack.group(1)})"
    label = _torch.module_path_from_stack_entry(source) or source
    return label if k == 0 else f"{label} (from graph {k - 1})"


def _joint_graph(raw: _torch.RawJoint, input_names: dict[int, InputName], constant_names: dict[str, str],
                 constant_values: dict[str, torch.Tensor], model: nn.Module | None, index: int,
                 caller: str, user_names: dict[int, str],
                 values: Sequence[Any] | None = None) -> JointGraph:
    gm = raw.joint if raw.joint is not None else raw.forward_only
    assert gm is not None
    has_backward = raw.joint is not None
    num_fwd = raw.num_fwd_outputs if has_backward else len(output_values(gm))
    info = classify_nodes(gm, num_fwd, input_names, constant_names, _module_paths(model),
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
                      compiler=raw.compiler, before_joint_passes=raw.before_joint_passes)


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
    named = _named_leaves(inputs, names)
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
    _, params, buffers = _named_state(model)
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
                raise _trace_failed(exc, "aot") from exc
    return [_joint_graph(raw, input_names, {}, {}, model, 0, "aot_function", {0: "loss"}, values=flat_real)], []


def _via_closure(step: Callable, inputs: tuple[Any, ...], model: nn.Module | None,
                 names: list[str], reduce: Callable) -> tuple[list[JointGraph], list[str]]:
    """``aot_function`` on a function that closes over the model's parameters.

    Parameters stay real tensors inside the traced function, so torch bakes them in as
    ``_param_constant`` ``get_attr`` nodes.  Buffers are passed as inputs (BatchNorm's in-place
    running-stat updates cannot be traced on a captured constant).  Floating user inputs are marked
    as requiring grad: with nothing requiring grad, ``aot_function`` builds no backward at all.
    """
    _, params, buffers = _named_state(model)
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
    flat_fakes += [fakes(t, True if _differentiable(t) else None) for _, t in tensors]
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
