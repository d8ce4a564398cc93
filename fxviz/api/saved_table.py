"""``SavedTable``: what ``Trace.saved()`` returns, one door to the saved values.  A ``DataFrame`` (one
row per value the backward reads from the forward) that also sums its activations per module
(``by_module``) and prints itself the way people read saved residuals (``to_text``: identical layers
folded, as JAX's ``print_saved_residuals``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pandas as pd

from fxviz.analysis.memory.saved import SAVED_COLUMNS
from fxviz.core.errors import InputError

__all__ = ["SavedTable"]


class SavedTable(pd.DataFrame):
    """``tr.saved()``: a ``DataFrame`` indexed by joint node name; ``by_module(depth)`` sums its
    activations per module, ``to_text()`` (and ``print``) folds identical layers into one line each."""

    _metadata: ClassVar[list[str]] = ["_per_module", "_as_text"]  # what pandas carries to a derived frame

    @property
    def _constructor(self) -> type:
        return SavedTable

    @classmethod
    def of(cls, frame: pd.DataFrame, per_module: Callable[[pd.DataFrame, int | None], pd.DataFrame],
           as_text: Callable[[pd.DataFrame], str]) -> SavedTable:
        """``frame`` as a saved table whose ``by_module`` and ``to_text`` ask the trace it came from."""
        out = cls(frame)
        out.attrs = dict(frame.attrs)
        out._per_module = per_module
        out._as_text = as_text
        return out

    def _whole(self, what: str) -> tuple[Any, Any]:
        per_module, as_text = getattr(self, "_per_module", None), getattr(self, "_as_text", None)
        if per_module is None or as_text is None:
            raise InputError(f"{what} needs the table tr.saved() returned, not a copy made without it",
                             "call it on tr.saved(...) itself")
        return per_module, as_text

    def by_module(self, depth: int | None = None) -> pd.DataFrame:
        """The activation rows summed per module at ``depth``, a level of the model's structure as the
        drawing counts it (default: the default drawing's level; ``attrs["level"]``), biggest first:
        they add up to the memory table's ``saved_activation_bytes``."""
        per_module, _ = self._whole("by_module()")
        return per_module(self, depth)

    def to_text(self) -> str:
        """A headline, then one line per saved value in words, identical layers folded."""
        _, as_text = self._whole("to_text()")
        return str(as_text(self))

    def __str__(self) -> str:
        """``print(tr.saved())``: the folded text; a slice that lost its trace or the columns the text
        reads (``tr.saved()[["kind", "bytes"]]``) prints as the frame it is."""
        if getattr(self, "_as_text", None) is None or not set(SAVED_COLUMNS) <= set(self.columns):
            return super().__str__()
        return self.to_text()
