"""The user's inputs before a trace: their names (argument names, module state, module paths) and the
checks that refuse what no route can trace, with an error that says what to do."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.core.errors import InputError, close_matches
from fxviz.sources.model.loss import describe, one_line
from fxviz.sources.roles import InputName

PARAM_MODES = ("lifted", "closure")
CAPTURE_ROUTES = ("auto", "dynamo", "aot")
BACKENDS = _torch.CAPTURE_BACKENDS


# --- names ---------------------------------------------------------------------------------------
def argument_names(fn: Callable, n: int) -> list[str]:
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


def bind_keywords(fn: Callable, args: tuple[Any, ...], keywords: dict[str, Any]) -> tuple[Any, ...]:
    """``fn(*args, **keywords)`` as positional inputs: each keyword goes to the parameter it names,
    the parameters between the last given one and ``args`` get their defaults (a Hugging Face model's
    ``model(input_ids=ids, labels=ids)`` is ``model(ids, None, ..., ids)``), so every route, name and
    view treats them as it treats positional inputs.  A keyword that names no positional parameter
    (keyword-only, ``**kwargs``) is refused with a way around it."""
    if not keywords:
        return args
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise InputError(f"fxviz cannot read the parameters of {describe(fn)} to bind keyword inputs "
                         f"{sorted(keywords)}", "pass the inputs positionally") from exc
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    index = {p.name: i for i, p in enumerate(positional) if p.kind == p.POSITIONAL_OR_KEYWORD}
    unknown = [k for k in keywords if k not in index]
    if unknown:
        rest = {p.name for p in params if p.kind == p.KEYWORD_ONLY}
        raise unknown_keywords(unknown, list(index), unknown[0] in rest or any(p.kind == p.VAR_KEYWORD for p in params))
    twice = [k for k in keywords if index[k] < len(args)]
    if twice:
        raise InputError(f"input(s) {twice} given both positionally and by keyword", "pass each input once")
    last = max(index[k] for k in keywords)
    out = list(args)
    for p in positional[len(args):last + 1]:
        if p.name in keywords:
            out.append(keywords[p.name])
        elif p.default is not p.empty:
            out.append(p.default)
        else:
            raise InputError(f"the model's parameter {p.name!r} has no default and was not given",
                             f"pass {p.name} too (positionally or as a keyword)")
    return tuple(out)


TRACE_OPTIONS: tuple[str, ...] = ("loss_fn", "params", "capture_route", "backend", "dynamic", "inputs",
                                  "compile_loss")
"""``fxviz.trace``'s own keywords: any other keyword is an input of the model."""


def unknown_keywords(unknown: list[str], positional: list[str], takes_it: bool) -> InputError:
    """Keywords the model does not take positionally, said with what was probably meant: a parameter
    of the model's (``input_id`` -> ``input_ids``) or an fxviz option (``backnd`` -> ``backend``);
    else a wrapper that binds them.  ``takes_it``: the model takes the first as a keyword-only argument
    or through ``**kwargs``."""
    first = unknown[0]
    guess = close_matches(first, positional)
    if guess:
        return InputError(f"the model takes no input named {first!r}",
                          f"did you mean {guess[0]!r}? fxviz.trace(model, {guess[0]}=...) (the model's inputs: "
                          f"{', '.join(positional)})")
    option = close_matches(first, TRACE_OPTIONS)
    if option:
        return InputError(f"{first!r} is neither an input of the model nor an option of fxviz.trace",
                          f"did you mean the option {option[0]}=...? (the model's inputs: "
                          f"{', '.join(positional) or 'none'})")
    where = ("it takes them as keyword-only or **kwargs, which fxviz cannot pass as graph inputs" if takes_it
             else "it has no such parameter")
    return InputError(f"keyword input(s) {unknown} name no parameter the model takes positionally "
                      f"({', '.join(positional) or 'none'}): {where}",
                      "bind them in a wrapper: fxviz.trace(lambda x: model(x, key=value), x)")


def named_state(model: nn.Module | None) -> tuple[dict[int, InputName], list[tuple[str, torch.Tensor]],
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


def named_leaves(inputs: tuple[Any, ...], names: list[str]) -> list[tuple[str, Any]]:
    """(real name, leaf) of every example input leaf: ``x``, or ``xs[0]`` inside a list argument."""
    out = []
    for i, arg in enumerate(inputs):
        leaves, _ = pytree.tree_flatten_with_path(arg)
        for path, leaf in leaves:
            out.append((names[i] + pytree.keystr(path), leaf))
    return out


def module_paths(model: nn.Module | None) -> dict[str, str]:
    if model is None:
        return {}
    return {str(id(m)): name for name, m in model.named_modules() if name}


# --- validation ----------------------------------------------------------------------------------
def check_call(model_or_fn: Any, params: str, route: str, backend: str | None = None, dynamic: bool = False) -> None:
    if not callable(model_or_fn):
        raise InputError(f"fxviz.trace needs an nn.Module or a function, got {describe(model_or_fn)}",
                         "call fxviz.trace(model, *example_inputs)")
    if params not in PARAM_MODES:
        raise InputError(f"params={params!r} is not one of {PARAM_MODES}",
                         "use params='lifted' (parameters as graph inputs) or params='closure'")
    if route not in CAPTURE_ROUTES:
        raise InputError(f"capture_route={route!r} is not one of {CAPTURE_ROUTES}",
                         "use capture_route='auto' (default), 'dynamo' (torch.compile's capture) or "
                         "'aot' (fake tensors, no graph breaks)")
    if backend is not None and backend not in BACKENDS:
        raise InputError(f"backend={backend!r} is not one of {BACKENDS}",
                         "use backend='aot_eager' (the graph AOTAutograd traces) or backend='inductor' "
                         "(the graph torch.compile's default backend partitions)")
    if (backend not in (None, "aot_eager") or dynamic) and (params == "closure" or route == "aot"):
        what = f"backend={backend!r}" if backend not in (None, "aot_eager") else "dynamic=True"
        raise InputError(f"{what} needs torch.compile's capture (capture_route='dynamo', params='lifted')",
                         "drop params='closure' / capture_route='aot', or trace with backend='aot_eager', "
                         "dynamic=False")
    if isinstance(model_or_fn, (torch.jit.ScriptModule, torch.jit.ScriptFunction)):
        raise InputError(f"{type(model_or_fn).__name__} is TorchScript, which torch.compile and AOTAutograd "
                         "cannot see into (the joint graph would hold nothing of it)",
                         "trace the Python nn.Module or function, before torch.jit.script / torch.jit.trace")


def uncompiled(model_or_fn: Any) -> Any:
    """The model or function under a ``torch.compile`` wrapper (tracing the wrapper would nest
    dynamo in dynamo, name every parameter ``_orig_mod.*``, and break closure capture)."""
    for _ in range(4):  # compiled twice is possible
        inner = getattr(model_or_fn, "_orig_mod", None) if isinstance(model_or_fn, nn.Module) else \
            getattr(model_or_fn, "_torchdynamo_orig_callable", None)
        if inner is None or not callable(inner):
            return model_or_fn
        model_or_fn = inner
    return model_or_fn


def model_raised(exc: Exception, inputs: tuple[Any, ...]) -> InputError:
    """The user's forward rejected the example inputs: say why, and what usually fixes it."""
    text = one_line(exc)
    if "not dict" in text and any(isinstance(a, dict) for a in inputs):
        hint = ("a dict given as one positional input is passed as one value: pass its items as keyword inputs, "
                "fxviz.trace(model, **inputs) (the CLI: make the factory return (model, inputs_dict))")
    elif isinstance(exc, TypeError) and "keyword" in text:
        hint = ("pass keyword inputs by name: fxviz.trace(model, x, name=value); one the model takes only as a "
                "keyword-only argument needs a wrapper: fxviz.trace(lambda x: model(x, key=value), x)")
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


def eager_output(fn: Callable, inputs: tuple[Any, ...]) -> Any:
    """Run once eagerly (no grad) so a model that rejects its inputs fails here, clearly."""
    try:
        with torch.no_grad():
            return fn(*inputs)
    except Exception as exc:  # the user's code, not ours
        raise model_raised(exc, inputs) from exc


def any_meta(model: nn.Module | None, inputs: Sequence[Any]) -> bool:
    tensors = [t for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    if model is not None:
        tensors += list(model.parameters()) + list(model.buffers())
    return any(t.device.type == "meta" for t in tensors)


def all_meta(model: nn.Module | None, inputs: Sequence[Any]) -> bool:
    """Every tensor on the meta device (a mix is an error the model's own forward reports)."""
    tensors = [t for t in pytree.tree_leaves(inputs) if isinstance(t, torch.Tensor)]
    if model is not None:
        tensors += list(model.parameters()) + list(model.buffers())
    return all(t.device.type == "meta" for t in tensors)


def refuse_mixed_meta(model: nn.Module | None, inputs: tuple[Any, ...], names: list[str]) -> None:
    """A meta model with inputs on a real device (or meta inputs to a real model), said as that, before
    torch fails on it somewhere inside (a Hugging Face model's ``DynamicCache`` "register a pytree"):
    a meta model is traced with fake tensors, every tensor on the meta device."""
    state = (list(model.parameters()) + list(model.buffers())) if model is not None else []
    leaves = [(n, t) for n, t in named_leaves(inputs, names) if isinstance(t, torch.Tensor)]
    if not any(t.device.type == "meta" for t in state) and not any(t.device.type == "meta" for _, t in leaves):
        return
    real = [(n, t) for n, t in leaves if t.device.type != "meta"]
    if model is not None and state and all(t.device.type == "meta" for t in state) and real:
        devices = sorted({str(t.device) for _, t in real})
        raise InputError(f"the model is on the meta device, and its input(s) {', '.join(n for n, _ in real)} on "
                         f"{', '.join(devices)}: a meta model is traced with fake tensors, every tensor on the meta "
                         "device (nothing is computed)",
                         f"put the inputs on the model's device too: {real[0][0]}.to('meta') (or build the model on "
                         f"{devices[0]} to trace it with real tensors)")
    on_real = [t for t in state if t.device.type != "meta"]
    meta_inputs = [n for n, t in leaves if t.device.type == "meta"]
    if on_real and meta_inputs:
        raise InputError(f"input(s) {', '.join(meta_inputs)} are on the meta device, and the model's parameters on "
                         f"{on_real[0].device}", "put the inputs on the model's device (or the model on the meta "
                         "device: model.to('meta'), to trace it with fake tensors)")


_COMPRESSED = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)


def refuse_compressed(model: nn.Module | None, inputs: tuple[Any, ...], names: list[str], route: str) -> None:
    """The fake-tensor routes cannot take compressed sparse tensors: torch's fake CSR tensors abort
    the whole Python process (torch 2.13, reproducible with ``aot_function`` alone), so they are
    refused before torch sees them.  COO tensors trace."""
    named = named_leaves(inputs, names)
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
