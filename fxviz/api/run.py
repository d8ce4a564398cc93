"""``Run``: every graph a real ``torch.compile`` run logged (``TORCH_TRACE=dir``), on every rank.

``load_logs(path)`` streams each file once into an index (``logs.index``: per compile its frame,
source line, status, reasons, node and saved counts, saved bytes from the printed signatures, and
the byte offsets of its graph payloads), never the payloads themselves, and without torch: the
listing (``graphs``, ``totals``, ``summary``) needs no rebuild.  ``Run.trace(rank, compile_id)``
rebuilds one compile's graphs when a view asks for it (``capture.from_log``) and returns the same
``Trace`` ``fxviz.trace`` returns, with the run's own partition as strategy ``"logged"``; ``Run.logged`` reads
that partition's memory row and saved table from the log's text alone, in seconds where the rebuild takes
minutes (``api.logged``, issue 46), and ``Run.cache`` keeps what views computed for the next view.
"""

from __future__ import annotations

import os
import pathlib
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fxviz.api.logged import REBUILD_SECONDS_PER_NODE, LoggedView
from fxviz.core.errors import Blank, Do, FxvizWarning, LogError, Say, Span
from fxviz.sources.log import totals
from fxviz.sources.log.cache import LogCache
from fxviz.sources.log.index import (
    GRAPH_COLUMNS,
    GRAPH_WORDS,
    READ_KINDS,
    STATUSES,
    Compile,
    FileIndex,
    Piece,
    assign_ranks,
    graph_rows,
)
from fxviz.sources.log.knapsack import KNAPSACK_COLUMNS, read_knapsack
from fxviz.sources.log.reader import log_files, read_payload, warn_other_torch
from fxviz.sources.log.totals import TOTAL_COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fxviz.analysis.strategy.strategies import StrategiesLike
    from fxviz.api.facade import Trace

__all__ = ["Run", "load_logs", "graph_rows", "GRAPH_COLUMNS", "READ_KINDS", "STATUSES", "TOTAL_COLUMNS"]

_GRAPHS = Do("graphs", on="run", attr=True)
"""Where a run lists its graphs (``run.graphs``; ``fxviz logs DIR``), for hints."""
_ANOTHER_COMPILE = Do("trace", (("compile_id", Blank("'F/N'", "F/N")),), on="run")


class Run:
    """Every graph of a logged run.  ``graphs``: one row per compile (and piece), with its status."""

    def __init__(self, path: pathlib.Path, files: list[FileIndex], cache: LogCache | None = None) -> None:
        self.path = path
        self.cache = cache
        """Where views of this run keep what they worked out for the next view (``sources.log.cache``; None:
        nothing kept).  ``load_logs(path, cache=True)`` sets one; the CLI always does."""
        self.progress: Callable[[str], None] | None = None
        """Told, before a rebuild that takes more than a couple of seconds, what is rebuilt and for how long
        (the CLI prints it on stderr)."""
        self._files = files
        self.notes = assign_ranks(files)  # what the reader had to decide (a file that names no rank)
        self._compiles: list[Compile] = [c for fi in files for c in fi.compiles.values()]
        self._cache: dict[Any, Any] = {}
        self.skipped: dict[str, int] = {}
        for fi in files:
            for kind, n in fi.stats.kinds.items():
                if kind not in READ_KINDS:
                    self.skipped[kind] = self.skipped.get(kind, 0) + n
        self.torch_versions = sorted({fi.torch_version for fi in files if fi.torch_version})
        """The torch versions that wrote the log (its ``torch_version`` records), one per file at most."""

    @property
    def ranks(self) -> list[int]:
        return sorted({c.rank for c in self._compiles})

    @property
    def compile_count(self) -> int:
        """Dynamo compiles the log records, over every rank."""
        return len(self._compiles)

    @property
    def aot_graph_count(self) -> int:
        """AOT graphs (pieces with a joint, inference or forward graph) the log holds, over every rank."""
        return sum(len(c.pieces) for c in self._compiles)

    def rows(self) -> list[dict[str, Any]]:
        """The rows of ``graphs`` as dicts, by rank (no pandas: what ``fxviz logs`` prints)."""
        return sorted((row for c in self._compiles for row in graph_rows(c)), key=lambda r: r["rank"])

    @property
    def graphs(self) -> pd.DataFrame:
        """One row per compile and piece: rank, compile id, frame and source line, status (``STATUSES``),
        which AOT graphs the log holds, node and saved counts, the activation bytes the backward
        reads (``saved_bytes``, from the printed signatures), failure, recompile and graph-break reasons."""
        import pandas as pd

        df = pd.DataFrame(self.rows(), columns=GRAPH_COLUMNS)
        for col in ("nodes", "saved", "saved_bytes"):
            df[col] = df[col].astype("Int64")
        for col in ("frame", "source", "backend", "fail_type", "fail_reason", "recompile_reason",
                    "graph_break_reason", "damaged"):
            df[col] = pd.Series([None if pd.isna(v) else v for v in df[col]], index=df.index, dtype="object")
        return df

    @staticmethod
    def _holds(p: Piece) -> bool:
        """Whether the log holds a graph of ``p`` to rebuild (a joint or an inference graph, or the forward
        graph alone of a run that stopped before its backward was compiled: issue 46)."""
        return any(k in p.offsets for k in ("aot_joint_graph", "aot_inference_graph", "aot_forward_graph"))

    def _first(self, rank: int) -> tuple[Compile, Piece] | None:
        """The first graph with a backward on ``rank``, else its first inference graph, else its first forward
        graph logged alone."""
        mine = [(c, p) for c in self._compiles if c.rank == rank for p in c.pieces]
        for kind in ("aot_joint_graph", "aot_inference_graph", "aot_forward_graph"):
            found = next(((c, p) for c, p in mine if kind in p.offsets), None)
            if found is not None:
                return found
        return None

    def holds(self) -> str:
        """What the log holds, in a few words (``3 compile(s): 2 failed, 1 eager frame``)."""
        counts: dict[str, int] = {}
        for c in self._compiles:
            for s in ([p.status for p in c.pieces] if c.pieces and c.status != "failed" else [c.status]):
                counts[s] = counts.get(s, 0) + 1
        return f"{self.compile_count} compile(s)" + (": " + ", ".join(f"{n} {s}" for s, n in counts.items())
                                                      if counts else "")

    def _some_compile(self) -> None:
        """A log without a compile (a torch.export run without ``run_decompositions()``) is one ``LogError``."""
        if not self.ranks:  # issue 46: every view said ``internal error: StopIteration``
            raise LogError(f"the log holds no compiled graph ({self.records()})",
                           "log a torch.compile run with TORCH_TRACE=dir; a torch.export log holds an AOT graph only "
                           "after ep.run_decompositions()")

    def records(self) -> str:
        """The log's records by kind, the most common first (``412 records: 300 describe_tensor, ...``)."""
        kinds: dict[str, int] = {}
        for fi in self._files:
            for kind, n in fi.stats.kinds.items():
                kinds[kind] = kinds.get(kind, 0) + n
        top = sorted(kinds.items(), key=lambda kv: -kv[1])
        return f"{sum(kinds.values())} records: " + ", ".join(f"{n} {k}" for k, n in top[:5]) + (
            ", ..." if len(top) > 5 else "")

    def _find(self, rank: int | None, compile_id: str | None, piece: int) -> tuple[Compile, Piece, list[str]]:
        """The graph a view asked for; with no rank, rank 0's, else the first rank's that has it (said in the notes)."""
        self._some_compile()
        ranks = self.ranks if rank is None else [rank]
        if rank is not None and rank not in self.ranks:
            raise LogError(f"the log has no rank {rank}", f"ranks in this log: {', '.join(map(str, self.ranks))}")
        found = [(r, self._pick(r, compile_id, piece)) for r in ranks]
        hits = [(r, hit) for r, hit in found if isinstance(hit, tuple)]
        if not hits:
            reason = next((str(hit) for _, hit in found if isinstance(hit, str)), "no such graph")
            having = [r for r in self.ranks if isinstance(self._pick(r, compile_id, piece), tuple)]
            hint = (Say(f"rank(s) {', '.join(map(str, having))} have it: ",
                        Do("trace", (("rank", having[0]),), on="run")) if having
                    else Say(f"the log holds {self.holds()}; see ", _GRAPHS, " for what it compiled"))
            raise LogError(reason, hint)
        r, (c, p) = hits[0]
        notes = []
        if rank is None and r != 0:
            why = "logged no such graph" if 0 in self.ranks else "is not in the log"
            notes.append(f"rank 0 {why}: this is rank {r}'s (ranks with it: {', '.join(str(x) for x, _ in hits)})")
        return c, p, notes

    def _pick(self, rank: int, compile_id: str | None, piece: int) -> tuple[Compile, Piece] | str:
        """The graph on ``rank``, or why there is none there."""
        mine = [c for c in self._compiles if c.rank == rank]
        if compile_id is None:
            first = self._first(rank)
            return first if first is not None else f"rank {rank} logged no AOT graph ({self._what(mine)})"
        c = next((c for c in mine if c.compile_id == str(compile_id)), None)
        if c is None:
            ids = ", ".join(dict.fromkeys(c.compile_id for c in mine))
            return f"rank {rank} has no compile {compile_id!r} (compile ids there: {ids})"
        if not c.pieces or not any(self._holds(p) for p in c.pieces):
            why = f"{c.fail_type}: {c.fail_reason}" if c.status == "failed" else STATUSES[c.status]
            return f"compile {compile_id} on rank {rank} has no AOT graph to rebuild ({c.status}: {why})"
        if not 0 <= piece < len(c.pieces):
            return Say(f"compile {compile_id} has {len(c.pieces)} piece(s), not piece {piece} (use ",
                       Do("trace", (("piece", Span(0, len(c.pieces) - 1)),), on="run"), ")")
        if not self._holds(c.pieces[piece]):
            return (f"compile {compile_id} piece {piece} is a {c.pieces[piece].status}: the log holds its forward and "
                    "backward graphs but no joint graph to rebuild")
        return c, c.pieces[piece]

    @staticmethod
    def _what(compiles: list[Compile]) -> str:
        counts: dict[str, int] = {}
        for c in compiles:
            counts[c.status] = counts.get(c.status, 0) + 1
        return ", ".join(f"{n} {s}" for s, n in counts.items()) or "no compile"

    def trace(self, rank: int | None = None, compile_id: str | None = None, piece: int = 0) -> Trace:
        """The ``Trace`` of one logged graph (default: the first graph with a backward on rank 0, or on
        the first rank that has one, which the trace's warnings say): every view of ``fxviz.trace``
        works on it; strategy ``"logged"`` is the run's own partition."""
        from fxviz.api.facade import Trace
        from fxviz.sources.log.rebuild.from_log import capture_from_log

        c, p, notes = self._find(rank, compile_id, piece)
        key = (c.rank, c.compile_id, c.pieces.index(p))
        if key not in self._cache:
            kind = "aot_joint_graph" if "aot_joint_graph" in p.offsets else "aot_inference_graph"
            nodes = p.placeholders.get(kind, 0) + p.ops.get(kind, 0)
            if self.progress is not None and nodes * REBUILD_SECONDS_PER_NODE > 2:
                self.progress(f"rebuilding compile {c.compile_id} of rank {c.rank} ({nodes:,} nodes) on fake tensors, "
                              f"about {nodes * REBUILD_SECONDS_PER_NODE:.0f} s ...")
            self._cache[key] = Trace(capture_from_log(c, p, notes, self.cache))
        result: Trace = self._cache[key]
        return result

    def logged(self, rank: int | None = None, compile_id: str | None = None, piece: int = 0) -> LoggedView:
        """One logged graph as its run partitioned it, read from the log's text without a rebuild
        (``api.logged``): ``.memory_table()``'s ``logged`` row and ``.saved()`` in about a second on a
        64-layer step (issue 46), and what earlier views of this log kept (:attr:`cache`).  The graph is
        the one :meth:`trace` would rebuild; ``Declined`` (a ``LogError``) where the text is not enough."""
        c, p, notes = self._find(rank, compile_id, piece)
        return LoggedView(c, p, self.cache, notes)

    def traces(self, rank: int | None = None) -> list[Trace]:
        """The whole step of one rank (default: rank 0, or the first rank with a graph with a backward):
        a ``Trace`` of each frame's graphs with a backward, in compile order (``fxviz.diff`` of two runs
        pairs them).  A frame whose every recompile was for new input sizes has one compile per shape
        variant, and a step runs one of them: the step takes its last compile (:meth:`step_note` says
        which it left out); a frame recompiled for anything else keeps all (``totals.last_per_frame``).
        A compile dynamo reused is in the log once: the log does not say how often it ran."""
        rank = self._step_rank(rank)
        return [self.trace(rank, c.compile_id, k) for c, k in self._step_pieces(rank)]

    def _backward_pieces(self, rank: int) -> list[tuple[Compile, int]]:
        """``rank``'s graphs with a backward that a view can rebuild: their joint graph is logged (a
        compile whose backward never ran has one too; a cache hit has none, while the totals, which
        read the forward and backward graphs' signatures, count it)."""
        return [(c, k) for c in self._compiles if c.rank == rank for k, p in enumerate(c.pieces)
                if "aot_joint_graph" in p.offsets]

    def _step_pieces(self, rank: int) -> list[tuple[Compile, int]]:
        """One step's graphs with a backward (``totals.last_per_frame``: a shape-variant frame's last)."""
        return totals.last_per_frame(self._backward_pieces(rank))

    def step_note(self, rank: int | None = None) -> Say | None:
        """Which compiles the step leaves out, in words (None when every graph is in it): a frame
        recompiled for new input sizes N times is N variants of one part of the step."""
        rank = self._step_rank(rank)
        kept = {id(c) for c, _ in self._step_pieces(rank)}
        left: dict[tuple[Any, Any], list[str]] = {}
        chosen: dict[tuple[Any, Any], str] = {}
        for c, _ in self._backward_pieces(rank):
            frame_key = (c.key[0], c.key[3])
            if id(c) in kept:
                chosen[frame_key] = c.compile_id
            else:
                left.setdefault(frame_key, []).append(c.compile_id)
        if not left:
            return None
        parts = [f"{chosen[k]} of frame {k[0]}" + (f" (compiled autograd {k[1]})" if k[1] is not None else "")
                 + " (" + (f"its earlier compile {ids[0]} is a recompile" if len(ids) == 1
                           else f"its {len(ids)} earlier compiles, {totals.id_span(ids)}, are recompiles")
                 + " for other input sizes)" for k, ids in left.items() if k in chosen]
        return Say("a step runs one shape variant of a frame; the step here takes each frame's last, "
                   + "; ".join(parts) + "; each compile alone: ", _ANOTHER_COMPILE)

    def step_graph_count(self, rank: int | None = None) -> int:
        """How many graphs with a backward one rank's step has (default: the rank :meth:`traces`
        takes), from the index: nothing rebuilt."""
        return len(self._step_pieces(self._step_rank(rank)))

    def _step_rank(self, rank: int | None) -> int:
        """``rank``, or rank 0 when it has a graph with a backward, else the first rank that has one; a rank
        the log lacks, or one with no graph with a backward, is a ``LogError`` naming the ranks that have one."""
        self._some_compile()
        having = [r for r in self.ranks if self._backward_pieces(r)]
        if rank is not None and rank in having:
            return rank
        if rank is not None:
            mine = [c for c in self._compiles if c.rank == rank]
            what = "is not in the log" if not mine else f"has no graph with a backward ({self._what(mine)})"
            hint = (Say("ranks with one: ", ", ".join(map(str, having))) if having
                    else Say("the log holds ", self.holds(), "; see ", _GRAPHS, " for what it compiled"))
            raise LogError(f"rank {rank} {what}", hint)
        if not having:
            raise LogError(f"the log has no graph with a backward ({self.holds()})",
                           Say("see ", _GRAPHS, " for what it compiled"))
        return 0 if 0 in having else having[0]

    def memory_table(self, rank: int | None = None, strategies: StrategiesLike | None = None) -> pd.DataFrame:
        """The memory table of one rank's whole step, as ``Trace.memory_table(scope="step")`` gives a
        model's: one row per graph with a backward (``piece``: its place in :meth:`traces`) and
        strategy (default each graph's offered ones, ``logged`` first), then one ``total`` row per
        strategy over every graph.  Each graph counted once: the log does not say how often it ran."""
        from fxviz.analysis.memory.step import PieceTable, step_table

        traces = self.traces(rank)
        chosen = strategies if strategies is not None else list(dict.fromkeys(
            s.name for t in traces for s in t.offered))
        return step_table([PieceTable(i, 1, True, t.memory_table(chosen, scope="graph")) for i, t in enumerate(traces)])

    def knapsack(self, rank: int | None = None, compile_id: str | None = None, piece: int = 0) -> pd.DataFrame | None:
        """The run's own knapsack for one graph (``logs.knapsack``: each value its activation-memory budget's
        solver weighed, its bytes, runtime and whether the run saved or recomputed it; the budget and sizes in
        ``attrs["caption"]``); None when the log holds none (torch writes it only when min-cut solved a
        budget below 1 with ``AOT_PARTITIONER_DEBUG=1`` set)."""
        import pandas as pd

        c, p, _ = self._find(rank, compile_id, piece)
        if p.min_cut_offset < 0:
            return None
        k = read_knapsack(read_payload(c.file, p.min_cut_offset))
        df = pd.DataFrame(k.rows, columns=KNAPSACK_COLUMNS)
        df.attrs["caption"] = k.caption
        return df

    def compare_ranks(self, compile_id: str | None = None, piece: int = 0) -> pd.DataFrame:
        """Where the ranks' graphs of one compile differ: one row per difference (``what``:
        ``nodes``, ``op``, ``shape``, ``saved_bytes``), one column per rank.  Empty when they agree."""
        import pandas as pd
        if compile_id is None:
            compile_id = self._find(None, None, piece)[0].compile_id
        traces = {}
        for r in self.ranks:
            try:
                traces[r] = self.trace(r, compile_id, piece)
            except LogError:
                continue
        if len(traces) < 2:
            raise LogError(f"compile {compile_id or '(first with a backward)'} is on {len(traces)} rank(s): "
                           "nothing to compare", f"ranks in this log: {', '.join(map(str, self.ranks))}")
        cols = [f"rank {r}" for r in traces]
        rows: list[dict[str, Any]] = []

        def add(what: str, node: str | None, values: list[Any]) -> None:
            if len({repr(v) for v in values}) > 1:
                rows.append({"what": what, "node": node, **dict(zip(cols, values))})

        infos = {r: t.graph.info for r, t in traces.items()}
        add("nodes", None, [len(i) for i in infos.values()])
        names = list(dict.fromkeys(n for i in infos.values() for n in i))
        for n in names:
            add("op", n, [i[n].short_op if n in i else None for i in infos.values()])
            add("shape", n, [i[n].shape if n in i else None for i in infos.values()])
        saved = []
        for t in traces.values():
            table = t.memory_table(["logged"], scope="graph") if t.graph.logged is not None else None
            saved.append(int(table["saved_activation_bytes"].iloc[0]) if table is not None
                         and "saved_activation_bytes" in table else None)
        add("saved_bytes", None, saved)
        return pd.DataFrame(rows, columns=["what", "node"] + cols)

    def eager_frames(self, rank: int | None = None) -> list[str]:
        """The frames dynamo compiled nothing for and ran as plain Python (``forward (model.py:32):
        why``): what they compute outside the graphs they call is in no graph of the log."""
        return totals.eager_frames(self._compiles, rank)

    def total_rows(self) -> list[dict[str, Any]]:
        """``totals`` as dicts (no pandas, no torch: every number from the index)."""
        return totals.total_rows(self._compiles, self.ranks)

    def totals(self) -> pd.DataFrame:
        """Per rank: graphs with a forward and a backward, inference-only graphs, frames run eagerly,
        failed compiles, and the activation bytes one step saves (what each backward reads from its
        forward, by storage, from the graphs' printed signatures) summed over the step's graphs (a frame
        recompiled only for new input sizes counts its last compile: ``totals.last_per_frame``), beside
        ``all_compiles_saved_bytes`` over every compile and ``offloaded_bytes``;
        ``saved_bytes_exact`` is False where a size or a storage was not determined (see ``summary``).
        The log records compiles, not calls: a graph dynamo reused is counted once (``runs_known``)."""
        import pandas as pd

        return pd.DataFrame(self.total_rows(), columns=TOTAL_COLUMNS)

    def summary(self) -> str:
        """The whole run in a few lines: graphs per rank, the frames that fell back to eager (what
        they compute is in no graph), and per rank the activation bytes one step saves over its graphs
        (``totals.summary_lines``; each counted once: the log records compiles, not how often one ran)."""
        written = f", written by torch {' and '.join(self.torch_versions)}" if self.torch_versions else ""
        missing = sorted(set(range(max(self.ranks) + 1)) - set(self.ranks)) if self.ranks else []
        absent = (f" (no log of rank {', '.join(map(str, missing))}: the directory has no file for it)"
                  if missing else "")
        lines = [f"{self.path}: {len(self.ranks)} rank(s){absent}, {self.compile_count} compile(s), "
                 f"{self.aot_graph_count} AOT graph(s){written}"]
        if not self._compiles:  # issue 46: say what it does hold (a torch.export log without decompositions)
            lines.append(f"no compiled graph: {self.records()}; a torch.export log holds an AOT graph only after "
                         "ep.run_decompositions()")
        return "\n".join(lines + totals.summary_lines(self._compiles, self.ranks) + self.notes)

    def __repr__(self) -> str:
        skipped = (f", skipped {sum(self.skipped.values())} records of {len(self.skipped)} kinds"
                   if self.skipped else "")
        return (f"<fxviz.Run {self.path}: {len(self.ranks)} rank(s), {self.compile_count} compile(s), "
                f"{self.aot_graph_count} AOT graph(s){skipped}>")


def _warn_read(fi: FileIndex) -> None:
    """One warning per file for each kind of damage the reading met: a cut, corrupt lines, graphs whose
    payload no longer matches the md5 torch wrote for it (issue 46: every graph payload is checked)."""
    name = os.path.basename(fi.path)
    if fi.stats.truncated:
        warnings.warn(f"{name} is truncated (it ends inside a record): its last graph may be incomplete", FxvizWarning,
                      stacklevel=3)
    if fi.stats.corrupt_lines:
        warnings.warn(f"{name}: skipped {fi.stats.corrupt_lines} corrupt line(s)", FxvizWarning, stacklevel=3)
    damaged = [f"{c.compile_id} {GRAPH_WORDS[k]}" for c in fi.compiles.values() for p in c.pieces for k in p.damaged]
    if damaged:
        shown = ", ".join(damaged[:4]) + (", ..." if len(damaged) > 4 else "")
        warnings.warn(f"{name}: {len(damaged)} graph(s) do not match the md5 torch wrote for them ({shown}): changed "
                      "after the run wrote them; views of them read the changed text", FxvizWarning, stacklevel=3)


def load_logs(path: str | os.PathLike[str], on_compile: Callable[[Compile], None] | None = None,
              cache: bool | LogCache = False) -> Run:
    """Read a ``TORCH_TRACE`` directory (one file per rank) or one log file into a :class:`Run`.

    Each file is streamed once (memory stays bounded whatever its size), without torch.  A missing
    path, or one with no trace log at all, raises ``LogError``; a readable log is always read, whatever
    it compiled (``Run.graphs`` says each compile's status).  A file that is not a trace log is skipped;
    a truncated or partly corrupt file, or one from a torch fxviz does not support, gives a
    ``FxvizWarning``.  ``on_compile(c)`` sees each compile as its reading ends (``graph_rows(c)``: its rows).
    ``cache``: keep what views work out on disk for the next view of the same log (``Run.cache``; True: under
    ``$FXVIZ_CACHE_DIR`` or ``~/.cache/fxviz``).  Strategy rows kept are this session's torch config's: leave it
    off where the config changes between views.
    """
    p = pathlib.Path(path)
    indexes = []
    strays: list[str] = []  # files that are not trace logs: one warning for them all, after the logs
    for f in log_files(p):
        fi = FileIndex(f)
        fi.read(on_compile)
        if fi.stats.records == 0:
            strays.append(os.path.basename(f))
            continue
        _warn_read(fi)
        indexes.append(fi)
    if not indexes:
        what = f" ({len(strays)} file(s), none a trace log)" if strays else ""
        raise LogError(f"{p} holds no TORCH_TRACE log records{what}",
                       "run the training with TORCH_TRACE=dir and pass dir")
    if strays:
        warnings.warn(f"{len(strays)} file(s) are not TORCH_TRACE logs (no records): skipped ("
                      + ", ".join(strays[:3]) + (", ..." if len(strays) > 3 else "") + ")", FxvizWarning, stacklevel=2)
    run = Run(p, indexes, LogCache() if cache is True else cache or None)
    warn_other_torch(run.torch_versions)  # issue 33.2: results are the reading torch's; one warning names both
    return run
