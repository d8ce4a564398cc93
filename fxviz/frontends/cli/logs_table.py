"""``fxviz logs DIR``: the graphs of a logged run as a table printed while the log is read, then the run."""

from __future__ import annotations

import argparse
import sys
from typing import Any, ClassVar

from fxviz.api.run import graph_rows
from fxviz.frontends.cli.options import command, opt
from fxviz.frontends.cli.source import open_run
from fxviz.frontends.cli.words import wrap
from fxviz.sources.log.totals import guard_failures  # loaded with the log anyway; not at the CLI's start-up

__all__ = ["cmd_logs", "StreamedTable"]


@command("logs", "the graphs of a logged run (TORCH_TRACE=dir): one row per compiled graph and rank, printed as "
                 "each compile is read; then the whole run (graphs, frames that ran as plain Python, totals)",
         opt("dir", help="the directory TORCH_TRACE=dir wrote (one file per rank), or one file"))
def cmd_logs(args: argparse.Namespace) -> int:
    """The graphs of a logged run, streamed, then the run's summary and how to read one graph."""
    table = StreamedTable(sys.stdout, args.dir)

    def show(compile_: Any) -> None:  # imported here: a missing path is said before torch loads

        table.rows(graph_rows(compile_), compile_.torch_version)

    run = open_run(args.dir, on_compile=show)
    table.notes()
    print()
    print("\n".join(wrap(line) for line in run.summary().splitlines()))
    if run.skipped:
        print(wrap("skipped record kinds: " + ", ".join(f"{k} ({n})" for k, n in sorted(run.skipped.items()))))
    print(wrap("read one graph: fxviz table|draw|doctor|report --logs DIR --graph ID [--rank N]"))
    return 0


class StreamedTable:
    """The rows of ``Run.graphs`` printed one at a time under a fixed header (which names the torch that
    wrote the log), in 100 columns: numbers right-aligned under their names, long text cut, each row's
    status as ``Run.graphs`` has it; failures, graph-break and recompile reasons as numbered notes after
    the table.  A row completed by a record after its compile's metrics is printed again."""

    WIDTHS: ClassVar[dict[str, int]] = {"rank": 4, "graph": 8, "frame": 21, "line": 18, "backend": 9,
                                        "status": 12, "nodes": 6, "saved": 5, "notes": 6}
    NOTED = ("fail_reason", "graph_break_reason", "recompile_reason", "damaged")

    def __init__(self, out: Any, where: str) -> None:
        self.out, self.where = out, where
        self.shown: dict[tuple[Any, ...], dict[str, Any]] = {}  # (rank, compile id, piece) -> the row printed
        self.reasons: dict[tuple[str, str], int] = {}  # (compile id, what) -> note number
        self.header = False
        self.noted = False

    @staticmethod
    def _cut(value: Any, width: int, tail: bool = False) -> str:
        text = "" if value is None or value != value else str(value)  # None and NaN: empty
        if len(text) <= width:
            return text
        return "…" + text[-(width - 1):] if tail else text[:width - 1] + "…"

    def _cells(self, r: dict[str, Any]) -> dict[str, Any]:
        mark = ""
        for what in self.NOTED:
            if r[what] or (what == "fail_reason" and r["fail_type"]):
                number = self.reasons.setdefault((f"{r['compile_id']}", what), len(self.reasons) + 1)
                mark += f"[{number}]"
        return {"rank": r["rank"], "graph": r["compile_id"] + (f".{r['piece']}" if r["piece"] else ""),
                "frame": r["frame"] or "?", "line": str(r["source"] or "?").rsplit("/", 1)[-1],
                "backend": r["backend"], "status": r["status"], "nodes": r["nodes"], "saved": r["saved"],
                "notes": mark}

    def rows(self, rows: list[dict[str, Any]], torch_version: str | None = None) -> None:
        """Print the rows not printed yet (the header, with the torch that wrote the log, before the
        first), and a row that changed since."""
        if not self.header:
            written = f" (written by torch {torch_version})" if torch_version else ""
            print(wrap(f"{self.where}: the compiles as they are read{written}"), file=self.out)
            print(" ".join(name.rjust(w) for name, w in self.WIDTHS.items()), file=self.out)
            self.header = True
        for row in rows:
            key = (row["rank"], row["compile_id"], row["piece"])
            before = self.shown.get(key)
            if before == row:
                continue
            if before is not None and not self.noted:
                print("rows completed by records after their compile's metrics:", file=self.out)
                self.noted = True
            self.shown[key] = row
            cells = self._cells(row)
            print(" ".join(self._cut(cells[name], w, tail=name == "line").rjust(w) for name, w in self.WIDTHS.items()),
                  file=self.out, flush=True)

    def notes(self) -> None:
        """The reasons the rows' note marks point to, numbered, wrapped to 100 columns."""
        for (compile_id, what), number in self.reasons.items():
            row = next((r for r in self.shown.values() if r["compile_id"] == compile_id
                        and (r[what] or (what == "fail_reason" and r["fail_type"]))), None)
            reason = "" if row is None else row[what] or ""
            if what == "fail_reason" and row is not None and row["fail_type"]:
                reason = f"{row['fail_type']}: {reason}" if reason else str(row["fail_type"])
            if what == "recompile_reason":
                reason = _newest_guard_failure(reason)
            if what == "damaged":  # issue 46: a graph payload whose md5 does not match
                reason = (f"its {reason} graph's text does not match the md5 torch wrote for it: changed after the run "
                          "wrote it")
            label = {"fail_reason": "failed"}.get(what, what.replace("_reason", "").replace("_", " "))
            print(wrap(f"[{number}] {compile_id} {label}: {reason}"), file=self.out)


def _newest_guard_failure(reason: str) -> str:
    """torch's recompile reason lists why every earlier compile of the frame refused the call
    (``0/2: ...; 0/1: ...; 0/0: ...``): the newest one's, and how many more failed, so that 23
    recompiles are 23 lines, not 253 (``Run.graphs`` keeps the whole text).

    >>> _newest_guard_failure("0/1: tensor 'x' size mismatch; 0/0: tensor 'x' size mismatch")
    "0/1: tensor 'x' size mismatch (and the guards of 1 earlier compile(s) of the frame failed too)"
    """

    parts = guard_failures(reason)
    if len(parts) <= 1:
        return reason
    return f"{parts[0]} (and the guards of {len(parts) - 1} earlier compile(s) of the frame failed too)"
