"""``Run``: every graph a real ``torch.compile`` run logged (``TORCH_TRACE=dir``), on every rank.

``load_logs(path)`` streams each file once and keeps an index (per compile: frame, source
location, recompile and graph-break reasons, node and saved counts, and the byte offsets of its
graph payloads), never the payloads themselves.  ``Run.trace(rank, compile_id)`` then reads the
three graphs of one compile back (joint, forward, backward), rebuilds them as ``GraphModule``s
with fake values (``graph_code``), names every input from dynamo's graph and its
``describe_source`` records (``L['self']._modules['h']._modules['0']...`` -> ``h.0...``), and
returns the same ``Trace`` ``fxviz.trace`` returns, with the run's own partition as strategy
``"logged"``.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch.fx as fx

from .. import _torch
from .._fx import output_values
from ..capture import Capture, JointGraph
from ..errors import FxvizWarning, LogError
from ..graph_facts import is_cast, is_view_op, tangents, traced_phases
from ..roles import LIFTED_STATE_ROLES, InputName, classify_nodes
from .graph_code import parse_def_names, parse_graph
from .reader import ReadStats, Record, log_files, read_payload, read_records

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..trace import Trace

__all__ = ["Run", "load_logs", "graph_rows", "GRAPH_COLUMNS", "READ_KINDS"]

GRAPH_COLUMNS = ["rank", "compile_id", "piece", "attempt", "frame", "source", "joint", "forward", "backward",
                 "inference", "nodes", "saved", "recompile_reason", "graph_break_reason", "file"]

READ_KINDS = frozenset({
    "dynamo_start", "dynamo_output_graph", "aot_joint_graph", "aot_forward_graph", "aot_backward_graph",
    "aot_inference_graph", "compilation_metrics", "describe_source", "describe_tensor", "create_symbol", "str",
    "artifact",
})
"""Record kinds fxviz reads; every other kind is skipped and counted in ``Run.skipped``."""

_GRAPH_KINDS = ("aot_joint_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph")
_OP_LINE = re.compile(r"^\s+\w+(?:: \"[^\"]*\")? = (?!None\b)")
_PLACEHOLDER = re.compile(r"^\s+\w+: \"[^\"]*\",?\s*(?:#\s*(.*))?$")
_RANK_IN_NAME = re.compile(r"rank_(\d+)_")
_STATIC = re.compile(r"static_input_indices=\[([0-9,\s]*)\]")


@dataclass
class _Piece:
    """One AOT graph set of a compile (several when DDP's optimizer splits a graph by bucket)."""

    offsets: dict[str, int] = field(default_factory=dict)  # record kind -> payload offset
    placeholders: dict[str, int] = field(default_factory=dict)
    ops: dict[str, int] = field(default_factory=dict)
    bwd_tangents: int = 0
    attempt: int = 0
    static: list[int] | None = None


@dataclass
class _Compile:
    rank: int
    key: tuple[Any, ...]
    file: str
    frame: str | None = None
    source: str | None = None
    recompile_reason: str | None = None
    graph_break_reason: str | None = None
    fail_reason: str | None = None
    dynamo_offset: int = -1
    sources: list[tuple[int, str]] = field(default_factory=list)  # (tensor id, dynamo source)
    parameters: dict[int, tuple[list[Any], str, bool]] = field(default_factory=dict)  # described parameters:
    # tensor id -> (size, dtype, requires_grad)
    hints: dict[str, int] = field(default_factory=dict)  # size symbol -> its example value
    pieces: list[_Piece] = field(default_factory=list)

    @property
    def compile_id(self) -> str:
        frame, fcid, _attempt, ca = self.key
        return (f"!{ca}/" if ca is not None else "") + f"{frame}/{fcid}"


class _FileIndex:
    """One pass over one file: the compiles it holds, and what the reader met."""

    def __init__(self, path: str, default_rank: int) -> None:
        self.path = path
        self.stats = ReadStats()
        self.rank: int | None = None
        self.torch_version: str | None = None
        self.compiles: dict[tuple[Any, ...], _Compile] = {}
        self.strings: dict[int, str] = {}
        m = _RANK_IN_NAME.search(os.path.basename(path))
        self.name_rank = int(m.group(1)) if m else None
        self.default_rank = default_rank

    def compile(self, rec: Record) -> _Compile | None:
        frame, fcid, _attempt, ca = rec.compile_key
        if frame is None:
            return None
        key = (frame, fcid, 0, ca)
        if key not in self.compiles:
            self.compiles[key] = _Compile(rank=-1, key=key, file=self.path)
        return self.compiles[key]

    def read(self, on_compile: Callable[[_Compile], None] | None = None) -> None:
        """One pass over the file; ``on_compile(c)`` as each compile's metrics record closes it (so a
        table can stream), with ``c.rank`` as far as the file has said it, and once more for every
        compile at the end of the file (records may follow a compile's metrics)."""
        def keep(r: Record) -> bool:
            return r.kind == "artifact" and r.artifact_name in ("torch_version", "recompile_reasons",
                                                                   "dynamo_graph_break_reason")

        def on_line(r: Record, line: str) -> None:
            t = r.tally
            if r.kind in _GRAPH_KINDS:
                if _OP_LINE.match(line):
                    t["ops"] = t.get("ops", 0) + 1
                else:
                    m = _PLACEHOLDER.match(line)
                    if m:
                        t["placeholders"] = t.get("placeholders", 0) + 1
                        if m.group(1) and "TangentAOTInput" in m.group(1):
                            t["tangents"] = t.get("tangents", 0) + 1
            elif r.artifact_name == "aot_forward_graph_fw_metadata" and ("static_input_indices" in line
                                                                        or ("static" in t and "]" not in t["static"])):
                text = t.get("static", "") + line.strip()
                t["static"] = text[text.index("static_input_indices"):] if "static_input_indices" in text else text

        try:
            f = open(self.path, "rb")  # noqa: SIM115 - only the open's OSError becomes a LogError; read below in `with`
        except OSError as exc:
            raise LogError(f"cannot read log file {self.path}: {exc.strerror}",
                           "check the path and permissions") from exc
        def wants_lines(r: Record) -> bool:
            return r.kind in _GRAPH_KINDS or r.artifact_name == "aot_forward_graph_fw_metadata"

        with f:
            for rec in read_records(f, self.stats, keep, on_line, wants_lines):
                self.record(rec)
                if on_compile is not None and rec.kind == "compilation_metrics":
                    c = self.compile(rec)
                    if c is not None:
                        c.rank = self._rank()
                        on_compile(c)
        if on_compile is not None:
            for c in self.compiles.values():
                c.rank = self._rank()
                on_compile(c)

    def _rank(self) -> int:
        """The file's rank: the one its records name, else its file name's, else its position."""
        return self.rank if self.rank is not None else \
            self.name_rank if self.name_rank is not None else self.default_rank

    def record(self, rec: Record) -> None:
        env, md = rec.envelope, rec.metadata
        if "rank" in env and self.rank is None:
            self.rank = int(env["rank"])
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
        if rec.kind in ("aot_joint_graph", "aot_inference_graph") or (
                rec.kind in _GRAPH_KINDS and (not c.pieces or rec.kind in c.pieces[-1].offsets)):
            c.pieces.append(_Piece(attempt=rec.compile_key[2]))  # a joint graph starts a new piece
        if rec.kind in _GRAPH_KINDS:
            if not c.pieces:
                c.pieces.append(_Piece(attempt=rec.compile_key[2]))
            piece = c.pieces[-1]
            piece.offsets[rec.kind] = rec.payload_offset
            piece.ops[rec.kind] = rec.tally.get("ops", 0)
            piece.placeholders[rec.kind] = rec.tally.get("placeholders", 0)
            if rec.kind == "aot_backward_graph":
                piece.bwd_tangents = rec.tally.get("tangents", 0)
        elif rec.artifact_name == "aot_forward_graph_fw_metadata" and c.pieces:
            m = _STATIC.search(rec.tally.get("static", ""))
            if m:
                c.pieces[-1].static = [int(x) for x in m.group(1).split(",") if x.strip()]
        elif rec.kind == "dynamo_output_graph":
            c.dynamo_offset = rec.payload_offset
        elif rec.kind == "dynamo_start" and isinstance(md, dict):
            stack = md.get("stack") or []
            if stack and c.frame is None:
                top = stack[-1]
                c.frame = top.get("name")
                path = self.strings.get(top.get("filename"), str(top.get("filename")))
                c.source = f"{path}:{top.get('line')}"
        elif rec.kind == "compilation_metrics" and isinstance(md, dict):
            if md.get("co_name"):
                c.frame = md.get("co_name")
                c.source = f"{md.get('co_filename')}:{md.get('co_firstlineno')}"
            if md.get("fail_reason"):
                c.fail_reason = str(md.get("fail_reason"))
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


# --- names -----------------------------------------------------------------------------------------
def _mangle(source: str) -> str:
    """dynamo's placeholder name for a source: every run of non-alphanumerics becomes ``_``."""
    return re.sub(r"[^a-zA-Z0-9]+", "_", source)


def _qualname(source: str) -> tuple[str, str]:
    """(role, real name) of a dynamo source: ``L['self']._modules['h']._modules['0']._parameters['w']``
    -> ("parameter", "h.0.w"); ``L['idx']`` -> ("primal", "idx")."""
    parts = re.findall(r"\._(modules|parameters|buffers)\[['\"]([^'\"]+)['\"]\]", source)
    if parts:
        role = {"parameters": "parameter", "buffers": "buffer"}.get(parts[-1][0], "primal")
        return role, ".".join(name for _, name in parts)
    m = re.fullmatch(r"[LG]\[['\"]([^'\"]+)['\"]\](.*)", source)
    if m:
        return "primal", m.group(1) + m.group(2)
    return "primal", source


def _input_names(c: _Compile, dynamo_names: list[str]) -> dict[int, InputName]:
    by_mangled: dict[str, tuple[str, str]] = {}
    for tid, src in c.sources:
        role, qual = _qualname(src)
        if tid in c.parameters:
            role = "parameter"
        by_mangled.setdefault(_mangle(src), (role, qual))
    out: dict[int, InputName] = {}
    for i, name in enumerate(dynamo_names):
        hit = by_mangled.get(name) or by_mangled.get(re.sub(r"_\d+$", "", name))
        if hit is None:  # a size or a value dynamo made without describing it: keep dynamo's name
            hit = ("primal", name)
        out[i] = InputName(*hit)
    return out


def _state(c: _Compile) -> list[tuple[str, Any]]:
    """The parameters the log describes, as meta tensors (shape, dtype, requires_grad; no data)."""
    import torch

    out: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for tid, src in c.sources:
        if tid not in c.parameters:
            continue
        size, dtype, requires_grad = c.parameters[tid]
        _, name = _qualname(src)
        dt = getattr(torch, dtype.replace("torch.", ""), None)
        if name in seen or not isinstance(dt, torch.dtype) or not all(isinstance(s, int) for s in size):
            continue
        seen.add(name)
        t = torch.empty(size, dtype=dt, device="meta")
        out.append((name, torch.nn.Parameter(t, requires_grad=requires_grad)))
    return out


def _annotate_modules(gm: fx.GraphModule, info_inputs: dict[str, str]) -> None:
    """Give forward ops that read a parameter (directly or through a view of it) the module that owns
    the parameter (``h.0.attn.c_attn.weight`` -> ``h.0.attn.c_attn``).  A log records source lines but
    not dynamo's module stack, so this is the module path a log can support; other ops have none."""
    owner: dict[str, str] = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder" and n.name in info_inputs and "." in info_inputs[n.name]:
            owner[n.name] = info_inputs[n.name].rsplit(".", 1)[0]
            continue
        if n.op != "call_function":
            continue
        mods = [owner[a.name] for a in n.all_input_nodes if a.name in owner]
        if not mods:
            continue
        # a view or a cast of a parameter (a transposed weight, an autocast copy) is the parameter's
        if (is_view_op(n.target) or is_cast(n)) and len(mods) == len(n.all_input_nodes):
            owner[n.name] = mods[0]
        _torch.LogGraphBuilder.set_module(n, mods[0])


def _share_values(part: fx.GraphModule, joint: fx.GraphModule) -> fx.GraphModule:
    """Give the run's forward/backward nodes the joint node's fake value of the same name (the
    partitioner copies nodes by name), so storages, and hence saved bytes, are counted as one."""
    vals = {n.name: _torch.meta_val(n) for n in joint.graph.nodes}
    for n in part.graph.nodes:
        if n.name in vals and vals[n.name] is not None:
            _torch.LogGraphBuilder.set_val(n, vals[n.name])
    return part


def _tag_phases(gm: fx.GraphModule) -> None:
    """Tag every op forward or backward, as AOTAutograd tagged the joint graph it logged (the tags
    are not in the text).  AOTAutograd traces the forward, then the backward, so the joint graph's
    order is its phases: the ops before the first op that reads a tangent are the forward.
    torch's default partitioner keeps forward ops by these tags."""
    for n, phase in traced_phases(gm).items():
        _torch.LogGraphBuilder.set_tag(n, "is_backward" if phase == "backward" else "is_forward")


def graph_rows(c: _Compile) -> list[dict[str, Any]]:
    """The rows of ``Run.graphs`` for one compile (one per piece; one row when it has none)."""
    rows: list[dict[str, Any]] = []
    pieces: list[_Piece | None] = list(c.pieces) or [None]
    for k, p in enumerate(pieces):
        off = p.offsets if p is not None else {}
        nodes = None
        saved = None
        # joint-graph nodes as graph_facts.joint_node_count counts them (and Trace.summary
        # prints them): placeholders and ops, the output node not counted
        if p is not None and "aot_joint_graph" in off:
            nodes = p.placeholders.get("aot_joint_graph", 0) + p.ops.get("aot_joint_graph", 0)
        elif p is not None and "aot_inference_graph" in off:
            nodes = p.placeholders.get("aot_inference_graph", 0) + p.ops.get("aot_inference_graph", 0)
        if p is not None and "aot_backward_graph" in off:
            saved = p.placeholders.get("aot_backward_graph", 0) - p.bwd_tangents
        rows.append({
            "rank": c.rank, "compile_id": c.compile_id, "piece": k, "attempt": p.attempt if p else 0,
            "frame": c.frame, "source": c.source, "joint": "aot_joint_graph" in off,
            "forward": "aot_forward_graph" in off, "backward": "aot_backward_graph" in off,
            "inference": "aot_inference_graph" in off, "nodes": nodes, "saved": saved,
            "recompile_reason": c.recompile_reason, "graph_break_reason": c.graph_break_reason,
            "file": os.path.basename(c.file),
        })
    return rows


# --- the run ---------------------------------------------------------------------------------------
class Run:
    """Every graph of a logged run.  ``graphs``: one row per compiled graph (and piece)."""

    def __init__(self, path: pathlib.Path, files: list[_FileIndex]) -> None:
        self.path = path
        self._files = files
        self._compiles: list[_Compile] = []
        for fi in files:
            rank = fi.rank if fi.rank is not None else fi.name_rank if fi.name_rank is not None else fi.default_rank
            for c in fi.compiles.values():
                c.rank = rank
                self._compiles.append(c)
        self._cache: dict[Any, Any] = {}
        self.skipped: dict[str, int] = {}
        for fi in files:
            for kind, n in fi.stats.kinds.items():
                if kind not in READ_KINDS:
                    self.skipped[kind] = self.skipped.get(kind, 0) + n
        self.torch_versions = sorted({fi.torch_version for fi in files if fi.torch_version})

    @property
    def ranks(self) -> list[int]:
        return sorted({c.rank for c in self._compiles})

    @property
    def compile_count(self) -> int:
        """Dynamo compiles the log records, over every rank."""
        return len(self._compiles)

    @property
    def aot_graph_count(self) -> int:
        """AOT graphs (pieces with a joint or inference graph) the log holds, over every rank."""
        return sum(len(c.pieces) for c in self._compiles)

    @property
    def graphs(self) -> pd.DataFrame:
        """One row per compiled graph: rank, compile id, frame and source location, which AOT
        graphs the log holds, node and saved counts, recompile and graph-break reasons."""
        import pandas as pd
        rows = [row for c in self._compiles for row in graph_rows(c)]
        df = pd.DataFrame(rows, columns=GRAPH_COLUMNS)
        df = df.sort_values(["rank"], kind="stable").reset_index(drop=True)
        for col in ("nodes", "saved"):
            df[col] = df[col].astype("Int64")
        for col in ("frame", "source", "recompile_reason", "graph_break_reason"):
            df[col] = pd.Series([None if pd.isna(v) else v for v in df[col]], index=df.index, dtype="object")
        return df

    def _find(self, rank: int, compile_id: str | None, piece: int) -> tuple[_Compile, _Piece]:
        mine = [c for c in self._compiles if c.rank == rank]
        if not mine:
            raise LogError(f"the log has no rank {rank}", f"ranks in this log: {', '.join(map(str, self.ranks))}")
        if compile_id is None:
            for c in mine:
                for p in c.pieces:
                    if "aot_joint_graph" in p.offsets:
                        return c, p
            for c in mine:
                for p in c.pieces:
                    if "aot_inference_graph" in p.offsets:
                        return c, p
            raise LogError(f"rank {rank} logged no AOT graph", "see run.graphs for what it compiled")
        for c in mine:
            if c.compile_id == str(compile_id):
                if not c.pieces:
                    raise LogError(f"compile {compile_id} on rank {rank} has no AOT graph (dynamo compiled nothing "
                                   "through AOTAutograd there)", "pick a row of run.graphs with joint=True")
                if not 0 <= piece < len(c.pieces):
                    raise LogError(f"compile {compile_id} has {len(c.pieces)} piece(s), not piece {piece}",
                                   f"use piece=0..{len(c.pieces) - 1}")
                return c, c.pieces[piece]
        ids = ", ".join(dict.fromkeys(c.compile_id for c in mine))
        raise LogError(f"rank {rank} has no compile {compile_id!r}", f"compile ids on rank {rank}: {ids}")

    def trace(self, rank: int = 0, compile_id: str | None = None, piece: int = 0) -> Trace:
        """The ``Trace`` of one logged graph (default: the first graph with a backward on ``rank``):
        every view of ``fxviz.trace`` works on it; strategy ``"logged"`` is the run's own partition."""
        from ..trace import Trace

        c, p = self._find(rank, compile_id, piece)
        key = (c.rank, c.compile_id, c.pieces.index(p))
        if key not in self._cache:
            self._cache[key] = Trace(self._capture(c, p))
        result: Trace = self._cache[key]
        return result

    def _capture(self, c: _Compile, p: _Piece) -> Capture:
        builder = _torch.LogGraphBuilder(c.hints)
        with _torch.quiet_torch():
            has_backward = "aot_joint_graph" in p.offsets
            kind = "aot_joint_graph" if has_backward else "aot_inference_graph"
            joint = parse_graph(read_payload(c.file, p.offsets[kind]), builder)
            logged = None
            if has_backward and "aot_forward_graph" in p.offsets and "aot_backward_graph" in p.offsets:
                fwd = parse_graph(read_payload(c.file, p.offsets["aot_forward_graph"]), builder)
                bwd = parse_graph(read_payload(c.file, p.offsets["aot_backward_graph"]), builder)
                logged = (_share_values(fwd.gm, joint.gm), _share_values(bwd.gm, joint.gm))
        gm = joint.gm
        descs = [_torch.node_desc(n) for n in gm.graph.nodes if n.op == "placeholder"]
        if not any(d is not None for d in descs):
            raise LogError("this log's graphs carry no AOT descriptors (# PlainAOTInput...): it was written by a torch "
                           "older than fxviz reads", f"fxviz reads logs of torch {_torch.SUPPORTED_TORCH}")
        dynamo_names: list[str] = []
        user_names: dict[int, str] = {}
        warnings_: list[str] = []
        if c.dynamo_offset >= 0 and len(c.pieces) == 1:
            code = read_payload(c.file, c.dynamo_offset)
            try:
                dynamo_names = parse_def_names(code)
                user_names = _returned_names(code)
            except LogError:
                warnings_.append("dynamo's graph in the log does not parse: inputs keep their graph names")
        elif len(c.pieces) > 1:
            warnings_.append(f"compile {c.compile_id} was split into {len(c.pieces)} graphs (DDP's bucketing): "
                             "inputs keep their graph names")
        _tag_phases(joint.gm)
        names = _input_names(c, dynamo_names)
        state = _state(c)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        tangent_count = len(tangents(gm)) if has_backward else 0
        outs = output_values(gm)
        num_fwd = len(outs) - (len(placeholders) - tangent_count) if has_backward else len(outs)
        info = classify_nodes(gm, num_fwd, names, {}, {}, user_output_names=user_names)
        _annotate_modules(gm, {n: i.qualname for n, i in info.items() if i.role in LIFTED_STATE_ROLES
                               and i.qualname})
        info = classify_nodes(gm, num_fwd, names, {}, {}, user_output_names=user_names)
        graph = JointGraph(gm=gm, has_backward=has_backward, num_fwd_outputs=num_fwd,
                           static_lifetime_input_indices=list(p.static or []), joint_inputs=[], info=info,
                           placeholder_values={}, constant_values={}, index=0,
                           partitioner_caller="torch.compile (read from the log)", logged=logged)
        if has_backward and logged is None:
            warnings_.append("the log has the joint graph but not the forward/backward graphs the run used: "
                             "strategy 'logged' is unavailable")
        origin = f"rank {c.rank}, compile {c.compile_id}" + (f" piece {c.pieces.index(p)}" if len(c.pieces) > 1 else "")
        breaks = [c.graph_break_reason] if c.graph_break_reason else []
        return Capture(graphs=[graph], route="log", params="lifted",
                       loss="loss: what the run's compiled frame returned (read from the log)", graph_breaks=breaks,
                       model=None, fn=None, example_inputs=(), loss_fn=None, reduce=None,
                       input_names=[i.qualname for i in names.values()], warnings=warnings_,
                       name=c.frame or "compiled frame", origin=origin, state=state)

    def compare_ranks(self, compile_id: str | None = None, piece: int = 0) -> pd.DataFrame:
        """Where the ranks' graphs of one compile differ: one row per difference (``what``:
        ``nodes``, ``op``, ``shape``, ``saved_bytes``), one column per rank.  Empty when they agree."""
        import pandas as pd
        if compile_id is None:
            compile_id = self._find(self.ranks[0], None, piece)[0].compile_id
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
            table = t.memory_table(["logged"]) if t.graph.logged is not None else None
            saved.append(int(table["saved_activation_bytes"].iloc[0]) if table is not None
                         and "saved_activation_bytes" in table else None)
        add("saved_bytes", None, saved)
        return pd.DataFrame(rows, columns=["what", "node"] + cols)

    def __repr__(self) -> str:
        skipped = (f", skipped {sum(self.skipped.values())} records of {len(self.skipped)} kinds"
                   if self.skipped else "")
        return (f"<fxviz.Run {self.path}: {len(self.ranks)} rank(s), {self.compile_count} compile(s), "
                f"{self.aot_graph_count} AOT graph(s){skipped}>")


def _returned_names(code: str) -> dict[int, str]:
    """dynamo's names for what the frame returns (``cross_entropy``), by output position."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            return {i: e.id for i, e in enumerate(node.value.elts) if isinstance(e, ast.Name)}
    return {}


def load_logs(path: str | os.PathLike[str], on_compile: Callable[[_Compile], None] | None = None) -> Run:
    """Read a ``TORCH_TRACE`` directory (one file per rank) or one log file into a :class:`Run`.

    Each file is streamed once (memory stays bounded whatever its size).  A missing path, a
    file that is not a trace log, or a log without any AOT graph raises ``LogError``; a truncated
    or partly corrupt file, or one from a torch fxviz does not support, gives a ``FxvizWarning``.
    ``on_compile(c)`` sees each compile as its reading ends (``graph_rows(c)``: its rows of ``graphs``).
    """
    p = pathlib.Path(path)
    files = log_files(p)
    indexes = []
    for i, f in enumerate(files):
        fi = _FileIndex(f, i)
        fi.read(on_compile)
        if fi.stats.records == 0:
            warnings.warn(f"{os.path.basename(f)} is not a TORCH_TRACE log (no records): skipped", FxvizWarning,
                          stacklevel=2)
            continue
        if fi.stats.truncated:
            warnings.warn(f"{os.path.basename(f)} is truncated (it ends inside a record): its last graph may be "
                          "incomplete", FxvizWarning, stacklevel=2)
        if fi.stats.corrupt_lines:
            warnings.warn(f"{os.path.basename(f)}: skipped {fi.stats.corrupt_lines} corrupt line(s)", FxvizWarning,
                          stacklevel=2)
        indexes.append(fi)
    if not indexes:
        raise LogError(f"{p} holds no TORCH_TRACE log records", "run the training with TORCH_TRACE=dir and pass dir")
    run = Run(p, indexes)
    for v in run.torch_versions:
        if not _supported(v):
            warnings.warn(f"the log was written by torch {v}; fxviz reads logs of torch {_torch.SUPPORTED_TORCH}: "
                          "some graphs may not be rebuilt", FxvizWarning, stacklevel=2)
    if not run.aot_graph_count:
        raise LogError(f"the log holds no AOT graph ({run.compile_count} dynamo compile(s)): an inference-only run "
                       "with AOT graphs logged elsewhere, backend='eager', or dynamo compiled nothing",
                       "log a training step compiled with an AOTAutograd backend (inductor, aot_eager)")
    return run


def _supported(version: str) -> bool:
    m = re.match(r"(\d+)\.(\d+)", version)
    if not m:
        return False
    lo = re.search(r">=(\d+)\.(\d+)", _torch.SUPPORTED_TORCH)
    hi = re.search(r"<(\d+)\.(\d+)", _torch.SUPPORTED_TORCH)
    v = (int(m.group(1)), int(m.group(2)))
    return bool(lo and hi and (int(lo.group(1)), int(lo.group(2))) <= v < (int(hi.group(1)), int(hi.group(2))))
