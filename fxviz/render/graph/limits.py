"""How big a drawing gets before fxviz collapses it, and how long a report lays out: a leaf module
(no torch), so the CLI's help can say the limits without importing the renderer."""

from __future__ import annotations

__all__ = ["NODE_LIMIT", "REPORT_BUDGET", "READABLE_PX", "PAGE_PANE"]

# Above this many nodes the default view collapses modules into boxes.  Layout time is not the
# limit (docs/rendering-timings.md: ~1 s in ``dot -Tsvg`` at 560 nodes): readability is.  A
# 2-layer HF GPT-2 drawn node by node (396 nodes) is 1656 x 5219 pt, a strip no screen shows
# legibly; ResNet-18 in train mode (528) was 13,427 pt wide.  fxviz's AlexNet (127 nodes) stays
# drawn op by op.
NODE_LIMIT = 150

REPORT_BUDGET = 10.0
"""Seconds a report spends partitioning and laying out before it leaves the rest out.  The first
strategy and the view the page opens with are always computed; further strategies and drawings only
while their estimated costs add up to under the budget (``payloads.budget``: seconds per joint node
on a quiet machine, never the clock, so that the same input gives the same report under any load),
and each one left out says so in the page and on stderr with how to get it.  Small graphs never
reach it (AlexNet's whole report: about 2 s; a 12-layer GPT-2: about 5 s); on a 10,282-node graph
(issue 26) torch's own partitioners took 6-18 s (default) and 20-43 s (min-cut) each, and its trace
27-90 s, so a report holding every strategy took twice the trace.  10 s keeps the report of that
graph near half its trace.  The rest of the report (node records, doctor, saved panel, memory table,
timeline, the page) computes only from what the budget computed and is linear in the graph: about
15 s of a 15,162-node report (issue 36, benchmarks/RESULTS.md), whose min-cut and opening drawing
are the other 105 s."""

READABLE_PX = 10.5
"""Screen pixels a node label's font needs to be read (the median label of a drawing): a page opens a
drawing fitted when its labels are this big there, and picks the level of an automatic collapse so that
they are (``PAGE_PANE``).  The page's script reads it from the page constants."""

PAGE_PANE = (1100, 640)
"""The graph pane a page opens a drawing in, in screen pixels: the explorer's in JupyterLab on a
laptop (70% of a 900-pixel-high window, beside the notebook's margins), the report's at 1280x800.  An
automatic collapse drawn for a page (``DrawSpec.pane``) is at the deepest level of the model's structure
whose labels stay ``READABLE_PX`` tall with the whole drawing fitted in it: a 2-layer Qwen3's level 2
(45 boxes, 2323 x 1648 pt) fits at 5 px labels, its level 1 (20 boxes, 985 x 762 pt) at 8-9 px."""
