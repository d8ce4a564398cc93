"""Graph + overlays -> ``graphviz.Digraph``.

Three steps, each a small function:

1. a *scene*: the nodes to draw (``Item``: joint name, ``NodeInfo``, side, overlay marks) and the
   edges between them, built from the joint graph (``joint_scene``) or from one side of a
   ``Partition`` (``partition_scene``) with node names mapped back to joint names;
2. optionally *grouped* by module path (``group_scene``): nested clusters, and below ``depth``
   one box per module that shows its node count, role mix and saved bytes;
3. *emitted* as DOT (``to_digraph``) with HTML-like labels (every model-provided string goes
   through ``html.escape``; never ``shape=record``), tooltips, and a legend + caption.

Every drawn node's DOT name, hence its SVG ``<title>``, is its joint-graph node name, so the
report and the widget can find it.  A recomputed copy in the backward view of a node the forward
also computes is named ``<joint name>~recomputed``.  Every SVG edge title is ``producer->consumer``.
Nothing here re-derives an analysis fact: saved / recomputed / removed come from the ``Partition``.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import graphviz
import torch.fx as fx

from . import theme
from ..analysis.partition import Partition
from ..capture import JointGraph
from ..roles import ROLES, NodeInfo

__all__ = [
    "RECOMPUTED_SUFFIX",
    "VIEWS",
    "LAYOUT_ATTRS",
    "Item",
    "Scene",
    "joint_scene",
    "partition_scene",
    "compare_scene",
    "group_scene",
    "to_digraph",
    "format_bytes",
    "format_tensor",
    "auto_depth",
]

RECOMPUTED_SUFFIX = "~recomputed"
VIEWS = ("joint", "forward", "backward")

# Bounded network-simplex and crossing-minimisation iterations: the measured difference between
# minutes and seconds on a few hundred nodes (docs/rendering-timings.md).
LAYOUT_ATTRS: dict[str, str] = {"nslimit": "2", "nslimit1": "2", "mclimit": "0.5"}

_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
           "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
           "complex64": "c64", "complex128": "c128", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


# --- formatting ----------------------------------------------------------------------------------
def format_bytes(n: int | None) -> str:
    """``2048`` -> ``'2.0 KiB'``."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def format_tensor(info: NodeInfo) -> str:
    """``f32[8, 64]`` (torch's own short form), or ``''`` when the value is not one tensor."""
    if info.shape is None or info.dtype is None:
        return ""
    return f"{_DTYPES.get(info.dtype, info.dtype)}[{', '.join(str(s) for s in info.shape)}]"


def _e(text: object) -> str:
    """Escape model-provided text for an HTML-like label; newlines become visible '⏎'."""
    return html.escape(str(text)).replace("\r\n", "\n").replace("\n", " ⏎ ")


def _esc_string(text: str) -> graphviz.quoting.NoHtml:
    """Plain text for an escString attribute (tooltip): backslashes kept literal, newlines as
    graphviz's ``\\n``; never treated as an HTML-like string even if it looks like ``<...>``."""
    text = text.replace("\\", "\\\\").replace("\r\n", "\n").replace("\n", "\\n")
    return graphviz.nohtml(text)


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
    target: str = ""


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


def _edges(nodes: Sequence[fx.Node], ids: dict[str, str]) -> list[tuple[str, str]]:
    edges = []
    for n in nodes:
        for a in n.all_input_nodes:
            if a.name in ids and n.name in ids:
                edges.append((ids[a.name], ids[n.name]))
    return edges


def _users(nodes: Sequence[fx.Node], ids: dict[str, str]) -> dict[str, list[str]]:
    return {ids[n.name]: [ids[u.name] if u.name in ids else "output" for u in n.users] for n in nodes
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
            users=users[n.name], target=info.target)
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
    scene.compare_names = (strategy_name(a), strategy_name(b))
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
        raise ValueError(f"partition {partition.strategy!r} has no {side} graph: {partition.error}")
    nodes = _real_nodes(gm)
    in_forward = set(partition.fw_to_joint.values())
    saved = set(partition.saved)
    ids: dict[str, str] = {}
    taken: set[str] = set()
    infos: dict[str, tuple[str, NodeInfo, bool]] = {}
    for n in nodes:
        joint = mapping.get(n.name)
        info = graph.info.get(joint) if joint is not None else None
        if info is None:
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
                                  recomputed=recomputed, users=users[ids[n.name]],
                                  target=info.target)
    scene = Scene(items=items, edges=_edges(nodes, ids), view=side, title=title)
    scene.caption.append(_totals_line(graph, partition))
    return scene


def _saved_bytes_text(graph: JointGraph, partition: Partition) -> str:
    """The saved bytes as the memory analysis counts them (by storage: views and aliases once,
    parameters and inputs apart from activations); if that layer is unavailable, the nominal sum
    of the saved nodes' ``numel x itemsize``, labelled so."""
    try:
        from ..analysis.memory import saved_memory

        mem = saved_memory(partition, graph)
        parts = [f"activations {format_bytes(mem.activation_bytes)}"]
        if mem.param_bytes:
            parts.append(f"parameters {format_bytes(mem.param_bytes)}")
        if mem.input_bytes:
            parts.append(f"inputs {format_bytes(mem.input_bytes)}")
        return ", ".join(parts) + f" in {len(mem.storages)} storages"
    except (ImportError, AttributeError, TypeError):
        total = sum(graph.info[s].bytes or 0 for s in partition.saved if s in graph.info)
        return f"{format_bytes(total)} nominal (numel x itemsize per value; shared storage counted again)"


def strategy_name(partition: Partition) -> str:
    """The short name of a partition's strategy (``min_cut``, ``budget:0.5:dp``)."""
    return partition.strategy


def _totals_line(graph: JointGraph, partition: Partition) -> str:
    label = partition.label or partition.strategy
    if partition.error:
        return f"{label}: failed: {partition.error}"
    return (f"{label}: saves {len(partition.saved)} values ({_saved_bytes_text(graph, partition)}); "
            f"recomputes {len(partition.recomputed)} ops; removes {len(partition.removed)}")


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


def _path(info: NodeInfo) -> list[str]:
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
        units = {(it.side, ".".join(_path(it.info)[:depth])) if len(_path(it.info)) >= depth else it.id
                 for it in scene.items.values()}
        if len(units) > limit:
            break
        best = depth
        if all(len(_path(it.info)) < depth for it in scene.items.values()):
            break
    return best


def group_scene(scene: Scene, depth: int | None) -> Scene:
    """Cluster items by module path; modules at ``depth`` (1 = top-level) become single boxes."""
    scene.grouped = True
    scene.group_depth = depth
    groups: dict[str, Group] = {}
    for it in scene.items.values():
        path = _path(it.info)
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


# --- DOT -----------------------------------------------------------------------------------------
def _title_line(it: Item) -> str:
    i = it.info
    if i.role == "gradient":
        return f"grad {i.qualname}" if i.qualname else f"grad ({i.short_op})"
    if i.op in ("placeholder", "get_attr"):
        if i.role == "tangent":
            return "tangent"
        return i.qualname or i.name
    if i.role == "output" and i.qualname:
        return f"{i.qualname} = {i.short_op}"
    return i.short_op


def _badges(it: Item, scene: Scene) -> list[tuple[str, str]]:
    """(ink color, text) of each overlay mark on an item, in a fixed order."""
    out: list[tuple[str, str]] = []
    if it.saved:
        size = format_bytes(it.info.bytes) if it.info.bytes is not None else ""
        out.append((theme.STATUS["saved"].ink, f"saved {size}".strip()))
    if it.recomputed:
        out.append((theme.STATUS["recomputed"].ink, "recomputed"))
    if it.removed:
        out.append((theme.STATUS["removed"].ink, "removed"))
    if scene.compare_names is not None:
        a, b = scene.compare_names
        who = {"A-only": f"{a} only", "B-only": f"{b} only", "both": "both"}
        if it.cmp_saved:
            out.append((theme.COMPARE[it.cmp_saved].ink,
                        f"saved: {who[it.cmp_saved]} {format_bytes(it.info.bytes)}"))
        if it.cmp_recomputed:
            out.append((theme.COMPARE[it.cmp_recomputed].ink, f"recomputed: {who[it.cmp_recomputed]}"))
    return out


def _label(it: Item, scene: Scene) -> str:
    """Op (or real name) in bold; node name, dtype and shape; then one white badge per mark."""
    i = it.info
    first = _title_line(it)
    bits = []
    if it.joint != first and i.op != "placeholder":
        bits.append(it.joint)
    tensor = format_tensor(i)
    if tensor:
        bits.append(tensor)
    rows = [f"<TR><TD><B>{_e(first)}</B></TD></TR>"]
    if bits:
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="#333333">{_e("  ".join(bits))}</FONT></TD></TR>')
    for color, text in _badges(it, scene):
        rows.append(f'<TR><TD BGCOLOR="#FFFFFF"><FONT POINT-SIZE="9" COLOR="{color}"><B>{_e(text)}</B>'
                    "</FONT></TD></TR>")
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">' + "".join(rows) + "</TABLE>>"


def _tooltip(it: Item, scene: Scene) -> str:
    i = it.info
    lines = [f"{it.joint}: {i.target}" if i.op == "call_function" else f"{it.joint} ({i.op})",
             f"role: {theme.ROLE_LABELS.get(i.role, i.role)}"
             + (f" ({i.qualname})" if i.qualname else "") + f", {i.phase} phase"]
    if i.shape is not None:
        lines.append(f"value: {format_tensor(i)} ({format_bytes(i.bytes)})")
    elif i.bytes:
        lines.append(f"value: a tuple of tensors ({format_bytes(i.bytes)})")
    lines.append(f"module: {i.module}" if i.module else "module: (none recorded)")
    if i.source:
        lines.append(f"source: {i.source}" + (f"  {i.source_code}" if i.source_code else ""))
    if it.users:
        shown = ", ".join(it.users[:8]) + (f", ... ({len(it.users)} in all)" if len(it.users) > 8 else "")
        lines.append(f"users: {shown}")
    for _, text in _badges(it, scene):
        lines.append(text)
    return "\n".join(lines)


def _node_attrs(it: Item, scene: Scene) -> dict[str, object]:
    i = it.info
    fill = theme.ROLE_COLORS.get(i.role, "#FFFFFF")
    style = ["filled"] if i.role in theme.INPUT_ROLES else ["filled", "rounded"]
    attrs: dict[str, object] = {"color": "#333333", "penwidth": "1"}
    classes = ["fx-node", f"fx-role-{i.role}"]
    border = None
    if it.saved:
        border, classes = theme.STATUS["saved"].color, classes + ["fx-saved"]
        attrs["penwidth"] = "3"
    if scene.compare_names is not None and (it.cmp_saved or it.cmp_recomputed):
        border = theme.COMPARE[it.cmp_saved or it.cmp_recomputed].color  # type: ignore[index]
        attrs["penwidth"] = "3"
        classes.append(f"fx-saved-{it.cmp_saved}" if it.cmp_saved else f"fx-recomputed-{it.cmp_recomputed}")
    if it.recomputed or it.cmp_recomputed:
        attrs["peripheries"] = "2"
        classes.append("fx-recomputed")
        if border is None:
            border = theme.STATUS["recomputed"].color
            attrs["penwidth"] = "2"
    if it.removed:
        fill = theme.faded(fill)
        style.append("dashed")
        classes.append("fx-removed")
        attrs["fontcolor"] = "#777777"
        if border is None:
            border = theme.STATUS["removed"].color
    if it.highlighted is not None:
        if it.highlighted:
            classes.append("fx-highlight")
            attrs["penwidth"] = "4" if attrs["penwidth"] == "1" else attrs["penwidth"]
            border = border or theme.HIGHLIGHT
        elif not it.removed:
            fill = theme.faded(fill)
            attrs["fontcolor"] = "#888888"
            classes.append("fx-dimmed")
    if border:
        attrs["color"] = border
    attrs.update({"fillcolor": fill, "style": ",".join(style), "class": " ".join(classes),
                  "tooltip": _esc_string(_tooltip(it, scene)), "label": _label(it, scene)})
    return attrs


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _group_label(g: Group, scene: Scene) -> str:
    counts = Counter(m.info.role for m in g.members)
    total = sum(counts.values())
    bar = "".join(f'<TD BGCOLOR="{theme.ROLE_COLORS[r]}" WIDTH="{max(3, round(90 * counts[r] / total))}" '
                  f'HEIGHT="7"></TD>' for r in ROLES if counts.get(r))
    saved = [m for m in g.members if m.saved or m.cmp_saved]
    recomputed = sum(1 for m in g.members if m.recomputed or m.cmp_recomputed)
    rows = [f"<TR><TD><B>{_e(g.path)}</B></TD></TR>",
            f'<TR><TD><FONT POINT-SIZE="9">{_plural(total, "node")}: '
            + _e(", ".join(_plural(c, theme.ROLE_LABELS[r]) for r, c in counts.most_common(3)))
            + "</FONT></TD></TR>",
            f'<TR><TD><TABLE BORDER="0" CELLSPACING="0" CELLPADDING="0"><TR>{bar}</TR></TABLE></TD></TR>']
    if saved:
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="{theme.STATUS["saved"].color}"><B>saved {len(saved)}: '
                    f"{format_bytes(sum(m.info.bytes or 0 for m in saved))}</B></FONT></TD></TR>")
    if recomputed:
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="{theme.STATUS["recomputed"].color}"><B>'
                    f"recomputed {recomputed}</B></FONT></TD></TR>")
    if g.pattern:
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="#444444"><I>pattern {g.pattern} '
                    f"×{g.repeats} (same ops and shapes)</I></FONT></TD></TR>")
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="1">' + "".join(rows) + "</TABLE>>"


def _group_tooltip(g: Group) -> str:
    counts = Counter(m.info.role for m in g.members)
    lines = [f"module {g.path} ({g.side}): {_plural(len(g.members), 'node')}",
             ", ".join(_plural(c, theme.ROLE_LABELS[r]) for r, c in counts.most_common())]
    saved = [m.joint for m in g.members if m.saved or m.cmp_saved]
    if saved:
        lines.append("saved: " + ", ".join(saved[:10]) + (" ..." if len(saved) > 10 else ""))
    if g.pattern:
        lines.append(f"pattern {g.pattern}: {g.repeats} modules with the same ops and shapes")
    lines.append("nodes: " + ", ".join(m.id for m in g.members[:20]) + (" ..." if len(g.members) > 20 else ""))
    return "\n".join(lines)


def _legend_and_caption(scene: Scene) -> str:
    roles = [r for r in ROLES if any(it.info.role == r for it in scene.items.values())]
    statuses = [s for s in ("saved", "recomputed", "removed")
                if any(getattr(it, s) for it in scene.items.values())]
    marks = [m for m in ("A-only", "B-only", "both")
             if any(m in (it.cmp_saved, it.cmp_recomputed) for it in scene.items.values())]
    rows = [f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="16"><B>{_e(scene.title)}</B></FONT></TD></TR>'] \
        if scene.title else []  # graphviz rejects an empty <B></B>
    rows.append(theme.legend_dot(roles, statuses, scene.compare_names, marks))
    for line in scene.caption:
        rows.append(f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="11">{_e(line)}</FONT></TD></TR>')
    return '<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="2">' + "".join(rows) + "</TABLE>>"


_SIDE_STYLE = {"forward": ("forward", "#F1F6FC"), "backward": ("backward (drawn bottom-up)", "#FDF3EE")}


def to_digraph(scene: Scene, name: str = "fxviz") -> graphviz.Digraph:
    """Write the scene as a ``graphviz.Digraph``."""
    g = graphviz.Digraph(name=name)
    g.attr("graph", rankdir="TB", newrank="true", nodesep="0.18", ranksep="0.28", fontname=theme.FONT,
           labelloc="t", labeljust="l", outputorder="edgesfirst", tooltip=" ", **LAYOUT_ATTRS)
    g.attr("node", shape="box", fontname=theme.FONT, fontsize="11", margin="0.08,0.03", height="0.3")
    g.attr("edge", color=theme.EDGE_COLOR, arrowsize="0.6", penwidth="0.8", tooltip=" ")
    g.attr(label=_legend_and_caption(scene))

    unit_of = scene.unit_of or {i: i for i in scene.items}
    # the cluster tree: (side, module path tuple) -> members
    tree: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    side_of_unit: dict[str, str] = {}
    for it in scene.items.values():
        unit = unit_of[it.id]
        if unit in side_of_unit:
            continue
        side = it.side if scene.two_sides else ""
        side_of_unit[unit] = it.side
        if unit in scene.groups:
            grp = scene.groups[unit]
            path = tuple(grp.path.split(".")[:-1])
        else:
            path = tuple(_path(it.info)) if scene.grouped else ()
        tree.setdefault((side, path), []).append(unit)

    counter = iter(range(1, 10 ** 9))

    def emit_units(sub: graphviz.Digraph, units: list[str]) -> None:
        for u in units:
            if u in scene.groups:
                grp = scene.groups[u]
                saved = any(m.saved or m.cmp_saved for m in grp.members)
                sub.node(u, label=_group_label(grp, scene), shape="box", style="filled,rounded",
                         fillcolor="#FFFFFF", color=theme.STATUS["saved"].color if saved else "#333333",
                         penwidth="2" if saved else "1", tooltip=_esc_string(_group_tooltip(grp)),
                         **{"class": "fx-group"})
            else:
                sub.node(u, **{k: v for k, v in _node_attrs(scene.items[u], scene).items()})  # type: ignore[arg-type]

    def emit_tree(parent: graphviz.Digraph, side: str, prefix: tuple[str, ...]) -> None:
        emit_units(parent, tree.get((side, prefix), []))
        children = sorted({p[len(prefix)] for (s, p) in tree if s == side and len(p) > len(prefix)
                           and p[:len(prefix)] == prefix}, key=_natural)
        for child in children:
            path = prefix + (child,)
            with parent.subgraph(name=f"cluster_m{next(counter)}") as c:
                c.attr(label=f"<{_e('.'.join(path))}>", style="rounded,dashed", color="#888888",
                       fontsize="10", fontcolor="#444444", labeljust="l", penwidth="1",
                       tooltip=_esc_string(f"module {'.'.join(path)}"))
                emit_tree(c, side, path)

    if scene.two_sides:
        for side in ("forward", "backward"):
            text, bg = _SIDE_STYLE[side]
            with g.subgraph(name=f"cluster_{side}") as c:
                c.attr(label=f"<<B>{text}</B>>", style="filled,rounded", fillcolor=bg, color="#BBBBBB",
                       fontsize="14", labeljust="l", tooltip=_esc_string(f"the {side} pass"))
                emit_tree(c, side, ())
    else:
        emit_tree(g, "", ())

    _emit_edges(g, scene, unit_of, side_of_unit)
    return g


def _natural(s: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s))


def _emit_edges(g: graphviz.Digraph, scene: Scene, unit_of: dict[str, str], side_of: dict[str, str]) -> None:
    """One DOT edge per pair of drawn units (counted when several graph edges merge).  Edges inside
    the backward half of a two-sided picture are written reversed with ``dir=back`` so the
    backward reads bottom-up next to the forward it differentiates; their SVG titles are put back
    to ``producer->consumer`` by ``drawing.fix_edge_titles``."""
    merged: dict[tuple[str, str], list[tuple[Item, Item]]] = {}
    for a, b in scene.edges:
        ua, ub = unit_of[a], unit_of[b]
        if ua == ub:
            continue
        merged.setdefault((ua, ub), []).append((scene.items[a], scene.items[b]))
    for k, ((ua, ub), pairs) in enumerate(merged.items()):
        attrs: dict[str, str] = {"id": f"fxe{k}"}
        classes = ["fx-edge"]
        src_saved = [p for p, c in pairs if (p.saved and (c.side == "backward" or scene.view == "backward"))]
        cmp = [p.cmp_saved for p, c in pairs if p.cmp_saved and c.side == "backward"]
        if src_saved:
            attrs.update(color=theme.STATUS["saved"].color, penwidth="2.6", arrowsize="0.8")
            classes.append("fx-saved")
        elif cmp:
            status = "both" if "both" in cmp else cmp[0]
            attrs.update(color=theme.COMPARE[status].color, penwidth="2.6", arrowsize="0.8")
            classes.append(f"fx-saved-{status}")
        if any(p.removed or c.removed for p, c in pairs):
            attrs.update(style="dashed", color=theme.STATUS["removed"].color)
        if len(pairs) > 1:
            attrs["label"] = f"×{len(pairs)}"
            attrs["fontsize"] = "9"
        tip = ", ".join(f"{p.id} → {c.id}" for p, c in pairs[:6]) + (" ..." if len(pairs) > 6 else "")
        attrs["tooltip"] = _esc_string(tip)  # type: ignore[assignment]
        reverse = scene.two_sides and side_of.get(ua) == "backward" and side_of.get(ub) == "backward"
        if reverse:
            attrs["dir"] = "back"
            classes.append("fx-reversed")
        attrs["class"] = " ".join(classes)
        if reverse:
            g.edge(ub, ua, **attrs)
        else:
            g.edge(ua, ub, **attrs)
