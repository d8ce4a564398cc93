"""The self-contained HTML report: one file with every view of a trace inline.

The page shows the payloads of :mod:`fxviz.payloads` with the explorer's own front-end code;
this module only writes the file.  The JSON sits, gzipped and base64-encoded, in an inert
``<script type="application/json">`` element (``render.embed.packed_json``; the page unpacks it
with the browser's DecompressionStream), the SVGs are checked by ``clean_svg``, and the
page's Content-Security-Policy allows exactly fxviz's script, by hash.
"""

from __future__ import annotations

import base64
import hashlib
import os
import pathlib
from typing import TYPE_CHECKING, Any

from fxviz.analysis.strategy.choices import shown_graphs
from fxviz.api.run import Run
from fxviz.core.atomic import write_atomic
from fxviz.core.collector import old_objects_frozen
from fxviz.core.errors import RenderError
from fxviz.payloads.report import report_data, run_report_data
from fxviz.render import theme
from fxviz.render.page.embed import packed_json
from fxviz.render.page.static_html import static_html

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["STATIC", "build_report", "build_run_report", "report"]

STATIC = pathlib.Path(__file__).resolve().parents[1] / "static"


def build_report(tr: Trace, **kwargs: Any) -> str:
    """The report as one HTML string (see :func:`report`)."""
    with old_objects_frozen():
        return _html(report_data(tr, **kwargs))


def build_run_report(graphs: list[tuple[int, str, Trace]], initial: int = 0, **kwargs: Any) -> str:
    """The report of several graphs of a logged run, with a rank and a graph selector."""
    with old_objects_frozen():
        return _html(run_report_data(graphs, initial, **kwargs))


def _html(data: dict[str, Any]) -> str:
    view = data.get("first", data)  # a run's report: the script-free fallback shows its first graph
    first = view["initial"]
    shown = view["drawings"].get(first["drawing"]) or {"svg": "", "caption": "", "overlay": False}
    table = view["table"] if view["table"].get("rows") else None
    # the first drawing is embedded once: as markup in the script-free fallback, where the page's
    # script reads it back (view["drawing_in_fallback"]), not a second time in the JSON
    svg = shown["svg"]
    shown["svg"] = ""
    view["drawing_in_fallback"] = first["drawing"] if svg else None
    note = " (no strategy marks: they need JavaScript)" if shown["overlay"] else ""
    fallback = static_html(svg, table, first["strategy"] or "", shown["caption"] + note)
    if "first" in data:
        data = {k: v for k, v in data.items() if k != "first"}
    return _render_template(data, fallback)


def _asset(name: str) -> str:
    text = (STATIC / name).read_text(encoding="utf-8")
    for closer in ("<script", "</script", "</style", "<!--"):
        if closer in text.lower():
            raise RenderError(f"fxviz/frontends/static/{name} contains {closer!r}; it cannot be inlined",
                              "this is a bug in fxviz")
    return text


def _render_template(data: dict[str, Any], fallback: str) -> str:
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(STATIC)), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    template = env.get_template("report.html.j2")
    script = "\n" + _asset("explorer.js") + "\n" + _asset("report.js") + "\n"
    # the page's Content-Security-Policy allows exactly this script (by hash) and no other
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return template.render(
        title=data["title"],
        summary=data["summary"],
        generated=data["generated"],
        palette_css=Markup(theme.css_variables(":root")),
        css=Markup(_asset("explorer.css") + "\n" + _asset("report.css")),
        data_json=Markup(packed_json(data)),
        script=Markup(script),
        script_hash=f"sha256-{digest}",
        fallback=Markup(fallback),
    )


def report(tr: Any, path: str | os.PathLike[str], *, rank: int | None = None, compile_id: str | None = None,
           **kwargs: Any) -> pathlib.Path:
    """Write the self-contained HTML report of ``tr`` to ``path`` and return the path.

    One file with everything inline (SVGs, CSS, script, data); it loads nothing from the
    network.  It switches strategy and view, compares any two of its strategies (marks drawn by
    the page on one joint layout), shows a node's details on click, searches names, ops,
    modules, shapes and the labels' text, and shows the memory table, the doctor's findings and
    the legend.  Keyword arguments go to :func:`build_report` (``strategies``, ``views``,
    ``compare``: the pair the compare view opens with, ``group``, ``depth``, ``title``; ``runs``
    and ``advice``: logged runs and ``tr.advise(...)`` on the budget curve, ``fxviz.budget_points``).
    Written to a temporary file, then renamed into place.
    ``tr`` may be a ``Diff`` or a ``StepDiff`` (``fxviz.diff``): one scriptless page with its summary, drawing, bytes
    per module and table (keyword ``title``).
    ``tr`` may be a ``Run`` read from a log: the report then holds every graph with a backward (and
    every inference-only graph) on every rank, with a rank and a graph selector, and opens on ``compile_id`` of ``rank``
    (default: the first graph with a backward on rank 0, else on the first rank that has one, which its
    warnings say).
    """
    from fxviz.api.diffing import Diff, StepDiff

    if isinstance(tr, (Diff, StepDiff)):  # a diff of two traces: one page, no script
        from fxviz.frontends.report.diff_page import build_diff_report

        return write_atomic(path, build_diff_report(tr, **kwargs))
    if isinstance(tr, Run):  # a logged run: the graphs choices.shown_graphs offers (inference graphs: forward only)
        run = tr
        start = run.trace(rank=rank, compile_id=compile_id)
        rows = shown_graphs(run.graphs)
        graphs = [(int(r["rank"]), str(r["compile_id"]),
                   run.trace(int(r["rank"]), str(r["compile_id"]), int(r["piece"])))
                  for _, r in rows.iterrows()]
        initial = next((i for i, g in enumerate(graphs) if g[2] is start), 0)
        return write_atomic(path, build_run_report(graphs, initial, run_summary=run.summary(), **kwargs))
    return write_atomic(path, build_report(tr, **kwargs))
