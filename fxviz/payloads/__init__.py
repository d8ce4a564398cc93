"""What one view of a trace shows, as plain data: the payloads the notebook explorer and the HTML
report both send to the same front-end code (``fxviz/static/explorer.js``).

A payload is built from analysis objects (partitions, the memory table, the doctor's diagnosis)
that the ``Trace`` computes once and caches; nothing here re-derives a fact, and every choice
(default strategy, compare partner) is ``analysis.choices``'.  One module per job:

- ``panels``: the panels' records (node details, strategy statuses, memory table, saved tensors,
  timeline, doctor, legend, page constants);
- ``views``: the view schema (``ViewKey``, ``ViewPayload``) and its one builder ``view_payload``;
- ``budget``: what a report computes before its time budget runs out; ``graph``: one graph's payloads;
- ``pieces``: a graph-broken model's pieces and overview; ``report``: ``report_data`` and ``run_report_data``.

This package sits above ``render`` (which never calls the facade) and below the widget and the
report writer, which only ship these payloads.
"""

from __future__ import annotations

from .budget import MIN_CUT_OVER_DEFAULT, drawings_within, statuses_within
from .graph import DIFFERENCES_NODE_LIMIT, PIECE_FIELDS
from .panels import (
    Status,
    StatusState,
    doctor_data,
    legend_data,
    node_data,
    page_constants,
    saved_data,
    status_data,
    table_data,
    table_notes,
    timeline_data,
)
from .pieces import overview_data, piece_option, piece_options, pieces_data, short_option, whole_model_option
from .report import REPORT_BUDGET, report_data, run_report_data
from .views import VIEWS, ViewKey, ViewPayload, openable_boxes, view_payload

__all__ = [
    "VIEWS", "ViewKey", "ViewPayload", "view_payload", "openable_boxes", "page_constants",
    "Status", "StatusState", "status_data", "node_data", "table_data", "saved_data", "table_notes", "timeline_data",
    "doctor_data", "legend_data", "DIFFERENCES_NODE_LIMIT", "PIECE_FIELDS", "MIN_CUT_OVER_DEFAULT",
    "report_data", "drawings_within", "statuses_within", "REPORT_BUDGET", "pieces_data", "overview_data",
    "piece_options", "piece_option", "short_option", "whole_model_option", "run_report_data",
]
