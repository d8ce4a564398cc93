"""Fails loudly, naming the API, when a torch release moves an internal fxviz relies on."""

from __future__ import annotations

import importlib

import pytest
import torch

from fxviz import _torch


@pytest.mark.parametrize("path", _torch.REQUIRED_INTERNALS)
def test_internal_api_exists(path):
    module_name, _, attr = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # pragma: no cover - torch changed
        pytest.fail(f"torch {torch.__version__} has no module {module_name} (needed for {path}): {exc}")
    assert hasattr(module, attr), f"torch {torch.__version__} no longer has {path}; update fxviz/_torch/"


def test_partitioner_signatures_take_what_fxviz_passes():
    import inspect

    for fn in (_torch.default_partition, _torch.min_cut_partition):
        params = inspect.signature(fn).parameters
        assert "num_fwd_outputs" in params, fn
        assert "static_lifetime_input_indices" in params, fn


def test_only_fxviz_torch_imports_private_torch():
    import pathlib
    import re

    quarantine = pathlib.Path(_torch.__file__).parent  # the package fxviz/_torch/
    assert quarantine.name == "_torch" and (quarantine / "__init__.py").exists(), quarantine
    root = quarantine.parent
    offenders = []
    for path in root.rglob("*.py"):
        if path.is_relative_to(quarantine):
            continue
        text = path.read_text()
        if (re.search(r"torch\._(functorch|dynamo|subclasses|inductor|logging|guards)", text)
                or re.search(r"torch\.utils\._\w+|from torch\.utils import _", text)
                or ".meta[" in text or "meta.get(" in text):
            offenders.append(str(path.relative_to(root)))
    assert not offenders, f"private torch APIs / node meta used outside the fxviz/_torch/ package: {offenders}"


def test_torch_module_holds_torch_internals_only():
    """``_torch`` wraps torch; strategies live in ``analysis/`` (the recompute-all one too)."""
    assert not hasattr(_torch, "recompute_all_partition")
    from fxviz.analysis.strategy.recompute_all import recompute_all_partition

    assert callable(recompute_all_partition)
