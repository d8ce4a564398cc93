"""Shared fixtures of the suite: what is expensive is made once per session and shared, so reach for these
before making your own.

- ``traces`` (session): traces of fxviz's examples at the small sizes below, made on first use and shared
  by every test of the session:
    ``traces[(name, params)]`` / ``traces[(name, params, backend)]``: ``examples.<name>(**SMALL[name])``
        traced with ``params`` ("lifted" or "closure") and ``backend`` (None, "aot_eager", "inductor");
    ``traces[name]``: ``traces[(name, "lifted")]``;
    ``traces["by_hand"]``: ``sin(x * w).sum()`` of two 4-vectors (a function, not a module);
    ``traces.of(key, make)``: any other trace, ``make()`` called once for ``key`` (a tuple naming the
        module that makes it, e.g. ``("awkward", name)``), for traces a file of tests shares.
  Traces are shared: never change one (its model, its config) in a test; trace your own for that.
- ``logged`` (session): ``logged(script, *args)`` is the ``TORCH_TRACE`` directory of a real run of
  ``script`` (``tests/logs_util.py``: made once, cached under ``test-artifacts/logs/`` by script,
  arguments and torch version); read it, never write into it.  ``logs_util.make_log(script, dir,
  *args)`` gives a private copy instead, for a test that prints paths or changes files.  Helper
  modules call ``logs_util.cached_log`` directly; never run a ``TORCH_TRACE`` subprocess of your own.
- ``jupyter`` (session): one JupyterLab server (Notebook 7 served by it too: ``server.lab_url(nb,
  app="notebook")``) rooted at a fresh directory, for every browser and notebook test; write your
  notebook under ``jupyter.root``.
- ``artifacts`` (session): ``test-artifacts/`` (``FXVIZ_TEST_ARTIFACTS``), for screenshots and files a
  person looks at after a run.
- ``example_models`` (session): the examples' ``(model, inputs)`` at ``SMALL`` sizes.

Markers and workers (``pyproject.toml``): ``bash scripts/run.sh test`` runs ``pytest -n 2 --dist loadscope
-m "not sweep"`` (pytest-xdist, one worker a core) with the scheduler below (``pytest_xdist_make_scheduler``):
every test runs on the worker that runs the rest of its file (a module's fixtures, a model advised or real
compiled steps measured, are made once, not once per worker), and every test of a file in ``BROWSER_FILES``
(the files with ``browser`` or ``notebook`` tests; collection fails when a marked test is elsewhere) runs on
one worker, one after another, beside the other worker's tests.
``sweep`` marks a long sweep's full run (the op database, the corpus, the lab's notebooks): ``bash
scripts/run.sh sweeps`` runs those, while the default run keeps a representative subset of each.
"""

from __future__ import annotations

import os

# The suite's real torch.compile steps (here, in its subprocesses and notebook kernels, which inherit this) build
# their C++ kernels without DWARF line tables: inductor adds ``-g1`` by default, a quarter of each kernel's g++
# time (the precompiled header is built with the same flags), and nothing the suite measures reads it.
os.environ.setdefault("AOT_INDUCTOR_ENABLE_LINE_TABLES", "0")
# ... and scalar C++ kernels (no vector ISA: no at::vec templates to instantiate, no ISA probe compiled in each
# process): a third less time for a real step's compile.  Vectorizing changes a kernel's loops, never the
# wrapper's memory plan (its allocations, reuses and frees, every buffer's bytes), which is all that fxviz reads
# and the suite measures: tests/test_compiled_step.py checks that against a vectorized lowering.
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "0")

import pathlib
from collections.abc import Callable, Hashable
from typing import Any

import pytest
import torch

import fxviz
from fxviz import examples

from .logs_util import ARTIFACTS, cached_log

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


def _by_hand(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.sin(x * w).sum()


# the files whose tests open Chromium or a Jupyter kernel: one worker runs them one after another (each wants a
# core, and they share the session's ``jupyter`` server)
BROWSER_FILES = frozenset({"tests/test_browser.py", "tests/test_notebooks.py", "tests/test_logs_browser.py",
                           "tests/test_saved_browser.py", "tests/test_differences.py", "tests/test_explorer_expand.py",
                           "tests/test_widget.py", "tests/test_breaks.py"})
# the work units handed out first, longest first, so that no worker is left with a long one at the end (the rest
# follow in collection order): by their time on a clean clone
_FIRST = ("browser", "tests/test_advice.py", "tests/test_inductor.py", "tests/test_compiled_step.py",
          "tests/test_nonmutation.py", "tests/test_logs_gpt.py", "tests/test_lab.py")


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to: ``"browser"``, or its file."""
    file = nodeid.split("::")[0]
    return "browser" if file in BROWSER_FILES else file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's ``loadscope`` scheduling by :func:`work_unit` (its ``loadgroup`` reads groups from a node id that
    pytest 9 no longer lets a plugin change), the units in the order the workers collected them."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # the order of the collection below, not by number of tests
    return ByWorkUnit(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The long work units first (``_FIRST``); a ``browser`` or ``notebook`` test outside ``BROWSER_FILES`` is an
    error (it would share the machine with the other worker's browser)."""
    marked = [item for item in items if item.get_closest_marker("browser") or item.get_closest_marker("notebook")]
    stray = [item.nodeid for item in marked if work_unit(item.nodeid) != "browser"]
    if stray:
        raise pytest.UsageError(f"browser or notebook tests outside BROWSER_FILES (tests/conftest.py): {stray[:3]}; "
                                "add their files there")

    def rank(item: pytest.Item) -> int:
        unit = work_unit(item.nodeid)
        return _FIRST.index(unit) if unit in _FIRST else len(_FIRST)

    items.sort(key=rank)


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


class Traces(dict):
    """The session's traces, made on first use (see the module docstring for the keys)."""

    def __init__(self, models: dict[str, Any]) -> None:
        super().__init__()
        self._models = models

    def __missing__(self, key: Hashable) -> fxviz.Trace:
        if isinstance(key, str) and key in SMALL:  # a bare example name: its lifted trace
            tr = self[(key, "lifted")]
        elif key == "by_hand":
            x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
            tr = fxviz.trace(_by_hand, x, w)
        elif isinstance(key, tuple) and len(key) in (2, 3) and key[0] in SMALL:
            name, params, *backend = key
            model, inputs = self._models[name]
            tr = fxviz.trace(model, *inputs, params=params, backend=backend[0] if backend else None)
        else:
            raise KeyError(f"{key!r}: traces[(example, params[, backend])], traces['by_hand'] or traces.of(key, make)")
        self[key] = tr
        return tr

    def of(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """``make()``'s trace (or anything it returns), made once per session for ``key``."""
        if key not in self:
            self[key] = make()
        return self[key]


@pytest.fixture(scope="session")
def traces(example_models) -> Traces:
    return Traces(example_models)


@pytest.fixture(scope="session")
def logged() -> Callable[..., pathlib.Path]:
    """``logged(script, *args, env=None)``: the shared ``TORCH_TRACE`` directory of a real run."""
    return cached_log


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


@pytest.fixture(autouse=True)
def _log_cache(tmp_path_factory, monkeypatch):
    """What views of a log keep for the next view (``sources.log.cache``) goes to a folder of the test's own:
    never the user's ~/.cache, and no row one test kept shows in another's table."""
    monkeypatch.setenv("FXVIZ_CACHE_DIR", str(tmp_path_factory.mktemp("log_cache")))
