"""The explorer's measured step (``fxviz.explore(tr, measure=True)`` or ``ex.show_measured(m)``):
what the real compiled step keeps for its backward (``Trace.measure()``) shown beside the estimates,
as the report shows it: the memory table's twin columns and the step's storages under the table
(``explorer.js``'s ``renderMeasured``), the doctor's findings on what it keeps beyond the partition."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.analysis.real.measure import Measured
    from fxviz.api.facade import Trace
    from fxviz.frontends.widgets.table_fill import TableFill

__all__ = ["MeasuredView"]


class MeasuredView:
    """``Explorer.show_measured``, apart from the explorer's own module (a mixin of ``Explorer``)."""

    if TYPE_CHECKING:
        _fill: TableFill
        _doctors: dict[tuple[Any, ...], dict[str, Any]]
        _shown: tuple[Any, ...] | None
        _shown_trace: tuple[Any, ...] | None

        @property
        def trace(self) -> Trace: ...

        def _refresh(self) -> None: ...

    def show_measured(self, measured: Measured | bool = True) -> Measured:
        """Show the real compiled step of the trace shown beside its estimates: ``measured`` from
        ``Trace.measure()``, or True to run it now (it compiles).  Returns the measurement.  The
        twin sits on the row of the strategy the step used; after graph breaks, under the first
        graph's table (the step is measured whole)."""
        tr = self.trace
        m = tr.measure() if measured is True else measured
        if m is False:
            raise TypeError("show_measured needs a Trace.measure() result or True")
        self._fill.measure(tr, m)
        self._doctors.clear()
        self._shown = self._shown_trace = None
        self._refresh()
        return m
