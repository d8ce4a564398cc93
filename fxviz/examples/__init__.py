"""Built-in example models used by the docs, the tests, the notebooks and the CLI.

Each factory returns ``(model, example_inputs)`` where ``example_inputs`` is a tuple, so
``fxviz.trace(model, *example_inputs)`` works.  Every factory has a size knob so tests stay fast;
the defaults are the faithful sizes (AlexNet is torchvision's layout at 224x224).

The models live in ``fxviz.examples.models`` and load (with torch) when a factory is first read:
the CLI checks a model name against :data:`NAMES` without importing torch (issue 26).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import EXAMPLES, Example, alexnet, mini_gpt, mlp, pointwise_chain, resnet_block

__all__ = ["alexnet", "mlp", "resnet_block", "mini_gpt", "pointwise_chain", "EXAMPLES", "NAMES", "get_example"]

NAMES: tuple[str, ...] = ("alexnet", "mlp", "resnet_block", "mini_gpt", "pointwise_chain")
"""The built-in examples by the name the CLI's ``MODEL`` argument takes; one factory of that name each."""


def get_example(name: str, **kwargs: object) -> Example:
    """Build a built-in example by name (the CLI's ``MODEL`` argument)."""
    from ..errors import ModelSpecError

    if name not in NAMES:
        raise ModelSpecError(f"no built-in example named {name!r}; known: {', '.join(NAMES)}")
    factory = getattr(importlib.import_module(".models", __name__), name)
    result: Example = factory(**kwargs)
    return result


def __getattr__(name: str) -> Any:
    """A factory, a model class or ``EXAMPLES``, importing the models (and torch) on first use."""
    if name.startswith("__"):  # introspection (doctest, inspect) does not load torch
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    models = importlib.import_module(".models", __name__)
    try:
        value = getattr(models, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
