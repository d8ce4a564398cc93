"""``backend="inductor"`` (and ``dynamic=True``) against the log of a real ``torch.compile`` run.

The reference is a real inductor (CPU) training step of each model, run in a subprocess with
``TORCH_TRACE`` set (kernels generated and compiled with the C++ compiler): its ``aot_joint_graph``
(the graph AOTAutograd traced, before inductor's joint-graph passes), ``aot_forward_graph`` and
``aot_backward_graph`` (what min-cut made of the graph after those passes).  fxviz must show the
same joint graph, and ``tr.partition("min_cut")`` must produce the same forward, backward and saved
values.  One real compile per (static / dynamic) covers all three models.
"""

from __future__ import annotations

import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import torch
import torch.fx as fx

import fxviz
from fxviz.analysis.strategy.choices import step_strategy
from fxviz.core.errors import InputError

from .compile_log import LoggedStep, run_real_steps
from .compile_models import MODELS

NAMES = list(MODELS)
pytestmark = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                reason="a real inductor compile needs a C++ compiler (scripts/run.sh installs g++)")


BUDGET = 0.3  # a user's torch._functorch.config.activation_memory_budget in the third real run


@pytest.fixture(scope="module")
def real_runs() -> dict[bool | str, dict[str, LoggedStep]]:
    """{dynamic: {model: logged graphs}}: the static and the dynamic run, side by side; under
    ``"budget"``, the attention model's static step with the user's budget set in torch's config."""
    with ThreadPoolExecutor(2) as pool:
        futures: dict[bool | str, Any] = {d: pool.submit(run_real_steps, NAMES, d) for d in (False, True)}
        futures["budget"] = pool.submit(run_real_steps, ["two_blocks"], False, budget=BUDGET)
        return {d: f.result() for d, f in futures.items()}


def _inductor_trace(name: str, dynamic: bool) -> fxviz.Trace:
    model, inputs = MODELS[name]()
    return fxviz.trace(model, *inputs, backend="inductor", dynamic=dynamic)


@pytest.fixture(scope="module")
def traced(traces):
    """``traced(name, dynamic)``: the model's inductor capture, made once per session (``traces.of``)."""
    return lambda name, dynamic: traces.of(("compile_models", name, "inductor", dynamic),
                                           lambda: _inductor_trace(name, dynamic))


def _ops(gm: fx.GraphModule) -> Counter:
    """torch ops by overload (``aten.mul.Tensor``), as the log prints them (``torch.ops.<op>``)."""
    return Counter(str(n.target) for n in gm.graph.nodes
                   if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload))


def _sym_ops(gm: fx.GraphModule) -> int:
    """Python arithmetic on SymInts (``primals_1 * primals_2``): printed without ``torch.ops``."""
    return sum(1 for n in gm.graph.nodes
               if n.op == "call_function" and not isinstance(n.target, torch._ops.OpOverload)
               and isinstance(n.meta.get("val"), torch.SymInt))


def _log_sym_ops(code: str) -> int:
    import re

    return sum(1 for line in code.splitlines()
               if re.match(r'^\s*\w+: "Sym\([^"]*\)" = (?!torch\.ops)', line))


CASES = [(name, dynamic) for dynamic in (False, True) for name in NAMES]
IDS = [f"{name}-{'dynamic' if d else 'static'}" for name, d in CASES]


@pytest.mark.parametrize("name,dynamic", CASES, ids=IDS)
def test_joint_graph_is_the_real_runs(real_runs, traced, name, dynamic):
    logged = real_runs[dynamic][name]
    tr = traced(name, dynamic)
    traced = tr.graph.before_joint_passes
    assert traced is not None
    assert _ops(traced) == logged.joint_ops
    assert _sym_ops(traced) == _log_sym_ops(logged.graphs["aot_joint_graph"])
    # what min-cut receives is that graph after inductor's joint-graph passes (CSE of gelu's
    # recomputed erf, ...): never more ops than traced
    assert sum(_ops(tr.joint).values()) <= sum(_ops(traced).values())


@pytest.mark.parametrize("name,dynamic", CASES, ids=IDS)
def test_min_cut_is_the_real_runs(real_runs, traced, name, dynamic):
    logged = real_runs[dynamic][name]
    tr = traced(name, dynamic)
    p = tr.partition("min_cut")
    assert p.ok, p.error
    assert _ops(p.forward) == logged.forward_ops
    assert _ops(p.backward) == logged.backward_ops
    if dynamic:  # the backward graph lists saved SymInts first, the forward returns them last
        assert Counter(p.saved) == Counter(logged.saved)
    else:
        assert p.saved == logged.saved


@pytest.mark.parametrize("name,dynamic", CASES, ids=IDS)
def test_min_cut_reuses_the_captures_own_and_a_fresh_one_agrees(real_runs, traced, name, dynamic):
    """Inductor's capture already ran min-cut on the graph with the same arguments: ``min_cut`` is
    that result (no second solve); a fresh min-cut of the same graph gives the same graphs, and any
    change to torch's functorch config since the capture means a fresh one."""
    import dataclasses

    from torch._functorch import config as functorch_config

    from fxviz.analysis.strategy.partition import partition

    graph = traced(name, dynamic).graph
    assert graph.captured_min_cut is not None
    reused = partition(graph, "min_cut")
    assert reused.seconds == graph.captured_min_cut[2]  # the capture's own solve, not a second one
    assert reused.forward is not graph.captured_min_cut[0]  # a copy: an edit of it never reaches the capture
    fresh = partition(dataclasses.replace(graph, captured_min_cut=None), "min_cut")
    assert fresh.seconds != reused.seconds
    for a, b in ((reused.forward, fresh.forward), (reused.backward, fresh.backward)):
        assert [n.format_node() for n in a.graph.nodes] == [n.format_node() for n in b.graph.nodes]
    assert (reused.saved, reused.recomputed, reused.removed) == (fresh.saved, fresh.recomputed, fresh.removed)
    assert Counter(fresh.saved) == Counter(real_runs[dynamic][name].saved)
    with functorch_config.patch(ban_recompute_reductions=not functorch_config.ban_recompute_reductions):
        assert partition(graph, "min_cut").seconds != graph.captured_min_cut[2]
    from torch._inductor import config as inductor_config

    with inductor_config.patch(fallback_random=not inductor_config.fallback_random):
        assert partition(graph, "min_cut").seconds != graph.captured_min_cut[2]


@pytest.mark.parametrize("name", NAMES)
def test_the_step_strategy_is_the_real_step(real_runs, traced, name):
    """``choices.step_strategy``: what torch.compile(model)'s training step saves (issue 32)."""
    logged = real_runs[False][name]
    tr = traced(name, False)
    s = step_strategy(tr.capture)
    assert s.name == "min_cut"
    assert tr.partition(s).saved == logged.saved


@pytest.mark.parametrize("name", NAMES)
def test_the_default_is_the_real_step(real_runs, name):
    """No options: fxviz shows what torch.compile(model)'s training step saves (issue 32)."""
    logged = real_runs[False][name]
    model, inputs = MODELS[name]()
    tr = fxviz.trace(model, *inputs)
    assert tr.capture.backend == "inductor" and tr.default_strategy.name == "min_cut"
    assert tr.partition().saved == logged.saved
    assert tr.memory_table().iloc[0]["strategy"] == "min_cut"


def test_the_default_follows_the_users_budget(real_runs):
    """A budget the user set in torch's config is what their step partitions with: the knapsack."""
    from torch._functorch import config as functorch_config

    logged = real_runs["budget"]["two_blocks"]
    model, inputs = MODELS["two_blocks"]()
    with functorch_config.patch(activation_memory_budget=BUDGET):
        tr = fxviz.trace(model, *inputs)
    assert step_strategy(tr.capture) == tr.default_strategy
    assert tr.default_strategy.name == f"budget:{BUDGET:g}:dp"
    assert tr.graph.captured_min_cut is None  # the capture's min-cut solved a knapsack: not plain min_cut's
    assert tr.partition().saved == logged.saved
    # and min_cut stays min-cut without a budget, whatever torch's config says when it runs
    with functorch_config.patch(activation_memory_budget=BUDGET):
        plain = tr.partition("min_cut").saved
    assert plain == real_runs[False]["two_blocks"].saved != logged.saved


@pytest.mark.parametrize("name", NAMES)
def test_partitioner_called_as_inductor_calls_it(traced, name):
    tr = traced(name, False)
    assert tr.graph.compiler == "inductor"
    caption = tr.memory_table(["min_cut"]).attrs["caption"]
    assert "backend='inductor'" in caption and "compiler='inductor'" in caption
    # torch.compile passes the parameter (and buffer) inputs as static-lifetime
    static = tr.graph.static_lifetime_input_indices
    placeholders = [n for n in tr.joint.graph.nodes if n.op == "placeholder"]
    assert static and all(tr.graph.info[placeholders[i].name].role in ("parameter", "buffer") for i in static)


def test_gelu_aot_eager_is_not_what_inductor_runs(real_runs):
    """The issue's story: aot_eager keeps gelu (and saves it), the real run decomposes it into
    erf and saves a mul instead; fxviz's inductor capture shows the real run's."""
    logged = real_runs[False]["gelu_mlp"]
    model, inputs = MODELS["gelu_mlp"]()
    eager_style = fxviz.trace(model, *inputs, backend="aot_eager")
    assert "aot_eager" in eager_style.summary()
    gelu = "aten.gelu.default"
    assert _ops(eager_style.joint)[gelu] == 1 and logged.joint_ops[gelu] == 0
    assert logged.joint_ops["aten.erf.default"] >= 1
    assert eager_style.partition("min_cut").saved != logged.saved


@pytest.mark.parametrize("name", NAMES)
def test_dynamic_symints_listed_and_counted(real_runs, traced, name):
    import re

    logged = real_runs[True][name]
    tr = traced(name, True)
    sym_saved = [s for s in logged.saved
                 if re.search(rf'^\s*{s}: "Sym\(', logged.graphs["aot_backward_graph"], re.M)]
    row = tr.memory_table(["min_cut"]).iloc[0]
    assert row["saved_symints"] == len(sym_saved)
    assert set(sym_saved) <= set(tr.partition("min_cut").saved)
    assert "Symbolic sizes were evaluated" in tr.memory_table(["min_cut"]).attrs["caption"]
    # every symbolic value says so, and its bytes are the example sizes'
    _model, inputs = MODELS[name]()
    nodes = tr.nodes
    symbolic = nodes[nodes["symbolic_shape"].notna()]
    assert len(symbolic) > 0
    first = inputs[0]
    row_x = nodes[(nodes["role"] == "primal") & nodes["shape"].map(lambda s: s == tuple(first.shape))]
    assert len(row_x) and int(row_x["bytes"].iloc[0]) == first.numel() * first.element_size()


def test_backend_errors_are_one_line():
    model, inputs = MODELS["gelu_mlp"]()
    with pytest.raises(InputError, match=r"backend='tvm' is not one of"):
        fxviz.trace(model, *inputs, backend="tvm")
    with pytest.raises(InputError, match=r"needs torch\.compile's capture"):
        fxviz.trace(model, *inputs, backend="inductor", params="closure")
    with pytest.raises(InputError, match=r"needs torch\.compile's capture"):
        fxviz.trace(model, *inputs, dynamic=True, capture_route="aot")


def test_cli_names_the_backend(capsys):
    from fxviz.frontends.cli.entry import main

    assert main(["table", "mlp", "--backend", "inductor", "--strategies", "min_cut"]) in (0, None)
    out = capsys.readouterr().out
    assert "backend='inductor'" in out and "compiler='inductor'" in out
