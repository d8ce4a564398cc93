"""A run's totals and summary from its index alone (no torch, no rebuild): which compiles make one
step (each frame's last: a recompile is a variant of the frame, not more of the step), the activation
bytes a step saves, the frames that ran as plain Python, and the compiles without an AOT graph."""

from __future__ import annotations

import os
from typing import Any

from ..units import format_bytes
from .index import Compile, Piece

__all__ = ["TOTAL_COLUMNS", "last_per_frame", "id_span", "trained", "eager_frames", "no_aot_compiles",
           "total_rows", "summary_lines"]

TOTAL_COLUMNS = ["rank", "graphs", "inference_graphs", "eager_frames", "failed", "saved_activation_bytes",
                 "saved_bytes_exact", "runs_known"]


def last_per_frame(pieces: list[tuple[Compile, Any]]) -> list[tuple[Compile, Any]]:
    """``pieces`` of each frame (and compiled-autograd id) only from its last compile: a frame dynamo
    recompiled has one compile per variant (shapes, guards), and a step runs one of them; the last
    is the one the run ran when it ended.  Graphs logged outside dynamo (export) are all kept."""
    last: dict[tuple[Any, Any], Compile] = {}
    for c, _ in pieces:
        frame, fcid, attempt, ca = c.key
        if frame is None or fcid is None:
            continue
        seen = last.get((frame, ca))
        if seen is None or (fcid, attempt or 0) > (seen.key[1], seen.key[2] or 0):
            last[frame, ca] = c
    return [(c, x) for c, x in pieces if c.key[0] is None or c.key[1] is None or last[c.key[0], c.key[3]] is c]


def id_span(ids: list[str]) -> str:
    """Compile ids as few words: ``0/0`` or ``0/0 ... 0/21`` (22 ids)."""
    return ids[0] if len(ids) == 1 else f"{ids[0]} ... {ids[-1]}" if len(ids) > 2 else " and ".join(ids)


def trained(compiles: list[Compile], rank: int) -> list[tuple[Compile, Piece]]:
    """``rank``'s graphs with a forward and a backward graph logged (what saved bytes are read from)."""
    return [(c, p) for c in compiles if c.rank == rank for p in c.pieces
            if {"aot_forward_graph", "aot_backward_graph"} <= set(p.offsets)]


def eager_frames(compiles: list[Compile], rank: int | None = None) -> list[str]:
    """The frames dynamo compiled nothing for and ran as plain Python (``forward (model.py:32): why``)."""
    out = []
    for c in compiles:
        # a compile whose dynamo graph is logged did not run as plain Python: its backend took the
        # graph without AOTAutograd, or the log stops inside it (``no_aot_compiles``)
        if c.pieces or (rank is not None and c.rank != rank) or c.status in ("no AOT graph", "unfinished"):
            continue
        why = c.graph_break_reason or (f"{c.fail_type}: {c.fail_reason}" if c.fail_type else c.fail_reason) \
            or "dynamo compiled no graph for it"
        out.append(f"{c.frame or 'a frame'} ({os.path.basename(c.source or '?')}): {why}")
    return out


def no_aot_compiles(compiles: list[Compile], rank: int | None = None, status: str = "no AOT graph") -> list[str]:
    """Compiles without an AOT graph that did not run as plain Python (``compile 0/22 (forward)``):
    ``"no AOT graph"``, a backend that does not use AOTAutograd (``backend="eager"``);
    ``"unfinished"``, a compile the log ends inside (the run stopped before it finished)."""
    return [f"compile {c.compile_id} ({c.frame or 'a frame'})" for c in compiles
            if not c.pieces and c.status == status and (rank is None or c.rank == rank)]


def total_rows(compiles: list[Compile], ranks: list[int]) -> list[dict[str, Any]]:
    """Per rank (``TOTAL_COLUMNS`` and ``step_graphs``): every number from the index."""
    rows = []
    for rank in ranks:
        mine = [c for c in compiles if c.rank == rank]
        pieces = [p for c in mine for p in c.pieces]
        both = trained(compiles, rank)
        step = last_per_frame(both)  # a step: each frame's last compile
        counted = [p.saved for _, p in step]
        rows.append({"rank": rank, "graphs": len(both), "step_graphs": len(step),
                     "inference_graphs": sum("aot_inference_graph" in p.offsets for p in pieces),
                     "eager_frames": len(eager_frames(compiles, rank)),
                     "failed": sum(c.status == "failed" for c in mine),
                     "saved_activation_bytes": sum(s.activation_bytes for s in counted if s is not None),
                     "saved_bytes_exact": all(s is not None and s.exact for s in counted), "runs_known": False})
    return rows


def _inexact(compiles: list[Compile], rank: int) -> list[str]:
    """Where a rank's saved bytes are not exact, and which way they err."""
    out = []
    for c, p in last_per_frame(trained(compiles, rank)):
        s = p.saved
        if s is not None and s.unknown:
            out.append(f"compile {c.compile_id}: {len(s.unknown)} saved value(s) of a size the log gives no "
                       "value for, not counted (the figure is a lower bound)")
        if s is not None and s.approximate:
            out.append(f"compile {c.compile_id}: {len(s.approximate)} saved value(s) whose storage the "
                       "forward graph does not determine, each counted as its own (an estimate)")
    return out


def summary_lines(compiles: list[Compile], ranks: list[int]) -> list[str]:
    """Per rank: its graphs, failures, eager frames and compiles without an AOT graph, and the bytes
    one step saves (each frame's last compile, counted once: the log records compiles, not calls)."""
    lines = []
    for t in total_rows(compiles, ranks):
        parts = [f"{t['graphs']} graph(s) with a backward"]
        if t["inference_graphs"]:
            parts.append(f"{t['inference_graphs']} inference only (nothing saved for a backward)")
        if t["failed"]:
            parts.append(f"{t['failed']} failed compile(s)")
        if t["eager_frames"]:
            parts.append(f"{t['eager_frames']} frame(s) ran as plain Python")
        no_aot = no_aot_compiles(compiles, t["rank"])
        unfinished = no_aot_compiles(compiles, t["rank"], "unfinished")
        if no_aot:
            parts.append(f"{len(no_aot)} compile(s) with dynamo's graph and no AOT graph")
        if unfinished:
            parts.append(f"{len(unfinished)} unfinished compile(s)")
        lines.append(f"rank {t['rank']}: " + ", ".join(parts))
        if t["graphs"]:
            variants = t["graphs"] - t["step_graphs"]
            which = (f"each frame's last compile; the other {variants} are recompiles of the same frames, "
                     "variants a step runs one of; " if variants else "")
            lines.append(f"  saved by one step: {format_bytes(int(t['saved_activation_bytes']))} of activations "
                         f"over its {t['step_graphs']} graph(s) ({which}the log does not say how often a "
                         "graph ran)")
            lines += [f"  {n}" for n in _inexact(compiles, t["rank"])]
        for frame in eager_frames(compiles, t["rank"]):
            lines.append(f"  eager: {frame}; what it computes outside the graphs it calls is in no graph")
        if no_aot:
            lines.append(f"  no AOT graph: {', '.join(no_aot)}: its backend used no AOTAutograd (e.g. 'eager')")
        if unfinished:
            lines.append(f"  unfinished: {', '.join(unfinished)}: the log ends inside it (the run stopped, or was "
                         "still running, before it finished)")
    return lines
