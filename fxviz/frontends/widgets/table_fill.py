"""The explorer's memory table, filled without holding up the first picture: in a notebook kernel
(a running asyncio loop) one strategy per loop turn, its rows shown as they come with a progress
note; without a running loop (plain Python, tests) at once."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fxviz.core.errors import FxvizError
from fxviz.payloads.panels import table_data

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.analysis.real.measure import Measured
    from fxviz.api.facade import Trace
    from fxviz.frontends.widgets.pane import GraphPane

__all__ = ["TableFill"]

TableKey = tuple[Any, ...]


class TableFill:
    """The tables computed (``tables``, by trace id and strategies) and those being computed
    (``fills``).  ``wanted()``: the key of the table the pane shows now (None: none), so a table
    finished late never replaces another graph's."""

    def __init__(self, pane: GraphPane, wanted: Callable[[], TableKey | None]) -> None:
        self.pane = pane
        self.wanted = wanted
        self.tables: dict[TableKey, dict[str, Any]] = {}
        self.fills: dict[TableKey, asyncio.Task[None]] = {}
        self.measured: tuple[Trace, Measured] | None = None  # the trace measured, and its step

    def measure(self, tr: Trace, measured: Measured) -> None:
        """Show ``measured`` (``tr.measure()``) in ``tr``'s tables from now on (the others' stay)."""
        self.measured = (tr, measured)
        self.tables.clear()

    def measured_of(self, tr: Trace) -> Measured | None:
        """The measurement of ``tr`` itself, or None (another trace: the other capture mode, a piece)."""
        return self.measured[1] if self.measured is not None and self.measured[0] is tr else None

    def table(self, tr: Trace, key: TableKey, strategies: list[str]) -> dict[str, Any]:
        """The memory table of ``strategies``: from the cache; else, in a running event loop (a
        notebook kernel), a progress note now and the rows filled in by ``_fill``; else computed here."""
        if key in self.tables:
            return self.tables[key]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self.pane.busy = "computing the memory table (first time only)…"
            try:
                self.tables[key] = _table_now(tr, strategies, self.measured_of(tr))
            finally:
                self.pane.busy = ""
            return self.tables[key]
        if key not in self.fills:
            self.fills[key] = loop.create_task(self._fill(tr, key, strategies))
        return _progress({}, 0, strategies)

    async def _fill(self, tr: Trace, key: TableKey, strategies: list[str]) -> None:
        """Compute the table one strategy per event-loop turn (partitions are cached on the
        Trace, so the last, full table only adds the rows); show the rows so far as they come."""
        try:
            for i in range(len(strategies)):
                await asyncio.sleep(0)  # let the kernel send the picture and answer the front-end
                if i + 1 == len(strategies):
                    self.tables[key] = _table_now(tr, strategies, self.measured_of(tr))
                    break
                partial = _table_now(tr, strategies[:i + 1], self.measured_of(tr))
                if "rows" not in partial:  # the table cannot be made: say so at once
                    self.tables[key] = partial
                    break
                # no "best" marks until every row is in: the best of the first rows may not be
                partial["rows"] = [{**r, "best": [False] * len(r["best"])} for r in partial["rows"]]
                partial["best_note"] = ""
                self._show(key, _progress(partial, i + 1, strategies))
        except Exception as exc:  # a bug: say so in the pane, not as an unretrieved task exception
            self.tables[key] = {"message": f"fxviz could not compute the memory table: {type(exc).__name__}: {exc}"}
        finally:
            self.fills.pop(key, None)
        self._show(key, self.tables[key])

    def _show(self, key: TableKey, table: dict[str, Any]) -> None:
        """Put a (partial) table in the pane if it belongs to the graph and strategies shown now."""
        if self.wanted() == key:
            self.pane.table = table

    async def filled(self) -> None:
        """Wait until every table being computed in the background is complete."""
        while self.fills:
            await asyncio.gather(*list(self.fills.values()), return_exceptions=True)


def _table_now(tr: Trace, strategies: Sequence[str], measured: Measured | None = None) -> dict[str, Any]:
    try:
        return table_data(tr.memory_table(list(strategies), scope="graph", measured=measured), tr, measured)
    except FxvizError as exc:
        return {"message": f"no memory table: {exc.message}"}


def _progress(partial: dict[str, Any], done: int, strategies: list[str]) -> dict[str, Any]:
    """The rows computed so far and a note saying which strategy is being computed."""
    note = (f"computing the memory table: strategy {done + 1} of {len(strategies)} "
            f"({strategies[done]})…")
    return {**partial, "message": note, "progress": {"done": done, "total": len(strategies)}}
