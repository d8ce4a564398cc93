"""Model specs: the ``MODEL`` argument (a built-in example, ``package.module:factory`` or
``path/to/file.py:factory``) parsed once and turned into the model and the inputs it is called with:
``Loaded`` (positional and keyword inputs, as ``fxviz.trace(model, *args, **kwargs)`` takes them), and
``--loss`` (a function beside the factory, or ``module:fn`` / ``file.py:fn``) as ``loss_fn``."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from fxviz.core.errors import ModelSpecError
from fxviz.core.example_names import NAMES as EXAMPLE_NAMES

__all__ = ["ModelSpec", "Loaded", "parse_spec", "load_spec", "load_model_spec", "load_loss", "SPEC_FORMS",
           "FACTORY_RETURNS"]

SPEC_FORMS = (f"built-in example ({', '.join(EXAMPLE_NAMES)}) or package.module:factory or file.py:factory; the "
              "factory returns (model, inputs), (model, kwargs) or (model, args, kwargs)")

FACTORY_RETURNS = ("return (model, inputs) for positional inputs, (model, {'input_ids': ids, 'labels': ids}) for "
                   "keyword inputs, or (model, args, kwargs) for both")
"""What a factory returns, as the hint for a factory that returned something else says it."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: ``where`` (a module, a ``.py`` file, or ``""`` for a built-in) and ``name`` (the
    example or the factory)."""

    text: str
    where: str
    name: str

    @property
    def stem(self) -> str:
        """The default name of the files a command writes for this model."""
        return self.name.replace(".py", "")


def parse_spec(spec: str) -> ModelSpec:
    """``spec`` split once; an unknown example name is said here, before torch loads."""
    if ":" not in spec:
        if spec in EXAMPLE_NAMES:
            return ModelSpec(spec, "", spec)
        raise ModelSpecError(f"unknown model {spec!r}: not a built-in example ({', '.join(EXAMPLE_NAMES)}) "
                             "and not of the form package.module:factory")
    where, _, name = spec.rpartition(":")
    return ModelSpec(spec, where, name)


@dataclass(frozen=True)
class Loaded:
    """What a spec names: the model and the inputs it is called with (``model(*args, **kwargs)``),
    and the module its factory lives in (``--loss NAME`` looks there first; None for an example)."""

    model: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    module: ModuleType | None = None


def load_model_spec(spec: str) -> Loaded:
    """``alexnet`` (built-in), ``package.module:factory`` or ``path/to/file.py:factory``.

    The factory is called with no arguments and returns ``(model, inputs)`` (a tuple or list of
    positional inputs, or one input), ``(model, kwargs)`` (a dict of keyword inputs: ``input_ids``,
    ``labels``) or ``(model, args, kwargs)``.  A file's own folder is importable while it loads
    (``from helpers import Block`` beside it works, as ``python file.py`` would run it).
    """
    return load_spec(parse_spec(spec))


def load_spec(parsed: ModelSpec) -> Loaded:
    """A parsed spec's model and inputs: the example built, or the factory imported and called."""
    if not parsed.where:
        from fxviz.examples import get_example

        model, inputs = get_example(parsed.name)
        return Loaded(model, tuple(inputs), {})
    with _importable(parsed.where):
        module = _import(parsed)
        factory = getattr(module, parsed.name, None)
        if not callable(factory):
            raise ModelSpecError(f"{parsed.where!r} has no callable {parsed.name!r}")
        try:
            result = factory()
        except Exception as exc:
            raise ModelSpecError(f"{parsed.text} raised {type(exc).__name__}: {exc}",
                                 "the factory must run with no arguments") from exc
    return _inputs_of(parsed, result, module)


def _inputs_of(parsed: ModelSpec, result: Any, module: ModuleType) -> Loaded:
    """A factory's result as model and inputs: ``(model, inputs)``, ``(model, kwargs)`` or
    ``(model, args, kwargs)``; anything else is refused with the three forms."""
    if not isinstance(result, tuple) or len(result) not in (2, 3):
        got = f"a tuple of {len(result)}" if isinstance(result, tuple) else type(result).__name__
        raise ModelSpecError(f"{parsed.text} returned {got}, not (model, inputs)",
                             f"make the factory {FACTORY_RETURNS}")
    if len(result) == 3:
        model, args, kwargs = result
        if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            raise ModelSpecError(f"{parsed.text} returned 3 values whose third is {type(kwargs).__name__}, not a "
                                 "dict of keyword inputs", f"make the factory {FACTORY_RETURNS}")
        return Loaded(model, tuple(args) if isinstance(args, (tuple, list)) else (args,), dict(kwargs), module)
    model, inputs = result
    if isinstance(inputs, dict):  # keyword inputs: model(input_ids=..., labels=...)
        if not all(isinstance(k, str) for k in inputs):
            raise ModelSpecError(f"{parsed.text} returned a dict of inputs whose keys are not all names",
                                 f"make the factory {FACTORY_RETURNS}")
        return Loaded(model, (), dict(inputs), module)
    return Loaded(model, tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,), {}, module)


def load_loss(text: str, loaded: Loaded) -> Any:
    """``--loss``: a function of the model's output that returns the scalar to differentiate, applied
    outside the compiled model as ``fxviz.trace(..., loss_fn=...)`` applies it.  ``NAME`` (beside the
    factory), ``package.module:NAME`` or ``file.py:NAME``."""
    if ":" in text:
        spec = parse_spec(text)
        with _importable(spec.where):
            fn = getattr(_import(spec), spec.name, None)
        where = spec.where
    else:
        if loaded.module is None:
            raise ModelSpecError(f"--loss {text}: a built-in example has no file to find {text!r} in",
                                 "write --loss package.module:NAME or --loss path/to/file.py:NAME")
        fn = getattr(loaded.module, text, None)
        where = getattr(loaded.module, "__file__", None) or loaded.module.__name__
    if not callable(fn):
        raise ModelSpecError(f"--loss {text}: {where!r} has no function {text.rpartition(':')[2]!r}",
                             "name a function of the model's output that returns a scalar: --loss NAME (beside the "
                             "factory), --loss package.module:NAME or --loss file.py:NAME")
    return fn


def _import(spec: ModelSpec) -> ModuleType:
    where = spec.where
    try:
        if not where.endswith(".py"):
            return importlib.import_module(where)
        if not os.path.exists(where):
            raise ModelSpecError(f"model file {where!r} does not exist")
        mod_spec = importlib.util.spec_from_file_location("fxviz_user_model", where)
        assert mod_spec is not None and mod_spec.loader is not None
        module = importlib.util.module_from_spec(mod_spec)
        # registered as Python's import recipe does: dynamo looks a frame's module up by name
        # when it compiles the code after a graph break (ModuleNotFoundError otherwise)
        sys.modules[mod_spec.name] = module
        mod_spec.loader.exec_module(module)
        return module
    except ModelSpecError:
        raise
    except Exception as exc:
        raise ModelSpecError(f"cannot import {where!r} for model spec {spec.text!r}: {type(exc).__name__}: {exc}"
                             ) from exc


@contextlib.contextmanager
def _importable(where: str) -> Iterator[None]:
    """A model file's folder first on ``sys.path`` while the file loads and its factory runs (its
    imports of the files beside it work, as under ``python file.py``); ``sys.path`` as it was after."""
    if not where.endswith(".py"):
        yield
        return
    before = list(sys.path)
    sys.path.insert(0, os.path.dirname(os.path.abspath(where)))
    try:
        yield
    finally:
        sys.path[:] = before
