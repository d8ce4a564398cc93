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
import operator
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
from ..errors import Do, FxvizWarning, LogError, Say, Span
from ..graph_facts import is_cast, is_view_op, tangent_dependent, tangents, traced_phases
from ..roles import LIFTED_STATE_ROLES, InputName, classify_nodes
from .graph_code import parse_def_names, parse_graph
from .reader import ReadStats, Record, log_files, read_payload, read_records, warn_other_torch

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..facade import Trace

__all__ = ["Run", "load_logs", "graph_rows", "GRAPH_COLUMNS", "READ_KINDS"]

_GRAPHS = Do("graphs", on="run", attr=True)
"""Where a run lists its graphs (``run.graphs``; ``fxviz logs DIR``), for hints."""
GRAPH_COLUMNS = ["rank", "compile_id", "piece", "attempt", "frame", "source", "backend", "joint", "forward", "backward",
                 "inference", "nodes", "saved", "recompile_reason", "graph_break_reason", "file"]

READ_KINDS = frozenset({
    "dynamo_start", "dynamo_output_graph", "aot_joint_graph", "aot_forward_graph", "aot_backward_graph",
    "aot_inference_graph", "compilation_metrics", "describe_source", "describe_tensor", "create_symbol", "str",
    "artifact",
})
"""Record kinds fxviz reads; every other kind is skipped and counted in ``Run.skipped``."""

_INDUCTOR_ARTIFACTS = frozenset({"before_pre_grad_graph", "after_pre_grad_graph", "before_post_grad_graph",
                                 "after_post_grad_graph", "fx_graph_cache_hit", "fx_graph_cache_miss"})
"""Artifacts only inductor's ``compile_fx`` logs (with ``inductor_*`` record kinds): how a log says
which backend compiled a frame (no record names the backend itself)."""
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
    backend: str = "aot_eager"  # "inductor" when the compile wrote inductor's own records

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
        if rec.kind.startswith("inductor_") or (rec.artifact_name or "") in _INDUCTOR_ARTIFACTS:
            c.backend = "inductor"  # only inductor writes these: the run compiled with it
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


def _annotate_modules(gm: fx.GraphModule, info_inputs: dict[str, str], phases: dict[str, str]) -> None:
    """Give every op the module path the log lets fxviz place (a log records source lines but
    not dynamo's module stack), in three steps:

    1. an op that reads a parameter (directly or through a view or cast of it) is in the module
       that owns the parameter (``blocks.0.attn.in_proj_weight`` -> ``blocks.0.attn``);
    2. the other ops of a *source block* (the run of ops under one ``# File:`` comment, one line of
       the user's code) are in the modules' common prefix: GELU between ``blocks.0.fc`` and
       ``blocks.0.proj`` is in ``blocks.0``, attention's views between its projections in
       ``blocks.0.attn``; where the modules share nothing, an op is in its producer's module
       (``getitem`` of ``ln_f``'s layer norm), else in its consumer's;
    3. a backward op is in the common module of the forward values it reads (its saved
       activations and parameters), else in its source block's, else in the module of the
       backward op it follows (the gradient arriving from its user).
    Ops of the top-level frame (the loss) stay without a module, as in a traced model."""
    owner: dict[str, str] = {}
    module: dict[str, str] = {}
    for n in gm.graph.nodes:
        if n.op == "placeholder" and n.name in info_inputs and "." in info_inputs[n.name]:
            owner[n.name] = info_inputs[n.name].rsplit(".", 1)[0]
            continue
        if n.op != "call_function" or phases.get(n.name) != "forward":
            continue
        if n.target is operator.getitem and isinstance(n.args[0], fx.Node) and n.args[0].name in module:
            module[n.name] = module[n.args[0].name]  # an element of a multi-output op (layer norm's mean)
            continue
        mods = [owner[a.name] for a in n.all_input_nodes if a.name in owner]
        if not mods:
            continue
        # a view or a cast of a parameter (a transposed weight, an autocast copy) is the parameter's
        if (is_view_op(n.target) or is_cast(n)) and len(mods) == len(n.all_input_nodes):
            owner[n.name] = mods[0]
        module[n.name] = mods[0]
    blocks = _source_blocks(gm)
    for ops in blocks:  # step 2: forward ops by source block
        if phases.get(ops[0].name) != "forward":
            continue
        common = _common_module([module[n.name] for n in ops if n.name in module])
        for n in ops:
            if common and n.name not in module:
                module[n.name] = common
        inside = {n.name for n in ops}
        for n in ops:  # modules with nothing in common (``self.head(self.ln_f(x))``): the producer's
            made = [module[a.name] for a in n.all_input_nodes if a.name in inside and a.name in module]
            if n.name not in module and made:
                module[n.name] = made[0]
        for n in reversed(ops):  # else the consumer's
            used = [module[u.name] for u in n.users if u.name in inside and u.name in module]
            if n.name not in module and used:
                module[n.name] = used[0]
    block_of = {n.name: i for i, ops in enumerate(blocks) for n in ops}
    line_modules: dict[str | None, set[str]] = {}  # source line -> the modules of its forward ops
    for n in gm.graph.nodes:
        if phases.get(n.name) == "forward" and n.name in module:
            line_modules.setdefault(_torch.stack_trace(n), set()).add(module[n.name])
    for ops in blocks:  # step 3: backward ops, in graph order
        if phases.get(ops[0].name) != "backward":
            continue
        for n in ops:
            common = _backward_module(n, module, owner, phases, line_modules)
            if common:
                module[n.name] = common
        known = _common_module([module[n.name] for n in ops if n.name in module])
        for n in ops:
            if n.name not in module:
                came = [module[a.name] for a in n.all_input_nodes if a.name in module
                        and phases.get(a.name) == "backward" and block_of.get(a.name) is not None]
                m = known or (came[0] if came else None)
                if m:
                    module[n.name] = m
    for n in gm.graph.nodes:
        if n.name in module:
            _torch.LogGraphBuilder.set_module(n, module[n.name], forward=phases.get(n.name) == "forward")


def _backward_module(n: fx.Node, module: dict[str, str], owner: dict[str, str], phases: dict[str, str],
                     line_modules: dict[str | None, set[str]]) -> str | None:
    """The module a backward op differentiates: the forward values it reads from its own source
    line (AOTAutograd gives a backward op the source line of the forward op it differentiates) and
    the parameters it reads; else the one module that line has in the forward; else the common
    module of every forward value it reads."""
    trace = _torch.stack_trace(n)
    forward = [a for a in n.all_input_nodes if phases.get(a.name) == "forward" or a.name in owner]
    same = [owner.get(a.name) or module.get(a.name) for a in forward
            if a.name in owner or _torch.stack_trace(a) == trace]
    found = _common_module([m for m in same if m])
    if found:
        return found
    if len(line_modules.get(trace, ())) == 1:
        return next(iter(line_modules[trace]))
    return _common_module([m for m in (module.get(a.name) for a in forward) if m])


def _source_blocks(gm: fx.GraphModule) -> list[list[fx.Node]]:
    """Runs of consecutive ops of one phase under one source line (torch prints the ``# File:``
    comment once per run)."""
    blocks: list[list[fx.Node]] = []
    key: Any = None
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        k = (_torch.stack_trace(n), _torch.partitioner_tag(n))
        if not blocks or k != key:
            blocks.append([])
            key = k
        blocks[-1].append(n)
    return blocks


def _common_module(paths: list[str]) -> str | None:
    """The longest module path every one of ``paths`` lies in (``blocks.0.fc``, ``blocks.0.proj``
    -> ``blocks.0``); None for none, or when they share nothing (the root)."""
    if not paths:
        return None
    parts = [p.split(".") for p in paths]
    common: list[str] = []
    for items in zip(*parts):
        if len(set(items)) != 1:
            break
        common.append(items[0])
    return ".".join(common) or None


def _share_values(part: fx.GraphModule, joint: fx.GraphModule) -> fx.GraphModule:
    """Give the run's forward/backward nodes the joint node's fake value of the same name (the
    partitioner copies nodes by name), so storages, and hence saved bytes, are counted as one.
    A node the partitioner made itself may reuse a joint name (min-cut's RNG functionalization
    names its saved RNG state ``getitem_21``, a name the joint gives a layer-norm gradient): a
    value is shared only with a node of the same op on the same inputs, or, for a backward input, of the same
    dtype and shape."""
    nodes = {n.name: n for n in joint.graph.nodes}
    for n in part.graph.nodes:
        j = nodes.get(n.name)
        val = _torch.meta_val(j) if j is not None else None
        if val is None or j is None:
            continue
        same = (n.op == j.op and n.target == j.target and str(n.args) == str(j.args)) if n.op == "call_function" \
            else _same_kind(
            _torch.meta_val(n), val)
        if same:
            _torch.LogGraphBuilder.set_val(n, val)
    return part


def _same_kind(a: Any, b: Any) -> bool:
    """Same dtype and shape (tensors), or both not tensors: a parsed value and a joint value agree."""
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and str(list(a.shape)) == str(list(b.shape))
    return not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor)


def _tag_new_nodes(gm: fx.GraphModule) -> None:
    """Tag the ops inductor's joint passes added (their replacements carry no tag): an op that
    reads a tangent or a backward op, directly or not, is backward; any other is forward.  Then
    put every forward op before the first backward op, as AOTAutograd traced them (the passes
    insert replacements where the pattern was): torch's default partitioner takes every node up
    to the last forward-tagged one as the forward."""
    late = tangent_dependent(gm)
    for n in gm.graph.nodes:
        if n.op == "call_function" and _torch.partitioner_tag(n) is None:
            backward = n in late or any(_torch.partitioner_tag(a) == "is_backward" for a in n.all_input_nodes)
            _torch.LogGraphBuilder.set_tag(n, "is_backward" if backward else "is_forward")
    nodes = list(gm.graph.nodes)
    first_bwd = next((n for n in nodes if n.op == "call_function" and _torch.partitioner_tag(n) == "is_backward"), None)
    if first_bwd is None:
        return
    for n in nodes[nodes.index(first_bwd):]:
        if n.op == "call_function" and _torch.partitioner_tag(n) == "is_forward":
            first_bwd.prepend(n)  # forward ops read only forward ops and inputs: the order stays valid
    gm.graph.lint()
    gm.recompile()


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
            "frame": c.frame, "source": c.source, "backend": c.backend, "joint": "aot_joint_graph" in off,
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
            raise LogError(f"rank {rank} logged no AOT graph", Say("see ", _GRAPHS, " for what it compiled"))
        for c in mine:
            if c.compile_id == str(compile_id):
                if not c.pieces:
                    raise LogError(f"compile {compile_id} on rank {rank} has no AOT graph (dynamo compiled nothing "
                                   "through AOTAutograd there)", Say("pick a row of ", _GRAPHS, " with joint=True"))
                if not 0 <= piece < len(c.pieces):
                    raise LogError(f"compile {compile_id} has {len(c.pieces)} piece(s), not piece {piece}",
                                   Say("use ", Do("trace", (("piece", Span(0, len(c.pieces) - 1)),), on="run")))
                return c, c.pieces[piece]
        ids = ", ".join(dict.fromkeys(c.compile_id for c in mine))
        raise LogError(f"rank {rank} has no compile {compile_id!r}", f"compile ids on rank {rank}: {ids}")

    def trace(self, rank: int = 0, compile_id: str | None = None, piece: int = 0) -> Trace:
        """The ``Trace`` of one logged graph (default: the first graph with a backward on ``rank``):
        every view of ``fxviz.trace`` works on it; strategy ``"logged"`` is the run's own partition."""
        from ..facade import Trace

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
        before = None
        if c.backend == "inductor" and has_backward:
            # the run's min-cut partitioned the graph after inductor's joint passes; the log holds
            # the one before them: run them (the pre-pass graph is kept, as fxviz.trace does)
            before = gm
            with _torch.quiet_torch():
                gm = _torch.inductor_joint_passes(gm)
            _tag_new_nodes(gm)
            if logged is not None:
                logged = (_share_values(logged[0], gm), _share_values(logged[1], gm))
        warnings_ += joint.notes + _torch.joint_passes_note(gm)  # issue 33: what a foreign log could not give
        names = _input_names(c, dynamo_names)
        state = _state(c)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        tangent_count = len(tangents(gm)) if has_backward else 0
        outs = output_values(gm)
        num_fwd = len(outs) - (len(placeholders) - tangent_count) if has_backward else len(outs)
        info = classify_nodes(gm, num_fwd, names, {}, {}, user_output_names=user_names)
        _annotate_modules(gm, {n: i.qualname for n, i in info.items() if i.role in LIFTED_STATE_ROLES
                               and i.qualname}, {n: i.phase for n, i in info.items()})
        info = classify_nodes(gm, num_fwd, names, {}, {}, user_output_names=user_names)
        graph = JointGraph(gm=gm, has_backward=has_backward, num_fwd_outputs=num_fwd,
                           static_lifetime_input_indices=list(p.static or []), joint_inputs=[], info=info,
                           placeholder_values={}, constant_values={}, index=0,
                           partitioner_caller="torch.compile (read from the log)", logged=logged,
                           inference=not has_backward, backend=c.backend, before_joint_passes=before,
                           compiler="inductor" if c.backend == "inductor" else None)
        if has_backward and logged is None:
            warnings_.append("the log has the joint graph but not the forward/backward graphs the run used: "
                             "strategy 'logged' is unavailable")
        origin = f"rank {c.rank}, compile {c.compile_id}" + (f" piece {c.pieces.index(p)}" if len(c.pieces) > 1 else "")
        breaks = [c.graph_break_reason] if c.graph_break_reason else []
        return Capture(graphs=[graph], route="log", params="lifted",
                       loss="loss: what the run's compiled frame returned (read from the log)", graph_breaks=breaks,
                       model=None, fn=None, example_inputs=(), loss_fn=None, reduce=None,
                       input_names=[i.qualname for i in names.values()], warnings=warnings_,
                       name=c.frame or "compiled frame", origin=origin, state=state, backend=c.backend)

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

    def eager_frames(self, rank: int | None = None) -> list[str]:
        """The frames dynamo compiled nothing for and ran as plain Python (``forward (model.py:32):
        why``): what they compute outside the graphs they call is in no graph of the log."""
        out = []
        for c in self._compiles:
            if c.pieces or (rank is not None and c.rank != rank):
                continue
            why = c.graph_break_reason or c.fail_reason or "dynamo compiled no graph for it"
            out.append(f"{c.frame or 'a frame'} ({os.path.basename(c.source or '?')}): {why}")
        return out

    def totals(self) -> pd.DataFrame:
        """Per rank: graphs with a backward, inference-only graphs, frames run eagerly, and the
        activation bytes the run saved (strategy ``logged``) summed over its graphs.  The log
        records compiles, not calls: a graph dynamo reused (one block's graph for every block)
        is counted once (``runs_known`` is False)."""
        import pandas as pd

        rows = []
        for rank in self.ranks:
            saved, graphs, inference = 0, 0, 0
            for c in (c for c in self._compiles if c.rank == rank):
                for k, p in enumerate(c.pieces):
                    if "aot_inference_graph" in p.offsets:
                        inference += 1
                    elif {"aot_forward_graph", "aot_backward_graph"} <= set(p.offsets):
                        graphs += 1
                        row = self.trace(rank, c.compile_id, k).memory_table(["logged"]).iloc[0]
                        saved += 0 if pd.isna(row["saved_activation_bytes"]) else int(row["saved_activation_bytes"])
            rows.append({"rank": rank, "graphs": graphs, "inference_graphs": inference,
                         "eager_frames": len(self.eager_frames(rank)), "saved_activation_bytes": saved,
                         "runs_known": False})
        return pd.DataFrame(rows, columns=["rank", "graphs", "inference_graphs", "eager_frames",
                                           "saved_activation_bytes", "runs_known"])

    def summary(self) -> str:
        """The whole run in a few lines: graphs per rank, the frames that fell back to eager (what
        they compute is in no graph), and per rank the activation bytes the run saved over all its
        graphs (each graph counted once: the log records compiles, not how often a graph ran)."""
        from ..units import format_bytes

        lines = [f"{self.path}: {len(self.ranks)} rank(s), {self.compile_count} compile(s), "
                 f"{self.aot_graph_count} AOT graph(s)"]
        for _, t in self.totals().iterrows():
            rank = int(t["rank"])
            parts = [f"{t['graphs']} graph(s) with a backward"]
            if t["inference_graphs"]:
                parts.append(f"{t['inference_graphs']} inference only (nothing saved for a backward)")
            if t["eager_frames"]:
                parts.append(f"{t['eager_frames']} frame(s) ran as plain Python")
            lines.append(f"rank {rank}: " + ", ".join(parts))
            if t["graphs"]:
                lines.append(f"  saved by the run: {format_bytes(int(t['saved_activation_bytes']))} of activations "
                             "over its graphs, each counted once (the log does not say how often a graph ran)")
            for frame in self.eager_frames(rank):
                lines.append(f"  eager: {frame}; what it computes outside the graphs it calls is in no graph")
        return "\n".join(lines)

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
    warn_other_torch(run.torch_versions)  # issue 33.2: results are the reading torch's
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
