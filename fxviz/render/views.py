"""One entry point from analysis objects to a ``Drawing``: picks the scene for the view, applies
highlight and module grouping (automatic above ``NODE_LIMIT`` nodes), and writes the DOT."""

from __future__ import annotations

from typing import Iterable

from ..analysis.partition import Partition
from ..capture import JointGraph
from ..errors import InputError
from . import dot, scene as sc
from .drawing import DEFAULT_TIMEOUT, Drawing

__all__ = ["draw", "NODE_LIMIT", "AUTO_UNITS", "GROUPS"]

# Above this many nodes the default view collapses modules into boxes.  Measured on a 2-core
# machine (docs/rendering-timings.md): fxviz's two-sided layout of a joint graph takes ~1 s in
# ``dot -Tsvg`` at 560 nodes, 1.5 s at 729, then bends upward (3.4 s at 898, 5 s at 1067, 25-30 s
# at 2081); PNG takes 3-5x longer.  Past a few hundred nodes a picture of every op is also no
# longer readable, so 600 keeps the default view about a second and legible.
NODE_LIMIT = 600
# When the default view collapses, it picks the deepest module depth with at most this many boxes
# and nodes (GPT-2 small: depth 2, one box per transformer block and side, ~100 drawn).
AUTO_UNITS = 120
GROUPS = (None, "module", "none")


def draw(graph: JointGraph, *, view: str = "joint", partition: Partition | None = None,
         compare: Partition | None = None, group: str | None = None, depth: int | None = None,
         highlight: str | Iterable[str] | None = None, name: str = "model", node_limit: int = NODE_LIMIT,
         timeout: float = DEFAULT_TIMEOUT) -> Drawing:
    """Draw ``graph`` (the joint graph, or one side of ``partition``) as a :class:`Drawing`.

    ``compare``: a second partition; the joint graph is then marked with what ``partition`` (A)
    and ``compare`` (B) save and recompute.  ``group``: ``"module"`` (clusters by module path,
    boxes at ``depth``), ``"none"`` (every node, however many), or ``None`` (every node up to
    ``node_limit``, module boxes above it).
    """
    if view not in sc.VIEWS:
        raise InputError(f"unknown view {view!r}", f"use one of {', '.join(sc.VIEWS)}")
    if group not in GROUPS:
        raise InputError(f"unknown group {group!r}", "use group='module', group='none' or leave it out")
    if depth is not None and (not isinstance(depth, int) or depth < 1):
        raise InputError(f"depth must be a positive integer, not {depth!r}", "depth=1 draws top-level modules")
    for p in (partition, compare):
        if p is not None and p.error:
            raise InputError(f"strategy {p.label!r} failed: {p.error}",
                             "pick another strategy (see tr.partition(...).error)")
    if compare is not None:
        if view != "joint":
            raise InputError(f"compare=... draws the joint graph, not the {view!r} view",
                             "call draw('joint', strategy=A, compare=B)")
        if partition is None:
            raise InputError("compare=... needs a strategy to compare with", "pass strategy='default'")
        scene = sc.compare_scene(graph, partition, compare)
        what = f"joint graph, strategy A = {partition.name} vs B = {compare.name}"
    elif view == "joint":
        scene = sc.joint_scene(graph, partition)
        what = f"joint graph, strategy {partition.name}" if partition else "joint graph"
    else:
        if partition is None:
            raise InputError(f"the {view!r} view needs a strategy", f"call draw({view!r}, strategy='default')")
        if (partition.forward if view == "forward" else partition.backward) is None:
            raise InputError(f"strategy {partition.name!r} has no {view} graph to draw",
                             f"draw('joint', strategy={partition.name!r}) marks what it saves")
        scene = sc.partition_scene(graph, partition, view)
        what = f"{view} graph of strategy {partition.name}"
    n_nodes = len(scene.items)
    capture = f"backend={graph.backend!r}" + (", dynamic shapes" if graph.dynamic else "")
    scene.title = f"{name}: {what} ({n_nodes} nodes; {capture})"

    if isinstance(highlight, str):
        highlight = [highlight]
    if highlight:
        hits = sc.apply_highlight(scene, highlight)
        scene.caption.append(f"highlighted: {', '.join(highlight)} ({hits} nodes)")

    if depth is not None and group is None:
        group = "module"
    if group == "module":
        sc.group_scene(scene, depth)
    elif group is None and n_nodes > node_limit:
        chosen = sc.auto_depth(scene, min(node_limit, AUTO_UNITS))
        sc.group_scene(scene, chosen)
        scene.caption.append(
            f"{n_nodes} nodes is more than {node_limit}: modules are collapsed into boxes below depth "
            f"{chosen}. draw(depth=k) chooses the depth; draw(group='none') draws every node (slow).")
    units = len(set(scene.unit_of.values())) if scene.unit_of else n_nodes
    return Drawing(dot.to_digraph(scene), nodes=units, timeout=timeout, caption=scene.title)
