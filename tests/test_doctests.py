"""The examples in fxviz's docstrings run, and say what they show (as graphviz's do).

Every module whose source holds a ``>>>`` example is imported and its docstrings run with
``doctest``; a module with examples that silently never ran is what this test prevents."""

from __future__ import annotations

import doctest
import importlib
import pathlib

import pytest

import fxviz

ROOT = pathlib.Path(fxviz.__file__).parent
WITH_EXAMPLES = sorted(
    "fxviz." + ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
    for p in ROOT.rglob("*.py") if ">>>" in p.read_text()
)


def test_the_modules_with_examples_are_found():
    assert {"fxviz.core.units", "fxviz.analysis.strategy.strategies",
            "fxviz.analysis.strategy.optimal"} <= set(WITH_EXAMPLES)


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples_run(name: str):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.attempted > 0, f"{name} has '>>>' in its source but doctest found no example"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (see above)"
