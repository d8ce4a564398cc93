"""The bad-input and real-world-model corpus.

Every case ends either in a correct result (checked against eager autograd through
``check_gradients``, or against what the case is built to show) or in an ``fxviz.FxvizError``
whose message is one line and which carries a fix hint — never a hang (each case runs under a
deadline), never a raw exception from torch's internals, and never a change to the user's model or
inputs, whatever the outcome.  Cases run in both parameter modes where the mode matters.
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import signal
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fxviz
from fxviz.core.errors import FxvizWarning

from .conftest import assert_unchanged, snapshot

DEADLINE_S = 120  # generous for 2 busy cores; a hang is what it catches


# --- outcomes --------------------------------------------------------------------------------------
@dataclass
class Ok:
    """A trace is the right answer; ``check(tr)`` says what makes it right."""

    check: Callable[[fxviz.Trace], None] | None = None
    gradients: str = "match"  # match: lifted params match eager; none: no param gets one; skip
    warning: str | None = None  # regex an FxvizWarning (and the summary) must match


@dataclass
class Err:
    """An FxvizError of class ``cls`` whose message matches ``match``; ``hint`` too if given."""

    cls: type
    match: str
    hint: str | None = None


@dataclass
class Case:
    id: str
    build: Callable[[], tuple[Any, tuple[Any, ...]]]
    expect: dict[str, Ok | Err]  # by params mode
    kwargs: dict[str, Any] = field(default_factory=dict)
    xfail: dict[str, str] = field(default_factory=dict)  # mode -> known bug elsewhere (strict)
    context: Callable[[], Any] = contextlib.nullcontext  # the caller's ambient mode around trace()


def both(outcome: Ok | Err) -> dict[str, Ok | Err]:
    return {"lifted": outcome, "closure": outcome}


def lifted_and_closure(lifted: Ok | Err, closure: Ok | Err | None = None) -> dict[str, Ok | Err]:
    """The usual pair: lifted parameters match eager; closure-captured ones get no gradient."""
    if closure is None:
        closure = Ok(lifted.check if isinstance(lifted, Ok) else None, gradients="none")
    return {"lifted": lifted, "closure": closure}


# --- small models ------------------------------------------------------------------------------------
def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _ids(*shape: int, vocab: int = 10) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(1))


def _linear(i: int = 4, o: int = 3) -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(i, o)


class Raises(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("boom from the user's forward")


class DataDependent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lin(x)
        if h.sum() > 0:  # Python branching on a tensor value
            return h * 2
        return h - 1


@torch.compiler.disable
def _eager_helper(h: torch.Tensor) -> torch.Tensor:
    return h * 2


class GraphBreak(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = _linear(4, 4), _linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(_eager_helper(self.a(x)))


@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    aux: torch.Tensor
    note: str


class Outputs(nn.Module):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.lin = _linear(4, 4)

    def forward(self, x: torch.Tensor) -> Any:
        h = self.lin(x)
        if self.kind == "dict":
            return {"logits": h, "aux": {"norm": h.norm()}}
        if self.kind == "tuple":
            return h, h.argmax(-1), 3
        if self.kind == "dataclass":
            return Output(h, h.mean(), "hi")
        if self.kind == "ints":
            return h.argmax(-1)
        if self.kind == "none":
            return None
        raise AssertionError(self.kind)


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 3)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(idx))


class Tied(nn.Module):
    """An output head sharing the embedding matrix (GPT-2's weight tying)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.emb(idx))


def _frozen() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _batchnorm() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()


class InPlaceOnInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(2)
        return self.lin(x)


class Checkpointed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = _linear(4, 4), _linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.utils.checkpoint.checkpoint(lambda h: self.b(torch.relu(self.a(h))), x,
                                                 use_reentrant=False)


class Random(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.lin(x)) + torch.rand_like(x) * torch.randn(x.shape)


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class CustomFunction(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return Square.apply(self.lin(x))


class NoGradInside(nn.Module):
    def __init__(self, everything: bool = False) -> None:
        super().__init__()
        self.everything = everything
        self.a, self.b = _linear(4, 4), _linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            h = self.a(x)
            if self.everything:
                return self.b(h)
        return self.b(h)


class MixedDtypes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = _linear(4, 4)
        self.b = _linear(4, 4).to(torch.float64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x).double())


class Autocast(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.lin(x)


class Complex(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4, dtype=torch.complex64, generator=torch.Generator().manual_seed(0)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.complex64) @ self.w  # a complex output: the loss sums its real view


class CrossEntropy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.lin(x), y)


class PinnedToMeta(CrossEntropy):
    """Makes a tensor on the meta device by name, so fxviz must trace it on meta as it is."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.lin(x) + torch.zeros(5, device="meta"), y)


def _meta_pinned() -> nn.Module:
    with torch.device("meta"):
        return PinnedToMeta()


def _meta_mlp() -> nn.Module:
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _meta_cross_entropy() -> nn.Module:
    with torch.device("meta"):
        return CrossEntropy()


MARKUP = '<b onmouseover="x">a&b</b>{|}->"\\l'
SCRIPT = "<script>alert('x')</script>"


class Markup(nn.Module):
    """Module and buffer names full of HTML and DOT metacharacters."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module(MARKUP, _linear(4, 4))
        self.register_buffer(SCRIPT, torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self, MARKUP)(x) + getattr(self, SCRIPT)


class KeywordOnly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear()

    def forward(self, x: torch.Tensor, *, scale: float) -> torch.Tensor:
        return self.lin(x) * scale


class ListInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear(4, 4)

    def forward(self, xs: list[torch.Tensor]) -> torch.Tensor:
        return self.lin(xs[0]) + self.lin(xs[1])


class Stateful(nn.Module):
    """A forward that rebinds a buffer and bumps a Python counter."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear(4, 4)
        self.register_buffer("steps", torch.zeros(()))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.steps = self.steps + 1
        self.calls += 1
        return self.lin(x) * self.steps


class Generator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = _linear()

    def forward(self, x: torch.Tensor) -> Any:
        yield self.lin(x)


# --- case-specific checks -------------------------------------------------------------------------
def _roles(tr: fxviz.Trace, role: str) -> list[str]:
    df = tr.nodes
    return list(df[df.role == role].qualname)


def _check_breaks(tr: fxviz.Trace) -> None:
    if tr.capture.params == "lifted":
        assert len(tr.pieces) >= 2 and tr.capture.graph_breaks, tr.summary()
        assert "graph break" in tr.summary()


def _check_two_outputs(tr: fxviz.Trace) -> None:
    assert "2:" in tr.capture.loss, tr.capture.loss  # logits and the nested norm; nothing else


def _check_one_float_output(tr: fxviz.Trace) -> None:
    assert "(1:" in tr.capture.loss, tr.capture.loss  # the int tensor and the Python int are left out


def _check_dataclass(tr: fxviz.Trace) -> None:
    assert ".logits" in tr.capture.loss and ".aux" in tr.capture.loss, tr.capture.loss


def _check_token_ids(tr: fxviz.Trace) -> None:
    df = tr.nodes
    primal = df[df.role == "primal"]
    assert list(primal.qualname) == ["idx"] and list(primal.dtype) == ["int64"]
    if tr.capture.params == "lifted":
        assert sorted(_roles(tr, "gradient")) == ["emb.weight", "head.bias", "head.weight"]
    else:  # integer inputs and constant parameters: nothing requires grad, no backward at all
        assert not tr.graph.has_backward and "no backward graph" in tr.summary()


def _check_function_no_params(tr: fxviz.Trace) -> None:
    if tr.capture.params == "lifted":  # as torch.compile sees it: only `a` requires grad
        assert _roles(tr, "gradient") == ["a"]
    else:  # closure mode marks every floating input as requiring grad
        assert sorted(_roles(tr, "gradient")) == ["a", "b"]
    grads = _joint_input_gradients(tr)
    a, b = (t.detach().clone().requires_grad_() for t in tr.capture.example_inputs)
    ga, gb = torch.autograd.grad((a * b).sin().sum(), [a, b])
    assert torch.allclose(grads["a"], ga)
    if tr.capture.params == "closure":
        assert torch.allclose(grads["b"], gb)


def _joint_input_gradients(tr: fxviz.Trace) -> dict[str, torch.Tensor]:
    """Run the captured joint graph and read the gradients of the user's inputs."""
    from fxviz.analysis.real.gradients import gradient_outputs, run_joint

    outs = run_joint(tr.graph)
    return {name: outs[j] for j, name, role in gradient_outputs(tr.graph) if role == "primal"}


def _check_no_backward(tr: fxviz.Trace) -> None:
    if tr.capture.params == "lifted":
        assert not tr.graph.has_backward and "no backward graph" in tr.summary()
        assert not tr.capture.warnings  # nothing requires grad: nothing to warn about


def _check_no_backward_at_all(tr: fxviz.Trace) -> None:
    assert not tr.graph.has_backward and "no backward graph" in tr.summary()


def _check_frozen_with_input_grad(tr: fxviz.Trace) -> None:
    assert _roles(tr, "gradient") == ["input"]  # nn.Sequential.forward(input)
    assert tr.parameters().requires_grad.eq(False).all()


def _check_tied(tr: fxviz.Trace) -> None:
    if tr.capture.params == "lifted":
        assert _roles(tr, "parameter") == ["emb.weight"] and _roles(tr, "gradient") == ["emb.weight"]
    else:
        assert set(_roles(tr, "constant")) == {"emb.weight"}


def _updates(tr: fxviz.Trace) -> list[str]:
    """The inputs the step writes, by name: aot_eager returns them (outputs), inductor keeps the write in
    the graph (a ``copy_`` into the input)."""
    role = "forward" if tr.capture.backend == "inductor" and tr.capture.route == "dynamo" else "output"
    return [q for q in _roles(tr, role) if isinstance(q, str) and q.endswith("(updated in place)")]


def _check_batchnorm(tr: fxviz.Trace) -> None:
    assert sorted(_updates(tr)) == sorted(f"{n} (updated in place)" for n, _ in tr.capture.model.named_buffers())


def _check_inplace(tr: fxviz.Trace) -> None:
    assert "x (updated in place)" in _updates(tr)


def _check_checkpoint(tr: fxviz.Trace) -> None:
    assert {"a", "b"} <= set(tr.nodes.module.dropna())


def _check_random(tr: fxviz.Trace) -> None:
    ops = set(tr.nodes.short_op)
    if tr.capture.backend == "inductor":  # its joint passes draw every random value from seeds of its own
        assert {"inductor_seeds", "inductor_lookup_seed", "inductor_random"} <= ops, ops
        assert (tr.nodes.short_op == "inductor_random").sum() == 3  # the dropout's, rand_like's, randn's
    else:
        assert {"native_dropout", "rand_like", "randn"} <= ops, ops


def _check_custom_function(tr: fxviz.Trace) -> None:
    assert (tr.nodes.short_op == "mul").sum() >= 3  # x * x forward; 2 * x * grad from Square.backward


def _check_partial_no_grad(tr: fxviz.Trace) -> None:
    if tr.capture.params == "lifted":
        assert sorted(_roles(tr, "gradient")) == ["b.bias", "b.weight"]
        assert not tr.capture.warnings


def _check_dtypes(*dtypes: str) -> Callable[[fxviz.Trace], None]:
    def check(tr: fxviz.Trace) -> None:
        assert set(dtypes) <= set(tr.nodes.dtype.dropna()), set(tr.nodes.dtype.dropna())

    return check


def _check_meta(tr: fxviz.Trace) -> None:
    assert tr.capture.route in ("aot", "closure")
    if tr.capture.params == "lifted":
        assert sorted(_roles(tr, "gradient")) == sorted(n for n, _ in tr.capture.model.named_parameters())


def _check_markup(tr: fxviz.Trace) -> None:
    names = set(tr.nodes.qualname.dropna())
    assert SCRIPT in names
    if tr.capture.params == "lifted":
        assert {f"{MARKUP}.weight", f"{MARKUP}.bias"} <= names
        assert MARKUP in set(tr.nodes.module.dropna())
    else:
        assert {f"{MARKUP}.weight", f"{MARKUP}.bias"} <= set(_roles(tr, "constant"))


def _check_list_input(tr: fxviz.Trace) -> None:
    assert sorted(_roles(tr, "primal")) == ["xs[0]", "xs[1]"]


def _check_stateful(tr: fxviz.Trace) -> None:
    assert tr.capture.model.calls == 0 and float(tr.capture.model.steps) == 0.0


def _check_empty_batch(tr: fxviz.Trace) -> None:
    assert tr.nodes.loc[tr.nodes.role == "primal", "shape"].tolist() == [(0, 4)]


def _check_training_graph(tr: fxviz.Trace) -> None:
    assert tr.graph.has_backward and torch.is_grad_enabled()  # and the caller's mode came back (checked outside)


def _check_uncompiled(tr: fxviz.Trace) -> None:
    assert type(tr.capture.model).__name__ == "Sequential"
    assert not any("_orig_mod" in str(q) for q in tr.nodes.qualname.dropna())


def _inference_inputs() -> tuple[Any, ...]:
    with torch.inference_mode():
        return (_x(2, 4) * 1,)


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))


def _missing_spec() -> tuple[Any, tuple[Any, ...]]:
    from fxviz.frontends.cli.specs import load_model_spec

    return load_model_spec("no_such_model_anywhere")


# --- the corpus ------------------------------------------------------------------------------------
SHAPES = r"shapes cannot be multiplied"
CASES: list[Case] = [
    Case("too_many_inputs", lambda: (_linear(), (_x(2, 4), _x(2, 4))),
         both(Err(fxviz.InputError, r"takes 2 positional arguments but 3", hint=r"model\.forward takes"))),
    Case("no_inputs", lambda: (_linear(), ()),
         both(Err(fxviz.InputError, r"missing 1 required positional argument"))),
    Case("wrong_shape", lambda: (_linear(), (_x(2, 5),)), both(Err(fxviz.InputError, SHAPES))),
    Case("wrong_dtype_float64", lambda: (_linear(), (_x(2, 4).double(),)),
         both(Err(fxviz.InputError, r"dtype", hint=r"dtype"))),
    Case("token_ids_into_float_model", lambda: (_linear(), (_ids(2, 4),)),
         both(Err(fxviz.InputError, r"Long", hint=r"dtype"))),
    Case("model_raises", lambda: (Raises(), (_x(2, 4),)),
         both(Err(fxviz.InputError, r"RuntimeError.*boom from the user's forward"))),
    Case("not_callable", lambda: (42, (_x(2, 4),)), both(Err(fxviz.InputError, r"got an int"))),
    Case("bad_params_mode", lambda: (_linear(), (_x(2, 4),)),
         {"frozen": Err(fxviz.InputError, r"params='frozen'")}),
    Case("bad_capture_route", lambda: (_linear(), (_x(2, 4),)),
         {"lifted": Err(fxviz.InputError, r"capture_route='inductor'")},
         kwargs={"capture_route": "inductor"}),
    Case("keyword_only_argument", lambda: (KeywordOnly(), (_x(2, 4),)),
         both(Err(fxviz.InputError, r"keyword-only argument: 'scale'", hint=r"lambda"))),
    Case("data_dependent_control_flow", lambda: (DataDependent(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_breaks),
                            Err(fxviz.TraceError, r"DataDependent", hint=r"capture_route='dynamo'"))),
    Case("data_dependent_on_aot_route", lambda: (DataDependent(), (_x(2, 4),)),
         {"lifted": Err(fxviz.TraceError, r"\(aot\)", hint=r"capture_route='dynamo'")},
         kwargs={"capture_route": "aot"}),
    Case("graph_break", lambda: (GraphBreak(), (_x(2, 4),)), lifted_and_closure(Ok(_check_breaks))),
    Case("dict_output", lambda: (Outputs("dict"), (_x(2, 4),)), lifted_and_closure(Ok(_check_two_outputs))),
    Case("tuple_output_with_ints", lambda: (Outputs("tuple"), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_one_float_output))),
    Case("dataclass_output", lambda: (Outputs("dataclass"), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_dataclass))),
    Case("no_floating_output", lambda: (Outputs("ints"), (_x(2, 4),)),
         both(Err(fxviz.NoFloatingOutputError, r"int64 tensor", hint=r"loss_fn"))),
    Case("none_output", lambda: (Outputs("none"), (_x(2, 4),)),
         both(Err(fxviz.NoFloatingOutputError, r"NoneType"))),
    Case("generator_output", lambda: (Generator(), (_x(2, 4),)),
         both(Err(fxviz.NoFloatingOutputError, r"a generator"))),
    Case("loss_fn_raises", lambda: (_linear(), (_x(2, 4),)),
         both(Err(fxviz.InputError, r"loss_fn raised IndexError")), kwargs={"loss_fn": lambda out: out["logits"]}),
    Case("loss_fn_not_scalar", lambda: (_linear(), (_x(2, 4),)),
         both(Err(fxviz.InputError, r"not a floating scalar")), kwargs={"loss_fn": lambda out: out * 2}),
    Case("token_ids", lambda: (Embed(), (_ids(2, 5),)),
         lifted_and_closure(Ok(_check_token_ids), Ok(_check_token_ids, gradients="none"))),
    Case("function_without_parameters", lambda: (lambda a, b: (a * b).sin(), (_x(2, 4).requires_grad_(), _x(2, 4))),
         both(Ok(_check_function_no_params, gradients="skip"))),
    Case("module_without_parameters", lambda: (nn.ReLU(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_no_backward), Ok(lambda tr: None, gradients="none"))),
    Case("all_parameters_frozen", lambda: (_frozen(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_no_backward, gradients="none"))),
    Case("frozen_parameters_input_requires_grad", lambda: (_frozen(), (_x(2, 4).requires_grad_(),)),
         lifted_and_closure(Ok(_check_frozen_with_input_grad, gradients="none"))),
    Case("tied_weights", lambda: (Tied(), (_ids(2, 3),)), lifted_and_closure(Ok(_check_tied))),
    Case("batchnorm_training_mode", lambda: (_batchnorm(), (_x(2, 3, 6, 6),)),
         lifted_and_closure(Ok(_check_batchnorm))),
    Case("in_place_on_input", lambda: (InPlaceOnInput(), (_x(2, 4),)), lifted_and_closure(Ok(_check_inplace))),
    Case("checkpoint_inside_model", lambda: (Checkpointed(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_checkpoint), Ok(None, gradients="none"))),
    Case("dropout_and_random_ops", lambda: (Random(), (_x(2, 4),)), lifted_and_closure(Ok(_check_random))),
    Case("custom_autograd_function", lambda: (CustomFunction(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_custom_function))),
    Case("no_grad_inside_forward", lambda: (NoGradInside(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_partial_no_grad),
                            Ok(None, gradients="none", warning=r"backward is empty.*no_grad"))),
    Case("whole_forward_under_no_grad", lambda: (NoGradInside(everything=True), (_x(2, 4),)),
         lifted_and_closure(Ok(None, gradients="none", warning=r"does not require grad although 4 parameter"),
                            Ok(_check_no_backward_at_all, gradients="none"))),
    Case("mixed_dtypes", lambda: (MixedDtypes(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_dtypes("float32", "float64")))),
    Case("autocast_bfloat16", lambda: (Autocast(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_dtypes("float32", "bfloat16")))),
    Case("bfloat16_model", lambda: (_linear().to(torch.bfloat16), (_x(2, 4).bfloat16(),)),
         lifted_and_closure(Ok(_check_dtypes("bfloat16")))),
    Case("complex_parameters_and_output", lambda: (Complex(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_dtypes("complex64")))),
    Case("meta_device", lambda: (_meta_mlp(), (torch.empty(2, 4, device="meta"),)),
         lifted_and_closure(Ok(_check_meta, gradients="skip"), Ok(_check_meta, gradients="skip"))),
    Case("meta_device_cross_entropy", lambda: (_meta_cross_entropy(),
                                               (torch.empty(2, 4, device="meta"),
                                                torch.empty(2, dtype=torch.long, device="meta"))),
         lifted_and_closure(Ok(_check_meta, gradients="skip"),
                            Ok(None, gradients="skip", warning=r"backward is empty.*meta device"))),
    Case("meta_device_cross_entropy_pinned_to_meta",
         lambda: (_meta_pinned(), (torch.empty(2, 4, device="meta"), torch.empty(2, dtype=torch.long, device="meta"))),
         lifted_and_closure(Ok(None, gradients="skip",
                               warning=r"does not require grad although 2 parameter.*meta device.*cross_entropy"),
                            Ok(None, gradients="skip", warning=r"backward is empty.*meta device"))),
    Case("meta_model_cpu_inputs", lambda: (_meta_mlp(), (_x(2, 4),)),
         both(Err(fxviz.InputError, r"device", hint=r"model's device"))),
    Case("meta_model_forced_dynamo", lambda: (_meta_mlp(), (torch.empty(2, 4, device="meta"),)),
         {"lifted": Err(fxviz.InputError, r"meta device", hint=r"capture_route='aot'")},
         kwargs={"capture_route": "dynamo"}),
    Case("cli_model_spec_missing", _missing_spec,
         {"lifted": Err(fxviz.core.errors.ModelSpecError, r"no_such_model_anywhere")}),
    Case("markup_and_dot_metacharacters_in_names", lambda: (Markup(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_markup))),
    Case("list_of_tensors_input", lambda: (ListInput(), ([_x(2, 4), _x(2, 4) * 2],)),
         lifted_and_closure(Ok(_check_list_input))),
    Case("forward_rebinds_buffer_and_counts_calls", lambda: (Stateful(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_stateful))),
    Case("traced_inside_no_grad", lambda: (_mlp(), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_training_graph)), context=torch.no_grad),
    Case("traced_inside_inference_mode", lambda: (_mlp(), _inference_inputs()),
         lifted_and_closure(Ok(_check_training_graph)), context=torch.inference_mode),
    Case("torch_compiled_model", lambda: (torch.compile(_mlp()), (_x(2, 4),)),
         lifted_and_closure(Ok(_check_uncompiled))),
    Case("torchscript_model", lambda: (torch.jit.script(_mlp()), (_x(2, 4),)),
         both(Err(fxviz.InputError, r"TorchScript", hint=r"before torch\.jit"))),
    Case("empty_batch", lambda: (_linear(), (_x(0, 4),)), lifted_and_closure(Ok(_check_empty_batch))),
]


# --- the harness -------------------------------------------------------------------------------------
class Hang(Exception):
    pass


@contextlib.contextmanager
def deadline(seconds: int):
    """Fail instead of hanging: SIGALRM interrupts the case after ``seconds``."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"the case ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _is_meta(model: Any) -> bool:
    return isinstance(model, nn.Module) and any(t.device.type == "meta" for t in model.state_dict().values())


def _tensor_leaves(inputs: Any) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]


def _params_checked(case: Case) -> list[Any]:
    return [pytest.param(case, mode, id=f"{case.id}-{mode}",
                         marks=[pytest.mark.xfail(reason=case.xfail[mode], strict=True)] if mode in case.xfail else [])
            for mode in case.expect]


def test_corpus_is_big_enough():
    assert len(CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case,mode", [p for c in CASES for p in _params_checked(c)])
def test_corpus_case(case: Case, mode: str):
    expect = case.expect[mode]
    with deadline(DEADLINE_S):
        try:
            target, inputs = case.build()
        except fxviz.FxvizError as exc:  # a case whose failure is in building it (a model spec)
            return _check_error(exc, expect)
    model = target if isinstance(target, nn.Module) else None
    real = model is not None and not _is_meta(model)
    before = snapshot(model) if real else None
    calls_before = dict(vars(model)) if model is not None else {}
    user_inputs = [(t, t.detach().clone()) for t in _tensor_leaves(inputs) if t.device.type != "meta"]

    result: fxviz.Trace | fxviz.FxvizError
    with deadline(DEADLINE_S), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FxvizWarning)
        try:
            with case.context():
                result = fxviz.trace(target, *inputs, params=mode, **case.kwargs)
        except fxviz.FxvizError as exc:
            result = exc
    # whatever happened, the user's model and inputs are as they were
    if before is not None:
        assert_unchanged(model, before)
    if model is not None:
        assert {k: v for k, v in vars(model).items() if isinstance(v, (int, float, str))} == \
            {k: v for k, v in calls_before.items() if isinstance(v, (int, float, str))}
    for t, copy in user_inputs:
        assert torch.equal(t, copy), "fxviz changed an example input"

    if isinstance(expect, Err):
        assert isinstance(result, fxviz.FxvizError), f"expected {expect.cls.__name__}, got a trace"
        return _check_error(result, expect)
    assert not isinstance(result, fxviz.FxvizError), f"expected a trace, got {result!r}"
    tr = result
    _TRACED[(case.id, mode)] = tr
    warned = [str(w.message) for w in caught if issubclass(w.category, FxvizWarning)]
    if expect.warning:
        assert any(re.search(expect.warning, w) for w in warned), warned
        assert re.search(expect.warning, tr.summary()), tr.summary()
    else:
        assert not warned, warned
    assert len(tr.nodes) == len(tr.joint.graph.nodes)
    if expect.check is not None:
        expect.check(tr)
    if model is not None and expect.gradients != "skip":
        with deadline(DEADLINE_S):
            checked = tr.check_gradients()
        if before is not None:
            assert_unchanged(model, before)
        if expect.gradients == "match":
            assert checked.ok.all(), checked[~checked.ok]
            wanted = checked.eager_has_gradient
            assert (checked.has_gradient == wanted).all(), checked
        else:  # "none": no parameter gets a gradient from the traced backward
            assert not checked.has_gradient.any(), checked


def _check_error(exc: fxviz.FxvizError, expect: Ok | Err) -> None:
    assert isinstance(expect, Err), f"expected a trace, got {exc!r}"
    assert isinstance(exc, expect.cls), f"expected {expect.cls.__name__}, got {type(exc).__name__}: {exc}"
    text = str(exc)
    assert re.search(expect.match, exc.message), exc.message
    assert "\n" not in text and "\n" not in exc.hint, "an error must be one line"
    assert "Traceback" not in text and len(text) < 800, text
    assert exc.hint and exc.hint != fxviz.FxvizError.hint, "every error needs a fix hint"
    if expect.hint:
        assert re.search(expect.hint, exc.hint), exc.hint


# --- every view of every traced case ends cleanly too -------------------------------------------------
_TRACED: dict[tuple[str, str], fxviz.Trace] = {}
STRATEGIES = ["default", "min_cut", "budget:0.5", "recompute_all", "eager"]
VIEW_XFAIL: dict[tuple[str, str], str] = {}  # (case, mode) -> a known bug elsewhere


def _views(tr: fxviz.Trace) -> list[tuple[str, Callable[[], Any]]]:
    calls: list[tuple[str, Callable[[], Any]]] = [(f"partition({s!r})", lambda s=s: tr.partition(s))
                                                  for s in STRATEGIES]
    calls += [("memory_table()", tr.memory_table), ("doctor()", tr.doctor), ("draw()", lambda: tr.draw().source),
              ("draw(strategy='min_cut')", lambda: tr.draw(strategy="min_cut").source)]
    return calls


@pytest.mark.parametrize("case,mode", [
    pytest.param(c, m, id=f"{c.id}-{m}",
                 marks=([pytest.mark.xfail(reason=VIEW_XFAIL[(c.id, m)], strict=True)]
                        if (c.id, m) in VIEW_XFAIL else []))
    for c in CASES for m, e in c.expect.items() if isinstance(e, Ok) and m not in c.xfail])
def test_corpus_case_every_view(case: Case, mode: str):
    """Partition with every strategy, the memory table, the doctor and the drawing, on every graph
    of every case that traced: each ends in a result or an FxvizError, never a raw exception."""
    tr = _TRACED.get((case.id, mode))
    if tr is None:
        target, inputs = case.build()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FxvizWarning)
            tr = fxviz.trace(target, *inputs, params=mode, **case.kwargs)
    model = tr.capture.model if isinstance(tr.capture.model, nn.Module) and not _is_meta(tr.capture.model) else None
    before = snapshot(model) if model is not None else None
    for piece in tr.pieces:
        for what, call in _views(piece):
            with deadline(DEADLINE_S):
                try:
                    result = call()
                except fxviz.FxvizError as exc:
                    _check_error(exc, Err(fxviz.FxvizError, r"."))
                    assert not piece.graph.has_backward or what.startswith("draw(strategy"), (what, exc)
                    continue
            if what.startswith("partition"):
                assert (result.error is None) == piece.graph.has_backward, (what, result.error)
    if before is not None:
        assert_unchanged(model, before)


# --- cases that need more than a trace -----------------------------------------------------------------
def test_meta_cross_entropy_matches_a_real_device_trace():
    """The meta-device quirk: traced as fake CPU tensors, GPT's cross-entropy keeps its backward,
    and the graph has the same ops as the same model traced on real CPU tensors."""
    size = dict(n_layer=1, n_embd=32, n_head=4, vocab=64, block_size=32, seq=8)
    meta_model, meta_inputs = fxviz.examples.mini_gpt(device="meta", **size)
    cpu_model, cpu_inputs = fxviz.examples.mini_gpt(**size)
    with deadline(DEADLINE_S), warnings.catch_warnings():
        warnings.simplefilter("error", FxvizWarning)
        meta = fxviz.trace(meta_model, *meta_inputs)
        cpu = fxviz.trace(cpu_model, *cpu_inputs, capture_route="aot")
    assert sorted(_roles(meta, "gradient")) == sorted(n for n, _ in meta_model.named_parameters())
    assert sorted(meta.nodes.short_op) == sorted(cpu.nodes.short_op)


def test_check_gradients_on_a_meta_model_is_a_clear_error():
    tr = fxviz.trace(_meta_mlp(), torch.empty(2, 4, device="meta"))
    with deadline(DEADLINE_S), pytest.raises(fxviz.FxvizError) as info:
        tr.check_gradients()
    _check_error(info.value, Err(fxviz.FxvizError, r"meta"))


def test_sparse_embedding_gradients_match_eager():
    class SparseEmbedding(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.emb = nn.Embedding(10, 4, sparse=True)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            return self.emb(idx)

    tr = fxviz.trace(SparseEmbedding(), _ids(3))
    with deadline(DEADLINE_S):
        checked = tr.check_gradients()
    assert checked.ok.all() and checked.has_gradient.all()


def test_a_model_that_loops_forever_is_stopped_by_the_deadline():
    """The deadline itself works (so 'never a hang' above can fail)."""
    def spin(x: torch.Tensor) -> torch.Tensor:
        while True:
            x = x + 0

    with pytest.raises(Hang), deadline(1):
        spin(torch.zeros(1))


def test_graph_over_the_draw_limit():
    """Over the node limit, draw() collapses modules into boxes (and says so) and lays out quickly;
    drawing every node anyway either finishes or stops at the timeout with a one-line RenderError."""
    if not hasattr(fxviz.Trace, "draw"):
        pytest.skip("Trace.draw has not landed yet (fxviz.Trace.draw missing)")
    from fxviz.render.graph.views import NODE_LIMIT

    model, inputs = fxviz.examples.mini_gpt(n_layer=4, n_embd=32, n_head=4, vocab=64, block_size=32, seq=8)
    tr = fxviz.trace(model, *inputs)
    assert len(tr.nodes) > NODE_LIMIT
    with deadline(DEADLINE_S):
        drawing = tr.draw()
        assert drawing.nodes < NODE_LIMIT and f"more than {NODE_LIMIT}" in drawing.source
        assert drawing.svg().rstrip().endswith("</svg>")
        try:
            tr.draw(group="none", timeout=0.5).svg()
        except fxviz.RenderError as exc:
            _check_error(exc, Err(fxviz.RenderError, r"longer than 0\.5 s", hint=r"."))
