"""Screenshots of the two flows of issue 19 at 1024x768 (the report): the teacher comparing
default with min-cut on pointwise_chain, and the engineer whose AlexNet (parameters captured as
constants) gets no gradients.  Usage: python scripts/flow_screenshots.py OUTDIR PREFIX"""

from __future__ import annotations

import pathlib
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

import fxviz
from fxviz import examples
from tests.browser_util import browser


def main(out: pathlib.Path, prefix: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp())
    m, x = examples.pointwise_chain()
    teacher = fxviz.report(fxviz.trace(m, *x), tmp / "teacher.html")
    m, x = examples.alexnet()
    engineer = fxviz.report(fxviz.trace(m, *x, params="closure"), tmp / "engineer.html")
    with browser(viewport=(1024, 768)) as b:
        page = b.new_page()
        page.goto(teacher.as_uri())
        page.wait_for_selector(".fxviz-viewport svg g.node", timeout=120_000)
        page.screenshot(path=str(out / f"{prefix}-teacher-open.png"))
        page.click("button[data-view='compare']")
        page.wait_for_timeout(500)
        if page.locator("#fxviz-compare").count():
            page.select_option("#fxviz-compare", "min_cut") if "min_cut" in page.eval_on_selector(
                "#fxviz-compare", "s => [...s.options].map(o => o.value)") else None
        page.select_option("#fxviz-strategy", "default")
        page.wait_for_timeout(800)
        page.screenshot(path=str(out / f"{prefix}-teacher-compare.png"))
        if page.locator(".fxviz-diff-toggle").count():  # the "differences only" compare (after issue 19)
            page.click(".fxviz-diff-toggle")
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / f"{prefix}-teacher-differences.png"))
            page.locator(".fxviz-differences").scroll_into_view_if_needed()
            page.screenshot(path=str(out / f"{prefix}-teacher-differences-table.png"))
        page.goto(engineer.as_uri())
        page.wait_for_selector(".fxviz-viewport svg g.node", timeout=120_000)
        page.screenshot(path=str(out / f"{prefix}-engineer-open.png"))
        page.locator(".fxviz-doctor").scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        page.screenshot(path=str(out / f"{prefix}-engineer-doctor.png"))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), sys.argv[2])
