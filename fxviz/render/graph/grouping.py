"""Grouping a scene by module path: each module at a depth becomes one box (``draw(group="module",
depth=...)``), the depth that fits a node limit, and the pattern letters of boxes that repeat
(``h.0`` ... ``h.11``)."""

from __future__ import annotations

import re
import urllib.parse
from collections import Counter

from fxviz.render.graph.scene_types import Group, Scene
from fxviz.sources.roles import STATE_ROLES, NodeInfo


def module_path(info: NodeInfo) -> list[str]:
    """The module path a node is grouped under: its recorded module, or for a parameter, buffer
    or constant the module that owns it (``features.0.weight`` -> ``features.0``)."""
    if info.module:
        return info.module.split(".")
    if info.role in STATE_ROLES and info.qualname and "." in info.qualname:
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
    find_patterns(groups)
    scene.groups = groups
    return scene


_INDEXED = re.compile(r"(^|\.)\d+(?=\.|$)")
_SAME_ROLE = {"gradient": "backward", "output": "forward"}
_PATTERN_MIN_NODES = 3  # two ReLUs being alike is not worth a mark; two transformer blocks are


def find_patterns(groups: dict[str, Group]) -> None:
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
