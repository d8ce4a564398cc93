"""Floor 4, presentation: reads analysis objects and never computes a fact.  ``theme`` (the one palette),
``graph/`` (scene -> DOT -> ``Drawing``), ``text/`` (tables and text for people), ``charts/`` (plots and
their SVG twins), ``page/`` (pieces of an HTML page)."""
