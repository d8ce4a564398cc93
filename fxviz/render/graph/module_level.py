"""Saved activation bytes per module at one level of the model's structure, as the drawing counts
levels (``Trace.memory_by_module``): containers such as ``ModuleList`` are no level, and the default
level is the one the default drawing collapses to.  The level is the drawing's, so it lives here;
the sums are ``analysis.saved.by_module``'s."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from fxviz.analysis.graph.pieces import renamed
from fxviz.analysis.memory.saved import by_module
from fxviz.core.errors import InputError
from fxviz.render.graph.scene import joint_scene
from fxviz.render.graph.structure import Structure
from fxviz.render.graph.views import collapse_level

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fxviz.analysis.strategy.cache import Cache
    from fxviz.analysis.strategy.partition import Partition
    from fxviz.sources.graphs import JointGraph

__all__ = ["module_at_level", "saved_by_module"]


def module_at_level(structure: Structure, level: int, p: Partition,
                    rename: dict[str, str]) -> Callable[[str], str | None]:
    """node name -> the module box at ``level`` that holds it (None: no module).  An RNG state the
    partitioner made counts under the module of the op it replays; ``rename``: a reused graph's run."""
    made = p.made

    def module_of(name: str) -> str | None:
        wraps = made[name].wraps if name in made else None
        if wraps is not None:
            name = wraps
        if name not in structure.path:
            return None
        return renamed(structure.box_of(name, level) or ".".join(structure.path[name]) or None, rename)

    return module_of


def saved_by_module(table: pd.DataFrame, graph: JointGraph, p: Partition, cache: Cache,
                    depth: int | None = None, rename: dict[str, str] | None = None) -> pd.DataFrame:
    """The activation rows of ``table`` (``p``'s saved table) summed per module at ``depth``
    (default: the default drawing's level); ``attrs``: ``level``, ``strategy``, ``caption``.
    ``cache``: the graph's, where the model's structure is made once."""
    if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 1):
        raise InputError(f"depth must be a positive integer, not {depth!r}",
                         "depth=1 sums per top-level module; leave it out for the drawing's level")
    structure = cache.get(("structure",), lambda: Structure(joint_scene(graph), graph))
    level = depth if depth is not None else collapse_level(graph, structure)
    out = by_module(table, module_at_level(structure, level, p, rename or {}))
    strategy = table.attrs["strategy"]
    out.attrs.update(level=level, strategy=strategy, caption=(
        f"Saved activation bytes per module at level {level} of the model's structure, strategy {strategy}; "
        "they add up to the memory table's saved_activation_bytes."))
    return out
