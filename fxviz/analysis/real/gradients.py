"""Compare the traced graphs' parameter gradients with eager autograd on the same inputs.

Both sides run on clones of the parameters and buffers, from the same RNG state, so the user's
model, ``.grad`` fields and RNG are untouched and dropout draws the same masks on both sides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.analysis.real.runtime_args import backward_args, forward_args, is_token, token
from fxviz.core.errors import FxvizError, FxvizWarning
from fxviz.core.fx_facts import output_node
from fxviz.core.state import preserved, restore_rng, rng_state
from fxviz.sources.graphs import Capture, JointGraph
from fxviz.sources.model.routes import recapture

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["check_gradients", "run_joint", "run_partition", "gradient_outputs"]

COLUMNS = ["parameter", "requires_grad", "has_gradient", "eager_has_gradient", "max_abs_diff", "ok"]


def _clones(model: nn.Module) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    params = {n: p.detach().clone().requires_grad_(p.requires_grad) for n, p in model.named_parameters()}
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    return params, buffers


def eager_gradients(cap: Capture, rng: dict[str, object]) -> dict[str, torch.Tensor | None]:
    """Gradients of the loss w.r.t. every parameter, by plain eager autograd on clones."""
    assert cap.model is not None and cap.reduce is not None
    params, buffers = _clones(cap.model)
    restore_rng(rng)
    loss = cap.reduce(torch.func.functional_call(cap.model, {**params, **buffers}, cap.example_inputs))
    wanted = [n for n, p in params.items() if p.requires_grad]
    if not wanted or not loss.requires_grad:
        return {n: None for n in params}
    grads = torch.autograd.grad(loss, [params[n] for n in wanted], allow_unused=True)
    out: dict[str, torch.Tensor | None] = {n: None for n in params}
    out.update(dict(zip(wanted, grads)))
    return out


def gradient_outputs(graph: JointGraph) -> list[tuple[int, str | None, str]]:
    """(flat output position, real name, role of the input) for every gradient output."""
    gm = graph.gm
    placeholders = {repr(_torch.node_desc(n)): n.name for n in gm.graph.nodes if n.op == "placeholder"}
    output = output_node(gm)
    res = []
    for j, desc in enumerate(_torch.output_descs(output)):
        if j < graph.num_fwd_outputs:
            continue
        kind = _torch.describe_output(desc)
        if kind.kind != "grad":
            continue
        ph = placeholders.get(repr(desc.grad_of))
        info = graph.info.get(ph) if ph else None
        res.append((j, info.qualname if info else None, info.role if info else "primal"))
    return res


def run_joint(graph: JointGraph, values: dict[str, Any] | None = None) -> list[Any]:
    """Execute the joint graph on real tensors: primals from the capture, each tangent = 1 for
    the loss (the only differentiable output fxviz's wrapper returns), zeros otherwise."""
    values = dict(graph.placeholder_values if values is None else values)
    args = []
    for n in graph.gm.graph.nodes:
        if n.op != "placeholder":
            continue
        if is_token(n):
            args.append(token())
        elif graph.info[n.name].role == "tangent":
            fake = _torch.meta_val(n)
            args.append(torch.ones(fake.shape, dtype=fake.dtype, device=fake.device))
        elif n.name in values:
            v = values[n.name]
            args.append(v.detach() if isinstance(v, torch.Tensor) else v)
        else:
            raise FxvizError(f"no value for graph input {n.name}", "re-trace the model")
    with torch.no_grad():
        out = _torch.SeededInterpreter(graph.gm).run(*args, enable_io_processing=False)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run_partition(graph: JointGraph, part: Any, values: dict[str, Any] | None = None) -> dict[str, Any]:
    """Execute a partition's forward then backward graph on real tensors, the way AOTAutograd's
    runtime does (saved values handed over by name), and return every backward output by the
    joint name of the input it is the gradient of (``qualname`` of that input)."""
    values = dict(graph.placeholder_values if values is None else values)
    fwd, bwd = part.forward, part.backward
    fw_args = forward_args(part, values)
    with torch.no_grad():
        fw_out = _torch.SeededInterpreter(fwd).run(*fw_args, enable_io_processing=False)
    fw_out = list(fw_out) if isinstance(fw_out, (tuple, list)) else [fw_out]
    bw_args = backward_args(graph, part, fw_out[graph.num_fwd_outputs:])
    with torch.no_grad():
        bw_out = _torch.SeededInterpreter(bwd).run(*bw_args, enable_io_processing=False)
    bw_out = list(bw_out) if isinstance(bw_out, (tuple, list)) else [bw_out]
    result: dict[str, Any] = {}
    for j, qual, _role in gradient_outputs(graph):
        k = j - graph.num_fwd_outputs
        if qual is not None and 0 <= k < len(bw_out):
            result[qual] = bw_out[k]
    return result


def traced_gradients(cap: Capture, rng: dict[str, object]) -> tuple[dict[str, torch.Tensor | None], str]:
    """Parameter gradients from the traced graphs.  One graph: run its joint graph directly.
    Several, or one after a graph break (code outside it may carry the gradient): dynamo's glue is
    needed between them, so run the same capture through
    torch.compile + AOTAutograd on parameter clones."""
    assert cap.model is not None
    names = [n for n, _ in cap.model.named_parameters()]
    result: dict[str, torch.Tensor | None] = {n: None for n in names}
    # a loss applied outside the graph: its tangents are the loss's gradients, not ones; the compiled step has them
    if len(cap.graphs) == 1 and not cap.graph_breaks and not cap.loss_outside:
        graph = cap.graphs[0]
        if not graph.has_backward:
            return result, "joint graph (no backward: nothing required grad)"
        how = "the captured joint graph, executed with torch.fx.Interpreter"
        if _torch.has_backend_random(graph.gm):
            graph = _with_eager_random(cap)
            how = ("the joint graph captured again with eager's random ops (inductor's fallback_random), executed "
                   "with torch.fx.Interpreter: inductor's own random ops draw other masks than eager autograd")
        values = {k: (v.detach().clone() if graph.info[k].role == "buffer" else v)
                  for k, v in graph.placeholder_values.items()}
        restore_rng(rng)
        outs = run_joint(graph, values)
        for j, qual, role in gradient_outputs(graph):
            if role == "parameter" and qual in result:
                result[qual] = outs[j]
        return result, how
    params, buffers = _clones(cap.model)
    model, reduce = cap.model, cap.reduce
    assert reduce is not None

    def step(*args: Any) -> torch.Tensor:
        return reduce(torch.func.functional_call(model, {**params, **buffers}, args))

    restore_rng(rng)
    _torch.run_compiled_backward(step, cap.example_inputs)
    return {n: params[n].grad for n in names}, "torch.compile + AOTAutograd runtime (graph breaks)"


def _with_eager_random(cap: Capture) -> JointGraph:
    """``cap``'s one graph as inductor captures it with eager's random ops: the same decompositions and
    joint passes but for the random-op replacement, so that one RNG state draws the same dropout
    masks as eager autograd (the graph shown draws with inductor's seeds: no eager reference exists)."""
    import warnings

    assert cap.fn is not None  # a model's capture (check_gradients refuses the others)
    with _torch.eager_random(), warnings.catch_warnings():
        warnings.simplefilter("ignore", FxvizWarning)  # said once, by the capture being checked
        again = recapture(cap)
    return again.graphs[0]


def _tensors(x: Any) -> list[torch.Tensor]:

    return [t for t in pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


def _dense(g: torch.Tensor | None) -> torch.Tensor | None:
    """Sparse gradients (``nn.Embedding(sparse=True)``) compared as dense tensors."""
    return g.to_dense() if g is not None and g.layout != torch.strided else g


def _compare(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float) -> tuple[float, bool]:
    """(largest difference, within tolerance).  NaN where eager has NaN (``x ** 0.5`` at a negative
    x) and equal infinities count as equal; an empty gradient (``nn.Linear(0, 3)``) is equal to
    another of its shape.  The tolerance scales with the gradient's size."""
    if got.shape != want.shape:
        return float("nan"), False
    if got.numel() == 0:
        return 0.0, True
    got, want = got.detach().to(want.dtype), want.detach()
    same = (got == want) | (torch.isnan(got) & torch.isnan(want))
    finite = torch.isfinite(want)
    diff = float(torch.where(same, torch.zeros_like(want), (got - want)).abs().max())
    scale = float(want[finite].abs().max()) if bool(finite.any()) else 1.0
    ok = bool(torch.allclose(got, want, rtol=rtol, atol=atol * max(1.0, scale), equal_nan=True))
    return diff, ok


def check_gradients(cap: Capture, rtol: float = 1e-4, atol: float = 1e-5) -> pd.DataFrame:
    """One row per parameter: does the traced backward produce its gradient, and does it match?"""
    import pandas as pd
    if cap.route == "log":
        raise FxvizError("check_gradients runs the model against eager autograd, and a log of a run has no model",
                         "trace the model itself: fxviz.trace(model, *inputs).check_gradients()")
    if cap.model is None:
        raise FxvizError("check_gradients compares parameter gradients, and a plain function has no "
                         "parameters", "trace an nn.Module")
    on_meta = [t for t in list(cap.model.parameters()) + _tensors(cap.example_inputs) if t.device.type == "meta"]
    if on_meta:
        raise FxvizError("check_gradients needs real values, and this model or its inputs live on the meta "
                         "device (shapes only)", "build the model on a real device (cpu) to compare gradients")
    # the forward may write into its inputs: each side gets the inputs exactly as captured
    with preserved(cap.model, cap.example_inputs), _torch.quiet_torch():
        rng = rng_state()
        with preserved(None, cap.example_inputs):
            try:
                eager = eager_gradients(cap, rng)
            except Exception as exc:  # torch's own backward on the user's model: say so, in one line
                raise FxvizError(f"eager autograd raised {type(exc).__name__} computing the reference gradients: "
                                 f"{' '.join(str(exc).split())[:300]}",
                                 "the loss may be ill-defined for this model (e.g. the sum of eigenvectors); "
                                 "trace with loss_fn=... that torch can differentiate") from exc
        try:
            traced, how = traced_gradients(cap, rng)
        except FxvizError:
            raise
        except Exception as exc:
            raise FxvizError(f"running the traced graphs raised {type(exc).__name__}: "
                             f"{' '.join(str(exc).split())[:300]}",
                             "the joint graph could not be executed on real tensors; report this model to fxviz"
                             ) from exc
    rows = []
    for name, p in cap.model.named_parameters():
        ge, gt = _dense(eager.get(name)), _dense(traced.get(name))
        if ge is None or gt is None:
            diff, ok = float("nan"), ge is None and gt is None
        else:
            diff, ok = _compare(gt, ge, rtol, atol)
        rows.append({"parameter": name, "requires_grad": p.requires_grad, "has_gradient": gt is not None,
                     "eager_has_gradient": ge is not None, "max_abs_diff": diff, "ok": ok})
    df = pd.DataFrame(rows, columns=COLUMNS)
    df.attrs["method"] = how
    return df
