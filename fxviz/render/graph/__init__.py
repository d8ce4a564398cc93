"""Drawings: ``scene``/``scene_types`` (what to draw), ``structure``/``grouping`` (collapsing along the
model), ``dot`` (scene -> DOT), ``drawing`` (``Drawing``), ``views`` (one entry point), ``flow`` and
``overview`` (the special views), ``limits``, ``module_level``.
"""
