"""The measured step beside every estimate: ``Trace.memory_table/saved/doctor(measured=m)`` and
``fxviz table/saved --measure``, checked against the test's own count of what a real
``torch.compile`` step saved (``saved_tensors_hooks``: ``tests/test_measure.independent_count``)."""

from __future__ import annotations

import pytest
import torch

import fxviz
from fxviz.core.units import format_bytes
from fxviz.render.text.measured_view import measured_text

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
    for name in copies.index:
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


# --- the report and the explorer ------------------------------------------------------------------
def _assert_measured_table(table: dict, measured, count: dict) -> None:
    """A page's memory table (``payloads.table_data``) with the twin: the step's row and its block."""
    col = table["columns"].index("measured")
    cells = {r["key"]: r["cells"][col] for r in table["rows"]}
    assert cells[measured.strategy] == format_bytes(count["bytes"])
    assert all(v == "\u2014" for k, v in cells.items() if k != measured.strategy)
    block = table["measured"]
    assert block["saved_bytes"] == count["bytes"]
    assert block["difference"] == count["bytes"] - block["estimated_bytes"]
    assert sorted(r["bytes"] for r in block["rows"] if r["kind"] not in ("parameter", "input")) == count["sizes"]
    for source in measured.copies["source"]:
        assert str(source) in block["reason"]


def test_report_data_shows_the_measurement_when_asked(convbn_inductor):
    from fxviz.payloads.report import report_data

    tr, measured, count = convbn_inductor
    plain = report_data(tr, views=("joint",))
    assert "measured" not in plain["table"] and "measured" not in plain["table"]["columns"]
    data = report_data(tr, views=("joint",), measure=measured)
    _assert_measured_table(data["table"], measured, count)
    kinds = {f["kind"] for f in data["doctor"]["findings"]}
    assert "measured_copies" in kinds and "measured_copies" not in {f["kind"] for f in plain["doctor"]["findings"]}


def test_explorer_shows_the_measurement(convbn_inductor):
    pytest.importorskip("anywidget")
    tr, measured, count = convbn_inductor
    ex = fxviz.explore(tr, measure=measured)
    _assert_measured_table(ex.pane.table, measured, count)
    assert "measured_copies" in {f["kind"] for f in ex.pane.doctor["findings"]}


def test_the_report_in_chromium(convbn_inductor, tmp_path):
    """The page shows the twin and the step's storages, each copy naming its source."""
    browser_util = pytest.importorskip("tests.browser_util")
    pytest.importorskip("playwright.sync_api")
    if browser_util.chromium_path() is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    tr, measured, count = convbn_inductor
    path = fxviz.report(tr, tmp_path / "measured.html", views=("joint",), measure=measured)
    with browser_util.browser() as b:
        page = b.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".fxviz-measured", timeout=60_000)
        assert format_bytes(count["bytes"]) in page.inner_text(".fxviz-measured-headline")
        page.evaluate("document.querySelector('.fxviz-measured-storages').open = true")
        rows = page.query_selector_all(".fxviz-measured-table tbody tr")
        assert len(rows) == len(measured.saved)
        copies = page.query_selector_all(".fxviz-measured-table tr.fxviz-measured-copy")
        assert len(copies) == len(measured.copies)
        for source in measured.copies["source"]:
            assert f"`{source}`" in page.inner_text(".fxviz-measured-table")
        assert not b.page_errors and not b.console_errors
