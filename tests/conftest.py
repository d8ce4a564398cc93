"""Shared fixtures: traces are expensive-ish, so each example is traced once per session."""

from __future__ import annotations

import os
import pathlib

import pytest
import torch

import fxviz
from fxviz import examples

ARTIFACTS = pathlib.Path(os.environ.get("FXVIZ_TEST_ARTIFACTS",
                                        pathlib.Path(__file__).parent.parent / "test-artifacts"))

# Small but faithful sizes for the suite (AlexNet stays full size: it is the story).
SMALL = {
    "mlp": {},
    "alexnet": {},
    "resnet_block": {"blocks": 2},
    "mini_gpt": {"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab": 64, "block_size": 32, "seq": 16},
    "pointwise_chain": {},
}


def make_example(name: str):
    return getattr(examples, name)(**SMALL[name])


@pytest.fixture(scope="session")
def artifacts() -> pathlib.Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def jupyter(tmp_path_factory):
    """One Jupyter server for the session's browser tests that open a notebook (started on first use):
    it serves JupyterLab 4 (``/lab``) and Notebook 7 (``/notebooks``) alike; a test opens its own
    notebook file in it (``dataclasses.replace(jupyter, app="notebook").lab_url(name)``)."""
    pytest.importorskip("jupyterlab")
    from .browser_util import jupyter_server

    with jupyter_server(tmp_path_factory.mktemp("jupyter")) as server:
        yield server


@pytest.fixture(scope="session")
def example_models():
    return {name: make_example(name) for name in SMALL}


@pytest.fixture(scope="session")
def traces(example_models):
    """Lazily traced examples: traces[(name, params)]."""

    class _Lazy(dict):
        def __missing__(self, key):
            name, params = key
            model, inputs = example_models[name]
            tr = fxviz.trace(model, *inputs, params=params)
            self[key] = tr
            return tr

    return _Lazy()


def snapshot(model: torch.nn.Module) -> dict:
    """Everything fxviz promises not to change, for bitwise comparison."""
    return {
        "state": {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()},
        "grads": {n: (None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()},
        "training": [m.training for m in model.modules()],
        "requires_grad": [p.requires_grad for p in model.parameters()],
        "rng": torch.get_rng_state().clone(),
        "budget": torch._functorch.config.activation_memory_budget,
        "solver": torch._functorch.config.activation_memory_budget_solver,
    }


def assert_unchanged(model: torch.nn.Module, before: dict) -> None:
    after = snapshot(model)
    assert before["state"].keys() == after["state"].keys()
    for k in before["state"]:
        a, b = before["state"][k], after["state"][k]
        assert a.dtype == b.dtype and a.shape == b.shape, k
        assert torch.equal(a.view(-1).view(torch.uint8) if a.dtype.is_floating_point else a,
                           b.view(-1).view(torch.uint8) if b.dtype.is_floating_point else b), f"{k} changed"
    for n in before["grads"]:
        ga, gb = before["grads"][n], after["grads"][n]
        assert (ga is None) == (gb is None), f"{n}.grad changed"
        if ga is not None:
            assert torch.equal(ga, gb), f"{n}.grad changed"
    assert before["training"] == after["training"]
    assert before["requires_grad"] == after["requires_grad"]
    assert torch.equal(before["rng"], after["rng"]), "global RNG state moved"
    assert before["budget"] == after["budget"] and before["solver"] == after["solver"]
