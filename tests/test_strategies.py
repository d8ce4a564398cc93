"""The strategy parser: every form a user may write becomes one ``Strategy`` value; every bad
form is a ``StrategyError`` that names the problem and the valid forms."""

from __future__ import annotations

import pytest

import fxviz
from fxviz import _torch
from fxviz.analysis.strategy import strategies
from fxviz.analysis.strategy.strategies import KINDS, OFFERED, Strategy, forms_text, parse_list


@pytest.mark.parametrize("text, kind, budget, solver, name", [
    ("default", "default", None, None, "default_partition"),  # torch's default_partition, named as it is named
    (" Default ", "default", None, None, "default_partition"),
    ("default_partition", "default", None, None, "default_partition"),
    ("min_cut", "min_cut", None, None, "min_cut"),
    ("min-cut", "min_cut", None, None, "min_cut"),
    ("mincut", "min_cut", None, None, "min_cut"),
    ("budget:0.5", "budget", 0.5, "dp", "budget:0.5:dp"),
    ("budget:0.30", "budget", 0.3, "dp", "budget:0.3:dp"),
    ("budget:.25:greedy", "budget", 0.25, "greedy", "budget:0.25:greedy"),
    ("budget:1:ilp", "budget", 1.0, "ilp", "budget:1:ilp"),
    ("budget:0:dp", "budget", 0.0, "dp", "budget:0:dp"),
    ("memory-budget:0.5", "budget", 0.5, "dp", "budget:0.5:dp"),
    ("recompute_all", "recompute_all", None, None, "recompute_all"),
    ("recompute-all", "recompute_all", None, None, "recompute_all"),
    ("eager", "eager", None, None, "eager"),
])
def test_every_written_form(text, kind, budget, solver, name):
    s = Strategy.parse(text)
    assert (s.kind, s.budget, s.solver, s.name) == (kind, budget, solver, name)
    assert Strategy.parse(s.name) == s  # the canonical name parses back to the same value
    assert Strategy.parse(s) is s
    assert s.label and str(s) == name


def test_callables_are_strategies_compared_by_identity():
    s = Strategy.parse(_torch.default_partition)
    assert s.kind == "callable" and s.fn is _torch.default_partition
    assert s == Strategy.parse(_torch.default_partition) and hash(s) == hash(Strategy.parse(_torch.default_partition))
    assert s != Strategy.parse(_torch.min_cut_partition)
    assert s.name == "callable:default_partition"


@pytest.mark.parametrize("bad, words", [
    ("nope", "unknown strategy 'nope'"),
    ("", "unknown strategy ''"),
    ("budget", "needs a budget"),
    ("budget:", "needs a budget"),
    ("budget:2", "outside 0..1"),
    ("budget:-0.5", "not a number"),
    ("budget:half", "not a number"),
    ("budget:0.5:magic", "unknown solver 'magic'"),
    ("budget:0.5:dp:extra", "too many ':'"),
    ("default:1", "takes no arguments"),
    ("eager:x", "takes no arguments"),
    ("callable", "unknown strategy"),
    (3, "not int"),
    (None, "not NoneType"),
])
def test_every_bad_form_names_the_problem_and_the_fix(bad, words):
    with pytest.raises(fxviz.StrategyError) as err:
        Strategy.parse(bad)
    assert words in err.value.message
    assert err.value.hint  # every error says what to write instead


def test_unknown_names_list_the_valid_forms():
    with pytest.raises(fxviz.StrategyError) as err:
        Strategy.parse("optimalish")
    for form in ("default", "min_cut", "budget:B:greedy", "recompute_all", "eager"):
        assert form in err.value.hint
    assert err.value.hint.endswith(forms_text())


def test_parse_list_accepts_strings_and_lists_and_drops_duplicates():
    assert parse_list(None) is None
    assert [s.name for s in parse_list("default, min-cut,,budget:0.5,default")] == \
        ["default_partition", "min_cut", "budget:0.5:dp"]
    assert [s.name for s in parse_list(["eager", Strategy("eager")])] == ["eager"]
    # one strategy that is not a string is a list of one (tr.memory_timeline(Strategy(...)) or a callable)
    assert parse_list(Strategy("min_cut")) == [Strategy("min_cut")]
    assert [s.kind for s in parse_list(len)] == ["callable"]


def test_the_registry_is_the_one_place_a_strategy_lives():
    from fxviz.analysis.strategy.partition import partitioner

    for kind in KINDS.values():
        assert kind.forms and kind.describe
        s = Strategy.parse(lambda *a, **k: None) if kind.name == "callable" else Strategy.parse(kind.forms[0]
                                                                                               .replace(":B", ":0.5"))
        if kind.from_real_run:  # the dispatcher runs it itself; it has no partitioner
            with pytest.raises(fxviz.StrategyError, match="not a partitioner"):
                partitioner(s)
        else:
            assert callable(partitioner(s)), kind.name
    assert [s.name for s in OFFERED] == ["default_partition", "min_cut", "budget:0.5:dp", "recompute_all", "eager"]
    assert "optimal" in KINDS and not any(s.kind == "optimal" for s in OFFERED)  # the default table stays fast
    assert Strategy.parse("eager").needs_model and not Strategy.parse("min_cut").needs_model
    assert set(strategies.SOLVERS) == {"dp", "greedy", "ilp"}


def test_equal_strategies_share_one_cached_partition(traces):
    tr = traces[("mlp", "lifted")]
    assert tr.partition("budget:0.5") is tr.partition("budget:0.5:dp") is tr.partition(Strategy.parse("budget:.5"))
    assert tr.partition("min-cut").name == "min_cut"


@pytest.mark.parametrize("text, budget, budget_bytes, name", [
    ("optimal:0.5", 0.5, None, "optimal:0.5"),
    ("optimal:.25", 0.25, None, "optimal:0.25"),
    ("optimal:0", 0.0, None, "optimal:0"),
    ("optimal:1", 1.0, None, "optimal:1"),
    ("Optimal:0.50", 0.5, None, "optimal:0.5"),
    ("optimal:64MiB", None, 64 << 20, "optimal:64MiB"),
    ("optimal:64mib", None, 64 << 20, "optimal:64MiB"),
    ("optimal:1.5GiB", None, 1536 << 20, "optimal:1536MiB"),
    ("optimal:1048576B", None, 1 << 20, "optimal:1MiB"),
    ("optimal:1000B", None, 1000, "optimal:1000B"),
    ("optimal:0B", None, 0, "optimal:0B"),
    ("optimal:2KiB", None, 2048, "optimal:2KiB"),
])
def test_optimal_forms(text, budget, budget_bytes, name):
    s = Strategy.parse(text)
    assert (s.kind, s.budget, s.budget_bytes, s.name) == ("optimal", budget, budget_bytes, name)
    assert Strategy.parse(s.name) == s
    assert "optimal" in s.label and "MILP" in s.label
    assert not s.needs_model


@pytest.mark.parametrize("bad, words", [
    ("optimal", "needs a budget"),
    ("optimal:", "needs a budget"),
    ("optimal:2", "outside 0..1"),
    ("optimal:-1", "neither a fraction nor a size"),
    ("optimal:half", "neither a fraction nor a size"),
    ("optimal:64MB", "neither a fraction nor a size"),
    ("optimal:64 parsecs", "neither a fraction nor a size"),
    ("optimal:0.5:dp", "too many ':'"),
])
def test_bad_optimal_forms(bad, words):
    with pytest.raises(fxviz.StrategyError) as err:
        Strategy.parse(bad)
    assert words in err.value.message
    assert "optimal:64MiB" in err.value.hint or "unit" in err.value.hint


def test_partitioner_returns_torch_signature_callables():
    from fxviz.analysis.strategy.optimal import OptimalPartitioner

    fn = fxviz.partitioner("optimal:0.5")
    assert isinstance(fn, OptimalPartitioner) and fn.budget == 0.5 and fn.solution is None
    assert fxviz.partitioner("optimal:1MiB").budget_bytes == 1 << 20
    assert fxviz.partitioner("default") is _torch.default_partition
    with pytest.raises(fxviz.StrategyError):
        fxviz.partitioner("eager")
