"""A run's totals and summary from its index alone (no torch, no rebuild): which compiles make one
step (a frame recompiled only for new input sizes is shape variants, and a step runs its last; any
other recompile runs in the step too), the activation bytes a step saves, the frames that ran as plain
Python, and the compiles without an AOT graph."""

from __future__ import annotations

import os
import re
from typing import Any

from fxviz.core.units import format_bytes
from fxviz.sources.log.index import Compile, Piece

__all__ = ["TOTAL_COLUMNS", "guard_failures", "shape_variant", "last_per_frame", "id_span", "trained",
           "eager_frames", "no_aot_compiles", "total_rows", "summary_lines"]

TOTAL_COLUMNS = ["rank", "graphs", "step_graphs", "inference_graphs", "eager_frames", "failed",
                 "saved_activation_bytes", "all_compiles_saved_bytes", "offloaded_bytes", "saved_bytes_exact",
                 "runs_known"]

_SIZE_GUARD = re.compile(r"^\d+/\d+: tensor '[^']*' (?:size|stride) mismatch")
"""A guard failure that is a tensor input's size (or stride) alone: a shape variant of the frame."""


def guard_failures(reason: str | None) -> list[str]:
    """torch's recompile reason as its entries, newest first: why each earlier compile of the frame
    refused the call (``0/2: ...; 0/1: ...``; each entry starts with that compile's id)."""
    return [e for e in re.split(r"; (?=\d+/\d+: )", reason or "") if e]


def shape_variant(c: Compile) -> bool:
    """Whether ``c`` is a recompile for new input sizes only: every guard failure torch gives for it
    is a tensor input's size or stride (a step runs one such variant, the next step another)."""
    entries = guard_failures(c.recompile_reason)
    return bool(entries) and all(_SIZE_GUARD.match(e) for e in entries)


def last_per_frame(pieces: list[tuple[Compile, Any]]) -> list[tuple[Compile, Any]]:
    """One step's ``pieces``: a frame (and compiled-autograd id) whose every recompile is for new
    input sizes (``shape_variant``) keeps only its last compile: a step runs one of the variants, and
    the last is the one the run ran when it ended.  A frame recompiled for anything else (an integer
    attribute per layer, ``requires_grad`` of an input: one code object run several times a step)
    keeps all its compiles, as do graphs logged outside dynamo (export).  The log does not say how
    often each compile ran: this is the reading of torch's guard failures, not a count."""
    by_frame: dict[tuple[Any, Any], list[Compile]] = {}
    for c, _ in pieces:
        if c.key[0] is not None and c.key[1] is not None and c not in by_frame.get((c.key[0], c.key[3]), []):
            by_frame.setdefault((c.key[0], c.key[3]), []).append(c)
    dropped: set[int] = set()
    for compiles in by_frame.values():
        if len(compiles) > 1 and all(shape_variant(c) for c in compiles if c.key[1]):
            last = max(compiles, key=lambda c: (c.key[1], c.key[2] or 0))
            dropped |= {id(c) for c in compiles if c is not last}
    return [(c, x) for c, x in pieces if id(c) not in dropped]


def id_span(ids: list[str]) -> str:
    """Compile ids as few words: ``0/0`` or ``0/0 ... 0/21`` (22 ids)."""
    return ids[0] if len(ids) == 1 else f"{ids[0]} ... {ids[-1]}" if len(ids) > 2 else " and ".join(ids)


def trained(compiles: list[Compile], rank: int) -> list[tuple[Compile, Piece]]:
    """``rank``'s graphs with a backward: a forward and a backward graph logged (what saved bytes are
    read from; a cache hit has no joint graph, so ``Run.traces``, which rebuilds from it, omits it)."""
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
        step = last_per_frame(both)  # a step: a shape-variant frame's last compile, every other compile
        counted = [p.saved for _, p in step]
        every = [p.saved for _, p in both]
        rows.append({"rank": rank, "graphs": len(both), "step_graphs": len(step),
                     "inference_graphs": sum("aot_inference_graph" in p.offsets for p in pieces),
                     "eager_frames": len(eager_frames(compiles, rank)),
                     "failed": sum(c.status == "failed" for c in mine),
                     "saved_activation_bytes": sum(s.activation_bytes for s in counted if s is not None),
                     "all_compiles_saved_bytes": sum(s.activation_bytes for s in every if s is not None),
                     "offloaded_bytes": sum(s.offloaded_bytes for s in counted if s is not None),
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
            which = (f"each frame's last shape variant; the other {variants} compile(s) are recompiles for new "
                     "input sizes, which a step runs one of (all "
                     f"{t['graphs']} together: {format_bytes(int(t['all_compiles_saved_bytes']))}); "
                     if variants else "")
            off = (f" (+ {format_bytes(int(t['offloaded_bytes']))} offloaded off the device)"
                   if t["offloaded_bytes"] else "")
            lines.append(f"  saved by one step: {format_bytes(int(t['saved_activation_bytes']))} of activations"
                         f"{off} over its {t['step_graphs']} graph(s) ({which}the log does not say how often a "
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
