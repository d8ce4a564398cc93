"""Logs of real ``torch.compile`` runs (``TORCH_TRACE=dir``) read into fxviz, no model needed."""

from .run import Run, load_logs

__all__ = ["Run", "load_logs"]
