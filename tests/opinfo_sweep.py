"""Sweep torch's own op database (``op_db``) through fxviz: every differentiable op, its first
float32 CPU sample, with the tensors that require grad as module parameters.

For each op the sweep checks what ``tests/test_opinfo.py`` promises: fxviz traces it or refuses it
with a one-line ``FxvizError``; the default and min-cut saved sets equal torch's partitioners
called directly on the same joint graph; the parameter gradients equal eager autograd's; the
model and the example inputs are untouched; nothing is printed to stderr; and the session is not
poisoned (a small canary model traced after the op gives what it gave in a fresh session).

Classes: ``ok``, ``refused`` (an FxvizError, grouped by its reason), ``known`` (a torch limitation
listed in ``KNOWN_LIMITATIONS`` with its reason), ``skipped`` (no float32 sample, or a sample too
big for CI), and the failures ``raw`` (an exception that is not an FxvizError), ``mismatch``,
``changed`` (inputs or model touched) and ``poisoned``.
"""

from __future__ import annotations

import contextlib
import io
import re
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

import fxviz
from fxviz import _torch
from fxviz.analysis.real.gradients import check_gradients
from fxviz.core.errors import FxvizError

__all__ = ["KNOWN_LIMITATIONS", "Result", "differentiable_ops", "sweep_op", "Canary", "summarize",
           "FAILURES", "MAX_NUMEL"]

# Samples with more elements than this are skipped (CI time; the first sample is tiny for nearly all ops).
MAX_NUMEL = 20_000

FAILURES = ("raw", "mismatch", "changed", "poisoned")

# Ops whose first float32 sample torch itself cannot trace or differentiate (torch 2.13 CPU), with why.
# fxviz refuses each with a one-line FxvizError saying so; the sweep counts them here instead of
# among the refusals.  One place; an entry that starts passing fails the sweep (remove it then).
KNOWN_LIMITATIONS: dict[str, str] = {
    "to_sparse": "dynamo cannot wrap the sparse output ('Attempted to wrap sparse Tensor'), so torch.compile "
                 "captures no graph",
    "sparse.sampled_addmm": "the sample's input is a CSR tensor, which dynamo cannot wrap, so torch.compile "
                            "captures no graph (and fake CSR tensors abort the process on the aot route)",
    "linalg.eig": "eager autograd itself rejects the default loss: the sum of eigenvectors depends on their "
                  "arbitrary phase e^{i phi} (linalg_eig_backward raises), so there is no reference gradient",
}


@dataclass
class Result:
    op: str
    cls: str  # ok | refused | known | skipped | raw | mismatch | changed | poisoned
    detail: str = ""
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time: what the op costs on an idle machine


def differentiable_ops() -> list[Any]:
    from torch.testing._internal.common_methods_invocations import op_db

    return [op for op in op_db if op.supports_autograd]


def op_name(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def first_sample(op: Any) -> Any:
    """The first float32 CPU sample of ``op`` (with requires_grad), or None."""
    if torch.float32 not in op.supported_dtypes("cpu"):
        return None
    torch.manual_seed(0)
    return next(iter(op.sample_inputs("cpu", torch.float32, requires_grad=True)), None)


def _tensors(x: Any) -> list[torch.Tensor]:
    return [t for t in _torch.pytree.tree_leaves(x) if isinstance(t, torch.Tensor)]


class OpModule(nn.Module):
    """``op(sample)`` as a module: the sample's tensors that require grad are its parameters; the
    other tensors are its forward's inputs; everything else is baked in."""

    def __init__(self, op: Callable, sample: Any) -> None:
        super().__init__()
        self.op = op
        structure = (sample.input, tuple(sample.args), dict(sample.kwargs))
        self.leaves, self.spec = _torch.pytree.tree_flatten(structure)
        self.grad_at = [i for i, t in enumerate(self.leaves)
                        if isinstance(t, torch.Tensor) and t.requires_grad]
        self.input_at = [i for i, t in enumerate(self.leaves)
                         if isinstance(t, torch.Tensor) and not t.requires_grad]
        self.weights = nn.ParameterList([nn.Parameter(self.leaves[i].detach().clone()) for i in self.grad_at])
        self.leaves = [None if isinstance(t, torch.Tensor) else t for t in self.leaves]

    def inputs(self, sample: Any) -> tuple[torch.Tensor, ...]:
        leaves, _ = _torch.pytree.tree_flatten((sample.input, tuple(sample.args), dict(sample.kwargs)))
        return tuple(leaves[i].detach().clone() for i in self.input_at)

    def forward(self, *inputs: torch.Tensor) -> Any:
        filled = list(self.leaves)
        for i, p in zip(self.grad_at, self.weights):
            filled[i] = p
        for i, t in zip(self.input_at, inputs):
            filled[i] = t
        first, args, kwargs = _torch.pytree.tree_unflatten(filled, self.spec)
        return self.op(first, *args, **kwargs)


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.detach()
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_complex():
        t = torch.view_as_real(t)
    t = t.contiguous().reshape(-1)
    return t if t.dtype == torch.bool else t.view(torch.uint8)


def _snapshot(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[Any]:
    return ([(n, _bits(p).clone(), p.requires_grad, p.grad) for n, p in model.named_parameters()]
            + [(t.dtype, t.shape, _bits(t).clone(), t.requires_grad) for t in inputs]
            + [torch.get_rng_state().clone()])


def _same(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        for u, v in zip(x if isinstance(x, tuple) else (x,), y if isinstance(y, tuple) else (y,)):
            if isinstance(u, torch.Tensor) or isinstance(v, torch.Tensor):
                if not (isinstance(u, torch.Tensor) and isinstance(v, torch.Tensor) and torch.equal(u, v)):
                    return False
            elif u != v:
                return False
    return True


def direct_saved(graph: Any, strategy: str) -> list[str]:
    """torch's partitioner called directly on a copy of the joint graph: the reference."""
    gm = _torch.copy_graph_module(graph.gm)
    part = _torch.default_partition if strategy == "default" else _torch.min_cut_partition
    with _torch.quiet_torch():
        fwd, _ = part(gm, graph.joint_inputs, num_fwd_outputs=graph.num_fwd_outputs,
                      static_lifetime_input_indices=graph.static_lifetime_input_indices)
    return [n.name for n in list(fwd.graph.nodes)[-1].args[0][graph.num_fwd_outputs:] if n is not None]


class Canary:
    """A tiny model traced in a fresh session; ``check()`` traces it again and compares."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))
        self.x = torch.randn(3, 4)
        self.expected = self._facts()

    def _facts(self) -> tuple[Any, ...]:
        tr = fxviz.trace(self.model, self.x)
        return (len(tr.pieces), tuple(tr.capture.graph_breaks), tuple(n.name for n in tr.joint.graph.nodes),
                tuple(tr.partition("default").saved))

    def check(self) -> str:
        """'' when the session is as fresh, else what differs."""
        try:
            got = self._facts()
        except Exception as exc:
            return f"canary raised {type(exc).__name__}: {exc}"
        return "" if got == self.expected else f"canary traced as {got[:2]} with {len(got[2])} nodes"


def _reason_class(exc: FxvizError) -> str:
    """A short stable label for a refusal: the error class and what torch or fxviz said first."""
    text = exc.message
    m = re.search(r"\((?:dynamo|aot|closure)\): (\w+): ([^:(]{0,60})", text)
    if m:
        return f"{type(exc).__name__}: {m.group(1)}: {m.group(2).strip()}"
    return f"{type(exc).__name__}: {text[:110]}"


@contextlib.contextmanager
def _stderr() -> Iterator[io.StringIO]:
    """What torch prints to stderr (warnings, fxviz's own included, are recorded, not printed)."""
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        yield buf


def sweep_op(op: Any, canary: Canary | None = None, check_canary: bool = True) -> Result:
    """Sweep one op.  The canary is traced after it when ``check_canary``, and always after an op
    that was not plainly fine (refused, graph breaks, failures): those are what leave dynamo state."""
    name = op_name(op)
    start, cpu = time.perf_counter(), time.process_time()
    res = _sweep_op(op, name)
    if canary is not None and res.cls != "skipped" and (check_canary or res.cls != "ok" or "break" in res.detail):
        poisoned = canary.check()
        if poisoned:
            res = Result(name, "poisoned", f"after {res.cls} ({res.detail}): {poisoned}")
    if name in KNOWN_LIMITATIONS:
        if res.cls in ("refused", "mismatch"):
            res = Result(name, "known", KNOWN_LIMITATIONS[name] + f" [{res.detail}]")
        elif res.cls == "ok":
            res = Result(name, "mismatch", "listed in KNOWN_LIMITATIONS but now fully right: remove it")
    res.seconds, res.cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    return res


def _sweep_op(op: Any, name: str) -> Result:
    try:
        sample = first_sample(op)
    except Exception as exc:  # the op database's own sample generator
        return Result(name, "skipped", f"no sample: {type(exc).__name__}")
    if sample is None:
        return Result(name, "skipped", "no float32 sample")
    if sum(t.numel() for t in _tensors((sample.input, sample.args, sample.kwargs))) > MAX_NUMEL:
        return Result(name, "skipped", f"sample over {MAX_NUMEL} elements")
    model = OpModule(op.op, sample)
    inputs = model.inputs(sample)
    try:
        with torch.no_grad():
            model(*inputs)
    except Exception as exc:
        return Result(name, "skipped", f"the sample does not run eagerly: {type(exc).__name__}")
    before = _snapshot(model, inputs)
    with _stderr() as err:
        try:
            tr = fxviz.trace(model, *inputs)
        except FxvizError as exc:
            if len(str(exc).splitlines()) != 1:
                return Result(name, "raw", f"multi-line FxvizError: {exc}")
            return Result(name, "refused", _reason_class(exc))
        except Exception as exc:
            return Result(name, "raw", f"trace: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
        finally:
            changed = not _same(before, _snapshot(model, inputs))
        if changed:
            return Result(name, "changed", "trace changed the model, its inputs or the RNG")
        try:
            problem = _check_trace(tr)
        except FxvizError as exc:
            return Result(name, "refused", "check_gradients: " + _reason_class(exc))
        except Exception as exc:
            return Result(name, "raw", f"analysis: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
    if problem:
        return Result(name, "mismatch", problem)
    if not _same(before, _snapshot(model, inputs)):
        return Result(name, "changed", "analysis changed the model, its inputs or the RNG")
    if err.getvalue().strip():
        return Result(name, "raw", "printed to stderr: " + err.getvalue().strip().splitlines()[-1][:200])
    breaks = f", {len(tr.capture.graph_breaks)} graph break(s)" if tr.capture.graph_breaks else ""
    return Result(name, "ok", f"{len(tr.pieces)} graph(s){breaks}")


def _check_trace(tr: Any) -> str:
    for piece in tr.pieces:
        if not piece.graph.has_backward:
            continue
        for strategy in ("default", "min_cut"):
            p = piece.partition(strategy)
            if not p.ok:
                return f"{strategy} failed on graph {piece.graph.index}: {p.error}"
            want = direct_saved(piece.graph, strategy)
            if list(p.saved) != want:
                return f"{strategy} saved {list(p.saved)} but torch's partitioner saves {want}"
    grads = check_gradients(tr.capture)
    # without graph breaks the graphs are the whole backward: a warning that no parameter gets a
    # gradient must then agree with the gradients (after a break, eager glue computes them instead)
    if not tr.capture.graph_breaks and tr.capture.warnings and grads["has_gradient"].any():
        return f"the capture warns '{tr.capture.warnings[0][:80]}...' yet the graphs compute a gradient"
    bad = grads[~grads["ok"]]
    if len(bad):
        row = bad.iloc[0]
        return (f"gradient of {row['parameter']}: traced {'present' if row['has_gradient'] else 'missing'}, "
                f"eager {'present' if row['eager_has_gradient'] else 'missing'}, max diff {row['max_abs_diff']}")
    return ""


def summarize(results: list[Result]) -> str:
    counts = Counter(r.cls for r in results)
    ran = len(results) - counts.get("skipped", 0)
    lines = [f"op_db sweep (torch {torch.__version__}): {len(results)} differentiable ops, {ran} ran (first float32 "
             "CPU sample each, grad-requiring tensors as module parameters, canary traced after each): "
             + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
    refused = Counter(r.detail for r in results if r.cls == "refused")
    for reason, n in refused.most_common():
        lines.append(f"  refused {n:3d}  {reason}")
    for r in results:
        if r.cls == "known":
            lines.append(f"  known limitation  {r.op}: {r.detail}")
    skipped = Counter(r.detail for r in results if r.cls == "skipped")
    for reason, n in skipped.most_common():
        lines.append(f"  skipped {n:3d}  {reason}")
    for r in results:
        if r.cls in FAILURES:
            lines.append(f"  FAIL {r.cls}  {r.op}: {r.detail}")
    slow = sorted(results, key=lambda r: -r.seconds)[:5]
    lines.append("  slowest: " + ", ".join(f"{r.op} {r.seconds:.1f}s" for r in slow))
    lines.append(f"  total {sum(r.seconds for r in results):.0f}s wall, {sum(r.cpu_seconds for r in results):.0f}s CPU")
    return "\n".join(lines)
