"""What a partition strategy is: a user's string (or callable) parsed once into a ``Strategy``.

Every layer reads a ``Strategy``'s fields (``kind``, ``budget``, ``solver``, ``name``, ``label``)
and nobody splits a strategy string again (einops' ``ParsedExpression`` is the model).  The
registry ``KINDS`` is the one place a strategy is added: its forms (help text, error messages),
its label, whether it needs the model or a log.  It describes; ``partition.py`` runs.

    >>> Strategy.parse("budget:0.3").name
    'budget:0.3:dp'
    >>> Strategy.parse("min-cut").label
    "min_cut (torch.compile's partitioner: min_cut_rematerialization_partition)"
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fxviz.core.errors import StrategyError, close_matches
from fxviz.core.units import exact_size, format_bytes, parse_size

__all__ = [
    "Strategy",
    "StrategyLike",
    "StrategiesLike",
    "Kind",
    "KINDS",
    "DISPLAY_NAMES",
    "SOLVERS",
    "OFFERED",
    "parse",
    "parse_list",
    "forms_text",
    "PartitionFn",
]

SOLVERS: tuple[str, ...] = ("dp", "greedy", "ilp")
"""The activation-memory-budget knapsack solvers torch offers (``activation_memory_budget_solver``)."""

PartitionFn = Callable[..., Any]
"""A partitioner with torch's signature: ``fn(joint, joint_inputs, *, num_fwd_outputs, ...)``."""


@dataclass(frozen=True)
class Strategy:
    """One way to partition a joint graph, parsed.  Equal strategies have equal ``name``s.

    ``kind``: a key of ``KINDS``.  ``budget``: the fraction of min-cut's saved activation bytes
    (``budget`` and ``optimal`` kinds).  ``budget_bytes``: an absolute byte budget (``optimal``
    kind, instead of ``budget``).  ``solver``: the knapsack solver.  ``fn``: the user's
    partitioner (``callable`` kind; compared by identity).
    """

    kind: str
    budget: float | None = None
    solver: str | None = None
    fn: PartitionFn | None = field(default=None, repr=False)
    budget_bytes: int | None = None

    @classmethod
    def parse(cls, spec: StrategyLike) -> Strategy:
        """A strategy from a string (``"min_cut"``, ``"budget:0.3:greedy"``), a callable with a
        torch partitioner's signature, or a ``Strategy``; raises ``StrategyError`` naming the
        valid forms."""
        if isinstance(spec, Strategy):
            return spec
        if callable(spec):
            return cls("callable", fn=spec)
        if not isinstance(spec, str):
            raise StrategyError(f"a strategy is a string or a callable, not {type(spec).__name__}",
                                f"valid forms: {forms_text()}")
        text = spec.strip().lower().replace("-", "_")
        head, _, rest = text.partition(":")
        head = _ALIASES.get(head, head)
        kind = KINDS.get(head)
        if kind is None or kind.name == "callable":
            raise StrategyError(f"unknown strategy {spec!r}", f"{_guess(head, rest)}valid forms: {forms_text()}")
        return kind.parse_args(rest.split(":") if rest else [], spec)

    @property
    def name(self) -> str:
        """The canonical name: cache keys, table rows, SVG view keys, the report's data."""
        if self.kind == "budget":
            return f"budget:{self.budget:g}:{self.solver}"
        if self.kind == "optimal":
            if self.budget_bytes is None:
                return f"optimal:{self.budget:g}"
            return f"optimal:{exact_size(self.budget_bytes)}"
        if self.kind == "callable":
            return f"callable:{getattr(self.fn, '__qualname__', repr(self.fn))}"
        return DISPLAY_NAMES.get(self.kind, self.kind)

    @property
    def label(self) -> str:
        """What a person reads: the name and what it means."""
        if self.kind == "budget":
            return f"budget {self.budget:g} ({self.solver} solver)"
        if self.kind == "optimal":
            where = (f"{self.budget:g} of the way from the least activations to min-cut's" if self.budget_bytes is None
                     else f"{format_bytes(self.budget_bytes) or '0 B'} of activations")
            return f"optimal at {where} (exact MILP)"
        return KINDS[self.kind].label or self.name

    @property
    def needs_model(self) -> bool:
        """True when the strategy runs the model (the eager reference), not only the graph."""
        return KINDS[self.kind].needs_model

    @property
    def spec(self) -> Kind:
        """This strategy's entry in the registry."""
        return KINDS[self.kind]

    def __str__(self) -> str:
        return self.name


StrategyLike = str | PartitionFn | Strategy
StrategiesLike = StrategyLike | Sequence[StrategyLike]
"""One strategy or several: a list, or a comma-separated string (``"default,min_cut"``)."""


# --- the registry ----------------------------------------------------------------------------------
def _no_args(kind: str) -> Callable[[list[str], str], Strategy]:
    def parse_args(args: list[str], spec: str) -> Strategy:
        if args:
            raise StrategyError(f"strategy {kind!r} takes no arguments, got {spec!r}", f"write {kind!r}")
        return Strategy(kind)

    return parse_args


_NUMBER = re.compile(r"^[0-9]*\.?[0-9]+$")


def _budget_args(args: list[str], spec: str) -> Strategy:
    if not args or not args[0]:
        raise StrategyError(f"strategy {spec!r} needs a budget",
                            "write budget:B with 0 <= B <= 1 (a fraction of min-cut's activation memory), "
                            "e.g. budget:0.5 or budget:0.5:greedy")
    if len(args) > 2:
        raise StrategyError(f"too many ':' in strategy {spec!r}", "write budget:B or budget:B:SOLVER")
    if not _NUMBER.match(args[0]):
        raise StrategyError(f"budget {args[0]!r} in strategy {spec!r} is not a number",
                            "write budget:B with 0 <= B <= 1, e.g. budget:0.5")
    budget = float(args[0])
    if not 0.0 <= budget <= 1.0:
        raise StrategyError(f"budget {budget:g} is outside 0..1 in strategy {spec!r}",
                            "the budget is a fraction of min-cut's activation memory: 0 <= B <= 1")
    solver = args[1] if len(args) > 1 else "dp"
    if solver not in SOLVERS:
        raise StrategyError(f"unknown solver {solver!r} in strategy {spec!r}", f"use one of {', '.join(SOLVERS)}")
    return Strategy("budget", budget=budget, solver=solver)


def _optimal_args(args: list[str], spec: str) -> Strategy:
    forms = "write optimal:B with 0 <= B <= 1 (from the least activation memory to min-cut's) or a size, " \
            "e.g. optimal:0.5, optimal:64MiB, optimal:1048576B"
    if not args or not args[0]:
        raise StrategyError(f"strategy {spec!r} needs a budget", forms)
    if len(args) > 1:
        raise StrategyError(f"too many ':' in strategy {spec!r}", forms)
    size = parse_size(args[0])
    if size is not None:
        return Strategy("optimal", budget_bytes=size)
    if not _NUMBER.match(args[0]):
        raise StrategyError(f"budget {args[0]!r} in strategy {spec!r} is neither a fraction nor a size", forms)
    budget = float(args[0])
    if not 0.0 <= budget <= 1.0:
        raise StrategyError(f"budget {budget:g} is outside 0..1 in strategy {spec!r}",
                            "a fraction of min-cut's activation memory is 0 <= B <= 1; "
                            "for bytes add a unit: optimal:64MiB")
    return Strategy("optimal", budget=budget)


def _unparsable(args: list[str], spec: str) -> Strategy:
    raise StrategyError(f"unknown strategy {spec!r}", f"valid forms: {forms_text()}")


@dataclass(frozen=True)
class Kind:
    """One kind of strategy: how it is written (``forms``) and read (``label``; ``short`` in choice
    lists).  ``from_real_run``: the kind builds its ``Partition`` from a real run (eager: running
    the model; logged: reading a run's log) rather than handing torch's partitioner signature a joint
    graph.  What runs each kind
    lives with the partitioner (``partition.py``), which imports the implementations; this
    registry imports none of them."""

    name: str
    forms: tuple[str, ...]
    describe: str
    label: str
    short: str
    parse_args: Callable[[list[str], str], Strategy]
    from_real_run: bool = False
    needs_model: bool = False
    needs_log: bool = False


KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("default", ("default_partition", "default"), "torch's default_partition: saves what the backward reads",
         "default_partition (torch's default_partition: aot_function's)", "default_partition",
         _no_args("default")),
    Kind("min_cut", ("min_cut",), "torch's min-cut rematerialization (what torch.compile uses)",
         "min_cut (torch.compile's partitioner: min_cut_rematerialization_partition)", "min-cut",
         _no_args("min_cut")),
    Kind("budget", ("budget:B", "budget:B:dp", "budget:B:greedy", "budget:B:ilp"),
         "min-cut under activation_memory_budget=B (0..1 of min-cut's activations) with a knapsack solver",
         "budget", "memory budget", _budget_args),
    Kind("recompute_all", ("recompute_all",),
         "save only graph inputs (and the outputs of ops that draw random values); recompute every other forward op",
         "recompute_all (save graph inputs only)", "recompute all", _no_args("recompute_all")),
    Kind("optimal", ("optimal:B", "optimal:64MiB"),
         "the exact optimum (MILP, HiGHS): least recompute FLOPs with saved activations at most B of the way "
         "from the least possible to min-cut's, or at most a size",
         "optimal", "optimal (MILP)", _optimal_args),
    Kind("eager", ("eager",), "what eager autograd saves for the same model and inputs (measured)",
         "eager autograd (measured with saved_tensors_hooks)", "eager autograd", _no_args("eager"),
         from_real_run=True, needs_model=True),
    Kind("logged", ("logged",), "what the real run saved: its logged forward and backward graphs",
         "logged (what the run's partitioner chose)", "logged (the run)", _no_args("logged"),
         from_real_run=True, needs_log=True),
    Kind("callable", ("<callable>",), "your function with a torch partitioner's signature",
         "", "your partitioner", _unparsable),
)}

_ALIASES = {"mincut": "min_cut", "memory_budget": "budget", "default_partition": "default"}

DISPLAY_NAMES: dict[str, str] = {"default": "default_partition"}
"""A kind whose name is spelled otherwise wherever a person reads it: torch's ``default_partition`` is
``default_partition`` in every table, caption, drawing, page and CLI line, so that nobody reads "default"
as fxviz's default (which is the user's step's strategy, min-cut for ``torch.compile``).  ``"default"``
stays accepted as input; the kind (a control's value) stays ``default``."""

OFFERED: tuple[Strategy, ...] = (
    Strategy("default"), Strategy("min_cut"), Strategy("budget", budget=0.5, solver="dp"),
    Strategy("recompute_all"), Strategy("eager"),
)
"""The strategies fxviz shows by default for a traced model: the memory table's rows, the
report's and the explorer's choices.  ``analysis.choices.offered`` adapts it to where a trace came from."""


def _guess(head: str, rest: str) -> str:
    """``"did you mean 'budget:0.3'? "`` for a misspelled strategy ``head``: the kinds whose names are
    close, each as a person writes it whole (``rest``, the arguments given, kept; else a kind's first
    form with an example budget); ``""`` when no kind is close."""
    kind_of = {f.split(":")[0]: k for k in KINDS.values() if k.name != "callable" for f in k.forms}
    kind_of.update({a: KINDS[k] for a, k in _ALIASES.items()})
    found = list(dict.fromkeys(kind_of[m] for m in close_matches(head, kind_of)))
    written = [f"{k.forms[0].split(':')[0]}:{rest}" if rest and ":" in k.forms[0] else k.forms[0].replace(":B", ":0.5")
               for k in found[:2]]
    return f"did you mean {' or '.join(repr(w) for w in written)}? " if written else ""


def parse(spec: StrategyLike) -> Strategy:
    """``Strategy.parse``."""
    return Strategy.parse(spec)


def parse_list(specs: StrategiesLike | None) -> list[Strategy] | None:
    """A list of strategies from one strategy, a list, or a comma-separated string (``None`` stays
    ``None``); duplicates are dropped, order kept."""
    if specs is None:
        return None
    if isinstance(specs, Strategy) or (callable(specs) and not isinstance(specs, str)):
        return [Strategy.parse(specs)]
    items: Sequence[StrategyLike] = [s for s in specs.split(",") if s.strip()] if isinstance(specs, str) else specs
    return list(dict.fromkeys(Strategy.parse(s) for s in items))


def forms_text() -> str:
    """Every form a strategy can be written in, for help texts and errors."""
    return ", ".join(f for k in KINDS.values() for f in k.forms)
