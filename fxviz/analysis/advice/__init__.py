"""What to change so a training step fits: ``advise`` a memory target, predicted by tracing each
changed model and partitioning it as torch.compile does (``search``); the changes as code
(``changes``); what the step's peak holds (``anatomy``); targets (``target``)."""

from __future__ import annotations

from .anatomy import LiveTensor, PiecePeak, StepPeak, step_peak
from .changes import Change, repeated_blocks
from .options import Advice, Option
from .search import advise, retrace, step_of
from .target import Target, parse_target

__all__ = ["advise", "Advice", "Option", "Change", "Target", "parse_target", "StepPeak", "PiecePeak", "LiveTensor",
           "step_peak", "step_of", "retrace", "repeated_blocks"]
