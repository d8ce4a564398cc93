"""fxviz never changes the user's model or session.

After every fxviz call — tracing in both parameter modes, every partition strategy, the memory
table, drawing, the doctor, the gradient check, the HTML report and the explorer — on every example
model: the state_dict is bitwise equal, ``.grad`` fields (objects and values), ``training`` flags,
``requires_grad``, the example inputs, the global RNG, grad mode and torch's functorch / dynamo
config values are exactly as before.  The session starts from non-default config values so that a
call which "restores" a default instead of the user's value is caught too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch._functorch.config  # the session knobs _user_session sets (fxviz imports it lazily)

import fxviz

from .conftest import SMALL, assert_unchanged, make_example, snapshot

STRATEGIES = ["default", "min_cut", "budget:0.5", "recompute_all", "eager"]
PARAMS = ["lifted", "closure"]

# The user's session is deliberately unusual: a non-default budget and solver, a seeded RNG.
USER_CONFIG = {"activation_memory_budget": 0.77, "activation_memory_budget_solver": "greedy"}


def _config_values() -> dict[str, Any]:
    """Every functorch and dynamo config value a user could have set (plain values only)."""
    out: dict[str, Any] = {}
    for prefix, cfg in (("functorch", torch._functorch.config), ("dynamo", torch._dynamo.config)):
        for key, value in cfg.get_config_copy().items():
            if isinstance(value, (bool, int, float, str, type(None))):
                out[f"{prefix}.{key}"] = value
    return out


def _session() -> dict[str, Any]:
    return {
        "config": _config_values(),
        "grad_enabled": torch.is_grad_enabled(),
        "deterministic": torch.are_deterministic_algorithms_enabled(),
        "default_dtype": torch.get_default_dtype(),
        "threads": torch.get_num_threads(),
    }


def _input_bits(inputs: tuple[Any, ...]) -> list[Any]:
    return [(t.detach().clone(), t.requires_grad, t.grad) if isinstance(t, torch.Tensor) else t for t in inputs]


def _assert_inputs_unchanged(inputs: tuple[Any, ...], before: list[Any]) -> None:
    for t, b in zip(inputs, before):
        if isinstance(t, torch.Tensor):
            value, requires_grad, grad = b
            assert torch.equal(t, value), "an example input changed"
            assert t.requires_grad == requires_grad and t.grad is grad, "an example input's autograd state changed"


@contextlib.contextmanager
def _user_session():
    with torch._functorch.config.patch(**USER_CONFIG):
        yield


class _Case:
    """One example model in one parameter mode, traced once (inside the test that checks tracing)."""

    def __init__(self, name: str, params: str) -> None:
        self.name, self.params = name, params
        self.model, self.inputs = make_example(name)
        self.model.train()
        first = next(self.model.parameters())
        first.grad = torch.full_like(first, 0.25)  # an existing .grad fxviz must not touch
        self.trace: fxviz.Trace | None = None


_CASES: dict[tuple[str, str], _Case] = {}


def _traced(name: str, params: str) -> _Case:
    key = (name, params)
    if key not in _CASES:
        case = _Case(name, params)
        with _user_session():
            case.trace = fxviz.trace(case.model, *case.inputs, params=params)
        _CASES[key] = case
    return _CASES[key]


def _check(case: _Case, what: str, call: Callable[[], Any]) -> Any:
    """Run ``call`` in the user's session and assert nothing the user owns moved."""
    with _user_session():
        torch.manual_seed(1234)
        before, session, inputs = snapshot(case.model), _session(), _input_bits(case.inputs)
        try:
            result = call()
        except fxviz.FxvizError as exc:  # refusing is allowed (e.g. a strategy on a graph with no
            result = exc  # backward); changing the user's things on the way out is not
        try:
            assert_unchanged(case.model, before)
            _assert_inputs_unchanged(case.inputs, inputs)
            assert _session() == session, f"{what} changed torch's session state"
        except AssertionError as exc:
            raise AssertionError(f"{what} on {case.name} ({case.params}): {exc}") from exc
    return result


def _needs(owner: Any, attr: str, feature: str) -> None:
    if not hasattr(owner, attr):
        pytest.skip(f"{feature} has not landed yet ({getattr(owner, '__name__', owner)}.{attr} missing)")


# --- tracing -------------------------------------------------------------------------------------
@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_trace_leaves_model_and_session_alone(name, params):
    case = _Case(name, params)
    tr = _check(case, "fxviz.trace", lambda: fxviz.trace(case.model, *case.inputs, params=params))
    assert len(tr.nodes) > 0
    if (name, params) not in _CASES:
        case.trace = tr
        _CASES[(name, params)] = case


@pytest.mark.parametrize("name", ["mlp", "mini_gpt"])
def test_trace_aot_route_leaves_model_alone(name):
    case = _Case(name, "lifted")
    tr = _check(case, "fxviz.trace(capture_route='aot')",
                lambda: fxviz.trace(case.model, *case.inputs, capture_route="aot"))
    assert tr.capture.route == "aot"


# --- analysis ------------------------------------------------------------------------------------
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_strategy_leaves_model_alone(name, params, strategy):
    _needs(fxviz.Trace, "partition", "Trace.partition")
    case = _traced(name, params)
    part = _check(case, f"partition({strategy!r})", lambda: case.trace.partition(strategy))
    assert part is not None


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_memory_table_leaves_model_alone(name, params):
    _needs(fxviz.Trace, "memory_table", "Trace.memory_table")
    case = _traced(name, params)
    table = _check(case, "memory_table()", lambda: case.trace.memory_table())
    assert not isinstance(table, fxviz.FxvizError) and len(table) > 0, table


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_check_gradients_leaves_model_alone(name, params):
    case = _traced(name, params)
    table = _check(case, "check_gradients()", lambda: case.trace.check_gradients())
    assert not isinstance(table, fxviz.FxvizError), table
    assert len(table) == len(list(case.model.parameters()))


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_doctor_leaves_model_alone(name, params):
    _needs(fxviz.Trace, "doctor", "Trace.doctor")
    case = _traced(name, params)
    _check(case, "doctor()", lambda: case.trace.doctor())


# --- presentation --------------------------------------------------------------------------------
@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("name", sorted(SMALL))
def test_draw_leaves_model_alone(name, params):
    _needs(fxviz.Trace, "draw", "Trace.draw")
    case = _traced(name, params)
    _check(case, "draw()", lambda: case.trace.draw())
    drawn = _check(case, "draw(strategy=...)", lambda: case.trace.draw(strategy="min_cut", compare="default"))
    assert not isinstance(drawn, fxviz.FxvizError) or not case.trace.graph.has_backward, drawn


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("name", ["mlp", "resnet_block"])
def test_report_leaves_model_alone(name, params, tmp_path):
    _needs(fxviz, "report", "fxviz.report")
    case = _traced(name, params)
    out = tmp_path / "report.html"
    _check(case, "fxviz.report", lambda: fxviz.report(case.trace, out))
    assert out.exists() and out.stat().st_size > 0


@pytest.mark.parametrize("params", PARAMS)
@pytest.mark.parametrize("name", ["mlp", "resnet_block"])
def test_explore_leaves_model_alone(name, params):
    _needs(fxviz, "explore", "fxviz.explore")
    case = _traced(name, params)
    _check(case, "fxviz.explore", lambda: fxviz.explore(case.trace))


def test_explore_on_a_model_leaves_model_alone():
    _needs(fxviz, "explore", "fxviz.explore")
    case = _Case("resnet_block", "lifted")
    _check(case, "fxviz.explore(model, *inputs)", lambda: fxviz.explore(case.model, *case.inputs))


# --- the harness itself can fail -----------------------------------------------------------------
def test_the_check_catches_each_kind_of_change():
    """Each thing the test guards, changed on purpose, is caught (so the tests above can fail)."""
    case = _Case("resnet_block", "lifted")
    bn = case.model[0].bn1
    changes: dict[str, Callable[[], None]] = {
        "buffer value": lambda: bn.running_mean.add_(1.0),
        "rebound buffer": lambda: setattr(bn, "running_var", bn.running_var + 1),
        "grad values": lambda: next(case.model.parameters()).grad.add_(1.0),
        "grad object": lambda: setattr(next(case.model.parameters()), "grad", None),
        "training flag": lambda: bn.eval(),
        "rng": lambda: torch.rand(1),
        "budget": lambda: setattr(torch._functorch.config, "activation_memory_budget", 0.5),
        "input": lambda: case.inputs[0].add_(1.0),
        "grad mode": lambda: torch.set_grad_enabled(False),
    }
    for what, change in changes.items():
        fresh = _Case("resnet_block", "lifted")
        case.model, case.inputs = fresh.model, fresh.inputs
        bn = case.model[0].bn1
        try:
            with pytest.raises(AssertionError):
                _check(case, what, change)
        finally:
            torch.set_grad_enabled(True)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", ["mlp", "mini_gpt"])
def test_inductor_capture_leaves_model_and_session_alone(name, dynamic):
    """backend='inductor' patches inductor's config (its partitioner hook, caches) and dynamo's
    remembered sizes only while it traces: the user's are exactly as before afterwards."""
    import torch._dynamo.pgo as pgo
    import torch._inductor.config as inductor_config

    def inductor_values() -> dict[str, Any]:
        return {k: v for k, v in inductor_config.get_config_copy().items()
                if isinstance(v, (bool, int, float, str, type(None), list, tuple))}

    case = _Case(name, "lifted")
    before, code_state = inductor_values(), (pgo._CODE_STATE, pgo._INIT_CODE_STATE)
    tr = _check(case, f"fxviz.trace(backend='inductor', dynamic={dynamic})",
                lambda: fxviz.trace(case.model, *case.inputs, backend="inductor", dynamic=dynamic))
    assert tr.capture.backend == "inductor" and tr.graph.compiler == "inductor"
    assert inductor_values() == before
    assert code_state == (pgo._CODE_STATE, pgo._INIT_CODE_STATE)


def test_quiet_blocks_nested_hand_every_torch_logger_its_level_back(monkeypatch):
    """fxviz silences torch's loggers while it drives torch, in blocks that nest (a partition inside a table inside
    a report): each logger gets the level the session gave it back, and an inner block at the level already set
    touches nothing (every ``setLevel`` clears the cache of each of torch's hundreds of loggers)."""
    import logging

    from fxviz._torch.tracing import quiet_torch

    dynamo, inductor = logging.getLogger("torch._dynamo"), logging.getLogger("torch._inductor")
    before = dynamo.level, inductor.level
    calls: list[str] = []
    original = logging.Logger.setLevel
    try:
        dynamo.setLevel(logging.INFO)
        monkeypatch.setattr(logging.Logger, "setLevel",
                            lambda self, level: calls.append(self.name) or original(self, level))
        with quiet_torch():
            assert dynamo.level == logging.ERROR
            outer = len(calls)
            with quiet_torch():
                assert dynamo.level == logging.ERROR
            assert len(calls) == outer  # nothing set again
            with quiet_torch(silent=True):
                assert dynamo.level == inductor.level == logging.CRITICAL + 1
            assert dynamo.level == logging.ERROR
        assert dynamo.level == logging.INFO and inductor.level == before[1]
    finally:
        monkeypatch.undo()
        dynamo.setLevel(before[0])
