"""The measured step beside every estimate: ``Trace.memory_table/saved/doctor(measured=m)`` and
``fxviz table/saved --measure``, checked against the test's own count of what a real
``torch.compile`` step saved (``saved_tensors_hooks``: ``tests/test_measure.independent_count``)."""

from __future__ import annotations

import pytest
import torch

import fxviz
from fxviz.render.measured_view import measured_text
from fxviz.units import format_bytes

from .conftest import assert_unchanged, snapshot
from .test_cli_errors import run_main
from .test_measure import convbn, independent_count


@pytest.fixture(scope="module")
def convbn_inductor():
    """The conv net with batch norm under inductor: one trace, one measure, one independent count."""
    model, inputs = convbn()
    before = snapshot(model)
    tr = fxviz.trace(model, *inputs, backend="inductor")
    measured = tr.measure()
    assert_unchanged(model, before)
    return tr, measured, independent_count(model, inputs, "inductor")


def test_the_memory_tables_twin_is_the_real_steps_count(convbn_inductor):
    tr, measured, count = convbn_inductor
    table = tr.memory_table(measured=measured)
    assert measured.strategy in set(table["strategy"])  # min-cut is offered: the twin has its row
    row = table[table["strategy"] == measured.strategy].iloc[0]
    assert int(row["measured_saved_bytes"]) == count["bytes"]
    assert int(row["measured_difference_bytes"]) == count["bytes"] - int(row["saved_activation_bytes"])
    # the difference, named: each copy's source parameter in the reason
    for source in measured.copies["source"]:
        assert str(source) in row["measured_reason"]
    assert table[table["strategy"] != measured.strategy]["measured_saved_bytes"].isna().all()
    assert "measured_saved_bytes" not in tr.memory_table().columns  # the cached table is untouched
    text = table.to_text()
    assert "measured_saved_bytes" in text and "measured - estimated" in text
    assert format_bytes(count["bytes"]) in text
    html = table._repr_html_()
    assert "measured reason" in html


def test_the_saved_table_marks_each_copy_with_its_source(convbn_inductor):
    tr, measured, count = convbn_inductor
    marked = tr.saved(measured.strategy, measured=measured)
    assert list(marked.drop(columns="measured").index) == list(tr.saved(measured.strategy).index)
    params = count["params"]
    copies = marked[marked["measured"].str.startswith("held as a copy")]
    assert len(copies) == len(measured.copies) > 0
    for name, row in copies.iterrows():
        qual = tr.graph.info[name].qualname
        if qual in params:  # the test's own step saved a tensor with that parameter's values elsewhere
            source = params[qual]
            assert any(t.shape == source.shape and t.data_ptr() != source.data_ptr() and torch.equal(t, source)
                       for t in count["tensors"]), name
    # every activation the partition saves, the real step holds: their bytes and the copies' are its count
    acts = marked[marked["kind"] == "activation"]
    assert set(acts["measured"]) == {"held"}
    copy_bytes = sum(int(b) for b in measured.copies["bytes"])
    assert int(acts["bytes"].sum()) + copy_bytes == count["bytes"]


def test_the_doctor_names_the_copies_and_the_knob(convbn_inductor):
    tr, measured, count = convbn_inductor
    report = tr.doctor(measured=measured)
    found = report.diagnosis.of_kind("measured_copies")
    assert len(found) == 1
    estimated = int(tr.memory_table([measured.strategy]).iloc[0]["saved_activation_bytes"])
    assert found[0].bytes == count["bytes"] - estimated  # the copies are the whole difference here
    assert "layout_optimization" in found[0].fix
    assert not tr.doctor().diagnosis.of_kind("measured_copies")  # the plain doctor stays as it was
    assert "layout_optimization" in str(report)


def test_measured_text_lists_every_storage(convbn_inductor):
    _, measured, count = convbn_inductor
    text = measured_text(measured, top=0)
    assert all(len(line) <= 100 for line in text.splitlines())
    assert format_bytes(count["bytes"]) in text
    for source in measured.copies["source"]:
        assert f"`{source}`" in text


def test_cli_table_and_saved_measure(capsys):
    """``fxviz table/saved MODEL --measure``: the twin and the marks, as the Python API gives them."""
    code, out, err = run_main(["table", "tests.test_measure:convbn", "--backend", "inductor", "--measure",
                               "--strategies", "default", "--exact"], capsys)
    assert code == 0, err
    model, inputs = convbn()
    count = independent_count(model, inputs, "inductor")
    lines = out.splitlines()
    header = next(line.split() for line in lines if "measured_saved_bytes" in line)
    # the step's strategy was added to the strategies asked for: its row carries the twin, exactly
    row = dict(zip(header, next(line.split() for line in lines if line.split()[:1] == ["min_cut"])))
    assert int(row["measured_saved_bytes"]) == count["bytes"]
    assert int(row["measured_difference_bytes"]) == count["bytes"] - int(row["saved_activation_bytes"])
    assert "measured - estimated (min_cut)" in out
    assert format_bytes(count["bytes"]) in out  # the measured block's headline
    block = out[out.index("measured - estimated"):]  # the words under the grid fit the terminal
    assert all(len(line) <= 100 for line in block.splitlines())
    code, out, err = run_main(["saved", "tests.test_measure:convbn", "--backend", "inductor", "--measure",
                               "--top", "0"], capsys)
    assert code == 0, err
    assert "by strategy min_cut" in out and "step" in out
    assert out.count("copy +") >= 2  # the two conv weights, marked
    assert all(len(line) <= 100 for line in out.splitlines())


def test_cli_measure_refusals(capsys):
    code, _, err = run_main(["saved", "tests.test_measure:convbn", "--measure", "--by-module"], capsys)
    assert code != 0 and "--by-module" in err and len(err.splitlines()) == 1
