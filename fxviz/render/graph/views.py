"""One entry point from analysis objects to a ``Drawing``: picks the scene for the view, applies
highlight and module grouping (automatic above ``NODE_LIMIT`` nodes), and writes the DOT."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable

from fxviz.analysis.strategy.choices import named
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.errors import Blank, Do, InputError, RenderError, Say
from fxviz.core.units import plural
from fxviz.render.graph import dot
from fxviz.render.graph import scene as sc
from fxviz.render.graph.drawing import DEFAULT_TIMEOUT, Drawing
from fxviz.render.graph.limits import NODE_LIMIT, READABLE_PX
from fxviz.render.graph.spec import GROUPS, PAGE_VIEWS, SIDES, DrawSpec
from fxviz.sources.graphs import INFERENCE_NOTE, JointGraph

__all__ = ["draw", "openable", "box_name", "aspect_of", "level_order", "collapse_level", "NODE_LIMIT", "AUTO_UNITS",
           "UNIT_LIMIT", "ASPECT", "GROUPS"]

# When the default view collapses, it picks the deepest level of the model's structure with at
# most AUTO_UNITS drawn units whose layout is between 1:3 and 3:1 (``ASPECT``); failing that, a
# level of at most UNIT_LIMIT units.  About 60 boxes is what a laptop screen shows with every label
# legible: on a 2-layer HF GPT-2 it is one box per attention, MLP and norm of each block (54);
# the next level (118 units) draws every projection and reads as a 1:2.4 strip.
AUTO_UNITS = 60
UNIT_LIMIT = 150
ASPECT = (1 / 3, 3.0)
# The default view of more boxes than this draws its edges as straight lines (``splines=line``):
# dot routes each curved edge through every rank it crosses, and a collapsed joint graph of a deep
# model has long edges (each block's forward to its backward, across the whole stack).  A 60-layer
# GPT's level-1 drawing (132 boxes, 250 ranks, 32k virtual nodes): 59 s of CPU in dot with curves,
# 2.4 s with lines, the same layout; ``splines=polyline`` routes like curves (51 s).
STRAIGHT_EDGES_ABOVE = 100
_COMPARE = ((None, "compare"), ("strategy", Blank("A", "A")), ("compare", Blank("B", "B")))
"""What a comparison drawing takes: the view and the two strategies (a hint's ``Do`` arguments)."""


def draw(graph: JointGraph, spec: DrawSpec, partition: Partition | None = None, compare: Partition | None = None,
         name: str = "model", names: dict[str, str] | None = None) -> Drawing:
    """Draw ``graph`` (the joint graph, or one side of ``partition``) as ``spec`` says.

    ``partition`` and ``compare`` are ``spec.strategy``'s and ``spec.compare``'s partitions (the joint
    graph is then marked with what A and B save and recompute).  ``spec.group``: ``"module"`` (clusters
    by module path, boxes at ``depth``), ``"none"`` (every node, however many), or ``None`` (every node
    up to ``node_limit``, module boxes above it, collapsed along the model's structure: see
    ``scene.Structure``).  ``spec.expand``: module paths (``"model.layers.0"``), function boxes
    (``"masking_utils.sdpa_mask()"``) or ``scene.BOOKKEEPING``, whose box is opened to show the
    boxes or ops inside (``openable`` lists them); it implies collapsing (at ``depth`` as a structure
    level if given).  ``spec.differences``: only the nodes A and B treat differently
    (``scene.differing``) with their direct producers and users as faded context, every node drawn as
    itself.  ``names``: what the user's step's strategy is (``choices.step_names``), said beside its
    name in the title.
    """
    _refuse(graph, spec, partition, compare)
    timeout = DEFAULT_TIMEOUT if spec.timeout is None else spec.timeout
    if compare is not None and partition is not None and spec.differences:
        return _differences(graph, partition, compare, name, timeout, spec.highlight)
    scene, what = _scene(graph, spec, partition, compare, names)
    n_nodes = len(scene.items)
    capture = f"backend={graph.backend!r}" + (", dynamic shapes" if graph.dynamic else "")
    scene.title = f"{name}: {what} ({n_nodes} nodes; {capture})"

    highlight, expand, group, depth = list(spec.highlight), list(spec.expand), spec.group, spec.depth
    node_limit = NODE_LIMIT if spec.node_limit is None else spec.node_limit
    if highlight:
        hits = sc.apply_highlight(scene, highlight)
        scene.caption.append(f"highlighted: {', '.join(highlight)} ({plural(hits, 'node')})")

    if expand and group == "none":
        raise InputError("expand=... opens module boxes, but group='none' draws no boxes", "leave group out")
    if depth is not None and group is None and not expand:
        group = "module"
    if group == "module" and not expand:
        sc.group_scene(scene, depth)
    elif expand or (group is None and n_nodes > node_limit):
        structure = sc.Structure(scene, graph)
        modules = {".".join(q) for q in structure.level}
        boxes = structure.openable() if any(m not in modules for m in expand) else set()  # every level's units
        expand = [m if m in modules else box_name(m, boxes) for m in expand]
        return _auto_structure(scene, structure, depth, list(expand), n_nodes, node_limit, timeout, spec.pane)
    units = len(set(scene.unit_of.values())) if scene.unit_of else n_nodes
    return Drawing(dot.to_digraph(scene), nodes=units, timeout=timeout, caption=scene.title,
                   boxes=[g.record() for g in scene.groups.values()])


def _refuse(graph: JointGraph, spec: DrawSpec, partition: Partition | None, compare: Partition | None) -> None:
    """What ``spec`` cannot draw on this graph with these partitions, refused with what to do instead
    (what no graph could draw is refused when the spec is made: ``DrawSpec.check``)."""
    view = "joint" if spec.view == "compare" else spec.view
    if spec.view == "compare" and compare is None:
        raise InputError("the 'compare' view needs a second strategy", Say("call ", Do("draw", _COMPARE, on="")))
    if view not in SIDES:
        raise InputError(f"the {spec.view!r} view is not a drawing of one graph's nodes",
                         f"use one of {', '.join(PAGE_VIEWS)}")
    if view == "backward" and graph.inference:  # before any strategy's error: none has a backward here
        raise InputError(f"this graph has no backward: {INFERENCE_NOTE} (it was compiled for inference: nothing "
                         "in it needed a gradient; a forward graph only)",
                         Say("draw it with ", Do("draw", ((None, "joint"),), on=""), " or ",
                             Do("draw", ((None, "forward"),), on="")))
    for p in (partition, compare):
        if p is not None and p.error:
            raise InputError(f"strategy {p.label!r} failed: {p.error}",
                             Say("pick another strategy (see ", Do("partition", ((None, Blank("...", "")),),
                                                                   then=".error"), ")"))
    if compare is not None and partition is None:
        raise InputError("compare=... needs a strategy to compare with", "pass strategy='default'")
    if view in ("forward", "backward") and compare is None:
        if partition is None:
            raise InputError(f"the {view!r} view needs a strategy",
                             Say("call ", Do("draw", ((None, view), ("strategy", "default_partition")), on="")))
        if (partition.forward if view == "forward" else partition.backward) is None:
            why = ": it is measured, not partitioned" if partition.measurement is not None else ""
            raise InputError(f"{partition.label} has no {view} graph to draw{why}",
                             Say(Do("draw", ((None, "joint"), ("strategy", partition.name)), on=""),
                                 " marks what it saves"))


def _scene(graph: JointGraph, spec: DrawSpec, partition: Partition | None, compare: Partition | None,
           names: dict[str, str] | None) -> tuple[sc.Scene, str]:
    """The scene ``spec`` draws (after ``_refuse``), and what its title says it is."""
    if compare is not None and partition is not None:
        what = f"joint graph, strategy A = {_named(partition, names)} vs B = {_named(compare, names)}"
        return sc.compare_scene(graph, partition, compare), what
    if spec.side == "joint" or partition is None:
        what = f"joint graph, strategy {_named(partition, names)}" if partition else "joint graph"
        return sc.joint_scene(graph, partition), what
    return sc.partition_scene(graph, partition, spec.side), f"{spec.side} graph of strategy {_named(partition, names)}"


def _named(p: Partition, names: dict[str, str] | None) -> str:
    return named(p.name, names or {}, "{name}, {words}")


def _differences(graph: JointGraph, a: Partition, b: Partition, name: str, timeout: float,
                 highlight: Iterable[str]) -> Drawing:
    """The differences-only compare (``scene.differences_scene``), every node drawn as itself."""
    scene = sc.differences_scene(graph, a, b)
    marks = list(highlight)
    if marks:
        hits = sc.apply_highlight(scene, marks)
        scene.caption.append(f"highlighted: {', '.join(marks)} ({plural(hits, 'node')})")
    capture = f"backend={graph.backend!r}" + (", dynamic shapes" if graph.dynamic else "")
    if scene.items:
        n_diff = sum(1 for it in scene.items.values() if not it.context)
        what = (f"differences only, A = {a.name} vs B = {b.name} ({plural(n_diff, 'node')} treated differently, "
                f"{len(scene.items) - n_diff} neighbors)")
        scene.title = f"{name}: {what} ({capture})"
    else:
        scene.title = f"{name}: {a.name} and {b.name} treat every node alike"
    return Drawing(dot.to_digraph(scene), nodes=len(scene.items), timeout=timeout, caption=scene.title)


def box_name(name: str, names: set[str]) -> str:
    """The box ``name`` means: itself, or the one function box whose name ends with it (a function
    box inside module ``transformer`` is ``transformer.masking_utils.sdpa_mask()``; its box reads
    ``masking_utils.sdpa_mask()``, which opens it too)."""
    if name in names:
        return name
    ending = sorted(n for n in names if n.endswith("." + name))
    if len(ending) == 1:
        return ending[0]
    if ending:
        raise InputError(f"expand={name!r} names {len(ending)} boxes of this graph: {', '.join(ending[:4])}",
                         "pass one of them as written")
    close = difflib.get_close_matches(name, sorted(names), n=3, cutoff=0.5)
    functions = sorted(n for n in names if n.endswith(")") or "() #" in n)
    example = close or functions[:2] or sorted(names)[:2]
    raise InputError(f"expand={name!r} is not a module or box of this graph",
                     f"pass a module path or a box's name as the boxes show it, e.g. expand={example!r}")


def openable(graph: JointGraph, view: str = "joint", partition: Partition | None = None, group: str | None = None,
             node_limit: int = NODE_LIMIT) -> set[str]:
    """The names ``draw(view, group=group, expand=[...])`` takes for this view: module paths,
    function boxes and the bookkeeping box (``Structure.openable``); none where the view draws
    no boxes (``group='none'``, or fewer than ``node_limit`` nodes and no grouping asked for),
    so that a name kept from another view never collapses a view drawn node by node."""
    if group == "none":
        return set()
    if view in ("joint", "compare"):
        scene = sc.joint_scene(graph)
    else:
        if partition is None or (partition.forward if view == "forward" else partition.backward) is None:
            return set()
        scene = sc.partition_scene(graph, partition, view)
    if group is None and len(scene.items) <= node_limit:
        return set()
    return sc.Structure(scene, graph).openable()


def level_order(counts: dict[int, int]) -> list[int]:
    """The structure levels the default drawing tries, best first, from the units each level draws:
    the deepest with at most ``AUTO_UNITS`` units, then those up to ``UNIT_LIMIT`` (fewest units
    first); failing both, the level with the fewest units."""
    fitting = [lvl for lvl in sorted(counts, reverse=True) if counts[lvl] <= AUTO_UNITS]
    fitting += sorted((lvl for lvl in counts if AUTO_UNITS < counts[lvl] <= UNIT_LIMIT), key=counts.__getitem__)
    return fitting or [min(counts, key=counts.__getitem__)]


def collapse_level(graph: JointGraph, structure: sc.Structure | None = None, node_limit: int = NODE_LIMIT) -> int:
    """The structure level the default joint drawing collapses to (its first candidate, before the
    layout's aspect check), or the deepest level when the drawing shows every node: the level a
    per-module summary of the same graph reads at (``Trace.memory_by_module``)."""
    scene = sc.joint_scene(graph)
    structure = sc.Structure(scene, graph) if structure is None else structure
    top = max(structure.max_level, 1)
    if len(scene.items) <= node_limit:
        return top
    return level_order({lvl: structure.count(lvl) for lvl in range(1, top + 1)})[0]


_SIZE = re.compile(r'<svg width="([\d.]+)pt" height="([\d.]+)pt"')


def aspect_of(svg: str) -> float:
    """Width / height of a laid-out SVG."""
    m = _SIZE.search(svg)
    return float(m.group(1)) / float(m.group(2)) if m else 1.0


def _auto_structure(scene: sc.Scene, structure: sc.Structure, level: int | None, expand: list[str], n_nodes: int,
                    node_limit: int, timeout: float, pane: tuple[int, int] | None = None) -> Drawing:
    """Collapse along the model's structure: at ``level`` if given, else the deepest level with at
    most ``AUTO_UNITS`` units whose layout is screen-shaped (``ASPECT``), laying out candidates
    from the deepest fitting level up (each layout of ~60 units takes a fraction of a second);
    if none is, the one closest to the bounds.  ``pane`` (a page's graph pane, screen pixels): first
    the deepest of those levels, not above the model's blocks (``Structure.blocks_level``), whose labels
    stay ``READABLE_PX`` tall with the whole drawing fitted in it."""
    opened = frozenset(expand)
    top = max(structure.max_level, 1)
    counts = {lvl: structure.count(lvl, opened) for lvl in range(1, top + 1)}
    if level is not None:
        order = [level]
    else:  # the level is chosen as if nothing were opened: opening a box keeps the rest as it was
        order = level_order({lvl: structure.count(lvl) for lvl in counts} if opened else counts)
    # a model too deep for any level (a 300-layer stack: 600 block boxes, dot for minutes, a strip no
    # screen shows): each container of blocks (``h``) becomes one box, opened by expand=['h']
    containers = level is None and structure.count(order[0]) > UNIT_LIMIT and bool(structure.container)
    if containers:
        order = order[:1]
        counts[order[0]] = structure.count(order[0], opened, containers=True)
    caption = list(scene.caption)
    made: dict[int, Drawing] = {}

    def drawing_at(lvl: int) -> Drawing:
        if lvl not in made:  # laid out once, whichever rule asks
            made[lvl] = _level_drawing(scene, structure, lvl, opened, containers, counts[lvl], n_nodes, node_limit,
                                       timeout, caption)
        return made[lvl]

    if pane is not None and level is None and not containers:
        floor = structure.blocks_level()  # never above the model's own blocks: a page opens on its layers
        fitted = [lvl for lvl in sorted(counts, reverse=True) if lvl >= floor and structure.count(lvl) <= AUTO_UNITS]
        readable = _readable_level(fitted, drawing_at, pane)
        if readable is not None:
            return readable
    return _screen_shaped(order, drawing_at)


def _screen_shaped(order: list[int], drawing_at: Callable[[int], Drawing]) -> Drawing:
    """The first of the levels ``order`` whose layout is screen-shaped (``ASPECT``), else the one closest to
    it; a single level, or one whose layout timed out, as it is."""
    best: tuple[float, Drawing] | None = None
    for lvl in order:
        drawing = drawing_at(lvl)
        if len(order) == 1:
            return drawing
        try:
            ratio = aspect_of(drawing.svg())
        except RenderError:  # a layout that times out here fails the same way when shown
            return drawing
        off = max(ASPECT[0] / ratio, ratio / ASPECT[1])  # <= 1 inside the bounds
        if off <= 1:
            return drawing
        if best is None or off < best[0]:
            best = (off, drawing)
    assert best is not None
    return best[1]


def _level_drawing(scene: sc.Scene, structure: sc.Structure, lvl: int, opened: frozenset[str], containers: bool,
                   units: int, n_nodes: int, node_limit: int, timeout: float, caption: list[str]) -> Drawing:
    """``scene`` collapsed at structure level ``lvl`` (``opened`` boxes open), its caption ``caption``
    (the scene's own, before any level's) with the line that says so."""
    scene.unit_of, scene.place, scene.groups, scene.caption = {}, {}, {}, list(caption)
    sc.structure_scene(scene, structure, lvl, opened, containers)
    why = (f"{n_nodes} nodes is more than {node_limit}: " if n_nodes > node_limit else "") + \
        f"modules are collapsed into boxes at level {lvl} of the model's structure"
    if containers:
        lists = sorted({g.path for g in scene.groups.values() if tuple(g.path.split(".")) in structure.container})
        why += (f" ({structure.count(lvl)} boxes at that level: each list of blocks is one box, "
                f"{', '.join(lists[:3])}{', ...' if len(lists) > 3 else ''}; expand=[{lists[0]!r}] opens it)"
                if lists else "")
    expand = sorted(opened)
    scene.caption.append(Say(why + (f" (opened: {', '.join(expand)})" if expand else "") + ". ",
                             Do("draw", (("expand", Blank("['<module>']", "MODULE")),), on=""), " opens a box; ",
                             Do("draw", (("depth", Blank("k", "K")),), on=""), " picks the level; ",
                             Do("draw", (("group", "none"),), on=""), " draws every node (slow)."))
    digraph = dot.to_digraph(scene)
    if units > STRAIGHT_EDGES_ABOVE:
        digraph.attr("graph", splines="line")
    return Drawing(digraph, nodes=units, timeout=timeout, caption=scene.title,
                   boxes=[g.record() for g in scene.groups.values()])


def _readable_level(levels: list[int], drawing_at: Callable[[int], Drawing], pane: tuple[int, int]) -> Drawing | None:
    """The drawing of the deepest of ``levels`` (deepest first) whose median node label is at least
    ``READABLE_PX`` tall when the whole drawing is fitted in ``pane``; None when none is (the page then
    opens the default level on the model's blocks at a readable zoom).  A layout that times out is kept
    (it fails the same way when shown)."""
    for lvl in levels:
        drawing = drawing_at(lvl)
        try:
            px = fitted_label_px(drawing.svg(), pane)
        except RenderError:
            return drawing
        if px >= READABLE_PX:
            return drawing
    return None


_NODE_TEXT = re.compile(r'<g id="[^"]*" class="node[^"]*">.*?</g>', re.S)
_FONT = re.compile(r'<text[^>]*font-size="([\d.]+)"')


def fitted_label_px(svg: str, pane: tuple[int, int]) -> float:
    """How tall (screen pixels) the median node label of a laid-out SVG is when the whole drawing is
    fitted in ``pane`` (width, height in pixels), as the page's script measures it: font size in SVG
    units times the fitted scale."""
    m = _SIZE.search(svg)
    if not m:
        return 0.0
    w, h = float(m.group(1)), float(m.group(2))
    sizes = sorted(float(f) for g in _NODE_TEXT.findall(svg) for f in _FONT.findall(g))
    median = sizes[len(sizes) // 2] if sizes else 14.0
    return median * min(pane[0] / w, pane[1] / h) if w and h else 0.0
