"""The explorer widget's kernel side: controls -> the pane's data, caching, the static fallback,
and a real kernel executing a notebook that calls ``fxviz.explore`` (what a static viewer shows).
The front-end itself is driven in a real browser in test_browser.py."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("anywidget")
pytest.importorskip("ipywidgets")

import fxviz
from fxviz.frontends.widgets.explorer import Explorer, GraphPane

from .conftest import assert_unchanged, make_example, snapshot

_TITLE = re.compile(r'<g id="node\d+" class="node([^"]*)">\s*<title>([^<]+)</title>')


def drawn(svg: str) -> dict[str, str]:
    """SVG node title -> its class list."""
    return {title: cls for cls, title in _TITLE.findall(svg)}


def saved_in(svg: str) -> set[str]:
    return {t for t, cls in drawn(svg).items() if "fx&#45;saved" in cls}


@pytest.fixture()
def mlp_explorer(traces) -> Explorer:
    return fxviz.explore(traces[("mlp", "lifted")])


def test_first_view_is_the_joint_graph_with_default_marks(mlp_explorer, traces):
    """The explorer opens on what torch.compile does (min-cut), the other strategies after it."""
    w, tr = mlp_explorer, traces[("mlp", "lifted")]
    assert isinstance(w.pane, GraphPane)
    nodes = drawn(w.pane.svg)
    assert set(nodes) == {n for n in tr.graph.info if tr.graph.info[n].op != "output"}
    for name, cls in nodes.items():
        assert f"fx&#45;role&#45;{tr.graph.info[name].role}" in cls
    assert saved_in(w.pane.svg) == set(tr.partition("min_cut").saved)
    assert w.pane.highlight == "min_cut" and w.pane.view == "joint"
    assert [r["key"] for r in w.pane.table["rows"]] == ["min_cut", "default_partition", "budget:0.5:dp",
                                                        "recompute_all", "eager"]
    assert w.pane.status["saved"] == list(tr.partition("min_cut").saved)
    assert set(w.pane.nodes) == set(nodes)
    assert w.pane.legend["roles"]["forward"]["color"] == fxviz.render.theme.ROLE_COLORS["forward"]
    assert w.pane.error == "" and w.pane.busy == ""


def test_strategy_switch_changes_graph_status_and_highlight_and_comes_back_cached(mlp_explorer, traces):
    w, tr = mlp_explorer, traces[("mlp", "lifted")]
    first = w.pane.svg
    w.strategy_control.value = "recompute_all"
    assert w.pane.highlight == "recompute_all"
    assert saved_in(w.pane.svg) == set(tr.partition("recompute_all").saved)
    assert w.pane.svg != first
    assert set(w.pane.status["recomputed"]) == tr.partition("recompute_all").recomputed
    w.strategy_control.value = "min_cut"  # the first view's
    assert w.pane.svg == first and w.pane.highlight == "min_cut"
    assert w.timings[-1].cached and w.timings[-1].key == "joint|min_cut|-|-|-"
    assert w.pane.keep_zoom  # same kind of view: the front-end keeps the zoom


def test_budget_controls_show_only_for_the_budget(mlp_explorer, traces):
    w, tr = mlp_explorer, traces[("mlp", "lifted")]
    assert w.budget_control.layout.display == "none" and w.solver_control.layout.display == "none"
    w.strategy_control.value = "budget"
    assert w.budget_control.layout.display == "" and w.solver_control.layout.display == ""
    assert w.pane.highlight == "budget:0.5:dp"
    w.budget_control.value = 0.2
    w.solver_control.value = "greedy"
    assert w.pane.highlight == "budget:0.2:greedy"
    assert saved_in(w.pane.svg) == set(tr.partition("budget:0.2:greedy").saved)
    assert "budget:0.2:greedy" in [r["key"] for r in w.pane.table["rows"]]
    w.strategy_control.value = "min_cut"
    assert w.budget_control.layout.display == "none"


def test_the_optimal_partition_is_offered_with_the_budget_slider(mlp_explorer, traces):
    """Issue 16: the exact optimum under the slider's budget, like the other strategies: its marks
    are its Partition's, its row is in the table, and the solver control (the knapsack's) hides."""
    w, tr = mlp_explorer, traces[("mlp", "lifted")]
    assert "optimal" in [v for _, v in w.strategy_control.options]
    w.budget_control.value = 0.5
    w.strategy_control.value = "optimal"
    assert w.budget_control.layout.display == "" and w.solver_control.layout.display == "none"
    assert w.pane.highlight == "optimal:0.5"
    assert saved_in(w.pane.svg) == set(tr.partition("optimal:0.5").saved)
    assert "optimal:0.5" in [r["key"] for r in w.pane.table["rows"]]
    w2 = fxviz.explore(tr, strategy="optimal:0.3")
    assert w2.strategy_control.value == "optimal" and w2.pane.highlight == "optimal:0.3"
    with pytest.raises(fxviz.InputError, match="fraction"):
        fxviz.explore(tr, strategy="optimal:1KiB")


def test_compare_view(mlp_explorer, traces):
    w, tr = mlp_explorer, traces[("mlp", "lifted")]
    assert w.compare_control.layout.display == "none"
    w.strategy_control.value = "recompute_all"
    w.view_control.value = "compare"
    assert w.compare_control.layout.display == ""
    # B opened as the first strategy's partner: min_cut (what torch.compile does) pairs with default
    assert w.pane.view == "compare" and w.pane.view_key == "compare|recompute_all|default_partition|-|-"
    assert w.pane.compare_status["saved"] == list(tr.partition("default").saved)
    assert w.pane.compare_highlight == "default_partition"
    w.compare_control.value = "min_cut"
    assert w.pane.compare_status["saved"] == list(tr.partition("min_cut").saved)
    # never A = B: picking B's strategy as A (or B = A) moves B to another strategy
    for a in ("default", "min_cut", "budget", "recompute_all"):
        w.strategy_control.value = a
        for b in ("default", "min_cut", "budget"):
            w.compare_control.value = b
            assert w.pane.highlight != w.pane.compare_highlight, (a, b)
            assert w.pane.status["key"] != w.pane.compare_status["key"]
    w.strategy_control.value = "min_cut"
    w.compare_control.value = "min_cut"
    assert w.compare_control.value == "default" and w.pane.view_key == "compare|min_cut|default_partition|-|-"


def test_forward_and_backward_views_and_an_undrawable_one(mlp_explorer, traces):
    w, tr = mlp_explorer, traces[("mlp", "lifted")]
    w.view_control.value = "backward"
    p = tr.partition("min_cut")  # the explorer's first strategy: what torch.compile does
    assert {t.split("~")[0] for t in drawn(w.pane.svg)} == set(p.bw_to_joint.values())
    w.strategy_control.value = "eager"
    assert "no backward graph" in w.pane.error and w.pane.svg == ""
    w.view_control.value = "forward"
    assert w.pane.error
    w.strategy_control.value = "min_cut"
    assert w.pane.error == "" and w.pane.view_key == "forward|min_cut|-|-|-"


def test_group_by_module_with_depth(traces):
    tr = traces[("resnet_block", "lifted")]
    w = fxviz.explore(tr)
    assert w.depth_control.layout.display == "none"
    w.group_control.value = "module"
    assert w.depth_control.layout.display == ""
    assert w.depth_control.max >= 1
    assert 'class="node fx&#45;group' in w.pane.svg
    assert w.pane.view_key.startswith("joint|min_cut|-|module|")


def test_the_explorer_depth_is_draws_depth(traces):
    """``explore(tr, depth=3)`` opens on the boxes ``tr.draw(depth=3)`` draws (the slider was made with
    an end of 2 before the trace's deepest module was known, and clamped a 3 to 2)."""
    tr = traces[("mini_gpt", "lifted")]
    for depth in (1, 2, 3):
        w = fxviz.explore(tr, group="module", depth=depth)
        assert w.depth_control.value == depth
        assert set(drawn(w.pane.svg)) == set(drawn(tr.draw(group="module", depth=depth).svg()))


def test_search_selection_and_table_row_clicks(mlp_explorer):
    w = mlp_explorer
    w.pane.search = "relu"  # the pane's own search box syncs this both ways
    w.select("relu")
    assert w.pane.selected == "relu"
    # a click on a memory-table row arrives as a custom message from the front-end
    w.pane._handle_custom_msg({"event": "row", "strategy": "budget:0.3:ilp"}, [])
    assert w.strategy_control.value == "budget" and w.budget_control.value == pytest.approx(0.3)
    assert w.solver_control.value == "ilp" and w.pane.highlight == "budget:0.3:ilp"
    w.pane._handle_custom_msg({"event": "row", "strategy": "min_cut"}, [])
    assert w.strategy_control.value == "min_cut"


def test_static_fallback_without_a_kernel(mlp_explorer):
    bundle = mlp_explorer._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert "application/vnd.jupyter.widget-view+json" in data
    page = data["text/html"]
    assert "<svg" in page and "<script" not in page.lower() and "http" not in page
    assert 'data-strategy="min_cut" class="fxviz-row-selected"' in page
    assert "saved activations" in page and "forward op" in page  # the table and the legend


def test_explore_a_model_switches_parameter_capture_without_touching_it():
    model, inputs = make_example("mlp")
    before = snapshot(model)
    w = fxviz.explore(model, *inputs)
    assert w.params_control in w.children[1].children and w.params_control.layout.display != "none"
    assert w.pane.doctor["healthy"] is True
    w.params_control.value = "closure"
    assert w.trace.capture.params == "closure"
    assert w.pane.doctor["healthy"] is False and w.pane.doctor["findings"]
    assert any(n["role"] == "constant" for n in w.pane.nodes.values())
    w.params_control.value = "lifted"
    assert w.pane.doctor["healthy"] is True
    assert_unchanged(model, before)
    # given a trace, there is no model to re-trace: no capture-mode control
    assert w.params_control not in fxviz.explore(w.trace).children[1].children


def test_every_way_in_opens_on_what_the_trace_shows(traces):
    """Issue 47: ``explore(model, x)`` opened on default_partition with generic labels while
    ``explore(trace(model, x))`` opened on min_cut: both open on the trace's own strategy and words,
    and so does a closure capture (aot_function's default_partition); keyword inputs go to the model
    as ``fxviz.trace`` takes them, and a misspelled option is named."""
    model, inputs = make_example("mlp")
    tr = traces[("mlp", "lifted")]
    labels = [label for label, _ in fxviz.explore(tr).strategy_control.options]
    assert labels[0] == "min_cut (what torch.compile does)"
    for w in (fxviz.explore(model, *inputs), fxviz.explore(model, x=inputs[0])):
        assert w.strategy == tr.default_strategy.name == "min_cut"
        assert [label for label, _ in w.strategy_control.options] == labels
        assert saved_in(w.pane.svg) == set(tr.partition("min_cut").saved)
    closure = fxviz.explore(model, *inputs, params="closure")
    assert closure.strategy == "default_partition"
    assert closure.strategy_control.options[0][0] == "default_partition (what aot_function does)"
    with pytest.raises(fxviz.InputError, match="stratgy") as err:
        fxviz.explore(model, *inputs, stratgy="min_cut")
    assert "did you mean strategy=" in err.value.hint
    with pytest.raises(fxviz.InputError) as err:
        fxviz.explore(tr, veiw="compare")
    assert "did you mean view=" in err.value.hint
    with pytest.raises(fxviz.InputError) as err:
        fxviz.explore(tr, view="comprae")
    assert "did you mean 'compare'" in err.value.hint


def test_explore_rejects_bad_calls(traces):
    tr = traces[("mlp", "lifted")]
    with pytest.raises(fxviz.InputError):
        fxviz.explore(tr, 1)
    with pytest.raises(fxviz.InputError):
        fxviz.explore(tr, view="sideways")
    with pytest.raises(fxviz.StrategyError):
        fxviz.explore(tr, strategy="nonsense")
    w = fxviz.explore(tr, strategy="budget:0.25:greedy", view="compare", compare="default")
    assert w.pane.view_key == "compare|budget:0.25:greedy|default_partition|-|-"
    # the example's (model, inputs) tuple passed whole: one line saying to unpack it
    with pytest.raises(fxviz.InputError, match="unpack"):
        fxviz.explore(make_example("mlp"))


@pytest.mark.notebook
def test_a_notebook_calling_explore_saves_a_static_view(tmp_path):
    """Executed by a real kernel, the saved notebook carries the widget view *and* plain HTML,
    which is what nbviewer/GitHub show without a kernel."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import fxviz\nfrom fxviz import examples\nmodel, inputs = examples.mlp()"),
        nbformat.v4.new_code_cell("fxviz.explore(model, *inputs, strategy='min_cut')"),
    ]
    # widget state is not stored, as JupyterLab saves notebooks by default ("saveState": false)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=False,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = nb.cells[1].outputs
    # while tracing, a line said what was being traced; it is emptied once the explorer shows
    assert [o["output_type"] for o in outputs] == ["display_data", "execute_result"], outputs
    assert outputs[0]["data"]["text/html"] == ""
    data = outputs[1]["data"]
    assert "application/vnd.jupyter.widget-view+json" in data
    # in a kernel the memory table is computed after the cell returns (the first picture comes
    # first), so the plain HTML saved with the cell has the graph and the selected strategy in its
    # title, not the table
    assert "<svg" in data["text/html"] and "joint view, min_cut" in data["text/html"]
    for cell in nb.cells:
        for o in cell.outputs:
            assert o["output_type"] != "error" and o.get("name") != "stderr", o
    # a static viewer (nbconvert, as nbviewer uses it; no widget state saved) shows the plain HTML
    nbconvert = pytest.importorskip("nbconvert")
    page, _ = nbconvert.HTMLExporter().from_notebook_node(nb)
    assert page.count('<div class="fxviz-static"') == 1 and "<svg" in page


def test_first_computations_show_progress_and_seen_views_do_not(mlp_explorer):
    w = mlp_explorer
    notes: list[str] = []
    w.pane.observe(lambda change: notes.append(change["new"]), "busy")
    w.view_control.value = "forward"  # never drawn: a progress note while it is computed, then none
    assert notes and notes[0].startswith("computing the forward view of min_cut") and notes[-1] == ""
    notes.clear()
    w.view_control.value = "joint"  # seen: straight from the cache
    assert notes == [] and w.timings[-1].cached


def test_in_a_running_event_loop_the_picture_comes_first_and_the_table_fills_in(mlp_explorer, traces):
    """As in a notebook kernel: ``explore(tr)`` returns with the drawing and a progress note; the
    rows come one strategy per loop turn, and the finished table is the one computed at once."""
    import asyncio

    tr = traces[("mlp", "lifted")]
    fresh = type(tr)(tr.capture)  # nothing partitioned or tabulated yet, as right after fxviz.trace
    tables: list[dict] = []

    async def cell() -> Explorer:
        w = fxviz.explore(fresh)
        assert saved_in(w.pane.svg) == set(tr.partition("min_cut").saved) and w.first_picture_s is not None
        assert "rows" not in w.pane.table and w.pane.table["progress"] == {"done": 0, "total": 5}
        assert w.pane.table["message"].startswith("computing the memory table: strategy 1 of 5")
        assert ("memory_table", ("min_cut", "default_partition", "budget:0.5:dp", "recompute_all", "eager"), None) \
            not in fresh._cache
        w.pane.observe(lambda change: tables.append(change["new"]), "table")
        await w.filled()
        return w

    w = asyncio.run(cell())
    assert [len(t["rows"]) for t in tables] == [1, 2, 3, 4, 5]
    assert [t.get("progress", {}).get("done") for t in tables] == [1, 2, 3, 4, None]
    assert not any(any(r["best"]) for t in tables[:-1] for r in t["rows"])  # marked once all are in
    for i, t in enumerate(tables[:-1]):
        assert t["message"].startswith(f"computing the memory table: strategy {i + 2} of 5")
    assert w.pane.table == mlp_explorer.pane.table and "message" not in w.pane.table
    assert w.static_html() == mlp_explorer.static_html()


def test_differences_only_is_the_kernels_drawing_cached_and_kept_across_strategies(traces):
    """Issue 19: the toggle asks the kernel for the differences-only drawing (part of the view's
    key, so toggling back is a cache hit), and it survives a strategy switch."""
    tr = traces[("pointwise_chain", "lifted")]
    w = fxviz.explore(tr, view="compare", strategy="default", compare="min_cut")
    full = w.pane.svg
    assert w.pane.view_key == "compare|default_partition|min_cut|-|-" and w.pane.differences is False
    w._on_pane_msg(w.pane, {"event": "differences", "on": True}, None)  # the pane's toggle
    assert w.differences and w.pane.differences
    assert w.pane.view_key == "compare|default_partition|min_cut|-|-|differences"
    expected = tr.draw("compare", strategy="default", compare="min_cut", differences=True)
    assert set(drawn(w.pane.svg)) == set(drawn(expected.svg())) and len(drawn(w.pane.svg)) < len(drawn(full))
    assert w.pane.caption == expected.caption and w.pane.keep_zoom is False
    # back and forth: from the cache
    w._on_pane_msg(w.pane, {"event": "differences", "on": False}, None)
    assert w.pane.svg == full and not w.pane.differences
    w._on_pane_msg(w.pane, {"event": "differences", "on": True}, None)
    assert w.timings[-1].cached and w.timings[-2].cached
    # a strategy switch keeps it on (and B moves off A as ever)
    w.strategy_control.value = "min_cut"
    assert w.pane.view_key == "compare|min_cut|default_partition|-|-|differences" and w.pane.differences
    assert set(drawn(w.pane.svg)) == set(drawn(tr.draw("compare", strategy="min_cut", compare="default",
                                                       differences=True).svg()))
    # other views ignore it, and it is still on when the compare view comes back
    w.view_control.value = "joint"
    assert w.pane.view_key == "joint|min_cut|-|-|-" and not w.pane.differences
    w.view_control.value = "compare"
    assert w.pane.view_key.endswith("|differences")
    # grouping does not apply: drawn node by node
    w.group_control.value = "module"
    assert w.pane.view_key == "compare|min_cut|default_partition|-|-|differences" and w.pane.boxes == []
    w.show_differences(False)
    assert not w.pane.view_key.endswith("|differences")


def test_a_logged_runs_explorer_offers_its_inference_only_graph():
    """The explorer of a run offers the graphs ``choices.shown_graphs`` does, as the report: an
    inference-only run's one forward graph (before, it offered none and failed).  Its joint view is
    the logged graph itself (nothing to mark: no partition exists), every node of it drawn; a view
    that needs a partition says why there is none."""
    from fxviz.analysis.strategy.choices import shown_graphs
    from fxviz.frontends.widgets.run_explorer import RunExplorer

    from .logs_gpt import gpt_log

    run = fxviz.load_logs(gpt_log("infer"))
    assert list(shown_graphs(run.graphs)["inference"]) == [True]
    rex = fxviz.explore(run)
    assert isinstance(rex, RunExplorer)
    ex, tr = rex.explorer, run.trace()
    assert not ex.pane.error and ex.pane.view_data["overlay"]
    assert set(drawn(ex.pane.svg)) == {n for n, i in tr.graph.info.items() if i.op != "output"}
    ex.view_control.value = "backward"
    assert "inference only" in ex.pane.error and not ex.pane.svg
