"""Facts of a capture as tables and text: ``tables`` (``Trace.nodes``, ``Trace.parameters``), ``code``
(a graph as readable Python), ``pieces`` (how a graph-broken model's graphs ran).
"""
