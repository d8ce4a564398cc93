"""What one view of a trace shows, as plain data: the payloads the notebook explorer and the HTML
report both send to the same front-end code (``fxviz/frontends/static/explorer.js``).

A payload is built from analysis objects (partitions, the memory table, the doctor's diagnosis)
that the ``Trace`` computes once and caches; nothing here re-derives a fact, and every choice
(default strategy, compare partner) is ``analysis.strategy.choices``'.  One module per job:

- ``panels``: the panels' records (node details, strategy statuses, memory table, saved tensors,
  timeline, doctor, legend, page constants);
- ``views``: the view schema (``ViewKey``, ``ViewPayload``) and its one builder ``view_payload``;
- ``budget``: what a report computes before its time budget runs out; ``graph``: one graph's payloads;
- ``pieces``: a graph-broken model's pieces and overview; ``report``: ``report_data`` and ``run_report_data``.

This package sits above ``render`` (which never calls the facade) and below the widget and the
report writer, which only ship these payloads.
"""
