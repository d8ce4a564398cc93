"""The whole training step of a capture of several graphs (or runs), under one strategy: the ``total``
row of ``memory_table(scope="step")`` and the step's timeline, from the graphs' own caches.

One rule for every view of a several-graph trace: it is the step's (``tr.pieces[k]`` is a view of the
same step), unless ``scope="graph"`` asks for one graph alone.  The step runs every graph's forward in
run order, then the backwards in reverse: what earlier graphs saved is still held, a value crossing a
break is its producer's output (an activation), the eager code between graphs is measured with the
model present (``analysis.real.eager_tape``) and not in a log.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fxviz.analysis.memory.compiled_step import StepMemory, TapeEvent
from fxviz.analysis.memory.program import compiles, step_runs, whole_step
from fxviz.analysis.memory.step_totals import StepPart, StepTotals, gradient_bytes, step_resident, step_totals
from fxviz.analysis.memory.timeline import TIMELINE_COLUMNS, named_event, walk_rows
from fxviz.analysis.real.eager_tape import eager_tape, needs_tape
from fxviz.analysis.strategy.cache import Cache, GraphCache
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.units import is_missing
from fxviz.sources.graphs import Capture

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["WholeStep", "timeline_frame"]


class WholeStep:
    """The step of ``capture`` over its graphs' caches (``graph_cache(index)``), cached in ``cache``."""

    def __init__(self, capture: Capture, graph_cache: Callable[[int], GraphCache], cache: Cache) -> None:
        self.capture, self.graph_cache, self.cache = capture, graph_cache, cache

    @property
    def caches(self) -> list[GraphCache]:
        """The graphs with a backward (a graph without one saves nothing and is in no total)."""
        return [self.graph_cache(g.index) for g in self.capture.graphs if g.has_backward]

    def tape(self) -> Sequence[TapeEvent] | None:
        """What the step does outside its graphs, measured once; None where nothing runs there or
        there is no model to run (a log)."""
        if self.capture.fn is None or not needs_tape(self.capture):
            return None
        return self.cache.get(("eager_tape",), lambda: eager_tape(self.capture))

    def compiled(self, s: Strategy) -> StepMemory | None:
        """The step's compiled code under ``s``, simulated over every run (None where a graph has none)."""
        return self.cache.get(("whole_step", s), lambda: whole_step(self.capture, [
            (c.graph, c.partition(s), c.compiled(s)) for c in self.caches], self.tape()))

    def totals(self, s: Strategy, tables: Mapping[int, pd.DataFrame], lowered: bool) -> StepTotals:
        """The ``total`` row's whole-step columns under ``s`` (``lowered``: from the compiled step)."""
        parts = [self._part(c, s, tables[c.graph.index]) for c in self.caches]
        code = compiles(self.capture.graphs[0])
        copies: list[Any] = [part.row.get("layout_copy_bytes") for part in parts]
        known = [int(c) for c in copies if not is_missing(c)]
        total_copies = sum(c * part.runs for c, part in zip(known, parts)) if len(known) == len(copies) else None
        return step_totals(parts, step_resident(self.capture, parts), self.compiled(s) if lowered and code else None,
                           code, total_copies)

    def _part(self, c: GraphCache, s: Strategy, table: pd.DataFrame) -> StepPart:
        row = table[table["strategy"] == s.name].iloc[0].to_dict()
        return StepPart(c.graph, c.partition(s), row, max(1, len(c.graph.runs)))

    def timeline_rows(self, s: Strategy, tables: Mapping[int, pd.DataFrame], unfused: bool) -> list[dict[str, Any]]:
        """The step's rows in run order: each compiled code line (its graph in ``piece``), or each node
        of the unfused graphs, a run's rows on top of what earlier runs saved and later runs' gradients."""
        parts = [self._part(c, s, tables[c.graph.index]) for c in self.caches]
        resident = step_resident(self.capture, parts)
        if not unfused and compiles(self.capture.graphs[0]):
            step = self.compiled(s)
            if step is None:
                return []
            runs, _ = step_runs(self.capture, [(c.graph, c.partition(s), c.compiled(s)) for c in self.caches])
            rows = []
            counter = {"forward": 0, "backward": 0}
            for e in step.pool.events:
                c = self.caches[runs[e.run].graph] if e.run >= 0 else None
                where = named_event(c.graph, c.partition(s), c.compiled(s), step, e) if c is not None else {}
                rows.append({"strategy": s.name, "phase": e.phase, "step": counter[e.phase],
                             "piece": c.graph.index if c is not None else None, "node": None, "joint_node": None,
                             "op": None, "module": None, **where, "line": e.line, "live_bytes": e.high,
                             "resident_bytes": resident, "total_bytes": e.high + resident})
                counter[e.phase] += 1
            return rows
        return self._walk_rows(s, parts, resident)

    def _walk_rows(self, s: Strategy, parts: Sequence[StepPart], resident: int) -> list[dict[str, Any]]:
        order = sorted((seq, k) for k, part in enumerate(parts) for seq, _ in part.graph.runs) \
            or [(k, k) for k in range(len(parts))]
        ks = [k for _, k in order]
        saved = [int(part.row["saved_activation_bytes"]) for part in parts]
        grads = [gradient_bytes(part.graph, part.partition) for part in parts]
        out: list[dict[str, Any]] = []
        counter = {"forward": 0, "backward": 0}
        sequence = [(i, "forward") for i in range(len(ks))] + [(i, "backward") for i in reversed(range(len(ks)))]
        for i, phase in sequence:
            k = ks[i]
            held = sum(saved[j] for j in ks[:i]) + (sum(grads[j] for j in ks[i + 1:]) if phase == "backward" else 0)
            for r in walk_rows(parts[k].graph, parts[k].partition):
                if r["phase"] != phase:
                    continue
                live = int(str(r["live_bytes"])) + held
                out.append({**r, "step": counter[phase], "piece": parts[k].graph.index, "live_bytes": live,
                            "resident_bytes": resident, "total_bytes": live + resident})
                counter[phase] += 1
        return out


def timeline_frame(rows: list[dict[str, Any]], skipped: list[str], program: str) -> pd.DataFrame:
    """The timeline's frame from its rows (``TIMELINE_COLUMNS``)."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=TIMELINE_COLUMNS)
    for c in ("step", "live_bytes", "resident_bytes", "total_bytes"):
        df[c] = df[c].astype("int64")
    df["piece"] = pd.array(df["piece"].tolist(), dtype="Int64")
    df.attrs["skipped"] = skipped
    df.attrs["program"] = program
    return df
