"""fxviz's views of one trace, timed: drawings, the notebook explorer, the HTML report in Chromium.

Only fxviz has views (torch alone has nothing to compare them with), so they are not in the ratio.
To add a view stage, add a ``ViewStage`` to ``VIEW_STAGES`` (its table column follows from it) and
time it in ``measure_views``; both are in this file.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import time
from typing import Any

from benchmarks.ladder import Spec
from benchmarks.recorder import Recorder

__all__ = ["VIEW_STAGES", "ViewStage", "mark_views", "measure_views"]


@dataclasses.dataclass(frozen=True)
class ViewStage:
    """One timed view: its stage name in the JSON, its column in the table, the digits shown."""

    name: str
    heading: str
    digits: int = 2


VIEW_STAGES: tuple[ViewStage, ...] = (
    ViewStage("draw_collapsed", "draw collapsed s"),
    ViewStage("draw_full", "draw full s"),
    ViewStage("explore_picture", "explorer first picture (kernel) s"),
    ViewStage("explore_filled", "explorer table filled (kernel) s"),
    ViewStage("explore_first", "explorer first (sync, all) s"),
    ViewStage("explore_new_view", "explorer new view s"),
    ViewStage("explore_switch", "explorer cached switch s", digits=3),
    ViewStage("report", "report s"),
    ViewStage("report_browser", "report switch (browser) s", digits=3),
)


def mark_views(rec: Recorder, status: str) -> None:
    """Give every view stage the same status (``skipped`` when a row has no views)."""
    for view in VIEW_STAGES:
        rec.mark(view.name, status)


def measure_views(tr: Any, spec: Spec, rec: Recorder, built: dict[str, bool], out_dir: pathlib.Path) -> None:
    """Drawings, explorer and report, each through its public entry point."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if built["draw"]:
        from fxviz.render.graph.views import NODE_LIMIT

        n = len(tr.graph.info)
        # the view fxviz draws by default above its node limit (modules collapsed into boxes at
        # the depth it picks), forced for every model through the public node_limit argument
        # (half the node count: safely below what the drawing counts, so it always collapses)
        d = rec.stage("draw_collapsed", lambda: _svg(tr.draw(node_limit=max(1, min(n // 2, NODE_LIMIT)))))
        if d is not None:
            rec.out["collapsed_units"] = d.nodes
            rec.out["collapsed_caption"] = d.caption
            (out_dir / f"{spec.name}-collapsed.svg").write_text(d.svg())
        if n > NODE_LIMIT:
            rec.mark("draw_full", f"refused ({n} > {NODE_LIMIT})")
        else:
            rec.stage("draw_full", lambda: _svg(tr.draw(group="none")))
    else:
        rec.mark("draw_collapsed", "n/a (not built)")
        rec.mark("draw_full", "n/a (not built)")

    import fxviz

    if built["explore"]:
        kernel = rec.stage("explore_picture", lambda: _explore_kernel(fxviz, tr))
        if kernel is not None:  # the two moments of one kernel-like run, not the run's total
            rec.out["stages"]["explore_picture"] = {"wall": kernel["picture"], "cpu": None,
                                                    "run": rec.out["stages"]["explore_picture"]}
            rec.out["stages"]["explore_filled"] = {"wall": kernel["filled"], "cpu": None}
        else:
            rec.mark("explore_filled", "error")
        ex = rec.stage("explore_first", lambda: _explore_first(fxviz, tr))
        if ex is not None:
            rec.stage("explore_new_view", lambda: _explore_new(ex))
            worst = rec.stage("explore_switch", lambda: _explore_switch(ex))
            if worst is not None:  # the slowest of six cached switches, not the loop's total
                rec.out["stages"]["explore_switch"] = {"wall": worst, "cpu": None,
                                                       "loop": rec.out["stages"]["explore_switch"]}
    else:
        for s in ("explore_picture", "explore_filled", "explore_first", "explore_new_view", "explore_switch"):
            rec.mark(s, "n/a (not built)")

    if built["report"]:
        path = out_dir / f"{spec.name}-report.html"
        rec.stage("report", lambda: fxviz.report(tr, path))
        if path.exists():
            rec.out["report_bytes"] = path.stat().st_size
            timing = rec.stage("report_browser", lambda: _browser_switch(path)) if _have_browser() else None
            if not _have_browser():
                rec.mark("report_browser", "n/a (no Playwright/Chromium)")
            elif timing is not None:  # the slowest switch, not the session's total
                rec.out["report_page_load_s"] = timing["load"]
                rec.out["stages"]["report_browser"] = {"wall": timing["switch"], "cpu": None,
                                                      "views": timing["views"],
                                                      "session": rec.out["stages"]["report_browser"]}
    else:
        rec.mark("report", "n/a (not built)")
        rec.mark("report_browser", "n/a (not built)")


_SWITCH_JS = """async (view) => {
  const button = document.querySelector(`button[data-view="${view}"]`);
  const t0 = performance.now();
  button.click();
  // two animation frames: the new drawing has been laid out and painted
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0;
}"""


def _chromium() -> str:
    return os.environ.get("FXVIZ_CHROMIUM", "/usr/bin/chromium")


def _have_browser() -> bool:
    return importlib.util.find_spec("playwright") is not None and os.access(_chromium(), os.X_OK)


def _browser_switch(path: pathlib.Path) -> dict[str, Any]:
    """The report in headless Chromium: seconds to the first drawing, and the slowest switch
    between views already shown once (every view's SVG is inline in the report: all cached)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            t0 = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector("#fxviz-root svg", timeout=120_000)
            load = time.perf_counter() - t0
            views = page.eval_on_selector_all("button[data-view]", "bs => bs.map((b) => b.dataset.view)")
            views = [v for v in views if v != "compare"] or views
            for v in views:  # each view shown once: parsed and laid out by the browser
                page.evaluate(_SWITCH_JS, v)
            times = [page.evaluate(_SWITCH_JS, v) / 1000.0 for _ in range(2) for v in views]
        finally:
            browser.close()
    return {"load": load, "switch": max(times), "views": views}


def _svg(drawing: Any) -> Any:
    """Lay the drawing out (``dot``), as showing it does; returns the drawing."""
    drawing.svg()
    return drawing


def _explore_kernel(fxviz: Any, tr: Any) -> dict[str, float]:
    """``fxviz.explore(tr)`` as a notebook cell runs it: inside a running asyncio loop (the
    kernel's), on a fresh ``Trace`` of the same capture (nothing partitioned, drawn or tabulated
    yet, as right after ``fxviz.trace``).  ``picture``: seconds until the call returns with the
    first drawing in the pane (the cell's output appears then); ``filled``: until the memory
    table of every offered strategy is complete (its rows fill in meanwhile)."""
    import asyncio

    fresh = type(tr)(tr.capture)

    async def cell() -> dict[str, float]:
        t0 = time.perf_counter()
        ex = fxviz.explore(fresh)
        picture = time.perf_counter() - t0
        if not ex.pane.svg or ex.first_picture_s is None:
            raise RuntimeError("explore(tr) returned without a drawing in the pane")
        await ex.filled()
        filled = time.perf_counter() - t0
        if not ex.pane.table.get("rows") or ex.pane.table.get("progress"):
            raise RuntimeError(f"the memory table did not fill in: {ex.pane.table.get('message')}")
        return {"picture": picture, "filled": filled}

    return asyncio.run(cell())


def _explore_first(fxviz: Any, tr: Any) -> Any:
    """``fxviz.explore(tr)``: builds the widget and renders its first view (joint graph, memory
    table of every strategy the explorer offers, doctor)."""
    return fxviz.explore(tr)


def _explore_new(ex: Any) -> None:
    """Switch to a view not seen yet (the forward graph): partition already cached, layout not."""
    ex.view_control.value = "forward"


def _explore_switch(ex: Any, rounds: int = 3) -> float:
    """Switch back and forth between two views already seen; the slowest switch, in seconds,
    as the explorer itself timed it (its ``timings`` say whether it came from the cache)."""
    worst = 0.0
    for _ in range(rounds):
        for view in ("joint", "forward"):
            ex.view_control.value = view
            t = ex.timings[-1]
            if not t.cached:
                raise RuntimeError(f"the switch to {t.key} was not served from the cache")
            worst = max(worst, t.seconds)
    return worst
