"""Advice on logs of real runs (issues 34, 45): ``fxviz advise --logs`` advises on the logged step (every
graph of it with a backward, the tensors crossing its breaks counted, as the real step holds them), or on
one graph named with ``--graph``/``--rank`` as the other log commands take them, saying plainly that it
covers that graph alone.  Logs are written by real ``torch.compile`` runs here."""

from __future__ import annotations

import pytest

import fxviz
from fxviz.frontends.cli.entry import main
from fxviz.frontends.cli.words import option_words

from .advice_log_models import SCRIPT
from .logs_util import make_log


@pytest.fixture(scope="module")
def break_log(tmp_path_factory):
    return make_log(SCRIPT, tmp_path_factory.mktemp("advbrk") / "trace", "break")


def _held_for_backward(model, x) -> int:
    """What a real ``torch.compile`` (aot_eager, as the log's run) step of ``model`` holds for its backward:
    the bytes still allocated after its forward, the loss's own left out (the profiler's memory events)."""
    import gc

    import torch

    torch._dynamo.reset()
    try:
        step = torch.compile(model, backend="aot_eager")
        step(x).backward()
        model.zero_grad(set_to_none=True)
        gc.collect()
        gc.disable()
        try:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
                loss = step(x)
        finally:
            gc.enable()
        events = sorted(prof.profiler.kineto_results.events(), key=lambda e: e.start_ns())
        held = sum(e.nbytes() for e in events if e.name() == "[memory]") - loss.untyped_storage().nbytes()
        loss.backward()
        return held
    finally:
        torch._dynamo.reset()


def test_advise_on_a_log_covers_its_step_or_the_graph_named(break_log, capsys):
    """No ``--graph``: the logged step, both graphs of the break, and the tensor that crosses it (what the
    real step holds for its backward); ``--graph ID``: that graph alone, said so."""
    from fxviz.frontends.cli.advise import step_trace

    from .advice_log_models import stack

    run = fxviz.load_logs(break_log)
    ids = [str(c) for c in run.graphs[run.graphs["backward"].astype(bool)]["compile_id"]]
    assert len(ids) == 2  # the graph break: two graphs with a backward in one step
    assert main(["advise", "--logs", str(break_log), "--saved", "50%"]) == 0
    out = capsys.readouterr().out
    head = " ".join(out.split("\n\n")[0].split())
    assert f"advice on the logged step of rank 0: its 2 graphs with a backward (compiles {ids[0]}, {ids[1]})" in head
    step, _ = step_trace(run, run.trace())
    advice = step.advise(saved="50%")
    assert advice.text(option_words) in out and [o.kind for o in advice.options] == ["budget"]
    logged = [int(t.memory_table(["logged"]).iloc[0]["saved_activation_bytes"]) for t in run.traces()]
    model, (x,) = stack(broken=True)
    held = _held_for_backward(model, x)
    assert advice.plain.saved_bytes == held > sum(logged) > 0  # the crossing tensor, counted once
    for args, cid in ((["--graph", ids[1]], ids[1]), (["--graph", ids[0], "--rank", "0"], ids[0])):
        assert main(["advise", "--logs", str(break_log), "--saved", "50%", *args]) == 0
        out = capsys.readouterr().out
        other = ids[1 - ids.index(cid)]
        assert f"compile {cid}" in out.splitlines()[0]  # which graph, first
        assert f"advice on compile {cid} of rank 0 only" in out and other in out.split("advice on compile")[1]
        # the table is the Python API's advice of that very graph, which says so in its notes
        advice = run.trace(compile_id=cid).advise(saved="50%")
        assert advice.text(option_words) in out and "--graph ID" in out and "compile_id" not in out
        assert any(f"compile {cid}" in n and "advice is of this graph's saved bytes" in n for n in advice.notes)
        logged_one = int(run.trace(compile_id=cid).memory_table(["logged"]).iloc[0]["saved_activation_bytes"])
        assert advice.plain.saved_bytes == logged_one > 0  # the plain step is what the run saved
    assert main(["advise", "--logs", str(break_log), "--saved", "50%", "--graph", "9/0"]) == 2
    assert "9/0" in capsys.readouterr().err
    assert main(["advise", "--logs", str(break_log), "--saved", "50%", "--rank", "3"]) == 2
    assert "rank" in capsys.readouterr().err


@pytest.fixture(scope="module")
def curve(tmp_path_factory):
    """The plain trace of ``stack``, its advice to 40% saved, and two real runs of the same model:
    each block checkpointed, and under torch's budget 0.3 (logged in parallel)."""
    from concurrent.futures import ThreadPoolExecutor

    from .advice_log_models import stack

    root = tmp_path_factory.mktemp("advcurve")
    with ThreadPoolExecutor(2) as pool:
        logs = dict(zip(("checkpointed", "budget 0.3"), pool.map(
            lambda mode: make_log(SCRIPT, root / mode, mode), ("checkpoint", "budget"))))
    runs = {name: fxviz.load_logs(path) for name, path in logs.items()}
    model, (x,) = stack()
    tr = fxviz.trace(model, x, backend="aot_eager")
    return tr, tr.advise(saved="40%"), runs


def test_budget_points_are_the_runs_tables_and_the_options(curve):
    tr, advice, runs = curve
    points = fxviz.budget_points(runs, advice)
    logged = points[points["kind"] == "logged"].set_index("label")
    for name, run in runs.items():  # each run's point: its own partition, as its traces' memory tables say
        rows = [t.memory_table(["logged"]).iloc[0] for t in run.traces()]
        for c in ("saved_activation_bytes", "recompute_flops", "recompute_bytes"):
            assert int(logged.loc[name, c]) == sum(int(r[c]) for r in rows), (name, c)
    # and what fxviz predicts for those very changes: the sweep's row at budget 0.3, the advice's
    # checkpoint of every block (the runs' own compiles, read back from their logs)
    sweep = tr.memory_sweep(progress=False)
    at = sweep[sweep["budgets"].map(lambda bs: 0.3 in bs)].iloc[0]
    assert (int(at["saved_activation_bytes"]), int(at["recompute_flops"])) == (
        int(logged.loc["budget 0.3", "saved_activation_bytes"]), int(logged.loc["budget 0.3", "recompute_flops"]))
    every = next(o for o in advice.options if o.kind == "checkpoint")
    assert every.change is not None and every.change.modules == ("layers.0", "layers.1")
    assert (every.saved_bytes, every.recompute_flops) == (
        int(logged.loc["checkpointed", "saved_activation_bytes"]), int(logged.loc["checkpointed", "recompute_flops"]))
    shown = [*advice.options, *([advice.bound] if advice.bound else [])]
    options = points[points["kind"] != "logged"]
    assert list(options["label"]) == [o.name for o in shown]
    for (_, r), o in zip(options.iterrows(), shown):
        assert (int(r["saved_activation_bytes"]), int(r["recompute_flops"]), int(r["recompute_bytes"])) == (
            o.saved_bytes, o.recompute_flops, o.recompute_bytes)
        assert r["kind"] == ("bound" if o.bound else "advice") and bool(r["meets"]) == o.meets
    assert list(points["tag"]) == ["L1", "L2"] + [f"A{i}" for i in range(1, len(shown) + 1)]
    whole = fxviz.budget_points(runs, advice, graph=None)  # one graph here: the whole step is the same
    assert whole.drop(columns="graphs").equals(points.drop(columns="graphs"))
    with pytest.raises(fxviz.InputError, match="not a logged run"):
        fxviz.budget_points([tr])


def test_budget_points_of_one_graph_or_the_whole_step(break_log):
    """After a graph break the sweep is of one graph: a run's point is that graph's (``graph=k``), or
    the step's sum (``graph=None``); a graph the run lacks is said."""
    run = fxviz.load_logs(break_log)
    rows = [t.memory_table(["logged"]).iloc[0] for t in run.traces()]
    assert len(rows) == 2
    cols = ["saved_activation_bytes", "recompute_flops", "recompute_bytes"]
    for k in (0, 1):
        got = fxviz.budget_points([run], graph=k).iloc[0]
        assert [int(got[c]) for c in cols] == [int(rows[k][c]) for c in cols] and int(got["graphs"]) == 1
    got = fxviz.budget_points({"broken": run}, graph=None).iloc[0]
    assert [int(got[c]) for c in cols] == [sum(int(r[c]) for r in rows) for c in cols] and got["label"] == "broken"
    with pytest.raises(fxviz.InputError, match="no graph 2"):
        fxviz.budget_points([run], graph=2)


def test_the_plot_names_every_point_and_its_labels_do_not_overlap(curve):
    tr, advice, runs = curve
    points = fxviz.budget_points(runs, advice)
    fig = tr.memory_sweep(progress=False).pareto_plot(points=points)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # drawn, so every text has its place
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    for _, r in points.iterrows():
        assert any(t.startswith(f"{r['tag']} ") and str(r["label"]) in t for t in legend), r["tag"]
    texts = [a for a in ax.texts if a.get_text()]
    tags = {tag for a in texts for tag in a.get_text().split(",")}
    assert set(points["tag"]) <= tags  # every point tagged; coinciding points share one tag line
    renderer = canvas.get_renderer()
    boxes = [a.get_window_extent(renderer) for a in texts]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), "labels overlap"


def test_the_report_holds_the_curve(curve, tmp_path):
    from fxviz.payloads.report import report_data

    tr, advice, runs = curve
    data = report_data(tr, runs=runs, advice=advice, budget=None)
    points = fxviz.budget_points(runs, advice)
    svg = data["pareto"]["svg"]
    for _, r in points.iterrows():
        assert f"{r['tag']} " in svg and str(r["label"]) in svg
    assert report_data(tr, budget=None)["pareto"] is None  # nothing to add: no curve
    path = fxviz.report(tr, tmp_path / "curve.html", runs=runs, advice=advice)
    from .browser_util import chromium_path

    if chromium_path() is None:
        pytest.skip("no Chromium for the page check")
    from .browser_util import browser

    with browser() as b:
        page = b.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".fxviz-pareto-plot svg", timeout=60_000)
        titles = page.eval_on_selector_all(".fxviz-pareto-plot svg text > title", "ts => ts.map(t => t.textContent)")
        assert len(titles) == len(points)
        for t, (_, r) in zip(titles, points.iterrows()):
            assert t.startswith(f"{r['tag']} ") and str(r["label"]) in t
        assert "Logged runs (L)" in page.inner_text(".fxviz-pareto-plot figcaption")
        assert page.locator(".fxviz-timeline .fxviz-timeline-plot svg").count() == 1  # the timeline stays, above
        plain = fxviz.report(tr, tmp_path / "plain.html")  # no runs, no advice: the timeline alone
        page.goto(plain.as_uri())
        page.wait_for_selector(".fxviz-timeline .fxviz-timeline-plot svg", timeout=60_000)
        assert page.locator(".fxviz-pareto-plot").count() == 0
        assert b.console_errors == [] and b.page_errors == [] and b.blocked == []


def test_the_explorer_shows_the_curve(curve):
    tr, advice, runs = curve
    ex = fxviz.explore(tr, runs=runs, advice=advice)
    points = fxviz.budget_points(runs, advice)
    assert ex.budget_curve in ex.children
    for _, r in points.iterrows():
        assert f"{r['tag']} " in ex.budget_curve.value and str(r["label"]) in ex.budget_curve.value
    shown = ex.show_budget_curve(advice=advice)  # again: the same box, now without the runs
    assert list(shown["kind"]) == ["advice"] * len(advice.options) + ["bound"] * (advice.bound is not None)
    assert sum(c is ex.budget_curve for c in ex.children) == 1 and "L1 " not in ex.budget_curve.value
    with pytest.raises(fxviz.InputError, match="logged run"):
        fxviz.explore(next(iter(runs.values())), advice=advice)


def test_offloading_is_an_option_where_the_step_is_on_an_accelerator(break_log, tmp_path):
    """The break log with its devices moved to cuda:0 (a CUDA run's log, read here): offloading is offered,
    predicted to move what torch's own pass moves when the option's code is pasted into a real step of the
    same model (every ``device_put`` of its forward graphs; on this CPU the pass copies to the CPU, the
    same values), its transfers timed at torch's stated bandwidth."""
    import torch
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    from fxviz import _torch
    from fxviz.frontends.cli.advise import step_trace

    from .advice_log_models import stack
    from .test_logs_anywhere import _envelope_on_cuda, _on_cuda, _rewrite

    run = fxviz.load_logs(_rewrite(break_log, tmp_path / "cuda", _on_cuda, _envelope_on_cuda))
    step, _ = step_trace(run, run.trace())
    advice = step.advise(saved="50%")
    [offload] = [o for o in advice.options if o.kind == "offload"]
    note = next(n for n in advice.notes if n.startswith("offloading"))
    assert "tensors are on cuda:0" in note and "not offered" not in note
    forwards = []

    def keep(gm, _inputs):
        forwards.append(gm)
        return gm

    model, (x,) = stack(broken=True)
    with _torch.config_restored():
        exec(compile(offload.code, "<pasted>", "exec"), {"model": model})
        torch._dynamo.reset()
        try:
            backend = aot_autograd(fw_compiler=keep, bw_compiler=lambda gm, _: gm,
                                   partition_fn=min_cut_rematerialization_partition)
            torch.compile(model, backend=backend)(x).backward()
        finally:
            torch._dynamo.reset()
    moved = sum(n.args[0].meta["val"].untyped_storage().nbytes() for gm in forwards for n in gm.graph.nodes
                if "device_put" in str(n.target))
    assert len(forwards) == 2 and offload.moved_bytes == moved > 0
    assert offload.saved_bytes == advice.plain.saved_bytes - moved and offload.recompute_flops == 0
    assert offload.seconds == 2 * moved / _torch.offload_bandwidth()
    assert f"{_torch.OFFLOAD_SETTING} = True" in offload.code and offload.config == {_torch.OFFLOAD_SETTING: True}
    with pytest.raises(fxviz.InputError, match="offloading"):
        offload.trace()


def test_a_second_advise_of_the_same_log_reads_the_first_ones_partitions(break_log, capsys, monkeypatch):
    """Issue 46: the second ``advise`` of a log reads each step the first partitioned (the plain step, every
    budget of the sweep, the bound) from the log's cache, and prints the same figures; nothing is partitioned."""
    import dataclasses

    from fxviz.api.advice import search

    def advised() -> tuple[str, str]:
        assert main(["advise", "--logs", str(break_log), "--saved", "50%"]) == 0
        got = capsys.readouterr()
        return got.out, got.err

    first, said = advised()
    assert "kept from an earlier advise" not in said

    def refused(*_args, **_kwargs):
        raise AssertionError("the second advise partitioned a step the first kept")

    monkeypatch.setattr(search, "step_of", refused)
    second, said = advised()
    assert second == first and "activation_memory_budget=0.5 (kept from an earlier advise of this log)" in said
    # the figures themselves, through the API: a fresh Run over the same cache
    from fxviz.frontends.cli.advise import step_trace

    run = fxviz.load_logs(break_log, cache=True)
    step, _ = step_trace(run, run.trace())
    kept = step.advise(saved="50%")
    monkeypatch.undo()
    fresh_run = fxviz.load_logs(break_log)  # no cache: partitioned now
    fresh, _ = step_trace(fresh_run, fresh_run.trace())
    computed = fresh.advise(saved="50%")
    assert [dataclasses.asdict(o.peak) for o in kept.options] == [dataclasses.asdict(o.peak) for o in computed.options]
    assert kept.plain == computed.plain and kept.text(option_words) == computed.text(option_words)
