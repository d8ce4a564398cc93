"""``DrawSpec``: everything that decides one drawing, and nothing else.  It is the argument of
``render.graph.views.draw``, the key a trace caches a drawing under, and what a page's payload carries
(``text()``); it is validated once, here, when it is made (``DrawSpec.of``).  ``View`` is the one list
of views."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from fxviz.analysis.strategy.strategies import Strategy, StrategyLike
from fxviz.core.errors import Blank, Do, InputError, Say, did_you_mean

__all__ = ["View", "VIEWS", "SIDES", "GROUPS", "DrawSpec"]


class View(str, Enum):
    """What a drawing shows: the joint graph, one side of a partition, two strategies on the joint
    graph, min-cut's flow network, or a graph-broken model's graphs as boxes."""

    JOINT = "joint"
    FORWARD = "forward"
    BACKWARD = "backward"
    COMPARE = "compare"
    FLOW = "flow"
    OVERVIEW = "overview"


VIEWS: tuple[str, ...] = tuple(v.value for v in View)
"""Every view ``Trace.draw`` and ``fxviz draw --view`` take."""
PAGE_VIEWS: tuple[str, ...] = ("joint", "forward", "backward", "compare")
"""The views of one graph a page (the explorer, the report) switches between."""
SIDES: tuple[str, ...] = ("joint", "forward", "backward")
"""The graphs a scene is built from: the joint graph or one side of a partition."""
GROUPS: tuple[str | None, ...] = (None, "module", "none")

_COMPARE = ((None, "compare"), ("strategy", Blank("A", "A")), ("compare", Blank("B", "B")))
"""What a comparison drawing takes: the view and the two strategies (a hint's ``Do`` arguments)."""


def _names(value: str | Sequence[str] | None) -> tuple[str, ...]:
    return tuple([value] if isinstance(value, str) else value or ())


@dataclass(frozen=True)
class DrawSpec:
    """One drawing, decided.  ``strategy``: whose saves, recomputes and removals are marked (None: the
    joint graph with roles only; a side view needs one).  ``compare``: a second strategy (the compare
    view).  ``group``/``depth``/``expand``: how the graph is collapsed and which boxes are open.
    ``highlight``: names to emphasise.  ``differences``: the compare view's differences only.
    ``piece``: which graph of a graph-broken model (None: the trace's own).  ``node_limit`` and
    ``timeout`` bound the layout (None: the defaults).  ``pane``: the (width, height) in screen pixels a
    page opens the drawing fitted in (``limits.PAGE_PANE``): an automatic collapse is then at the deepest
    level whose labels stay readable there, not at the deepest that fits a scrolled notebook cell; it is
    not part of the page key (``text``).  Make one with :meth:`of`, which validates."""

    view: str = "joint"
    strategy: Strategy | None = None
    compare: Strategy | None = None
    group: str | None = None
    depth: int | None = None
    expand: tuple[str, ...] = ()
    highlight: tuple[str, ...] = ()
    differences: bool = False
    piece: int | None = None
    node_limit: int | None = None
    timeout: float | None = None
    pane: tuple[int, int] | None = None

    @classmethod
    def of(cls, view: str | View = "joint", strategy: StrategyLike | None = None,
           compare: StrategyLike | None = None, group: str | None = None, depth: int | None = None,
           expand: str | Sequence[str] | None = None, highlight: str | Sequence[str] | None = None,
           differences: bool = False, piece: int | None = None, node_limit: int | None = None,
           timeout: float | None = None) -> DrawSpec:
        """A spec from what a user or a front end passes (strategies as strings, one name or a list):
        the one place a drawing's arguments are checked, each refusal with what to do instead."""
        name = view.value if isinstance(view, View) else view
        if name not in VIEWS:
            close = difflib.get_close_matches(str(name), VIEWS, n=1)
            raise InputError(f"unknown view {name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""),
                             f"use one of {', '.join(VIEWS)}")
        if group not in GROUPS:
            raise InputError(f"unknown group {group!r}", did_you_mean(str(group), ("module", "none"))
                             + "use group='module', group='none' or leave it out")
        if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 1):
            raise InputError(f"depth must be a positive integer, not {depth!r}", "depth=1 draws top-level modules")
        spec = cls(view=name, strategy=None if strategy is None else Strategy.parse(strategy),
                   compare=None if compare is None else Strategy.parse(compare), group=group, depth=depth,
                   expand=_names(expand), highlight=_names(highlight), differences=bool(differences), piece=piece,
                   node_limit=node_limit, timeout=timeout)
        spec.check()
        return spec

    def check(self) -> None:
        """Refuse a combination that cannot be drawn, whatever the graph (a strategy that fails on a
        graph is refused where it is partitioned)."""
        if self.differences and self.compare is None:
            raise InputError("differences=True shows what two strategies treat differently, and no compare=... "
                             "strategy was given",
                             Say("call ", Do("draw", ((None, "compare"), ("strategy", "default_partition"),
                                                      ("compare", "min_cut"), ("differences", True)), on="")))
        if self.compare is not None and self.view not in ("joint", "compare"):
            raise InputError(f"compare=... draws the joint graph, not the {self.view!r} view",
                             Say("call ", Do("draw", ((None, "joint"),) + _COMPARE[1:], on="")))

    def replace(self, **changes: object) -> DrawSpec:
        """This spec with ``changes`` (checked again)."""
        out = dataclasses.replace(self, **changes)  # type: ignore[arg-type]
        out.check()
        return out

    @property
    def side(self) -> str:
        """The graph the scene is built from: ``forward``/``backward`` for a side view, else ``joint``."""
        return self.view if self.view in ("forward", "backward") else "joint"

    def text(self) -> str:
        """``view|strategy|compare|group|depth``, then ``|+opened,boxes`` and ``|differences``: the key a
        page names a view by (the widget's cache, the report's keys, ``data-view-key``); no front end
        builds or parses it."""
        names = (self.strategy.name if self.strategy else None, self.compare.name if self.compare else None)
        base = "|".join(str(x) if x is not None else "-" for x in (self.view, *names, self.group, self.depth))
        return base + ("|+" + ",".join(self.expand) if self.expand else "") + \
            ("|differences" if self.differences else "")
