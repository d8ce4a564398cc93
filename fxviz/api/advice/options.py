"""An advice's options and the advice itself: predictions as attributes, the code to paste, the
table people read."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fxviz import _torch
from fxviz.analysis.advice.anatomy import StepPeak
from fxviz.analysis.advice.changes import Change
from fxviz.analysis.advice.target import Target
from fxviz.core.errors import Do, InputError, spelled
from fxviz.core.units import format_bytes, format_flops
from fxviz.sources.model.routes import recapture

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import torch.nn as nn

    from fxviz.sources.graphs import Capture

__all__ = ["Option", "Advice", "OPTION_COLUMNS", "seconds_text"]

OPTION_COLUMNS: list[str] = ["option", "kind", "meets", "short_by_bytes", "saved_bytes", "peak_bytes",
                             "peak_change_bytes", "recompute_flops", "recompute_bytes", "offloaded_bytes", "seconds",
                             "cheapest"]


@dataclass
class Option:
    """One way to reach the target, predicted by fxviz's trace of the changed step.

    ``saved_bytes``: the activations the backward holds (storages counted once), the whole step;
    ``peak_bytes``: the step's peak (parameters, gradients, optimizer state included; ``peak``
    takes it apart); ``recompute_flops`` / ``recompute_bytes``: what the backward runs again and the
    bytes that moves; ``seconds``: the estimated time that costs; ``meets`` / ``short_by``: whether
    the target is met, and else by how many bytes it is missed; ``moved_bytes``: what offloading
    moves to the host and back (its ``seconds`` are those transfers)."""

    name: str
    kind: str  # budget | checkpoint | selective | offload | optimum
    change: Change | None
    peak: StepPeak
    seconds: float
    meets: bool
    short_by: int
    plain_peak_bytes: int
    source: Capture | None = field(default=None, repr=False, compare=False)  # the advised step's capture
    as_trace: Callable[[Capture], Any] | None = field(default=None, repr=False, compare=False)  # -> a Trace
    moved_bytes: int = 0

    @property
    def saved_bytes(self) -> int:
        return self.peak.saved_bytes

    @property
    def peak_bytes(self) -> int:
        return self.peak.peak_bytes

    @property
    def peak_change_bytes(self) -> int:
        """How much this option moves the step's peak (negative: lower)."""
        return self.peak.peak_bytes - self.plain_peak_bytes

    @property
    def recompute_flops(self) -> int:
        return self.peak.recompute_flops

    @property
    def recompute_bytes(self) -> int:
        return self.peak.recompute_bytes

    @property
    def bound(self) -> bool:
        """The exact optimum: a bound no change of this graph beats, not a change to make."""
        return self.change is None

    @property
    def code(self) -> str:
        """The Python to paste into a training script (``model`` is the model)."""
        if self.change is None:
            return ("# a bound, not a change: no partition of this graph meets the target with less recompute;\n"
                    "# fxviz.partitioner(...) gives it as a partition_fn for aot_autograd\n")
        return self.change.code

    @property
    def config(self) -> dict[str, Any]:
        """The torch config values to set (dotted path -> value); ``{}`` when none."""
        return {} if self.change is None else dict(self.change.config)

    def apply(self, model: nn.Module) -> nn.Module:
        """A copy of ``model`` with the change's modules wrapped (``model`` untouched).  A budget
        option's copy is unchanged: its change is torch's config, in :attr:`config` (set it in the
        training script); :meth:`trace` applies both and traces, to check the prediction."""
        if self.change is None:
            raise InputError(f"{self.name} is a bound, not a change to a model",
                             "apply one of the advice's other options")
        return self.change.apply(model)

    def trace(self, *inputs: Any, **keyword_inputs: Any) -> Any:
        """The advised model with this option applied (:meth:`apply`) traced under its :attr:`config`
        (torch's config restored afterwards), as the advised trace was (loss, params, backend,
        dynamic): a ``Trace`` whose step holds this option's prediction, so
        ``opt.trace(x).memory_table()`` checks it (the whole step's table where it has several graphs).
        ``inputs`` (default: the advised trace's example inputs) are the model's call, keywords included
        (``labels=ids``)."""
        if self.change is None:
            raise InputError(f"{self.name} is a bound, not a change to a model",
                             "trace one of the advice's other options")
        if self.change.kind == "offload":
            raise InputError(f"{self.name}: fxviz traces the step torch partitions, and offloading moves its saved "
                             "values after that: the trace is the advised one", "paste opt.code into the training "
                             "script; opt.moved_bytes is what it moves")
        cap = self.source
        if cap is None or cap.model is None or self.as_trace is None:
            raise InputError(f"{self.name}: this advice has no model to apply it to (advice on a log, or an Option "
                             "made by hand)", f"set opt.config in the training script and compile the model there; "
                             f"the trace advised on shows it as tr.memory_table([{self._strategy_name()!r}])")
        model = self.apply(cap.model)
        given = bool(inputs or keyword_inputs)
        with self.change.settings():
            new = recapture(cap, model, tuple(inputs) if given else None, keyword_inputs)
        return self.as_trace(new)

    def _strategy_name(self) -> str:
        """The strategy that partitions as this option's torch config does (``budget:0.2``)."""

        b = self.config.get(_torch.BUDGET_SETTING)
        return f"budget:{float(b):g}" if b is not None else "min_cut"

    def row(self, cheapest: bool) -> dict[str, Any]:
        return {"option": self.name, "kind": self.kind, "meets": self.meets, "short_by_bytes": self.short_by,
                "saved_bytes": self.saved_bytes, "peak_bytes": self.peak_bytes,
                "peak_change_bytes": self.peak_change_bytes, "recompute_flops": self.recompute_flops,
                "recompute_bytes": self.recompute_bytes, "offloaded_bytes": self.moved_bytes, "seconds": self.seconds,
                "cheapest": cheapest}

    def __repr__(self) -> str:
        state = "meets the target" if self.meets else f"misses it by {format_bytes(self.short_by)}"
        modelless = self.source is None or self.source.model is None  # advice on a log: nothing to apply or trace
        how = (f"set it in the training script; this trace shows it as strategy {self._strategy_name()!r}"
               if modelless else "apply() leaves the model as it is; opt.trace(*inputs) applies both")
        if self.change is not None and self.change.kind == "offload":
            how = f"opt.code also sets the pass that marks what to move; it moves {format_bytes(self.moved_bytes)}"
        where = (f"; the change is torch config, opt.config = {self.config} ({how})"
                 if self.config and not (self.change and self.change.modules) else "")
        return (f"<fxviz advice option {self.name}: saved {format_bytes(self.saved_bytes) or '0 B'}, peak "
                f"{format_bytes(self.peak_bytes)}, recompute {format_flops(self.recompute_flops) or '0 FLOP'}; "
                f"{state}{where}>")


@dataclass
class Advice:
    """Ranked options for a target: those that meet it, cheapest (estimated time) first, then those
    that cannot, closest first; ``bound`` is fxviz's exact optimum at the target, when there is one."""

    target: Target
    goal_bytes: int
    plain: StepPeak
    candidates: list[Option]
    bound: Option | None
    notes: list[str] = field(default_factory=list)
    flops_per_s: float = 0.0
    bytes_per_s: float = 0.0
    step_name: str = "plain step"  # what the step advised on is: a logged run under a budget is not plain
    graphs: int = 1  # graphs with a backward in the step (every offered option's step compiles as many)

    @property
    def options(self) -> list[Option]:
        return sorted(self.candidates, key=lambda o: (not o.meets, o.short_by, o.seconds, o.saved_bytes))

    @property
    def plain_meets(self) -> bool:
        """Whether the step as it is already meets the target (then no change is needed)."""
        have = self.plain.saved_bytes if self.target.kind == "saved" else self.plain.peak_bytes
        return have <= self.goal_bytes

    @property
    def cheapest(self) -> Option | None:
        """The option that meets the target at the least estimated time; None when none does, or when
        the plain step already meets it."""
        first = self.options[0] if self.candidates and not self.plain_meets else None
        return first if first is not None and first.meets else None

    def __getitem__(self, i: int) -> Option:
        return self.options[i]

    def __len__(self) -> int:
        return len(self.candidates)

    def __iter__(self) -> Iterator[Option]:
        return iter(self.options)

    def table(self) -> pd.DataFrame:
        """One row per option (ranked), then the bound; ``attrs['caption']`` says how it was predicted."""
        import pandas as pd

        cheapest = self.cheapest
        rows = [o.row(o is cheapest) for o in self.options]
        if self.bound is not None:
            rows.append(self.bound.row(False))
        df = pd.DataFrame(rows, columns=OPTION_COLUMNS)
        df.attrs["caption"] = self.caption
        return df

    @property
    def caption(self) -> str:
        return (f"Target: {self.target.label(self.plain.saved_bytes)}. The plain step saves "
                f"{format_bytes(self.plain.saved_bytes) or '0 B'} and peaks at {format_bytes(self.plain.peak_bytes)}. "
                "Each option's bytes are fxviz's trace of the changed model, partitioned as torch.compile's step "
                f"does (storages counted once), over the step's {self.graphs} graph(s) with a backward, which "
                "every offered option keeps (one that breaks the graph is not offered); seconds: recompute FLOPs at "
                f"{self.flops_per_s / 1e12:g} TFLOP/s plus the bytes it moves at {self.bytes_per_s / 1e12:g} TB/s "
                "(an estimate). " + " ".join(n.rstrip(".") + "." for n in self.notes))

    def text(self, words: Callable[[Do], str] | None = None) -> str:
        """The table as a terminal shows it; ``words``: how a front end spells the actions the notes
        ask for (the command line's options; default the Python API's)."""
        graphs = f" ({self.graphs} graphs with a backward, which every option keeps)" if self.graphs > 1 else ""
        lines = [f"target: {self.target.label(self.plain.saved_bytes)}",
                 f"{self.step_name}{graphs}: saves {format_bytes(self.plain.saved_bytes) or '0 B'}, peak "
                 f"{format_bytes(self.plain.peak_bytes)}", ""]
        shown = self.options + ([self.bound] if self.bound is not None else [])
        cheapest = self.cheapest
        verdicts = [("bound" if o.bound else "CHEAPEST" if o is cheapest else "meets" if o.meets
                     else f"short by {format_bytes(o.short_by)}") for o in shown]
        # 100 columns: a name longer than what the figures leave gets a line of its own above them
        room = 100 - 60 - max((len(v) for v in verdicts), default=8)
        w = max(6, min(room, max((len(o.name) for o in shown), default=6)))
        if shown:
            lines.append(f"  {'option':<{w}} {'saved':>9} {'peak':>9} {'Δpeak':>9} {'recompute':>11} {'est. time':>9}"
                         "  verdict")
        else:
            lines.append("  no option to offer (the notes say why)")
        for o, verdict in zip(shown, verdicts):
            if len(o.name) > w:
                lines.append(f"  {o.name}")
            lines.append(f"  {o.name if len(o.name) <= w else '':<{w}} {format_bytes(o.saved_bytes) or '0 B':>9} "
                         f"{format_bytes(o.peak_bytes):>9} {_signed(o.peak_change_bytes):>9} "
                         f"{format_flops(o.recompute_flops) or '0 FLOP':>11} {seconds_text(o.seconds):>9}  {verdict}")
        raised = [o for o in shown if o.meets and o.peak_change_bytes > 0]
        if raised and self.target.kind == "saved":  # less saved, yet a higher peak: said, not left to the Δ column
            lines += ["", *textwrap.wrap(
                "raises the step's peak while saving less: " + ", ".join(
                    f"{o.name} (+{format_bytes(o.peak_change_bytes)})" for o in raised)
                + " (the backward recomputes at its peak; see each option's peak below)", 100, subsequent_indent="  ")]
        if self.plain_meets:
            lines += ["", f"the {self.step_name} already meets the target: no change is needed"
                      + (" (the options add headroom)" if self.options else "")]
        elif cheapest is None and self.options:
            o = self.options[0]
            lines += ["", f"no option meets the target; the closest is {o.name}, short by {format_bytes(o.short_by)}"]
        notes = [n if words is None else spelled(n, words) for n in self.notes]
        lines += ["", *[line for n in notes for line in textwrap.wrap(f"note: {n}", 100, subsequent_indent="  ")]]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()


def _signed(n: int) -> str:
    if n == 0:
        return "0 B"
    return ("+" if n > 0 else "-") + format_bytes(abs(n))


def seconds_text(s: float) -> str:
    if s == 0:
        return "0 s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"
