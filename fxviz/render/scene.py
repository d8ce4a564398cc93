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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch.fx as fx

from ..analysis.partition import Partition
from ..capture import JointGraph
from ..roles import NodeInfo
from ..units import format_bytes

__all__ = [
    "RECOMPUTED_SUFFIX",
    "VIEWS",
    "Item",
    "Group",
    "Scene",
    "joint_scene",
    "partition_scene",
    "compare_scene",
    "differs",
    "differing",
    "differences_scene",
    "apply_highlight",
    "group_scene",
    "auto_depth",
    "Structure",
    "structure_scene",
    "BOOKKEEPING",
    "function_key",
    "OPENED_FUNCTION",
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
    cmp_removed: str | None = None
    highlighted: bool | None = None  # None when nothing is highlighted
    users: list[str] = field(default_factory=list)
    detail: str = ""  # shown after the op name: which element a getitem takes
    # a saved value that adds no bytes: the saved value whose storage it shares ("parameter" /
    # "input" for a view of one), so that the badges add up to the memory table
    alias_of: str | None = None
    # drawn only as a producer or user of a node two strategies treat differently (the
    # differences-only compare): faded, smaller, said so in its tooltip
    context: bool = False


@dataclass
class Group:
    """One collapsed module box."""

    id: str
    path: str
    side: str
    members: list[Item]
    pattern: str | None = None
    repeats: int = 1
    parent: tuple[str, ...] = ()  # the module cluster the box is drawn in
    kind: str = "module"  # "module" | "function" (ops of one source function) | "bookkeeping"
    key: str | None = None  # what ``draw(expand=[...])`` takes to open this box

    def record(self) -> dict[str, object]:
        """The box as plain data for a front-end: its id (the SVG title), what opens it, its label
        and kind, its side and its members by joint name (each once, in graph order)."""
        members = list(dict.fromkeys(m.joint for m in self.members))
        return {"id": self.id, "key": self.key, "label": self.path, "kind": self.kind, "side": self.side,
                "members": members, "pattern": self.pattern, "repeats": self.repeats}


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
    place: dict[str, tuple[str, ...]] = field(default_factory=dict)  # item id -> module cluster path
    unframed: set[tuple[str, ...]] = field(default_factory=set)  # containers: no cluster frame of their own
    compact: bool = False  # two-line labels, tighter ranks: the differences-only drawing fits one screen
    # the halves of a two-sided picture: side -> (label, background); default forward and backward
    # (a diff of two graphs draws its sides "A" and "B")
    side_styles: dict[str, tuple[str, str]] | None = None


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


def saved_aliases(graph: JointGraph, partition: Partition | None) -> dict[str, str]:
    """Saved values that add no bytes, by joint name: -> the first saved value on the same storage,
    or ``"parameter"`` / ``"input"`` for a view of one (the memory analysis counts storages, so
    three ``detach`` aliases of one ``sigmoid`` are 1x its bytes, not 3x)."""
    if partition is None or partition.forward is None or partition.error:
        return {}
    from ..analysis.memory import saved_memory

    out: dict[str, str] = {}
    for use in saved_memory(partition, graph).storages:
        names = list(use.names)
        if use.owner != "activation":
            out.update({n: use.owner for n in names if graph.info[n].role not in ("parameter", "buffer", "primal")})
        else:
            out.update({n: names[0] for n in names[1:]})
    return out


def joint_scene(graph: JointGraph, partition: Partition | None = None, title: str = "") -> Scene:
    """The joint graph, forward and backward side by side; marks from ``partition`` if given."""
    nodes = _real_nodes(graph.gm)
    ids = {n.name: n.name for n in nodes}
    users = _users(nodes, ids)
    items: dict[str, Item] = {}
    saved = set(partition.saved) if partition is not None else set()
    aliases = saved_aliases(graph, partition)
    for n in nodes:
        info = graph.info[n.name]
        items[n.name] = Item(
            id=n.name, joint=n.name, info=info, side=info.phase, saved=n.name in saved,
            recomputed=partition is not None and n.name in partition.recomputed,
            removed=partition is not None and n.name in partition.removed,
            users=users[n.name], detail=_detail(n), alias_of=aliases.get(n.name))
    scene = Scene(items=items, edges=_edges(nodes, ids), view="joint", title=title,
                  two_sides=graph.has_backward)
    if partition is not None:
        scene.caption.append(_totals_line(graph, partition))
    return scene


def differs(it: Item) -> bool:
    """Whether the compare marks of ``it`` say A and B treat it differently: saved, recomputed or
    removed by one of them only.  The compare drawing's marks, the differences-only drawing and
    its caption all read this one test (``differing``)."""
    return any(m in ("A-only", "B-only") for m in (it.cmp_saved, it.cmp_recomputed, it.cmp_removed))


def differing(graph: JointGraph, a: Partition, b: Partition) -> list[str]:
    """The joint nodes (graph order) that A and B treat differently (``differs``)."""
    return [it.joint for it in compare_scene(graph, a, b).items.values() if differs(it)]


def compare_scene(graph: JointGraph, a: Partition, b: Partition, title: str = "") -> Scene:
    """The joint graph marked with what strategy A saves/recomputes/removes that B does not, and back."""
    scene = joint_scene(graph, None, title=title)
    sa, sb = set(a.saved), set(b.saved)
    for it in scene.items.values():
        it.cmp_saved = _which(it.joint in sa, it.joint in sb)
        it.cmp_recomputed = _which(it.joint in a.recomputed, it.joint in b.recomputed)
        it.cmp_removed = _which(it.joint in a.removed, it.joint in b.removed)
        it.removed = it.cmp_removed == "both"
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


def differences_scene(graph: JointGraph, a: Partition, b: Partition, title: str = "") -> Scene:
    """Only the nodes A and B treat differently (``differing``), marked as in ``compare_scene``,
    with their direct producers and users as context (``Item.context``); forward and backward
    sides kept.  When nothing differs the scene has no items and its caption says so."""
    full = compare_scene(graph, a, b, title=title)
    diff = [it.joint for it in full.items.values() if differs(it)]
    keep = set(diff)
    joint_nodes = {n.name: n for n in _real_nodes(graph.gm)}
    near: set[str] = set()
    for name in diff:
        n = joint_nodes[name]
        near.update(x.name for x in n.all_input_nodes)
        near.update(u.name for u in n.users if u.op != "output")
    near = {x for x in near if x in full.items} - keep
    shown = keep | near
    items = {i: it for i, it in full.items.items() if i in shown}
    for i in near:
        items[i].context = True
    scene = Scene(items=items, edges=[(x, y) for x, y in full.edges if x in shown and y in shown],
                  view="compare", title=title, two_sides=full.two_sides, compare_names=full.compare_names,
                  compact=True)
    sides = {it.side for it in items.values()}
    scene.two_sides = full.two_sides and len(sides) > 1
    head = f"{a.name} vs {b.name}: "
    if not diff:  # a short message that fits a small screen: the totals of two equal strategies add nothing
        scene.caption.append(head + "the same values saved, recomputed and removed: nothing to draw")
        return scene
    scene.caption.append(head + f"{len(diff)} node{'s' if len(diff) != 1 else ''} treated differently "
                         f"(+{len(near)} neighbor{'s' if len(near) != 1 else ''} shown as context)")
    scene.caption += full.caption
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
    aliases = saved_aliases(graph, partition)
    for n in nodes:
        joint, info, recomputed = infos[n.name]
        is_saved = joint in saved and (side == "forward" or n.op == "placeholder")
        items[ids[n.name]] = Item(id=ids[n.name], joint=joint, info=info, side=side, saved=is_saved,
                                  recomputed=recomputed, users=users[ids[n.name]], detail=_detail(n),
                                  alias_of=aliases.get(joint) if is_saved else None)
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
                groups[gid] = Group(id=gid, path=key, side=it.side, members=[], parent=tuple(path[:depth - 1]),
                                    key=key)
            groups[gid].members.append(it)
            scene.unit_of[it.id] = gid
        else:
            scene.unit_of[it.id] = it.id
    _find_patterns(groups)
    scene.groups = groups
    return scene


_INDEXED = re.compile(r"(^|\.)\d+(?=\.|$)")
_SAME_ROLE = {"gradient": "backward", "output": "forward"}
_PATTERN_MIN_NODES = 3  # two ReLUs being alike is not worth a mark; two transformer blocks are


def _find_patterns(groups: dict[str, Group]) -> None:
    """Boxes of modules whose paths differ only in container indices and that hold the same ops
    with the same shapes (``h.0`` ... ``h.11``, or ``layers.0.mlp`` and ``layers.1.mlp``) get the
    same pattern letter and a repeat count."""
    by_sig: dict[tuple, list[Group]] = {}
    for g in groups.values():
        stem = _INDEXED.sub(r"\1#", g.path) if g.kind == "module" else g.path
        if stem == g.path:
            continue
        # a block's last op may return a gradient or an output in one copy and not another:
        # that is not a different computation
        sig = (g.side, stem, tuple(sorted(Counter((i.info.short_op, i.info.shape, i.info.dtype,
                                                   _SAME_ROLE.get(i.info.role, i.info.role))
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


# --- collapsing that follows the model's structure ---------------------------------------------------
_CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")
_FRAME_FN = re.compile(r'File "([^"]+)", line \d+, in ([\w<>.]+)')
BOOKKEEPING = "(in-place buffer updates)"
_FN_BOX_MIN = 2  # one op of a function is drawn as itself; two or more share the function's box


def _source_function(node: fx.Node | None) -> str | None:
    """``masking_utils.sdpa_mask``: the innermost function of a node's recorded stack trace."""
    from .._torch import stack_trace

    trace = stack_trace(node) if node is not None else None
    if not trace:
        return None
    found = _FRAME_FN.findall(trace)
    if not found:
        return None
    path, fn = found[-1]
    return f"{path.rsplit('/', 1)[-1].removesuffix('.py')}.{fn}"


def _module_kinds(graph: JointGraph) -> dict[str, str]:
    """Module path -> class name, from dynamo's module stacks of the forward ops."""
    from .._torch import module_path_from_stack_entry, module_stack

    kinds: dict[str, str] = {}
    for n in graph.gm.graph.nodes:
        if n.op != "call_function":
            continue
        for _, path, typ in module_stack(n):
            qual = module_path_from_stack_entry(path)
            if qual and qual not in kinds:
                kinds[qual] = getattr(typ, "__name__", str(typ).rsplit(".", 1)[-1].strip("'>"))
    return kinds


def _common_prefix(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    if not paths:
        return ()
    first = paths[0]
    k = len(first)
    for p in paths[1:]:
        k = min(k, len(p))
        for i in range(k):
            if p[i] != first[i]:
                k = i
                break
    return first[:k]


def function_key(path: tuple[str, ...], label: str) -> str:
    """The name of a function box (``masking_utils.sdpa_mask()``, inside a module
    ``model.rotary.fn()``): what ``expand`` takes to open it, and its box id after the side."""
    return ".".join(path + (label,)) if path else label


def _opened(path: str, expand: frozenset[str]) -> bool:
    """A module is open when it, or a module inside it, is to be expanded."""
    return any(e == path or e.startswith(path + ".") for e in expand)


def _use_site(producers: list[tuple[str, ...]], candidates: set[tuple[str, ...]]) -> tuple[str, ...]:
    """Where a gradient-accumulation ``add`` belongs.  torch records for it the source line of
    the forward use of the tensor ("Gradient addition node due to multiple use of tensor
    around:"), which several modules may run (every layer's norm); the one that produced one of
    the summed gradients is the place.  Summing the residual stream's gradient chains these adds,
    so the plain common prefix of the producers would climb to the whole stack."""
    hits = [c for c in candidates if any(p[:len(c)] == c for p in producers)]
    if hits:
        return _common_prefix(hits)
    return _common_prefix(producers)


class Structure:
    """Where each item of a scene sits in the model's module tree, and which box it falls into at
    a given *level* of that tree.

    Levels count modules that do work, not containers: the children of a ``ModuleList``,
    ``Sequential`` or ``ModuleDict`` (or of a module never called itself, whose children are all
    numbered) sit at the container's own level, so ``model.layers.0`` is a level-2 box of
    ``LlamaForCausalLM``, beside ``model.norm``.  A backward op without a recorded module (the
    ``add`` that accumulates the gradient of a tensor used twice, whose ``seq_nr`` is the loss's)
    is placed in the deepest module shared by the ops it adds up.  Ops of no module are boxed per
    source function; forward ops whose values reach only in-place buffer updates (batch norm's
    running statistics, ``num_batches_tracked``), with the buffers they read, share one box.
    """

    def __init__(self, scene: Scene, graph: JointGraph) -> None:
        self.scene = scene
        joint_nodes = {n.name: n for n in graph.gm.graph.nodes}
        kinds = _module_kinds(graph)
        producers: dict[str, list[str]] = {}
        for a, b in scene.edges:
            producers.setdefault(b, []).append(a)
        used_at: dict[str, set[tuple[str, ...]]] = {}  # source line -> modules whose forward runs it
        for info in graph.info.values():
            if info.phase == "forward" and info.module and info.source:
                used_at.setdefault(info.source, set()).add(tuple(info.module.split(".")))
        self.path: dict[str, tuple[str, ...]] = {}
        for it in scene.items.values():  # items are in graph order: producers come first
            path = tuple(module_path(it.info))
            if not path and it.info.op == "call_function" and it.side == "backward":
                placed = [self.path[p] for p in producers.get(it.id, ())
                          if self.path.get(p) and scene.items[p].side == "backward"]
                path = _use_site(placed, used_at.get(it.info.source or "", set()))
            self.path[it.id] = path
        self.function = {it.id: _source_function(joint_nodes.get(it.joint)) for it in scene.items.values()}
        children: dict[tuple[str, ...], set[str]] = {}
        self.children = children
        for p in set(self.path.values()):
            for k in range(len(p)):
                children.setdefault(p[:k], set()).add(p[k])
        self.container: set[tuple[str, ...]] = set()
        for parent, kids in children.items():
            kind = kinds.get(".".join(parent))
            if parent and (kind in _CONTAINERS or (kind is None and all(k.isdigit() for k in kids))):
                self.container.add(parent)
        # a gradient summed over uses in unrelated modules (a UNet's time embedding, read by every
        # res block) has no shared module, or only a container (``up_blocks``, drawn without a
        # frame): it belongs where the sum flows next, towards the module that produced the tensor
        users: dict[str, list[str]] = {}
        for a, b in scene.edges:
            users.setdefault(a, []).append(b)
        for it in reversed(list(scene.items.values())):
            if (not self.path[it.id] or self.path[it.id] in self.container) and not it.info.module \
                    and it.info.op == "call_function" and it.side == "backward":
                onward = _common_prefix([self.path[u] for u in users.get(it.id, ()) if self.path.get(u)])
                self.path[it.id] = onward or self.path[it.id]
        self.level: dict[tuple[str, ...], int] = {}
        for p in set(self.path.values()):
            for k in range(1, len(p) + 1):
                q = p[:k]
                self.level[q] = 1 + sum(1 for j in range(1, k) if q[:j] not in self.container)
        self.bookkeeping = self._bookkeeping(producers)

    def _bookkeeping(self, producers: dict[str, list[str]]) -> set[str]:
        """Forward items from which no path reaches the loss, the backward or a returned value other
        than an in-place buffer update."""
        live: set[str] = set()
        todo = []
        for it in self.scene.items.values():
            mutation = it.info.role == "output" and (it.info.qualname or "").endswith("(updated in place)")
            if it.side == "backward" or ("output" in it.users and not mutation):
                todo.append(it.id)
        while todo:
            x = todo.pop()
            if x in live:
                continue
            live.add(x)
            todo += producers.get(x, [])
        dead = {i for i, it in self.scene.items.items() if i not in live and it.side == "forward"
                and (it.info.op == "call_function" or it.info.role == "buffer")}
        return dead if any(self.scene.items[i].info.op == "call_function" for i in dead) else set()

    @property
    def max_level(self) -> int:
        return max((lvl for q, lvl in self.level.items() if q not in self.container), default=0)

    def box_of(self, item_id: str, level: int, expand: frozenset[str] = frozenset()) -> str | None:
        """The module path of the box ``item_id`` falls into at ``level``, or None (drawn as itself).
        A module with no submodules is a box at every level below its own (opening it would show
        loose ops, not structure); a module in ``expand`` is always open."""
        p = self.path[item_id]
        for k in range(1, len(p) + 1):
            q = p[:k]
            if q in self.container or _opened(".".join(q), expand):
                continue
            if self.level[q] >= level or q not in self.children:
                return ".".join(q)
        return None

    def units(self, level: int, expand: frozenset[str] = frozenset()) -> dict[str, tuple[str, str, str | None]]:
        """item id -> (unit id, box label, box module path or None for a function/bookkeeping box).
        Items drawn as themselves map to ``(id, "", None)``."""
        out: dict[str, tuple[str, str, str | None]] = {}
        loose: dict[tuple[str, tuple[str, ...], str], list[str]] = {}
        for it in self.scene.items.values():
            if it.id in self.bookkeeping and BOOKKEEPING not in expand:
                out[it.id] = (f"forward/{urllib.parse.quote(BOOKKEEPING, safe='')}", BOOKKEEPING, None)
                continue
            box = self.box_of(it.id, level, expand)
            if box is not None:
                out[it.id] = (f"{it.side}/{urllib.parse.quote(box, safe='._-')}", box, box)
                continue
            out[it.id] = (it.id, "", None)
            path = self.path[it.id]
            fn = self.function[it.id]
            if it.info.op == "call_function" and fn and ".".join(path) not in expand \
                    and (not path or not fn.endswith(".forward")):
                loose.setdefault((it.side, path, fn), []).append(it.id)
        for (side, path, fn), ids in loose.items():
            boxes = [part for part in self._connected(ids) if len(part) >= _FN_BOX_MIN]
            for k, part in enumerate(boxes):  # numbered among the boxes only: #1, #2... or none for one
                label = f"{fn}()" if len(boxes) == 1 else f"{fn}() #{k + 1}"
                key = function_key(path, label)
                if key in expand:
                    continue
                for i in part:
                    out[i] = (f"{side}/{urllib.parse.quote(key, safe='._-()#')}", label, None)
        return out

    def _connected(self, ids: list[str]) -> list[list[str]]:
        """``ids`` split into pieces joined by edges among themselves, in graph order: one box
        for a whole function whose ops feed modules in between (a UNet's forward: the time
        embedding, then each upsampling) would be a hub every edge runs through."""
        rest = set(ids)
        links: dict[str, set[str]] = {i: set() for i in ids}
        for a, b in self.scene.edges:
            if a in rest and b in rest:
                links[a].add(b)
                links[b].add(a)
        parts = []
        for i in ids:
            if i not in rest:
                continue
            part, todo = [], [i]
            rest.discard(i)
            while todo:
                x = todo.pop()
                part.append(x)
                for y in links[x]:
                    if y in rest:
                        rest.discard(y)
                        todo.append(y)
            order = {x: n for n, x in enumerate(ids)}
            parts.append(sorted(part, key=order.__getitem__))
        return parts

    def openable(self) -> set[str]:
        """Every name ``expand`` takes: the module paths, the function boxes' keys (``fn()`` or
        ``module.fn() #2``, as the box ids spell them) at any level, and :data:`BOOKKEEPING`
        when there is such a box."""
        out = {".".join(q) for q in self.level}
        if self.bookkeeping:
            out.add(BOOKKEEPING)
        for level in range(1, max(self.max_level, 1) + 1):
            for unit, label, box in self.units(level).values():
                if box is None and label and label != BOOKKEEPING:
                    out.add(urllib.parse.unquote(unit.split("/", 1)[1]))
        return out

    def count(self, level: int, expand: frozenset[str] = frozenset()) -> int:
        return len({u for u, _, _ in self.units(level, expand).values()})


OPENED_FUNCTION = "ops of "
"""The start of the frame drawn around an opened function box's ops (``ops of masking_utils.sdpa_mask()``)."""


def _frame_opened_functions(scene: Scene, structure: Structure, level: int, opened: frozenset[str]) -> None:
    """An opened function box leaves a dashed frame around its ops, as an opened module does:
    otherwise its ops scatter over the drawing with nothing to say they belonged together."""
    modules = {".".join(q) for q in structure.level}
    for key in opened - modules - {BOOKKEEPING}:
        for item_id, (_, label, box) in structure.units(level, opened - {key}).items():
            if box is None and label and label != BOOKKEEPING and scene.unit_of.get(item_id) == item_id \
                    and function_key(structure.path[item_id], label) == key:
                scene.place[item_id] = structure.path[item_id] + (OPENED_FUNCTION + label,)


def structure_scene(scene: Scene, structure: Structure, level: int, expand: Iterable[str] = ()) -> Scene:
    """Collapse ``scene`` at ``level`` of the model's structure (see :class:`Structure`); modules
    named in ``expand`` are drawn open (their children become the boxes)."""
    opened = frozenset(expand)
    scene.grouped = True
    scene.group_depth = level
    scene.unframed = set(structure.container)  # ``layers`` around ``layers.0``: one frame less
    groups: dict[str, Group] = {}
    for item_id, (unit, label, box) in structure.units(level, opened).items():
        it = scene.items[item_id]
        scene.unit_of[item_id] = unit
        scene.place[item_id] = structure.path[item_id]
        if unit == item_id:
            continue
        if unit not in groups:
            where = tuple(box.split(".")[:-1]) if box is not None else \
                (() if label == BOOKKEEPING else structure.path[item_id])
            kind = "module" if box is not None else "bookkeeping" if label == BOOKKEEPING else "function"
            key = box if box is not None else label if kind == "bookkeeping" else \
                function_key(structure.path[item_id], label)
            groups[unit] = Group(id=unit, path=box or label, side=it.side, members=[], parent=where, kind=kind,
                                 key=key)
        groups[unit].members.append(it)
    _frame_opened_functions(scene, structure, level, opened)
    _find_patterns(groups)
    scene.groups = groups
    return scene
