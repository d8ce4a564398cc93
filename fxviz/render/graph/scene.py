"""What to draw, before any DOT is written: a *scene* of items (joint name, ``NodeInfo``, side,
overlay marks) and edges, built from the joint graph or from one side of a ``Partition`` with
node names mapped back to joint names, optionally highlighted.  The scene's data types live in
``scene_types``, grouping by module path in ``grouping``, the structure collapse in ``structure``;
this module re-exports their names, so ``scene.X`` is the one place ``views`` and ``dot`` read.

Nothing here re-derives an analysis fact: saved / recomputed / removed come from the
``Partition``, bytes from ``NodeInfo`` or the memory analysis.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import torch.fx as fx

from fxviz._torch import meta_val
from fxviz.analysis.memory.storage import offloads, saved_memory
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.units import format_bytes, plural
from fxviz.render.graph.grouping import auto_depth, group_scene, module_path
from fxviz.render.graph.scene_types import RECOMPUTED_SUFFIX, Group, Item, Scene, format_tensor
from fxviz.render.graph.structure import BOOKKEEPING, OPENED_FUNCTION, Structure, function_key, structure_scene
from fxviz.sources.graphs import JointGraph
from fxviz.sources.roles import CALLER_INPUT_ROLES, NodeInfo, short_op, tensor_facts

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.analysis.memory.storage import SavedMemory

__all__ = [
    "RECOMPUTED_SUFFIX",
    "Item",
    "Group",
    "Scene",
    "joint_scene",
    "saved_storage",
    "saved_aliases",
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


def _real_nodes(gm: fx.GraphModule) -> list[fx.Node]:
    """Every node but ``output`` (each returned value is already marked by its role)."""
    return [n for n in gm.graph.nodes if n.op != "output"]


def _fallback_info(n: fx.Node, side: str) -> NodeInfo:

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


def _saved_memory(graph: JointGraph, partition: Partition | None) -> SavedMemory | None:
    """The memory analysis of what ``partition`` saves (None without graphs): computed once per
    scene, read by the saved badges and the totals line (twice was 6 of a 60-layer GPT's 16 s)."""
    if partition is None or partition.forward is None or partition.error:
        return None

    return saved_memory(partition, graph)


def saved_storage(graph: JointGraph, partition: Partition | None,
                  memory: SavedMemory | None = None) -> dict[str, tuple[str, int, str | None]]:
    """Every saved tensor by joint name -> (kind, bytes it adds, alias): its kind as the memory
    analysis counts it (``activation`` / ``parameter`` / ``input``), its storage's bytes on the
    first value of a storage and 0 on the others, and what it aliases when it adds no bytes: the
    first saved value on the same storage, or ``"parameter"`` / ``"input"`` for a view of one (three
    ``detach`` aliases of one ``sigmoid`` are 1x its bytes, not 3x).  Empty without graphs.
    ``memory``: ``partition``'s saved memory if the caller has it."""
    if partition is None or partition.forward is None or partition.error:
        return {}
    memory = _saved_memory(graph, partition) if memory is None else memory
    assert memory is not None
    out: dict[str, tuple[str, int, str | None]] = {}
    for use in memory.storages:
        names = list(use.names)
        if use.owner == "offloaded":  # activation offloading's copy, drawn on the joint value it holds
            for k, n in enumerate(names):
                wraps = partition.made[n].wraps
                out[wraps or n] = (use.owner, use.nbytes if k == 0 else 0, None)
            continue
        for k, n in enumerate(names):
            if use.owner != "activation":
                alias = use.owner if graph.info[n].role not in CALLER_INPUT_ROLES else None
            else:
                alias = names[0] if k else None
            out[n] = (use.owner, use.nbytes if k == 0 else 0, alias)
    return out


def saved_aliases(graph: JointGraph, partition: Partition | None) -> dict[str, str]:
    """Saved values that add no bytes, by joint name: -> the first saved value on the same storage,
    or ``"parameter"`` / ``"input"`` for a view of one (``saved_storage``'s aliases)."""
    return {n: alias for n, (_, _, alias) in saved_storage(graph, partition).items() if alias is not None}


def offloaded(partition: Partition | None) -> dict[str, tuple[str, str]]:
    """Values ``partition`` offloads: the joint value -> (the forward graph's copy node, the device
    the copy went to); the forward graph's copy and the backward's input share that node name."""
    if partition is None or partition.forward is None or partition.error:
        return {}

    return {o.wraps: (partition.made[o.name].node, o.target) for o in offloads(partition) if o.wraps is not None}


def _mark_saved(items: Iterable[Item], storage: dict[str, tuple[str, int, str | None]],
                moved: dict[str, tuple[str, str]] | None = None) -> None:
    """Give each saved item its kind, the bytes it adds and what it aliases (``saved_storage``), and
    an offloaded one the device its copy went to."""
    for it in items:
        if it.saved and it.joint in storage:
            it.saved_kind, it.saved_bytes, it.alias_of = storage[it.joint]
        if it.saved and it.joint in (moved or {}):
            it.offloaded_to = (moved or {})[it.joint][1]


def joint_scene(graph: JointGraph, partition: Partition | None = None, title: str = "") -> Scene:
    """The joint graph, forward and backward side by side; marks from ``partition`` if given."""
    nodes = _real_nodes(graph.gm)
    ids = {n.name: n.name for n in nodes}
    users = _users(nodes, ids)
    items: dict[str, Item] = {}
    moved = offloaded(partition)
    saved = set(partition.saved) | set(moved) if partition is not None else set()
    recomputed = partition.recomputed if partition is not None else set()
    removed = partition.removed if partition is not None else set()
    infos = graph.info
    # a backward node the partition computes in its forward (a detach of a saved value, saved itself)
    # is drawn where the partition runs it: in the forward, its saved edge crossing to the backward
    run_forward = {j for j in partition.fw_to_joint.values() if j in infos and infos[j].phase == "backward"} \
        if partition is not None else set()
    for n in nodes:
        name = n.name
        info = infos[name]
        side = "forward" if name in run_forward else info.phase
        items[name] = Item(id=name, joint=name, info=info, side=side, saved=name in saved,
                           recomputed=name in recomputed, removed=name in removed, users=users[name],
                           detail=_detail(n))
    memory = _saved_memory(graph, partition)
    _mark_saved(items.values(), saved_storage(graph, partition, memory), moved)
    scene = Scene(items=items, edges=_edges(nodes, ids), view="joint", title=title,
                  two_sides=graph.has_backward)
    if partition is not None:
        scene.caption.append(_totals_line(graph, partition, memory))
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
    moved = offloaded(partition)
    copies = {node: (wraps, device) for wraps, (node, device) in moved.items()}  # the copy: its own node
    memory = _saved_memory(graph, partition)
    storage = saved_storage(graph, partition, memory)
    ids: dict[str, str] = {}
    taken: set[str] = set()
    infos: dict[str, tuple[str, NodeInfo, bool]] = {}
    for n in nodes:
        joint = mapping.get(n.name)
        info = graph.info.get(joint) if joint is not None else None
        if joint is None or info is None:
            joint, info = n.name, _fallback_info(n, side)
            held = graph.info.get(copies[n.name][0]) if n.name in copies else None
            if held is not None:  # an offloaded copy: a forward value (the one it holds), not a user input
                info = replace(info, role=held.role, module=held.module)
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
        is_saved = (joint in saved or n.name in copies) and (side == "forward" or n.op == "placeholder")
        items[ids[n.name]] = Item(id=ids[n.name], joint=joint, info=info, side=side, saved=is_saved,
                                  recomputed=recomputed, users=users[ids[n.name]], detail=_detail(n))
        if is_saved and n.name in copies:
            it = items[ids[n.name]]
            it.offloaded_to = copies[n.name][1]
            it.saved_kind, it.saved_bytes = "offloaded", storage.get(copies[n.name][0], ("", 0, None))[1]
    _mark_saved(items.values(), storage)
    scene = Scene(items=items, edges=_edges(nodes, ids), view=side, title=title)
    scene.caption.append(_totals_line(graph, partition, memory))
    return scene


def _bytes_text(activation: int, params: int, inputs: int, storages: int, offloaded: int = 0) -> str:
    parts = [f"activations {format_bytes(activation)}"]
    if params:
        parts.append(f"parameters {format_bytes(params)}")
    if inputs:
        parts.append(f"inputs {format_bytes(inputs)}")
    if offloaded:  # activation offloading's copies, off the device
        parts.append(f"offloaded {format_bytes(offloaded)}")
    return ", ".join(parts) + f" in {plural(storages, 'storage')}"


def _saved_bytes_text(graph: JointGraph, partition: Partition, memory: SavedMemory | None = None) -> str:
    """The saved bytes as the memory analysis counts them (by storage: views and aliases once,
    parameters and inputs apart from activations) or, for eager, as measured; if neither is
    available, the nominal sum of the saved nodes' ``numel x itemsize``, labelled so."""
    measured = partition.measurement  # the eager reference has no graphs
    if measured is not None:
        return _bytes_text(measured.activation_bytes, measured.param_bytes, measured.input_bytes,
                           measured.storages) + ", measured in eager"
    if partition.forward is not None:
        try:
            mem = _saved_memory(graph, partition) if memory is None else memory
            assert mem is not None
            return _bytes_text(mem.activation_bytes, mem.param_bytes, mem.input_bytes, len(mem.storages),
                               mem.offloaded_bytes)
        except (ImportError, AttributeError, TypeError):
            pass
    total = sum(graph.info[s].bytes or 0 for s in partition.saved if s in graph.info)
    return f"{format_bytes(total)} nominal (numel x itemsize per value; shared storage counted again)"


def _totals_line(graph: JointGraph, partition: Partition, memory: SavedMemory | None = None) -> str:
    label = partition.label
    if partition.error:
        return f"{label}: failed: {partition.error}"
    line = (f"{label}: saves {plural(len(partition.saved), 'value')} ({_saved_bytes_text(graph, partition, memory)}); "
            f"recomputes {plural(len(partition.recomputed), 'op')}; removes {len(partition.removed)}")
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
