"""The loss fxviz differentiates, and where the user's step applies it: chosen from what the model returns,
inside the traced step on the dynamo route (``TracedLoss``) or after an eager probe (``make_reducer``).

Where the loss is applied decides the graph.  ``torch.compile(model)`` followed by
``loss_fn(out).backward()`` compiles the model alone: its graph returns every output the model returns
(logits, a KV cache) and its backward gets their gradients as tangents.  So a ``loss_fn`` is applied
outside the captured graph by default (``compile_loss=True`` traces it in, as ``torch.compile`` of a
step that computes the loss does), and so is the model's own loss (``out.loss`` of a ``ModelOutput``, a
dict or a namedtuple, as ``model(ids, labels=ids).loss.backward()`` uses it).  With neither, fxviz's
stand-in (the output itself when it is a scalar, else the sum of every floating output) is traced
into the graph, so the backward starts from one scalar."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.core.errors import InputError, NoFloatingOutputError


def _leaves(out: Any) -> list[tuple[str, Any]]:
    """(path, leaf) of an output structure; dataclasses are walked field by field."""
    if dataclasses.is_dataclass(out) and not isinstance(out, type):
        res = []
        for f in dataclasses.fields(out):
            res += [(f".{f.name}{p}", v) for p, v in _leaves(getattr(out, f.name))]
        return res
    leaves, _ = pytree.tree_flatten_with_path(out)
    return [(pytree.keystr(path), leaf) for path, leaf in leaves]


def differentiable(t: Any) -> bool:
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


def own_loss(out: Any) -> torch.Tensor | None:
    """The model's own loss: ``out.loss`` (a ``ModelOutput``, a namedtuple, a dataclass) or
    ``out["loss"]`` (a dict) when it is a floating one-element tensor; else None."""
    loss = out.get("loss") if isinstance(out, dict) else getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and differentiable(loss):
        return loss
    return None


def _own(o: Any) -> torch.Tensor:
    loss = own_loss(o)
    assert loss is not None, "the output has a loss (checked when the loss was chosen)"
    return loss


_OWN_DESC = "loss = the model's own loss (output .loss), applied outside the graph as the step applies it"
_OUTSIDE_DESC = ("loss = loss_fn(outputs), applied outside the graph as torch.compile(model) then "
                 "loss_fn(out).backward() does (compile_loss=True traces it into the graph)")


@dataclass(frozen=True)
class LossPlan:
    """The loss fxviz differentiates: how the outputs are reduced to it, how every view says it, and
    whether the user's step applies it outside the compiled graph (the model's own ``.loss``, or a
    ``loss_fn`` without ``compile_loss``: the graph is then the model's, its tangents the gradients
    of the loss w.r.t. the model's outputs)."""

    reduce: Callable[[Any], torch.Tensor]
    desc: str
    outside: bool = False


def make_reducer(out: Any, loss_fn: Callable | None, inputs: Any = (), compile_loss: bool = False) -> LossPlan:
    """The loss: ``loss_fn``, the model's own ``.loss``, the output itself when it is a scalar,
    else the sum of every floating output.  ``inputs`` are the tensors ``out`` was computed from
    (to spot a loss that is a view of one of them)."""
    if loss_fn is None and own_loss(out) is not None:
        return LossPlan(_own, _OWN_DESC, outside=True)
    reduce, desc = _reducer(out, loss_fn)
    if loss_fn is not None and not compile_loss:
        return LossPlan(reduce, _OUTSIDE_DESC, outside=True)
    if loss_fn is not None or _is_scalar_loss(out):
        loss = loss_fn(out) if loss_fn is not None else out
        if isinstance(loss, torch.Tensor) and _storages(loss) & _storages(inputs):
            return LossPlan(_own_copy(reduce), desc)
    return LossPlan(reduce, desc)


def _reducer(out: Any, loss_fn: Callable | None) -> tuple[Callable[[Any], torch.Tensor], str]:
    if loss_fn is not None:
        try:
            loss = loss_fn(out)
        except Exception as exc:  # the user's code, not ours
            raise InputError(f"loss_fn raised {type(exc).__name__} on the model's outputs: {one_line(exc)}",
                             f"loss_fn receives what the model returns ({describe(out)}); make it map "
                             "that to a scalar") from exc
        if not (isinstance(loss, torch.Tensor) and loss.numel() == 1 and differentiable(loss)):
            raise InputError(f"loss_fn returned {describe(loss)}, not a floating scalar tensor",
                             "make loss_fn return one floating-point number, e.g. out.sum()")
        return (lambda o: _user_loss(loss_fn(o))), _USER_DESC
    if _is_scalar_loss(out):
        return _scalar_loss, _SCALAR_DESC
    paths = [p or "output" for p, v in _leaves(out) if differentiable(v)]
    if not paths:
        raise NoFloatingOutputError(f"the model returned {describe(out)}: no floating tensor to "
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
    """``loss_fn``'s one-element loss as the user's own step would use it: as it is.  ``backward()``
    takes any one-element tensor, so a reshape to 0-dim would add a ``view`` (and its backward
    ``view``) that the user's program never runs; dynamo reads ``dim()`` while tracing, so the
    test itself traces to nothing."""
    return loss


def _is_scalar_loss(out: Any) -> bool:
    return isinstance(out, torch.Tensor) and out.numel() == 1 and out.is_floating_point()


def _scalar_loss(o: torch.Tensor) -> torch.Tensor:
    return o  # a one-element output is the loss as the user's step would use it (see _user_loss)


def _sum_desc(paths: Sequence[str]) -> str:
    shown = ", ".join(paths[:4]) + (" ..." if len(paths) > 4 else "")
    return f"loss = sum of every floating output ({len(paths)}: {shown})"


def _floating_sum(o: Any) -> tuple[torch.Tensor | None, list[str]]:
    """The sum of every floating leaf of an output structure, and the leaves' paths."""
    total = None
    paths = []
    for path, v in _leaves(o):
        if differentiable(v):
            paths.append(path or "output")
            part = _as_loss_part(v)
            total = part if total is None else total + part
    return total, paths


class LazyLoss:
    """The default loss, built from the output of the first call (made by the tracer itself)."""

    def __init__(self) -> None:
        self.plan: LossPlan | None = None

    def __call__(self, out: Any) -> torch.Tensor:
        if self.plan is None:
            self.plan = make_reducer(out, None)
        return self.plan.reduce(out)


class TracedLoss:
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

    def __init__(self, loss_fn: Callable | None = None, compile_loss: bool = False) -> None:
        self.loss_fn = loss_fn
        self.compile_loss = compile_loss
        self.seen: dict[str, Any] = {}

    def __call__(self, out: Any) -> Any:
        seen = self.seen
        if self.loss_fn is not None and not self.compile_loss:  # applied outside: the graph is the model's
            seen["outside"] = True
            return out
        if self.loss_fn is None and own_loss(out) is not None:
            seen["own"] = True
            return out
        if self.loss_fn is not None:
            loss = self.loss_fn(out)
            fit = isinstance(loss, torch.Tensor) and loss.numel() == 1 and differentiable(loss)
            seen["scalar"] = fit
            return _user_loss(loss) if fit else None
        if isinstance(out, torch.Tensor):
            if out.numel() == 1 and out.is_floating_point():
                seen["scalar"] = True
                return _scalar_loss(out)
            seen["scalar"] = False
            seen["paths"] = ("output",) if differentiable(out) else ()
            return _as_loss_part(out)
        total, paths = _floating_sum(out)
        seen["scalar"] = False
        seen["paths"] = tuple(paths)
        return total

    def plan(self) -> LossPlan | None:
        """The loss the traced call chose (None where the probe route must decide: see the class)."""
        desc = self._desc()
        if desc is None:
            return None
        return LossPlan(self.reducer(), desc, outside=bool(self.seen.get("own") or self.seen.get("outside")))

    def _desc(self) -> str | None:
        if self.seen.get("own"):
            return _OWN_DESC
        if self.seen.get("outside"):
            return _OUTSIDE_DESC
        if self.seen.get("scalar"):
            return _USER_DESC if self.loss_fn is not None else _SCALAR_DESC
        paths = self.seen.get("paths")
        return _sum_desc(paths) if paths and self.loss_fn is None else None

    def reducer(self) -> Callable[[Any], torch.Tensor]:
        """The loss as the step applies it to the model's output (for the eager row, gradients)."""
        if self.seen.get("own"):
            return _own
        if self.seen.get("outside"):
            loss_fn = self.loss_fn
            assert loss_fn is not None
            return lambda o: _user_loss(loss_fn(o))
        return self

    def checked(self, result: Any) -> bool:
        """A loss applied outside the graph, checked on the compiled step's real output: the
        ``loss_fn`` maps it to a floating scalar (else the probe route says why)."""
        if not self.seen.get("outside"):
            return True
        assert self.loss_fn is not None
        try:
            with torch.no_grad():
                loss = self.loss_fn(result)
        except Exception:  # the probe route reports the user's error
            return False
        return isinstance(loss, torch.Tensor) and loss.numel() == 1 and differentiable(loss)

    def aliases(self, result: Any, sources: Any) -> bool:
        """Is the step's result (a scalar loss) a view of one of ``sources``?  ``make_reducer``'s
        check, made on the compiled step's result: AOTAutograd hands back an output that aliases
        an input as a view of that very input."""
        return bool(self.seen.get("scalar")) and bool(_storages(result) & _storages(sources))


def describe(x: Any) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    name = type(x).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + ("..." if len(text) > 300 else "")
