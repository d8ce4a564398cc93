"""The "saved tensors" panel in Chromium: the rows are tr.saved()'s, sortable; a row click selects
the node; a node or box clicked in the graph marks its rows; readable on a 1024x768 screen."""

from __future__ import annotations

import pytest

import fxviz
from fxviz.analysis.memory.saved import fate
from fxviz.render.graph.limits import PAGE_PANE
from fxviz.render.graph.spec import DrawSpec

from .browser_util import browser, chromium_path

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (apt-get install chromium)"),
]
pytest.importorskip("playwright.sync_api")

LONG = 120_000
SMALL_SCREEN = (1024, 768)


def _rows(page) -> list[str]:
    return page.eval_on_selector_all(".fxviz-saved-row", "rs => rs.map(r => r.dataset.node)")


def _marked(page) -> list[str]:
    return page.eval_on_selector_all(".fxviz-saved-row.fxviz-saved-selected", "rs => rs.map(r => r.dataset.node)")


def test_saved_panel_in_the_report(traces, tmp_path, artifacts):
    tr = traces[("mini_gpt", "lifted")]
    path = fxviz.report(tr, tmp_path / "saved.html", strategies=["default", "min_cut"])
    table = tr.saved("default")  # the page opens on the first strategy it is given
    layout = tr.draw(DrawSpec.of("joint").replace(pane=PAGE_PANE))  # the report's joint layout, drawn for its pane
    boxes = {b["id"]: b["members"] for b in layout.boxes}
    with browser(viewport=SMALL_SCREEN) as b:
        page = b.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".fxviz-saved-row", timeout=LONG)
        # the rows are tr.saved()'s, activations first (biggest first), what is held anyway after a line
        # that says so, with a letter per strategy of the report, the listed one first: what its
        # Partition does with the value (analysis.saved.fate)
        assert _rows(page) == list(table.index)
        held = page.locator(".fxviz-saved-held")
        assert held.count() == 1 and held.inner_text().startswith("held anyway")
        first_held = next(i for i, k in enumerate(table["kind"]) if k in ("input", "parameter"))
        assert page.evaluate("() => [...document.querySelectorAll('.fxviz-saved-table tbody tr')]"
                             ".findIndex(r => r.classList.contains('fxviz-saved-held'))") == first_held
        others = ["default_partition", "min_cut"]
        legend = page.inner_text(".fxviz-saved-legend")
        assert all(f"{'ABCDEFGH'[i]} = {o}" in legend for i, o in enumerate(others))
        letters = page.eval_on_selector_all(".fxviz-saved-fates", "ts => ts.map(t => t.textContent)")
        codes = {"saved": "S", "recomputed": "R", "not needed": "\u2013", "failed": "!"}
        assert letters == [" ".join(codes[fate(tr.partition(o), n)] for o in others) for n in table.index]
        assert letters == [" ".join(codes[f] for f in tr.saved("default", compare=others[1:]).loc[n, others])
                           for n in table.index]
        # sortable: bytes ascending is the reverse; by module, each module's rows sit together
        page.click(".fxviz-saved-table th[data-sort='bytes']")
        assert _rows(page) == list(table.index)[::-1]
        page.click(".fxviz-saved-table th[data-sort='module']")
        modules = [table["module"].fillna("").loc[n] for n in _rows(page)]
        runs = [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]
        assert len(runs) == len(set(runs))
        page.click(".fxviz-saved-table th[data-sort='bytes']")
        assert _rows(page) == list(table.index)
        # readable at 1024x768: the table fits its section, type no smaller than 11 px
        page.locator(".fxviz-saved").scroll_into_view_if_needed()
        fit = page.evaluate("""() => { const body = document.querySelector('.fxviz-saved-list');
            const t = body.querySelector('table'); const cell = t.querySelector('tbody td');
            return [t.scrollWidth, body.clientWidth, parseFloat(getComputedStyle(cell).fontSize),
                    body.getBoundingClientRect().height]; }""")
        assert fit[0] <= fit[1] + 1 and fit[2] >= 11 and fit[3] >= 200, fit
        page.screenshot(path=str(artifacts / "saved-panel-1024.png"))
        # a row click selects its node: the details show it, the graph marks its unit
        name = list(table.index)[2]
        page.click(f".fxviz-saved-row[data-node='{name}']")
        assert page.inner_text(".fxviz-details-body .fxviz-node-name") == name
        assert _marked(page) == [name]
        unit = page.eval_on_selector(".fxviz-viewport g.fxviz-selected > title", "t => t.textContent")
        assert unit == name or name in boxes[unit]
        # a click on that unit in the graph marks the rows of what it holds
        page.evaluate("window.scrollTo(0, 0)")
        page.locator(".fxviz-viewport g.fxviz-selected").first.click()
        members = set(boxes.get(unit, [unit]))
        assert _marked(page) == [n for n in table.index if n in members]
        details = page.inner_text(".fxviz-details-body")
        if unit in boxes:  # a box's details say what it saves
            assert "saves:" in details and name in details
        # another strategy: its own rows
        page.select_option("#fxviz-strategy", "min_cut")
        page.wait_for_function("n => document.querySelectorAll('.fxviz-saved-row').length === n",
                               arg=len(tr.saved("min_cut")), timeout=LONG)
        assert _rows(page) == list(tr.saved("min_cut").index)
        assert b.console_errors == [] and b.page_errors == [] and b.blocked == []
