"""Logs of real ``torch.compile`` runs (``TORCH_TRACE=dir``) read into fxviz, no model needed.

Reading a log and listing it (``load_logs``, ``Run.graphs``, ``Run.summary``) loads no torch: the
index (``index``, ``signature``) reads the records and the graphs' printed signatures; ``Run.trace``
rebuilds one graph (``fxviz.capture.from_log``, with torch) when a view asks for it.
"""

from __future__ import annotations

from .run import Run, load_logs

__all__ = ["Run", "load_logs"]
