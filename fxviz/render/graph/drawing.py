"""``Drawing``: what ``Trace.draw`` returns.  It wraps a ``graphviz.Digraph``, lays it out with the
real ``dot`` program under a timeout (a layout never hangs a notebook), shows itself inline in
Jupyter as an SVG that keeps its tooltips, and saves to SVG, PNG or DOT atomically.
"""

from __future__ import annotations

import html
import os
import pathlib
import re
import shutil
import subprocess
import time
from typing import Any

import graphviz

from fxviz.core.atomic import write_atomic
from fxviz.core.errors import Blank, Do, RenderError, Say

__all__ = ["Drawing", "find_dot", "run_dot", "fix_edge_titles", "add_title_elements", "INSTALL_HINT",
           "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 60.0
INSTALL_HINT = ("install graphviz's 'dot' program: apt-get install graphviz (Debian/Ubuntu), "
                "brew install graphviz (macOS), conda install -c conda-forge graphviz, "
                "or see https://graphviz.org/download/")
_FORMATS = {".svg": "svg", ".png": "png", ".dot": "dot", ".gv": "dot", ".pdf": "pdf"}


def find_dot() -> str:
    """The path of the ``dot`` executable, or ``RenderError`` saying how to install it."""
    path = shutil.which("dot")
    if path is None:
        raise RenderError("graphviz's 'dot' program was not found on PATH", INSTALL_HINT)
    return path


def run_dot(source: str, fmt: str, timeout: float, nodes: int | None = None, extra: tuple[str, ...] = ()) -> bytes:
    """``dot -T<fmt>`` on ``source`` in a subprocess that is killed after ``timeout`` seconds."""
    cmd = [find_dot(), f"-T{fmt}", *extra]
    try:
        proc = subprocess.run(cmd, input=source.encode("utf-8"), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        what = f"{nodes} nodes" if nodes is not None else "this graph"
        raise RenderError(
            f"graphviz took longer than {timeout:g} s to lay out {what}",
            Say("draw fewer boxes: ", Do("draw", (("group", "module"), ("depth", 1))), " collapses modules, ",
                Do("draw", (("highlight", Blank("...", "NAME")),)), " or ", Do("draw", (("view", "forward"),)),
                " shows less; or ", Do("draw", (("timeout", Blank("<seconds>", "SECONDS")),)),
                " waits longer")) from None
    except OSError as exc:
        raise RenderError(f"could not run graphviz's 'dot': {exc}", INSTALL_HINT) from exc
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise RenderError(f"graphviz's 'dot' failed: {err[0] if err else f'exit code {proc.returncode}'}",
                          "this is a bug in fxviz's DOT output; please report it with drawing.source")
    return proc.stdout


# graphviz writes "-" in class names as "&#45;"
_REVERSED_EDGE = re.compile(
    r'(<g id="fxe\d+" class="edge[^"]*\bfx(?:-|&#45;)reversed\b[^"]*">\s*<title>)(.*?)(</title>)')


def fix_edge_titles(svg: str) -> str:
    """Edges drawn reversed (``dir=back``, the bottom-up backward) get the title
    ``producer->consumer`` back, so every edge title reads in data-flow order."""
    def swap(m: re.Match[str]) -> str:
        a, sep, b = m.group(2).partition("&#45;&gt;")
        return m.group(1) + (b + sep + a if sep else m.group(2)) + m.group(3)

    return _REVERSED_EDGE.sub(swap, svg)


_LINK_TOOLTIP = re.compile(r'(<a\b[^>]*?\sxlink:title="([^"]*)"[^>]*>)')


def add_title_elements(svg: str) -> str:
    """Repeat each tooltip as an SVG ``<title>`` inside its ``<a>``: browsers show the innermost
    ``<title>`` on hover (not all show ``xlink:title``), and graphviz's own ``<title>`` on the node
    group holds only the node name.  The text is already XML-escaped by graphviz."""
    return _LINK_TOOLTIP.sub(lambda m: f"{m.group(1)}<title>{m.group(2)}</title>", svg)


def _inline(svg: str) -> str:
    """The ``<svg>`` element alone (no XML prolog or DOCTYPE), ready to sit inside HTML."""
    start = svg.find("<svg")
    return svg[start:] if start >= 0 else svg


SHRINK_TO = 0.6  # a drawing wider than the window shrinks to fit, down to this share of its size, then scrolls


def _fitted(svg: str) -> str:
    """The inline ``<svg>`` sized to the window: at most its natural width, shrunk to fit a narrower
    window down to ``SHRINK_TO`` of it (text stays legible), wider drawings scroll.  dot writes the
    size in points (96 px = 72 pt)."""
    svg = _inline(svg)
    m = re.match(r'<svg width="([\d.]+)pt"', svg)
    if not m:
        return svg
    px = float(m.group(1)) * 4 / 3
    style = f"width:100%;max-width:{px:.0f}px;min-width:{px * SHRINK_TO:.0f}px;height:auto"
    return svg.replace("<svg", f'<svg style="{style}"', 1)


class Drawing:
    """A drawn fxviz view.  ``.source`` is the DOT text, ``.svg()`` the laid-out SVG (computed
    once), ``.save(path)`` writes ``.svg``/``.png``/``.dot``/``.pdf``; in Jupyter it displays itself."""

    def __init__(self, digraph: graphviz.Digraph, *, nodes: int | None = None, timeout: float = DEFAULT_TIMEOUT,
                 caption: str = "", boxes: list[dict[str, Any]] | None = None) -> None:
        self.digraph = digraph
        # the collapsed boxes drawn (``Group.record()``: id, what opens it, label, kind, side, members)
        self.boxes: list[dict[str, Any]] = list(boxes or [])
        self.nodes = nodes
        self.timeout = timeout
        self.caption = caption
        self.layout_seconds: float | None = None
        self._svg: str | None = None

    @property
    def source(self) -> str:
        """The DOT source."""
        return self.digraph.source

    def svg(self) -> str:
        """The SVG document (laid out once, then cached)."""
        if self._svg is None:
            t0 = time.perf_counter()
            raw = run_dot(self.source, "svg", self.timeout, self.nodes).decode("utf-8")
            self.layout_seconds = time.perf_counter() - t0
            self._svg = add_title_elements(fix_edge_titles(raw))
        return self._svg

    def pipe(self, fmt: str = "svg", dpi: float | None = None) -> bytes:
        """The drawing rendered by ``dot`` in any of its output formats."""
        if fmt == "svg":
            return self.svg().encode("utf-8")
        if fmt in ("dot", "gv"):
            return self.source.encode("utf-8")
        extra = (f"-Gdpi={dpi:g}",) if dpi else ()
        return run_dot(self.source, fmt, self.timeout, self.nodes, extra)

    def save(self, path: str | os.PathLike[str], format: str | None = None, dpi: float | None = None
             ) -> pathlib.Path:
        """Write the drawing; the format comes from the suffix (``.svg``, ``.png``, ``.dot``,
        ``.gv``, ``.pdf``) unless given.  Written to a temporary file first, then renamed, so a
        failed or interrupted render never leaves a half-written file."""
        path = pathlib.Path(path)
        fmt = format or _FORMATS.get(path.suffix.lower())
        if fmt is None:
            raise RenderError(f"cannot tell the image format of {str(path)!r}",
                              "end the file name in .svg, .png, .dot or .pdf, or pass format=...")
        return write_atomic(path, self.pipe(fmt, dpi=dpi))

    # --- display ---------------------------------------------------------------------------------
    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        try:
            svg = self.svg()
        except RenderError as exc:
            return self._error_bundle(exc)
        return {
            "text/html": f'<div class="fxviz-drawing" style="overflow:auto;max-width:100%">{_fitted(svg)}</div>',
            "image/svg+xml": svg,
            "text/plain": repr(self),
        }

    def _error_bundle(self, exc: RenderError) -> dict[str, str]:
        msg = f"fxviz could not draw this graph: {exc.message}"
        page = (f'<div class="fxviz-drawing fxviz-error"><p><b>{html.escape(msg)}</b><br>'
                f"What to do: {html.escape(exc.hint)}</p>"
                f"<details><summary>DOT source ({len(self.source.splitlines())} lines)</summary>"
                f"<pre>{html.escape(self.source)}</pre></details></div>")
        return {"text/html": page, "text/plain": f"{msg}\nWhat to do: {exc.hint}\n\n{self.source}"}

    def __repr__(self) -> str:
        n = f", {self.nodes} shapes drawn" if self.nodes is not None else ""
        return f"<fxviz.Drawing{': ' + self.caption if self.caption else ''}{n}>"
