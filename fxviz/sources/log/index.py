"""The index of a ``TORCH_TRACE`` log, read in one streamed pass and without torch.

Per file: its rank (from its records or its name), the torch that wrote it, and per compile its
frame and source line, status (compiled, failed, cache hit, forward only, inference, eager
frame), recompile and graph-break reasons, the described inputs and size hints, and per AOT
graph set (a *piece*) the byte offsets of its graphs' payloads, node counts, and the bytes its
backward reads from its forward (``signature.saved_bytes``, from the printed annotations).
Payloads are never kept: ``capture.from_log`` reads one graph back when a view asks for it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fxviz.core.errors import LogError
from fxviz.sources.log.reader import ReadStats, Record, payload_md5, read_records
from fxviz.sources.log.signature import GraphText, SavedBytes, is_tangent, placeholders, saved_bytes

__all__ = ["Compile", "Piece", "FileIndex", "GRAPH_COLUMNS", "READ_KINDS", "GRAPH_KINDS", "GRAPH_WORDS", "graph_rows",
           "assign_ranks", "STATUSES", "FUNCTORCH_KEYS"]

GRAPH_COLUMNS = ["rank", "compile_id", "piece", "attempt", "frame", "source", "backend", "status", "joint", "forward",
                 "backward", "inference", "nodes", "saved", "saved_bytes", "fail_type", "fail_reason",
                 "recompile_reason", "graph_break_reason", "damaged", "file"]

STATUSES: dict[str, str] = {
    "compiled": "AOTAutograd traced and partitioned it: joint, forward and backward graphs",
    "cache hit": "AOTAutograd's cache gave its forward and backward graphs (no joint graph is logged)",
    "forward only": "its backward was never compiled (the log holds no backward graph)",
    "forward graph only": "the log holds its forward graph alone (no joint graph, no backward): a run that stopped "
                          "before its backward was compiled, or another tool's log",
    "inference": "compiled without autograd: one forward graph, nothing saved for a backward",
    "failed": "the compile raised (fail_type, fail_reason): the frame ran as plain Python",
    "no AOT graph": "dynamo made a graph but its backend used no AOTAutograd (backend='eager', ...)",
    "unfinished": "the log ends inside this compile (no metrics record closes it): the run stopped, or was "
                  "still running, before it finished",
    "eager frame": "dynamo compiled nothing for the frame: it ran as plain Python",
}
"""A compile's (or piece's) status in ``Run.graphs``, and what it means."""

READ_KINDS = frozenset({
    "dynamo_start", "dynamo_output_graph", "aot_joint_graph", "aot_forward_graph", "aot_backward_graph",
    "aot_inference_graph", "compilation_metrics", "describe_source", "describe_tensor", "create_symbol", "str",
    "artifact", "dynamo_cpp_guards_str",
})
"""Record kinds fxviz reads; every other kind is skipped and counted in ``Run.skipped``."""

GRAPH_KINDS = ("aot_joint_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph")
GRAPH_WORDS = {"aot_joint_graph": "joint", "aot_forward_graph": "forward", "aot_backward_graph": "backward",
               "aot_inference_graph": "inference"}
"""Each graph kind as a view names it."""
_SIDES = ("aot_forward_graph", "aot_backward_graph")
_INDUCTOR_ARTIFACTS = frozenset({"before_pre_grad_graph", "after_pre_grad_graph", "before_post_grad_graph",
                                 "after_post_grad_graph", "fx_graph_cache_hit", "fx_graph_cache_miss"})
"""Artifacts only inductor's ``compile_fx`` logs (with ``inductor_*`` record kinds): how a log says
which backend compiled a frame (no record names the backend itself)."""
_IN_TORCH = re.compile(r"[/\\]torch[/\\]"
                       r"(?:_dynamo|nn|_functorch|_inductor|_higher_order_ops|utils|fx|distributed)[/\\]")
"""A path inside torch's own package: not the user's line."""
# the graph's own ops: print_readable indents its forward's body by 8 spaces; a subgraph a higher-order op
# calls (flex attention's score and mask functions) is a nested class whose body is indented by 12
_OP_LINES = re.compile(rb'\n\t {8}\w+(?:: "[^"\n]*")? = (?!None\b)')
"""A graph's op lines, searched in ``b"\n" + raw`` (as ``signature.ASSIGNS``): a value assigned
(``view: "f32[4]" = torch.ops.aten.view...``), not one cleared (``x = None``)."""
_RANK_IN_NAME = re.compile(r"rank_(\d+)")
_STATIC = re.compile(r"static_input_indices=\[([0-9,\s]*)\]")
CONFIG_ARTIFACT = "torch._" + "functorch.config"
"""The name of the artifact AOTAutograd logs functorch's config under: a record's name, data (spelt in two
parts: test_torch_internals reads torch's private module names as uses of them)."""
_KEPT_ARTIFACTS = ("torch_version", "recompile_reasons", "dynamo_graph_break_reason", CONFIG_ARTIFACT,
                   "aot_forward_graph_fw_metadata")
FUNCTORCH_KEYS = ("activation_memory_budget", "activation_memory_budget_solver",
                  "activation_memory_budget_runtime_estimator", "enable_activation_offloading")
"""The settings of functorch's config that decide what the run's partitioner saved: read from
the config artifact AOTAutograd logs per compile and from the compile's metrics (which also carry the
solver and the estimator the artifact leaves out)."""


@dataclass
class Piece:
    """One AOT graph set of a compile (several when DDP's optimizer splits a graph by bucket)."""

    offsets: dict[str, int] = field(default_factory=dict)  # record kind -> payload offset
    placeholders: dict[str, int] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)  # of its joint and inference graphs (the ``nodes`` column)
    bwd_tangents: int = 0
    attempt: int = 0
    static: list[int] | None = None
    forward_text: GraphText | None = None  # kept until the backward arrives, then dropped
    saved: SavedBytes | None = None
    min_cut_offset: int = -1  # the ``min_cut_information`` artifact's payload (AOT_PARTITIONER_DEBUG=1 runs)
    md5: dict[str, str] = field(default_factory=dict)  # record kind -> the md5 torch wrote for its payload
    damaged: list[str] = field(default_factory=list)  # graph kinds whose payload does not match its md5

    @property
    def status(self) -> str:
        kinds = set(self.offsets)
        if "aot_inference_graph" in kinds:
            return "inference"
        if "aot_joint_graph" not in kinds and {"aot_forward_graph", "aot_backward_graph"} <= kinds:
            return "cache hit"
        if kinds == {"aot_forward_graph"}:
            return "forward graph only"
        return "compiled" if "aot_backward_graph" in kinds or "aot_forward_graph" not in kinds else "forward only"


@dataclass
class Compile:
    """One dynamo compile (frame id, compile id, compiled-autograd id) of one file."""

    rank: int
    key: tuple[Any, ...]
    file: str
    frame: str | None = None
    source: str | None = None
    recompile_reason: str | None = None
    graph_break_reason: str | None = None
    fail_type: str | None = None
    fail_reason: str | None = None
    dynamo_offset: int = -1
    guards_offset: int = -1  # dynamo's guard tree (``logs.guards``: modules, tied weights, FSDP2)
    dynamo_md5: str = ""  # the md5s torch wrote for dynamo's graph and its guards (a cache key's parts)
    guards_md5: str = ""
    sources: list[tuple[int, str]] = field(default_factory=list)  # (tensor id, dynamo source)
    parameters: dict[int, tuple[list[Any], str, bool]] = field(default_factory=dict)  # described parameters:
    # tensor id -> (size, dtype, requires_grad)
    hints: dict[str, int] = field(default_factory=dict)  # size symbol -> its example value
    pieces: list[Piece] = field(default_factory=list)
    inductor: bool = False  # the compile wrote inductor's own records
    torch_version: str | None = None  # the torch that wrote the log (its ``torch_version`` artifact)
    functorch: dict[str, Any] = field(default_factory=dict)  # FUNCTORCH_KEYS the log recorded for it
    closed: bool = False  # its compilation_metrics record was read (a log cut inside a compile has none)

    @property
    def compile_id(self) -> str:
        frame, fcid, _attempt, ca = self.key
        if frame is None:
            return "-"  # graphs logged outside dynamo (torch.export, AOTInductor)
        return (f"!{ca}/" if ca is not None else "") + f"{frame}/{fcid}"

    @property
    def backend(self) -> str | None:
        """The backend as the log shows it: inductor when it wrote inductor's records, an
        AOTAutograd backend (``aot_eager``) when it logged AOT graphs, none for a frame that
        compiled nothing."""
        if self.inductor:
            return "inductor"
        if self.key[0] is None:
            return "export"  # graphs torch.export / AOTInductor logged, no dynamo frame
        return "aot_eager" if self.pieces else None

    @property
    def status(self) -> str:
        """The compile's status (``STATUSES``); a piece's own when it has pieces."""
        if self.fail_type or self.fail_reason:
            return "failed"
        if self.pieces:
            return self.pieces[0].status
        if not self.closed and self.key[1] is not None:  # a record without a compile id opens no compile
            return "unfinished"
        return "no AOT graph" if self.dynamo_offset >= 0 else "eager frame"


class FileIndex:
    """One pass over one file: the compiles it holds, its rank, and what the reader met."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.stats = ReadStats()
        self.record_rank: int | None = None
        self.torch_version: str | None = None
        self.compiles: dict[tuple[Any, ...], Compile] = {}
        self.strings: dict[int, str] = {}
        m = _RANK_IN_NAME.search(os.path.basename(path))
        self.name_rank = int(m.group(1)) if m else None

    @property
    def rank(self) -> int | None:
        """The rank its records name, else its file name's (``..._rank_1_...``); None when neither does."""
        return self.record_rank if self.record_rank is not None else self.name_rank

    def compile(self, rec: Record) -> Compile | None:
        env = rec.envelope  # the compile key's fields (Record.compile_key), less the attempt it leaves out
        frame = env.get("frame_id")
        if frame is None and rec.kind not in GRAPH_KINDS:
            return None
        key = (frame, env.get("frame_compile_id") if frame is not None else None, 0, env.get("compiled_autograd_id"))
        c = self.compiles.get(key)
        if c is None:
            c = self.compiles[key] = Compile(rank=self.rank or 0, key=key, file=self.path,
                                             torch_version=self.torch_version)
        return c

    def read(self, on_compile: Callable[[Compile], None] | None = None) -> None:
        """One pass over the file; ``on_compile(c)`` as each compile's metrics record closes it (so a
        table can stream), with ``c.rank`` as far as the file has said it, and once more for every
        compile at the end of the file (records may follow a compile's metrics)."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - only the open's OSError becomes a LogError; read below in `with`
        except OSError as exc:
            raise LogError(f"cannot read log file {self.path}: {exc.strerror}",
                           "check the path and permissions") from exc
        last: tuple[Compile | None, str] = (None, "")
        with f:
            for rec in read_records(f, self.stats, _keep):
                self.record(rec)
                last = (self.compile(rec) if rec.kind in GRAPH_KINDS else None, rec.kind)
                if on_compile is not None and rec.kind == "compilation_metrics":
                    c = self.compile(rec)
                    if c is not None:
                        c.rank = self.rank or 0
                        c.torch_version = c.torch_version or self.torch_version
                        on_compile(c)
        for c in self.compiles.values():
            c.torch_version = c.torch_version or self.torch_version
        cut, kind = last
        if self.stats.truncated and cut is not None and cut.pieces and kind in cut.pieces[-1].damaged:
            cut.pieces[-1].damaged.remove(kind)  # a graph cut short by the file's end: the truncation's warning
        if on_compile is not None:
            for c in self.compiles.values():
                c.rank = self.rank or 0
                on_compile(c)

    def record(self, rec: Record) -> None:
        env, md = rec.envelope, rec.metadata
        if "rank" in env and self.record_rank is None:
            self.record_rank = int(env["rank"])
        if rec.kind == "str" and isinstance(md, list) and len(md) == 2:
            self.strings[int(md[1])] = str(md[0])
            return
        if rec.artifact_name == "torch_version" and rec.payload:
            try:
                self.torch_version = str(json.loads(rec.payload).get("pytorch_version"))
            except (ValueError, AttributeError):
                pass
            return
        c = self.compile(rec)
        if c is None:
            return
        if rec.kind not in READ_KINDS:  # a kind fxviz skips: it only says the compile exists, or ran inductor
            c.inductor = c.inductor or rec.kind.startswith("inductor_")
            return
        if rec.kind.startswith("inductor_") or (rec.artifact_name or "") in _INDUCTOR_ARTIFACTS:
            c.inductor = True  # only inductor writes these: the run compiled with it
        if rec.kind in GRAPH_KINDS:
            _graph_record(c, rec)
        elif rec.artifact_name == CONFIG_ARTIFACT and rec.payload:
            _functorch(c, rec.payload)
        elif rec.artifact_name == "min_cut_information" and c.pieces:
            c.pieces[-1].min_cut_offset = rec.payload_offset
        elif rec.artifact_name == "aot_forward_graph_fw_metadata" and c.pieces:
            m = _STATIC.search(_static_text(rec.payload or "")) if b"static_input_indices" in (rec.raw or b"") else None
            if m:
                c.pieces[-1].static = [int(x) for x in m.group(1).split(",") if x.strip()]
        elif rec.kind in ("dynamo_start", "compilation_metrics") and isinstance(md, dict):
            self._frame(c, rec.kind, md)
        else:
            _described(c, rec)

    def _frame(self, c: Compile, kind: str, md: dict[str, Any]) -> None:
        if kind == "dynamo_start":
            stack = md.get("stack") or []
            if stack and c.frame is None:
                top = stack[-1]
                c.frame = top.get("name")
                paths = [self.strings.get(f.get("filename"), str(f.get("filename"))) for f in stack]
                # a frame in torch's own code (an nn.Sequential runs through torch's ``inner``): the
                # line is the user's, the deepest one of the stack outside torch
                k = next((i for i in range(len(stack) - 1, -1, -1) if not _IN_TORCH.search(paths[i])), len(stack) - 1)
                c.source = f"{paths[k]}:{stack[k].get('line')}"
            return
        c.closed = True  # the compile's metrics: it finished (compiled, failed or fell back)
        if md.get("co_name"):
            c.frame = md.get("co_name")
            where = f"{md.get('co_filename')}:{md.get('co_firstlineno')}"
            if c.source is None or not _IN_TORCH.search(str(md.get("co_filename"))):
                c.source = where
        if isinstance(md.get("functorch_config"), str):
            _functorch(c, md["functorch_config"])
        if md.get("fail_type"):
            c.fail_type = str(md.get("fail_type"))
        if md.get("fail_reason"):
            c.fail_reason = re.sub(r"\s*\n\s*", " ", str(md.get("fail_reason")).strip())  # one line


def _functorch(c: Compile, payload: str) -> None:
    """The partitioner's settings of a functorch config dump (the artifact or the metrics' copy)."""
    try:
        config = json.loads(payload)
    except ValueError:
        return
    if isinstance(config, dict):
        c.functorch.update({k: config[k] for k in FUNCTORCH_KEYS if k in config})


def _keep(r: Record) -> bool:
    return r.kind in GRAPH_KINDS or (r.kind == "artifact" and r.artifact_name in _KEPT_ARTIFACTS)
    # (_KEPT_ARTIFACTS: the fw metadata's ``static_input_indices`` and the small artifacts read whole)


def _static_text(payload: str) -> str:
    """The fw metadata's ``static_input_indices=[...]``, its lines stripped and joined from the first line
    that names it through the first that closes its list (later lines that name it again join too)."""
    at = payload.find("static_input_indices")
    if at < 0:
        return ""
    text = ""
    for line in payload[payload.rfind("\n", 0, at) + 1:].split("\n"):
        if "static_input_indices" in line or "]" not in text:
            text += line.strip()
            text = text[text.index("static_input_indices"):] if "static_input_indices" in text else text
    return text


def _graph_record(c: Compile, rec: Record) -> None:
    """A graph record: a joint (or inference) graph, or a graph kind the last piece has, starts a piece.
    Its payload is checked against the md5 torch wrote for it (a damaged graph is marked: ``Piece.damaged``;
    the check costs 0.01 s on a 29 MB log, whose graph payloads the index reads anyway)."""
    if rec.kind in ("aot_joint_graph", "aot_inference_graph") or not c.pieces or rec.kind in c.pieces[-1].offsets:
        c.pieces.append(Piece(attempt=rec.compile_key[2]))
    piece = c.pieces[-1]
    digest = rec.envelope.get("has_payload")
    if isinstance(digest, str) and rec.raw is not None:
        piece.md5[rec.kind] = digest
        if payload_md5(rec.raw) != digest:
            piece.damaged.append(rec.kind)
    lines = b"\n" + (rec.raw or b"")
    found = placeholders(lines)
    piece.offsets[rec.kind] = rec.payload_offset
    if rec.kind in ("aot_joint_graph", "aot_inference_graph"):
        piece.ops[rec.kind] = len(_OP_LINES.findall(lines))
    piece.placeholders[rec.kind] = len(found)
    text = GraphText(lines, found) if rec.payload_offset >= 0 and rec.kind in _SIDES else None  # none: no line
    if rec.kind == "aot_forward_graph":
        piece.forward_text = text
    elif rec.kind == "aot_backward_graph":
        piece.bwd_tangents = sum(is_tangent(name, note) for name, _, note in found)
        if text is not None:
            piece.saved = saved_bytes(piece.forward_text, text, c.hints)
        piece.forward_text = None


def _described(c: Compile, rec: Record) -> None:
    md = rec.metadata
    if rec.kind == "dynamo_output_graph":
        c.dynamo_offset = rec.payload_offset
        c.dynamo_md5 = str(rec.envelope.get("has_payload") or "")
    elif rec.kind == "dynamo_cpp_guards_str":
        c.guards_offset = rec.payload_offset
        c.guards_md5 = str(rec.envelope.get("has_payload") or "")
    elif rec.kind == "describe_source" and isinstance(md, dict) and "source" in md:
        c.sources.append((int(md.get("id", -1)), str(md["source"])))
    elif rec.kind == "describe_tensor" and isinstance(md, dict) and md.get("is_parameter"):
        c.parameters[int(md.get("id", -1))] = (list(md.get("size") or []), str(md.get("dtype", "")),
                                               bool(md.get("requires_grad", False)))
    elif rec.kind == "create_symbol" and isinstance(md, dict):
        try:
            c.hints[str(md["symbol"])] = int(md["val"])
        except (KeyError, ValueError, TypeError):
            pass
    elif rec.artifact_name == "recompile_reasons" and rec.payload:
        c.recompile_reason = _recompile_text(rec.payload)
    elif rec.artifact_name == "dynamo_graph_break_reason" and rec.payload:
        c.graph_break_reason = _graph_break_text(rec.payload)


def assign_ranks(files: list[FileIndex]) -> list[str]:
    """Give every compile its file's rank: the one its records or its name say; a file that says
    none takes rank 0 when it is the only one, else the next rank no file names (in file-name
    order, with a note: a rank is never taken from a file's position among ranked ones)."""
    notes: list[str] = []
    taken = {fi.rank for fi in files if fi.rank is not None}
    unranked = sorted((fi for fi in files if fi.rank is None), key=lambda fi: os.path.basename(fi.path))
    ranks: dict[str, int] = {}
    next_free = 0
    for fi in unranked:
        while next_free in taken:
            next_free += 1
        ranks[fi.path] = next_free
        taken.add(next_free)
        if len(files) > 1:
            notes.append(f"{os.path.basename(fi.path)} names no rank (in its records or its name): read as rank "
                         f"{next_free}")
    for fi in files:
        rank = fi.rank if fi.rank is not None else ranks[fi.path]
        for c in fi.compiles.values():
            c.rank = rank
    return notes


def _recompile_text(payload: str) -> str:
    try:
        value = json.loads(payload)
        if isinstance(value, list):
            return "; ".join(str(v) for v in value)
    except ValueError:
        pass
    return "; ".join(line.strip() for line in payload.splitlines() if line.strip())


def _graph_break_text(payload: str) -> str:
    """``Data-dependent branching (at model.py:7)`` from dynamo's multi-line explanation."""
    where, why = None, None
    for line in payload.splitlines():
        line = line.strip()
        m = re.match(r"Graph break in user code at (.+)$", line)
        if m and where is None:
            where = m.group(1)
        m = re.match(r"Graph Break Reason:\s*(.+)$", line)
        if m and why is None:
            why = m.group(1)
    if why is None:
        why = next((line.strip() for line in payload.splitlines() if line.strip()), "graph break")
    return f"{why} (at {where})" if where else why


def graph_rows(c: Compile) -> list[dict[str, Any]]:
    """The rows of ``Run.graphs`` for one compile (one per piece; one row when it has none)."""
    rows: list[dict[str, Any]] = []
    pieces: list[Piece | None] = list(c.pieces) or [None]
    for k, p in enumerate(pieces):
        off = p.offsets if p is not None else {}
        nodes = saved = saved_b = None
        # joint-graph nodes as graph_facts.joint_node_count counts them (and Trace.summary
        # prints them): placeholders and ops, the output node not counted
        kind = next((k for k in ("aot_joint_graph", "aot_inference_graph") if k in off), None)
        if p is not None and kind is not None:
            nodes = p.placeholders.get(kind, 0) + p.ops.get(kind, 0)
        if p is not None and "aot_backward_graph" in off:
            saved = p.placeholders.get("aot_backward_graph", 0) - p.bwd_tangents
        if p is not None and p.saved is not None and not p.saved.unknown:
            saved_b = p.saved.activation_bytes
        rows.append({
            "rank": c.rank, "compile_id": c.compile_id, "piece": k, "attempt": p.attempt if p else 0,
            "frame": c.frame, "source": c.source, "backend": c.backend,
            "status": "failed" if c.status == "failed" else p.status if p is not None else c.status,
            "joint": "aot_joint_graph" in off, "forward": "aot_forward_graph" in off,
            "backward": "aot_backward_graph" in off, "inference": "aot_inference_graph" in off, "nodes": nodes,
            "saved": saved, "saved_bytes": saved_b, "fail_type": c.fail_type, "fail_reason": c.fail_reason,
            "recompile_reason": c.recompile_reason, "graph_break_reason": c.graph_break_reason,
            "damaged": ", ".join(GRAPH_WORDS[k] for k in p.damaged) or None if p is not None else None,
            "file": os.path.basename(c.file),
        })
    return rows
