"""Where one graph of a ``TORCH_TRACE`` log lies (``LogSource``): the ``Capture.source`` of a graph read from
a log, and what a view of the log says of it without rebuilding it (torch-free)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["LogSource"]


@dataclass(frozen=True)
class LogSource:
    """One graph of a ``TORCH_TRACE`` log: which file, rank, compile and piece it is, and what the log
    said of its frame.  A view of a log knows where its graph lies without asking the ``Run`` it came
    from (the CLI names it, ``--measure`` reads the same file's records)."""

    file: str
    rank: int
    compile_id: str
    piece: int = 0
    pieces: int = 1  # how many graphs (DDP buckets, graph-break pieces) the compile logged
    frame: str = "compiled frame"  # the frame's name, as dynamo logged it
    torch_version: str | None = None  # the torch that wrote the log
    input_names: list[str] = field(default_factory=list)
    # the log read with a cache (``Run.cache``): where views keep what they worked out for the next view of
    # the same log (a ``sources.log.cache.LogCache``, typed Any: this module is torch-free and a leaf), and
    # the entry there of each graph of the step this source stands for (``sources.log.cache.piece_key``;
    # None: not keyed), in the step's order; None and () for a log read without one
    cache: Any = field(default=None, compare=False, repr=False)
    keys: tuple[str | None, ...] = ()

    @property
    def origin(self) -> str:
        """``rank 0, compile 1/0`` (and `` piece 2`` when the compile logged several graphs)."""
        return f"rank {self.rank}, compile {self.compile_id}" + (f" piece {self.piece}" if self.pieces > 1 else "")

    @property
    def title(self) -> str:
        """What views call a log's graph: its frame, and the torch that wrote it (``Capture.title``)."""
        return self.frame + (f" [torch {self.torch_version}]" if self.torch_version else "")
