"""The report of a two-rank DDP log in Chromium.  Its screenshot goes to the test artifacts; with
``FXVIZ_UPDATE_DOCS=1`` also to docs/report_two_ranks.png (a test run never edits the tree by itself)."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

import fxviz
from fxviz.payloads.views import opening_units
from fxviz.render.graph.limits import PAGE_PANE
from fxviz.render.graph.spec import DrawSpec

from .browser_util import browser, chromium_path
from .logs_util import DISTRIBUTED, make_log

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (apt-get install chromium)"),
]
pytest.importorskip("playwright.sync_api")

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def _saved(page):
    return set(page.eval_on_selector_all(".fxviz-viewport g.node.fx-saved > title", "ts => ts.map(t => t.textContent)"))


def _x_shape(page):
    """The drawn label of the input ``x`` (its shape is the rank's batch)."""
    return page.eval_on_selector_all(".fxviz-viewport g.node", "gs => gs.map(g => g.textContent)")


def test_two_rank_report_in_chromium(tmp_path, artifacts):
    log = make_log(DISTRIBUTED, tmp_path / "ddp", "ddp")
    run = fxviz.load_logs(log)
    path = fxviz.report(run, tmp_path / "run.html", rank=1)
    with browser() as b:
        page = b.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".fxviz-viewport svg g.node", timeout=120_000)
        key = page.eval_on_selector(".fxviz-explorer", "e => e.dataset.viewKey || ''")
        assert key == "joint|logged|-|-|-"
        assert page.eval_on_selector("#fxviz-rank", "s => s.value") == "1"
        assert page.eval_on_selector_all("#fxviz-rank option", "os => os.map(o => o.value)") == ["0", "1"]
        options = page.eval_on_selector_all("#fxviz-graph option", "os => os.map(o => o.textContent)")
        assert options == [f"0/0 ({run.trace(rank=1).capture.title})"] and "[torch " in options[0]  # the log's torch
        assert _saved(page) == set(run.trace(rank=1).partition("logged").saved)
        assert "rank 1, compile 0/0" in page.text_content(".fxviz-summary")
        assert any("f32[6, 8]" in t for t in _x_shape(page))
        shot = artifacts / "report-two-ranks.png"
        page.screenshot(path=str(shot))
        # the rank selector switches to rank 0's graph: its batch of 4, its summary, its saved set
        page.select_option("#fxviz-rank", "0")
        page.wait_for_function("() => document.body.dataset.graph === '0|0/0'")
        page.wait_for_selector(".fxviz-viewport svg g.node", timeout=120_000)
        assert "rank 0, compile 0/0" in page.text_content(".fxviz-summary")
        assert any("f32[4, 8]" in t for t in _x_shape(page))
        assert _saved(page) == set(run.trace(rank=0).partition("logged").saved)
    if os.environ.get("FXVIZ_UPDATE_DOCS") == "1":
        shutil.copy(shot, DOCS / "report_two_ranks.png")


def test_log_report_opens_fitted_and_readable_at_1024(tmp_path, artifacts):
    """Issue 23: the report of a checkpointed GPT's log opens readable at 1024x768 (median label
    >= 10 px), with graph boxes in view; issue 47: on the model's blocks (the payload's ``opening``
    units: ``h.0``, ``h.1``), not on the drawing's top left corner."""
    from .logs_gpt import gpt_log
    from .test_browser import SMALL_SCREEN, _median_label_px

    log = gpt_log("ckpt_aot")
    path = fxviz.report(fxviz.load_logs(log), tmp_path / "gpt.html")
    with browser(viewport=SMALL_SCREEN) as b:
        page = b.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".fxviz-viewport svg g.node", timeout=120_000)
        labels = _median_label_px(page)
        print(f"median on-screen label height at 1024x768, log report: {labels:.1f} px")
        assert labels >= 10
        page.screenshot(path=str(artifacts / "log-report-1024.png"))
        layout = fxviz.load_logs(log).trace().draw(DrawSpec.of("joint").replace(pane=PAGE_PANE))  # the page's
        opening = set(opening_units(layout.boxes))
        seen = page.evaluate("""() => {
            const vp = document.querySelector('.fxviz-viewport').getBoundingClientRect();
            const inside = (r) => r.left >= vp.left - 1 && r.right <= vp.right + 1 && r.top >= vp.top - 1
                                  && r.bottom <= vp.bottom + 1;
            const nodes = [...document.querySelectorAll('.fxviz-viewport g.node')];
            return {nodes: nodes.length, shown: nodes.filter((g) => inside(g.getBoundingClientRect()))
                .map((g) => g.querySelector(':scope > title').textContent)};
        }""")
        assert len(seen["shown"]) >= 4, seen  # a block's boxes and what feeds them
        assert opening and opening & set(seen["shown"]), (opening, seen)
