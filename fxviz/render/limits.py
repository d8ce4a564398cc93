"""How big a drawing gets before fxviz collapses it: a leaf module (no torch), so the CLI's help
can say the limit without importing the renderer."""

from __future__ import annotations

__all__ = ["NODE_LIMIT"]

# Above this many nodes the default view collapses modules into boxes.  Layout time is not the
# limit (docs/rendering-timings.md: ~1 s in ``dot -Tsvg`` at 560 nodes): readability is.  A
# 2-layer HF GPT-2 drawn node by node (396 nodes) is 1656 x 5219 pt, a strip no screen shows
# legibly; ResNet-18 in train mode (528) was 13,427 pt wide.  fxviz's AlexNet (127 nodes) stays
# drawn op by op.
NODE_LIMIT = 150
