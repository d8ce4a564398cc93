"""What to draw, before any DOT is written: a *scene* of items (joint name, ``NodeInfo``, side,
overlay marks) and edges, built from the joint graph or from one side of a ``Partition`` with
node names mapped back to joint names, optionally highlighted and grouped by module path.

Nothing here re-derives an analysis fact: saved / recomputed / removed come from the
``Partition``, bytes from ``NodeInfo`` or the memory analysis.
"""

from __future__ import annotations

import re
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import torch.fx as fx

from ..analysis.partition import Partition
from ..units import format_bytes
from ..capture import JointGraph
from ..roles import NodeInfo

__all__ = [
    "RECOMPUTED_SUFFIX",
    "VIEWS",
    "Item",
    "Group",
    "Scene",
    "joint_scene",
    "partition_scene",
    "compare_scene",
    "apply_highlight",
    "group_scene",
    "auto_depth",
    "module_path",
    "format_tensor",
]

RECOMPUTED_SUFFIX = "~recomputed"
VIEWS = ("joint", "forward", "backward")

_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
           "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
           "complex64": "c64", "complex128": "c128", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


# --- formatting ----------------------------------------------------------------------------------
def format_tensor(info: NodeInfo) -> str:
    """``f32[8, 64]`` (torch's own short form), or ``''`` when the value is not one tensor."""
    if info.shape is None or info.dtype is None:
        return ""
    return f"{_DTYPES.get(info.dtype, info.dtype)}[{', '.join(str(s) for s in info.shape)}]"


# --- scenes --------------------------------------------------------------------------------------
@dataclass
class Item:
    """One drawn graph node."""

    id: str  # DOT name = SVG <title>: the joint name (plus RECOMPUTED_SUFFIX for a backward copy)
    joint: str
    info: NodeInfo
    side: str  # "forward" | "backward": which half of the picture it sits in
    saved: bool = False
    recomputed: bool = False
    removed: bool = False
    cmp_saved: str | None = None  # "A-only" | "B-only" | "both"
    cmp_recomputed: str | None = None
    highlighted: bool | None = None  # None when nothing is highlighted
    users: list[str] = field(default_factory=list)
    detail: str = ""  # shown after the op name: which element a getitem takes


@dataclass
class Group:
    """One collapsed module box."""

    id: str
    path: str
    side: str
    members: list[Item]
    pattern: str | None = None
    repeats: int = 1


@dataclass
class Scene:
    """What to draw, before any DOT is written."""

    items: dict[str, Item]
    edges: list[tuple[str, str]]  # (producer id, consumer id), in graph order
    view: str
    title: str
    caption: list[str] = field(default_factory=list)
    two_sides: bool = False  # forward and backward clusters, backward drawn bottom-up
    compare_names: tuple[str, str] | None = None
    group_depth: int | None = None
    grouped: bool = False
    groups: dict[str, Group] = field(default_factory=dict)
    unit_of: dict[str, str] = field(default_factory=dict)  # item id -> drawn unit id


def _real_nodes(gm: fx.GraphModule) -> list[fx.Node]:
    """Every node but ``output`` (each returned value is already marked by its role)."""
    return [n for n in gm.graph.nodes if n.op != "output"]


def _fallback_info(n: fx.Node, side: str) -> NodeInfo:
    from .._torch import meta_val
    from ..roles import short_op, tensor_facts

    shape, dtype, nbytes = tensor_facts(meta_val(n))
    role = "primal" if n.op == "placeholder" else "constant" if n.op == "get_attr" else side
    return NodeInfo(name=n.name, op=n.op, target=str(n.target), short_op=short_op(n), role=role, phase=side,
                    qualname=None, module=None, shape=shape, dtype=dtype, bytes=nbytes, source=None,
                    source_code=None, seq_nr=None)


def _detail(n: fx.Node) -> str:
    """``[1]`` for ``getitem(x, 1)``: which output of a multi-output op (max_pool2d's indices,
    dropout's mask) a node takes -- otherwise every getitem looks the same."""
    if n.op == "call_function" and getattr(n.target, "__name__", "") == "getitem" and len(n.args) > 1 \
            and isinstance(n.args[1], int):
        return f"[{n.args[1]}]"
    return ""


def _edges(nodes: Sequence[fx.Node], ids: dict[str, str]) -> list[tuple[str, str]]:
    edges = []
    for n in nodes:
        for a in n.all_input_nodes:
            if a.name in ids and n.name in ids:
                edges.append((ids[a.name], ids[n.name]))
    return edges


def _users(nodes: Sequence[fx.Node], ids: dict[str, str]) -> dict[str, list[str]]:
    return {ids[n.name]: [ids.get(u.name, "output") for u in n.users] for n in nodes
            if n.name in ids}


def joint_scene(graph: JointGraph, partition: Partition | None = None, title: str = "") -> Scene:
    """The joint graph, forward and backward side by side; marks from ``partition`` if given."""
    nodes = _real_nodes(graph.gm)
    ids = {n.name: n.name for n in nodes}
    users = _users(nodes, ids)
    items: dict[str, Item] = {}
    saved = set(partition.saved) if partition is not None else set()
    for n in nodes:
        info = graph.info[n.name]
        items[n.name] = Item(
            id=n.name, joint=n.name, info=info, side=info.phase, saved=n.name in saved,
            recomputed=partition is not None and n.name in partition.recomputed,
            removed=partition is not None and n.name in partition.removed,
            users=users[n.name], detail=_detail(n))
    scene = Scene(items=items, edges=_edges(nodes, ids), view="joint", title=title,
                  two_sides=graph.has_backward)
    if partition is not None:
        scene.caption.append(_totals_line(graph, partition))
    return scene


def compare_scene(graph: JointGraph, a: Partition, b: Partition, title: str = "") -> Scene:
    """The joint graph marked with what strategy A saves/recomputes that B does not, and back."""
    scene = joint_scene(graph, None, title=title)
    sa, sb = set(a.saved), set(b.saved)
    for it in scene.items.values():
        it.cmp_saved = _which(it.joint in sa, it.joint in sb)
        it.cmp_recomputed = _which(it.joint in a.recomputed, it.joint in b.recomputed)
        it.removed = it.joint in a.removed and it.joint in b.removed
    scene.view = "compare"
    scene.compare_names = (a.name, b.name)
    scene.caption.append("A = " + _totals_line(graph, a))
    scene.caption.append("B = " + _totals_line(graph, b))
    only_a = len(sa - sb)
    only_b = len(sb - sa)
    scene.caption.append(f"saved by A only: {only_a}, by B only: {only_b}, by both: {len(sa & sb)}; "
                         f"recomputed by A only: {len(a.recomputed - b.recomputed)}, "
                         f"by B only: {len(b.recomputed - a.recomputed)}")
    return scene


def _which(in_a: bool, in_b: bool) -> str | None:
    return "both" if in_a and in_b else "A-only" if in_a else "B-only" if in_b else None


def partition_scene(graph: JointGraph, partition: Partition, side: str, title: str = "") -> Scene:
    """One side (``"forward"`` or ``"backward"``) of a partition, its nodes named by joint name.

    Forward: saved outputs carry the saved badge.  Backward: the saved values arrive as inputs
    (drawn with their joint role and the saved badge, edges out of them thick); ops the backward
    runs again are marked recomputed.
    """
    gm = partition.forward if side == "forward" else partition.backward
    mapping = partition.fw_to_joint if side == "forward" else partition.bw_to_joint
    if gm is None:
        raise ValueError(f"partition {partition.name!r} has no {side} graph: {partition.error}")
    nodes = _real_nodes(gm)
    in_forward = set(partition.fw_to_joint.values())
    saved = set(partition.saved)
    ids: dict[str, str] = {}
    taken: set[str] = set()
    infos: dict[str, tuple[str, NodeInfo, bool]] = {}
    for n in nodes:
        joint = mapping.get(n.name)
        info = graph.info.get(joint) if joint is not None else None
        if joint is None or info is None:
            joint, info = n.name, _fallback_info(n, side)
        recomputed = (side == "backward" and n.op == "call_function" and info.phase == "forward")
        ident = joint + RECOMPUTED_SUFFIX if recomputed and joint in in_forward else joint
        base, k = ident, 2
        while ident in taken:  # two partition nodes for one joint node: keep ids unique
            ident, k = f"{base}~{k}", k + 1
        taken.add(ident)
        ids[n.name] = ident
        infos[n.name] = (joint, info, recomputed)
    users = _users(nodes, ids)
    items: dict[str, Item] = {}
    for n in nodes:
        joint, info, recomputed = infos[n.name]
        is_saved = joint in saved and (side == "forward" or n.op == "placeholder")
        items[ids[n.name]] = Item(id=ids[n.name], joint=joint, info=info, side=side, saved=is_saved,
                                  recomputed=recomputed, users=users[ids[n.name]], detail=_detail(n))
    scene = Scene(items=items, edges=_edges(nodes, ids), view=side, title=title)
    scene.caption.append(_totals_line(graph, partition))
    return scene


def _bytes_text(activation: int, params: int, inputs: int, storages: int) -> str:
    parts = [f"activations {format_bytes(activation)}"]
    if params:
        parts.append(f"parameters {format_bytes(params)}")
    if inputs:
        parts.append(f"inputs {format_bytes(inputs)}")
    return ", ".join(parts) + f" in {storages} storages"


def _saved_bytes_text(graph: JointGraph, partition: Partition) -> str:
    """The saved bytes as the memory analysis counts them (by storage: views and aliases once,
    parameters and inputs apart from activations) or, for eager, as measured; if neither is
    available, the nominal sum of the saved nodes' ``numel x itemsize``, labelled so."""
    measured = partition.measurement  # the eager reference has no graphs
    if measured is not None:
        return _bytes_text(measured.activation_bytes, measured.param_bytes, measured.input_bytes,
                           measured.storages) + ", measured in eager"
    if partition.forward is not None:
        try:
            from ..analysis.memory import saved_memory

            mem = saved_memory(partition, graph)
            return _bytes_text(mem.activation_bytes, mem.param_bytes, mem.input_bytes, len(mem.storages))
        except (ImportError, AttributeError, TypeError):
            pass
    total = sum(graph.info[s].bytes or 0 for s in partition.saved if s in graph.info)
    return f"{format_bytes(total)} nominal (numel x itemsize per value; shared storage counted again)"


def _totals_line(graph: JointGraph, partition: Partition) -> str:
    label = partition.label
    if partition.error:
        return f"{label}: failed: {partition.error}"
    line = (f"{label}: saves {len(partition.saved)} values ({_saved_bytes_text(graph, partition)}); "
            f"recomputes {len(partition.recomputed)} ops; removes {len(partition.removed)}")
    unmapped = partition.unmapped
    if unmapped:
        line += f"; {len(unmapped)} saved values match no joint node (not marked)"
    return line


def apply_highlight(scene: Scene, patterns: Iterable[str]) -> int:
    """Mark items whose name, op, real name or module matches one of ``patterns`` (a module
    pattern matches its submodules too).  Returns how many matched."""
    pats = [p for p in patterns if p]
    if not pats:
        return 0
    hits = 0
    for it in scene.items.values():
        i = it.info
        cands = [it.joint, it.id, i.short_op, i.target, i.qualname or "", i.module or ""]
        ok = any(p == c for p in pats for c in cands) or any(
            c.startswith(p + ".") for p in pats for c in (i.module or "", i.qualname or ""))
        it.highlighted = ok
        hits += ok
    return hits


# --- grouping by module --------------------------------------------------------------------------
_STATE_ROLES = ("parameter", "buffer", "constant")


def module_path(info: NodeInfo) -> list[str]:
    """The module path a node is grouped under: its recorded module, or for a parameter, buffer
    or constant the module that owns it (``features.0.weight`` -> ``features.0``)."""
    if info.module:
        return info.module.split(".")
    if info.role in _STATE_ROLES and info.qualname and "." in info.qualname:
        return info.qualname.split(".")[:-1]
    return []


def auto_depth(scene: Scene, limit: int) -> int:
    """The deepest module depth whose collapsed drawing has at most ``limit`` units (at least 1)."""
    best = 1
    for depth in range(1, 12):
        units = {(it.side, ".".join(module_path(it.info)[:depth])) if len(module_path(it.info)) >= depth else it.id
                 for it in scene.items.values()}
        if len(units) > limit:
            break
        best = depth
        if all(len(module_path(it.info)) < depth for it in scene.items.values()):
            break
    return best


def group_scene(scene: Scene, depth: int | None) -> Scene:
    """Cluster items by module path; modules at ``depth`` (1 = top-level) become single boxes."""
    scene.grouped = True
    scene.group_depth = depth
    groups: dict[str, Group] = {}
    for it in scene.items.values():
        path = module_path(it.info)
        if depth is not None and len(path) >= depth:
            key = ".".join(path[:depth])
            gid = f"{it.side}/{urllib.parse.quote(key, safe='._-')}"
            if gid not in groups:
                groups[gid] = Group(id=gid, path=key, side=it.side, members=[])
            groups[gid].members.append(it)
            scene.unit_of[it.id] = gid
        else:
            scene.unit_of[it.id] = it.id
    _find_patterns(groups)
    scene.groups = groups
    return scene


_INDEXED = re.compile(r"^(.*?)(\d+)$")
_PATTERN_MIN_NODES = 3  # two ReLUs being alike is not worth a mark; two transformer blocks are


def _find_patterns(groups: dict[str, Group]) -> None:
    """Boxes of modules that differ only in a trailing index and hold the same ops with the same
    shapes (``h.0`` ... ``h.11``) get the same pattern letter and a repeat count."""
    by_sig: dict[tuple, list[Group]] = {}
    for g in groups.values():
        m = _INDEXED.match(g.path)
        stem = m.group(1) if m else None
        if stem is None:
            continue
        sig = (g.side, stem, tuple(sorted(Counter((i.info.short_op, i.info.shape, i.info.dtype, i.info.role)
                                                  for i in g.members).items(), key=repr)))
        by_sig.setdefault(sig, []).append(g)
    letters = iter("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    names: dict[tuple, str] = {}
    for sig, gs in by_sig.items():
        if len(gs) < 2 or len(gs[0].members) < _PATTERN_MIN_NODES:
            continue
        names[sig] = next(letters, "?")
        for g in gs:
            g.pattern, g.repeats = names[sig], len(gs)
