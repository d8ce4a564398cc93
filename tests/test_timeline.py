"""The memory timeline (``Trace.memory_timeline``): per line of inductor's code (per node of each
graph with ``unfused=True``), the bytes held; the top of every curve must be the memory table's peak."""

from __future__ import annotations

import pytest
import torch

import fxviz

STRATEGIES = ["default_partition", "min_cut", "budget:0.5", "budget:0", "recompute_all"]




@pytest.mark.parametrize("name", ["by_hand", "pointwise_chain", "mlp", "resnet_block", "mini_gpt"])
def test_peaks_are_the_memory_tables(traces, name):
    """Under inductor the timeline is its code's, line by line, and the unfused walk's with
    ``unfused=True``: each curve's top is the memory table's peak of the same program."""
    tr = traces[name]
    table = tr.memory_table(STRATEGIES).set_index("strategy")
    compiled = tr.memory_table(["default", "min_cut"], compiled=True).set_index("strategy")
    for unfused, strategies in ((True, STRATEGIES), (False, ["default", "min_cut"])):
        timeline = tr.memory_timeline(strategies, unfused=unfused)
        peaks = timeline.peaks
        assert len(peaks) == 2 * len(strategies)
        prefix, rows = ("unfused_", table) if unfused else ("", compiled)
        for _, r in peaks.iterrows():
            assert r["total_bytes"] == rows.loc[r["strategy"], f"{prefix}{r['phase']}_peak_bytes"], (
                r["strategy"], r["phase"], unfused)
            assert r["resident_bytes"] == rows.loc[r["strategy"], "resident_bytes"]
        assert (timeline["live_bytes"] >= 0).all()
        if not unfused:  # one row per code line that allocates or frees, the line itself kept
            assert timeline["line"].map(lambda x: isinstance(x, str) and len(x) > 0).all()
            continue
        for s in strategies:  # one row per node of each graph, in graph order, named as the graph names it
            p = tr.partition(s)
            for phase, gm in (("forward", p.forward), ("backward", p.backward)):
                rows = timeline[(timeline["strategy"] == p.name) & (timeline["phase"] == phase)]
                assert list(rows["node"]) == [n.name for n in gm.graph.nodes]
                assert list(rows["step"]) == list(range(len(rows)))


@pytest.mark.parametrize("name", ["mlp", "mini_gpt"])
def test_the_backward_holds_its_inputs_from_its_first_row(traces, name):
    """The saved values are handed to the backward before its first op runs: every placeholder row
    of the unfused walk shows them all (it used to add them one row at a time, a ramp no backward builds)."""
    tr = traces[name]
    timeline = tr.memory_timeline(["default_partition", "min_cut"], unfused=True)
    table = tr.memory_table(["default_partition", "min_cut"]).set_index("strategy")
    for s in ("default_partition", "min_cut"):
        bw = timeline[(timeline["strategy"] == s) & (timeline["phase"] == "backward")]
        kinds = [n.op for n in tr.partition(s).backward.graph.nodes]
        leading = kinds.index(next(k for k in kinds if k != "placeholder"))
        assert bw["live_bytes"].iloc[:leading].nunique() == 1
        assert bw["live_bytes"].iloc[0] >= table.loc[s, "saved_activation_bytes"] > 0


def test_peak_names_the_node_and_module(traces):
    """The compiled peak's row names the FX node its buffer computes and that node's module."""
    tr = traces["mlp"]
    peak = tr.memory_timeline("min_cut").peaks.set_index("phase").loc["backward"]
    p = tr.partition("min_cut")
    names = {n.name for n in p.backward.graph.nodes}
    assert peak["node"] in names, peak["line"]
    joint = peak["joint_node"]
    if joint is not None:
        assert peak["module"] == tr.nodes.loc[joint, "module"] or (
            peak["module"] is None and tr.nodes.loc[joint, "module"] is None)


def test_saving_less_is_not_peaking_lower(traces):
    """The by-hand graph: min-cut saves 16 bytes less than default, the backward peak of the unfused
    walk is the same."""
    tr = traces["by_hand"]
    table = tr.memory_table(["default_partition", "min_cut"]).set_index("strategy")
    assert table.loc["min_cut", "saved_activation_bytes"] < table.loc["default_partition", "saved_activation_bytes"]
    peaks = tr.memory_timeline(["default_partition", "min_cut"], unfused=True).peaks.set_index(
        ["strategy", "phase"])["total_bytes"]
    assert peaks[("default_partition", "backward")] == peaks[("min_cut", "backward")] == table.loc[
        "min_cut", "unfused_backward_peak_bytes"]


def test_default_strategies_skip_the_measured_eager_row(traces):
    """By default the timeline is the step's own strategy under inductor (each other is lowered when
    named), every offered one with graphs for the unfused walk; the measured eager row has none."""
    tr = traces["mlp"]
    assert set(tr.memory_timeline()["strategy"]) == {tr.default_strategy.name}
    timeline = tr.memory_timeline(unfused=True)
    assert "eager" not in set(timeline["strategy"]) and len(set(timeline["strategy"])) >= 3
    only = tr.memory_timeline(["min_cut", "eager"])
    assert set(only["strategy"]) == {"min_cut"} and only.attrs["skipped"] == ["eager"]


def test_plot_draws_one_curve_per_strategy_per_panel(traces, tmp_path):
    timeline = traces["pointwise_chain"].memory_timeline(["default_partition", "min_cut", "recompute_all"])
    fig = timeline.plot()
    forward, backward = fig.axes
    for ax in (forward, backward):
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert sum(lab.split(":")[0] in ("default_partition", "min_cut", "recompute_all") for lab in labels) == 3
        assert all("peak" in lab for lab in labels if not lab.startswith("parameters"))
    fig.savefig(tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").stat().st_size > 5000


def test_the_reports_timeline_marks_the_tables_peaks(traces):
    """The report's timeline (``payloads.timeline_data``): an SVG the page's sanitizer keeps, with one
    dot per phase whose tooltip names the memory table's peak: under inductor the step's own
    strategy's compiled curve (each other would cost a lowering), and nothing measured."""
    import re
    import xml.etree.ElementTree as ET

    from fxviz.core.units import byte_unit
    from fxviz.payloads.panels import timeline_data
    from fxviz.render.page.embed import clean_svg

    tr = traces["mini_gpt"]
    data = timeline_data(tr, [*STRATEGIES, "eager"])
    assert data is not None and clean_svg(data["svg"]) == data["svg"]
    root = ET.fromstring(data["svg"])
    titles = [t.text or "" for c in root.iter("circle") for t in c.iter("title")]
    table = tr.memory_table().set_index("strategy")
    name = tr.default_strategy.name
    assert len(titles) == 2
    _unit, scale = byte_unit(float(table.loc[name, ["forward_peak_bytes", "backward_peak_bytes"]].max()))
    for phase in ("forward", "backward"):
        said = [t for t in titles if t.startswith(f"{name}: {phase} peak ")]
        assert len(said) == 1, (name, phase, titles)
        value = float(re.match(rf"{re.escape(name)}: {phase} peak ([\d.]+) ", said[0]).group(1))
        assert value == pytest.approx(table.loc[name, f"{phase}_peak_bytes"] / scale, rel=1e-3)
    assert not any(t.startswith("eager") for t in titles)  # measured: no graph, no curve


def test_no_timeline_without_a_backward():
    from fxviz.payloads.panels import timeline_data

    tr = fxviz.trace(lambda x: torch.topk(x, 2).indices.float().sum(), torch.randn(6))
    assert not tr.graph.has_backward
    assert timeline_data(tr, ["default_partition"]) is None


def test_a_peak_at_a_line_no_fx_node_made_is_plotted_and_named(traces):
    """AlexNet's compiled backward peaks where AccumulateGrad copies a gradient into its parameter's layout
    (no FX node made that line): the peak is on the timeline and named by what the line does."""
    tr = traces[("alexnet", "lifted")]
    timeline = tr.memory_timeline()
    peaks = timeline.peaks
    unnamed = peaks[peaks["node"].isna()]
    assert not unnamed.empty and unnamed["op"].str.startswith("AccumulateGrad").all()
    fig = timeline.plot()
    labels = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    assert any("peak" in label and "AccumulateGrad" in label for label in labels), labels
