"""Collapsing a scene along the model's own structure (the default for big graphs): ``Structure``
places every item in the module tree (containers do not count as levels; ops of no module are boxed
per source function; in-place buffer bookkeeping shares one box) and ``structure_scene`` draws one
level of it, with the boxes named in ``expand`` opened."""

from __future__ import annotations

import itertools
import urllib.parse
from collections.abc import Iterable

import torch.fx as fx

from fxviz._torch import module_path_from_stack_entry, module_stack, stack_trace
from fxviz.core.graph_facts import stack_frames
from fxviz.render.graph.grouping import find_patterns, module_path
from fxviz.render.graph.scene_types import Group, Scene
from fxviz.sources.graphs import JointGraph

_CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")
BOOKKEEPING = "(in-place buffer updates)"
_FN_BOX_MIN = 2  # one op of a function is drawn as itself; two or more share the function's box


def _source_function(node: fx.Node | None, memo: dict[str, str | None]) -> str | None:
    """``masking_utils.sdpa_mask``: the innermost function of a node's recorded stack trace
    (``memo``: by the trace's text, which every layer of a stack repeats)."""

    trace = stack_trace(node) if node is not None else None
    if not trace:
        return None
    if trace not in memo:
        memo[trace] = _innermost_function(trace)
    return memo[trace]


def _innermost_function(trace: str) -> str | None:
    found = [(path, fn) for path, _line, fn, _code in stack_frames(trace) if fn]
    if not found:
        return None
    path, fn = found[-1]
    return f"{path.rsplit('/', 1)[-1].removesuffix('.py')}.{fn}"


def _module_kinds(graph: JointGraph) -> dict[str, str]:
    """Module path -> class name, from dynamo's module stacks of the forward ops."""

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
    prefixes = {p[:k] for p in producers for k in range(len(p) + 1)}  # c is a prefix of a producer's path
    hits = [c for c in candidates if c in prefixes]
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
        self._joint_nodes = {n.name: n for n in graph.gm.graph.nodes}
        kinds = _module_kinds(graph)
        producers: dict[str, list[str]] = {}
        for a, b in scene.edges:
            producers.setdefault(b, []).append(a)
        used_at: dict[str, set[tuple[str, ...]]] = {}  # source line -> modules whose forward runs it
        for info in graph.info.values():
            if info.phase == "forward" and info.module and info.source:
                used_at.setdefault(info.source, set()).add(tuple(info.module.split(".")))
        self.path: dict[str, tuple[str, ...]] = {}
        of_module: dict[str, tuple[str, ...]] = {}  # a module's path, split once (not once per op)
        for it in scene.items.values():  # items are in graph order: producers come first
            module = it.info.module
            if module:
                path = of_module.get(module) or of_module.setdefault(module, tuple(module_path(it.info)))
            else:
                path = tuple(module_path(it.info))
            if not path and it.info.op == "call_function" and it.side == "backward":
                placed = [self.path[p] for p in producers.get(it.id, ())
                          if self.path.get(p) and scene.items[p].side == "backward"]
                path = _use_site(placed, used_at.get(it.info.source or "", set()))
            self.path[it.id] = path
        self._functions: dict[str, str | None] = {}  # stack-trace text -> its innermost function
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
        self._units: dict[tuple[int, frozenset[str], bool], dict[str, tuple[str, str, str | None]]] = {}
        self._by_place: dict[tuple[str, tuple[str, ...]], tuple[list[str], int]] | None = None
        self._producers, self._users = producers, users  # an item's edges, for ``_connected``

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

    def function(self, item_id: str) -> str | None:
        """The innermost source function of an item's op (``masking_utils.sdpa_mask``): asked only
        for the ops a level draws loose, not for the 50,000 a collapsed view boxes."""
        return _source_function(self._joint_nodes.get(self.scene.items[item_id].joint), self._functions)

    def blocks_level(self) -> int:
        """The level at which the model's stack of blocks are boxes (``model.layers.0`` ...: the children of
        the container with the most children, the shallower of a tie); 1 without a container."""
        stacks = sorted(((len(self.children.get(c, ())), -len(c), c) for c in self.container), reverse=True)
        if not stacks:
            return 1
        stack = stacks[0][2]
        return min((self.level[stack + (k,)] for k in self.children.get(stack, ()) if stack + (k,) in self.level),
                   default=1)

    @property
    def max_level(self) -> int:
        return max((lvl for q, lvl in self.level.items() if q not in self.container), default=0)

    def box_of(self, item_id: str, level: int, expand: frozenset[str] = frozenset(),
               containers: bool = False) -> str | None:
        """The module path of the box ``item_id`` falls into at ``level``, or None (drawn as itself).
        A module with no submodules is a box at every level below its own (opening it would show
        loose ops, not structure); a module in ``expand`` is always open.  ``containers``: a
        container on the way (``h`` of ``h.0`` ... ``h.299``) is itself one box, unless opened."""
        return self._box_at(self.path[item_id], level, expand, containers)

    def _box_at(self, p: tuple[str, ...], level: int, expand: frozenset[str], containers: bool) -> str | None:
        """``box_of`` for an item at module path ``p``: every item of one module falls into the same box."""
        for k in range(1, len(p) + 1):
            q = p[:k]
            if containers and q in self.container and not _opened(".".join(q), expand):
                return ".".join(q)
            if q in self.container or _opened(".".join(q), expand):
                continue
            if self.level[q] >= level or q not in self.children:
                return ".".join(q)
        return None

    def units(self, level: int, expand: frozenset[str] = frozenset(),
              containers: bool = False) -> dict[str, tuple[str, str, str | None]]:
        """item id -> (unit id, box label, box module path or None for a function/bookkeeping box).
        Items drawn as themselves map to ``(id, "", None)``; ``containers``: see :meth:`box_of`.
        Made once per arguments; the caller must not change it."""
        key = (level, frozenset(expand), containers)
        if key not in self._units:
            boxed, in_function = self._parts(*key)
            books = self.bookkeeping if BOOKKEEPING not in key[1] else set()
            bookkeeping = (f"forward/{urllib.parse.quote(BOOKKEEPING, safe='')}", BOOKKEEPING, None)
            out: dict[str, tuple[str, str, str | None]] = {}
            for it in self.scene.items.values():
                unit = bookkeeping if it.id in books else boxed.get((it.side, self.path[it.id]))
                out[it.id] = unit or in_function.get(it.id) or (it.id, "", None)
            self._units[key] = out
        return self._units[key]

    def count(self, level: int, expand: frozenset[str] = frozenset(), containers: bool = False) -> int:
        """How many units ``units(level, expand, containers)`` draws, counted by module, not by item
        (the default view counts every level to pick one, and draws one)."""
        expand = frozenset(expand)
        boxed, in_function = self._parts(level, expand, containers)
        books = self.bookkeeping if BOOKKEEPING not in expand else set()
        drawn = {unit for unit, _, _ in in_function.values()}
        loose = 0
        for place, (ids, n_books) in self._places().items():
            if books and n_books == len(ids):  # every item there is in the bookkeeping box
                continue
            if place in boxed:
                drawn.add(boxed[place][0])
            else:
                loose += sum(1 for i in ids if i not in in_function and i not in books)
        return len(drawn) + loose + (1 if books else 0)

    def _places(self) -> dict[tuple[str, tuple[str, ...]], tuple[list[str], int]]:
        """(side, module path) -> (the items there, in graph order; how many of them are
        bookkeeping): every item of a place falls into the same box at any level."""
        if self._by_place is None:
            places: dict[tuple[str, tuple[str, ...]], list[str]] = {}
            for it in self.scene.items.values():
                places.setdefault((it.side, self.path[it.id]), []).append(it.id)
            self._by_place = {place: (ids, sum(1 for i in ids if i in self.bookkeeping))
                              for place, ids in places.items()}
        return self._by_place

    def _parts(self, level: int, expand: frozenset[str], containers: bool) -> tuple[
            dict[tuple[str, tuple[str, ...]], tuple[str, str, str]], dict[str, tuple[str, str, None]]]:
        """What a level draws, by place: the module box of each boxed place ((side, path) -> its
        unit), and the function box of each loose op that shares one (item id -> its unit);
        bookkeeping items aside (``units``)."""
        boxed: dict[tuple[str, tuple[str, ...]], tuple[str, str, str]] = {}
        drawn: dict[tuple[str, str], tuple[str, str, str]] = {}  # (side, box) -> the unit
        loose: dict[tuple[str, tuple[str, ...], str], list[str]] = {}
        books = self.bookkeeping if BOOKKEEPING not in expand else set()
        boxes: dict[tuple[str, ...], str | None] = {}
        for (side, path), (ids, _) in self._places().items():
            if path not in boxes:
                boxes[path] = self._box_at(path, level, expand, containers)
            box = boxes[path]
            if box is not None:
                unit = drawn.get((side, box))
                if unit is None:
                    unit = drawn[side, box] = (f"{side}/{urllib.parse.quote(box, safe='._-')}", box, box)
                boxed[side, path] = unit
                continue
            for i in ids:
                if i in books:
                    continue
                fn = self.function(i)
                if self.scene.items[i].info.op == "call_function" and fn and ".".join(path) not in expand \
                        and (not path or not fn.endswith(".forward")):
                    loose.setdefault((side, path, fn), []).append(i)
        in_function: dict[str, tuple[str, str, None]] = {}
        for (side, path, fn), ids in loose.items():
            parts = [part for part in self._connected(ids) if len(part) >= _FN_BOX_MIN]
            for k, part in enumerate(parts):  # numbered among the boxes only: #1, #2... or none for one
                label = f"{fn}()" if len(parts) == 1 else f"{fn}() #{k + 1}"
                key = function_key(path, label)
                if key in expand:
                    continue
                for i in part:
                    in_function[i] = (f"{side}/{urllib.parse.quote(key, safe='._-()#')}", label, None)
        return boxed, in_function

    def _connected(self, ids: list[str]) -> list[list[str]]:
        """``ids`` split into pieces joined by edges among themselves, in graph order: one box
        for a whole function whose ops feed modules in between (a UNet's forward: the time
        embedding, then each upsampling) would be a hub every edge runs through."""
        rest = set(ids)
        parts = []
        order = {x: n for n, x in enumerate(ids)}  # once: per part it was quadratic (16 s at 50k nodes, issue 26)
        for i in ids:
            if i not in rest:
                continue
            part, todo = [], [i]
            rest.discard(i)
            while todo:
                x = todo.pop()
                part.append(x)
                for y in itertools.chain(self._producers.get(x, ()), self._users.get(x, ())):  # its own edges
                    if y in rest:
                        rest.discard(y)
                        todo.append(y)
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


def structure_scene(scene: Scene, structure: Structure, level: int, expand: Iterable[str] = (),
                    containers: bool = False) -> Scene:
    """Collapse ``scene`` at ``level`` of the model's structure (see :class:`Structure`); modules
    named in ``expand`` are drawn open (their children become the boxes); ``containers``: each
    unopened container (a ``ModuleList`` of blocks) is one box (:meth:`Structure.box_of`)."""
    opened = frozenset(expand)
    scene.grouped = True
    scene.group_depth = level
    scene.unframed = set(structure.container)  # ``layers`` around ``layers.0``: one frame less
    groups: dict[str, Group] = {}
    for item_id, (unit, label, box) in structure.units(level, opened, containers).items():
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
    find_patterns(groups)
    scene.groups = groups
    return scene
