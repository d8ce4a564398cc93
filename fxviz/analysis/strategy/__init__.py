"""How a joint graph is cut: ``strategies`` (a user's string parsed once into a ``Strategy``),
``choices`` (what every front end shows when nothing is named), ``partition`` (one strategy run ->
``Partition``), the strategies fxviz computes itself (``eager``, ``recompute_all``, ``optimal``),
``flow`` (min-cut's flow network), and ``cache`` (every fact of a graph computed once).
"""
