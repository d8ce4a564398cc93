"""The report of a two-rank DDP log in Chromium; its screenshot is docs/report_two_ranks.png."""

from __future__ import annotations

import pathlib
import shutil

import pytest

import fxviz

from .browser_util import browser, chromium_path
from .logs_util import DISTRIBUTED, free_port, make_log

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (apt-get install chromium)"),
]
pytest.importorskip("playwright.sync_api")

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def test_two_rank_report_in_chromium(tmp_path, artifacts):
    log = make_log(DISTRIBUTED, tmp_path / "ddp", "ddp", str(free_port()))
    run = fxviz.load_logs(log)
    tr = run.trace(rank=1)
    path = fxviz.report(run, tmp_path / "run.html", rank=1)
    with browser() as b:
        page = b.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".fxviz-viewport svg g.node", timeout=120_000)
        key = page.eval_on_selector(".fxviz-explorer", "e => e.dataset.viewKey || ''")
        assert key == "joint|logged|-|-|-"
        saved = set(page.eval_on_selector_all(".fxviz-viewport g.node.fx-saved > title",
                                              "ts => ts.map(t => t.textContent)"))
        assert saved == set(tr.partition("logged").saved)
        assert "rank 1, compile 0/0" in page.content()
        shot = artifacts / "report-two-ranks.png"
        page.screenshot(path=str(shot))
    DOCS.mkdir(exist_ok=True)
    shutil.copy(shot, DOCS / "report_two_ranks.png")
