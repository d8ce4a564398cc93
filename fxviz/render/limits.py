"""How big a drawing gets before fxviz collapses it, and how long a report lays out: a leaf module
(no torch), so the CLI's help can say the limits without importing the renderer."""

from __future__ import annotations

__all__ = ["NODE_LIMIT", "REPORT_BUDGET"]

# Above this many nodes the default view collapses modules into boxes.  Layout time is not the
# limit (docs/rendering-timings.md: ~1 s in ``dot -Tsvg`` at 560 nodes): readability is.  A
# 2-layer HF GPT-2 drawn node by node (396 nodes) is 1656 x 5219 pt, a strip no screen shows
# legibly; ResNet-18 in train mode (528) was 13,427 pt wide.  fxviz's AlexNet (127 nodes) stays
# drawn op by op.
NODE_LIMIT = 150

REPORT_BUDGET = 20.0
"""Seconds of layout a report spends on its forward/backward drawings once the view it opens with
is drawn.  Small graphs never reach it (AlexNet's 11 drawings: under 2 s); a 10,000-node graph's
collapsed forward and backward views take several seconds each in ``dot`` (issue 26), so the report
ships the joint layout (every strategy and compare is an overlay on it) and the sides it had time
for, and says in each view left out how to draw it."""
