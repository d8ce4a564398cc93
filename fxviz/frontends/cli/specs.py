"""Model specs: the ``MODEL`` argument (a built-in example, ``package.module:factory`` or
``path/to/file.py:factory``) parsed once and turned into ``(model, example_inputs)``."""

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

__all__ = ["ModelSpec", "parse_spec", "load_spec", "load_model_spec", "SPEC_FORMS"]

SPEC_FORMS = f"built-in example ({', '.join(EXAMPLE_NAMES)}) or package.module:factory or file.py:factory"


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


def load_model_spec(spec: str) -> tuple[Any, tuple[Any, ...]]:
    """``alexnet`` (built-in), ``package.module:factory`` or ``path/to/file.py:factory``.

    The factory is called with no arguments and returns ``(model, example_inputs)``.  A file's own
    folder is importable while it loads (``from helpers import Block`` beside it works, as ``python
    file.py`` would run it).
    """
    return load_spec(parse_spec(spec))


def load_spec(parsed: ModelSpec) -> tuple[Any, tuple[Any, ...]]:
    """A parsed spec's ``(model, example_inputs)``: the example built, or the factory imported and called."""
    if not parsed.where:
        from fxviz.examples import get_example

        return get_example(parsed.name)
    with _importable(parsed.where):
        factory = getattr(_import(parsed), parsed.name, None)
        if not callable(factory):
            raise ModelSpecError(f"{parsed.where!r} has no callable {parsed.name!r}")
        try:
            result = factory()
        except Exception as exc:
            raise ModelSpecError(f"{parsed.text} raised {type(exc).__name__}: {exc}",
                                 "the factory must run with no arguments") from exc
    if not (isinstance(result, tuple) and len(result) == 2):
        raise ModelSpecError(f"{parsed.text} returned {type(result).__name__}, not (model, example_inputs)",
                             "make the factory return (model, example_inputs)")
    model, inputs = result
    return model, tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


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
