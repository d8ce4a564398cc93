"""``advise``: the changes to a training step that meet a memory target, each predicted by tracing
the changed model with fxviz and reading the step's memory table of that trace, the one door every
view reads (``Trace.memory_table(scope="step")``).

Kinds of change, as torch offers them: ``activation_memory_budget`` (min-cut as a knapsack; the
largest budget on a grid that meets the target), activation checkpointing of the first k layers of
the model's stack of identical layers (the fewest that meet the target; a Hugging Face model's own
knob where it has one), the same with a selective-checkpoint policy that saves the matmuls, torch's
activation offloading on an accelerator's step; and fxviz's exact optimum at the target (a bound: no
partition of this graph saves as little with less recompute).  The time cost is an estimate:
recompute FLOPs at ``flops_per_s`` plus the bytes recomputation moves at ``bytes_per_s``, or the bytes
offloading moves both ways at torch's stated host-device bandwidth.

A change is offered only where its step runs as the plain one does: its code runs the model eagerly
(forward and backward, where a checkpoint's recompute fails if it would), and torch.compile captures
the changed model in the plain step's graphs, no more (a checkpointed region that breaks the graph
runs outside every graph, where nothing is predicted).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fxviz import _torch
from fxviz.analysis.advice.anatomy import StepPeak, step_peak, whole_step_peak
from fxviz.analysis.advice.changes import Change, budget_change, checkpoint_change, offload_change, repeated_blocks
from fxviz.analysis.advice.eager_check import plain_backward_flops, run_eagerly
from fxviz.analysis.advice.offload import offloaded_bytes
from fxviz.analysis.advice.target import Target, optimizer_bytes
from fxviz.analysis.graph.pieces import piece_facts
from fxviz.analysis.strategy.choices import budget_strategy, step_strategy
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.api.advice.kept import KeptSteps
from fxviz.api.advice.options import Advice, Option, seconds_text
from fxviz.core.errors import Blank, Do, FxvizError, FxvizWarning, InputError, Say
from fxviz.core.graph_facts import input_devices
from fxviz.core.units import format_bytes, format_flops
from fxviz.sources.graphs import Capture
from fxviz.sources.model.routes import recapture

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import torch.nn as nn

__all__ = ["advise", "step_of", "BUDGETS", "FLOPS_PER_S", "BYTES_PER_S", "KINDS"]

BUDGETS: tuple[float, ...] = tuple(round(1 - i / 20, 2) for i in range(1, 21))  # 0.95 ... 0
FLOPS_PER_S = 100e12  # the time estimate's device: 100 TFLOP/s ...
BYTES_PER_S = 2e12  # ... and 2 TB/s of memory bandwidth (a current datacenter GPU, roughly)
KINDS: tuple[str, ...] = ("budget", "checkpoint", "selective", "offload")

Evaluated = tuple[Change, "StepPeak | str"]
"""A change fxviz tried, and its step, or why it is not offered."""

StepMemo = dict[str, Evaluated]
"""Changed models tried, by the change's code (their steps without optimizer state, which adds the same
bytes to every option): kept across ``advise`` calls."""


def model_state_bytes(model: nn.Module | None) -> int:
    """Bytes of the model's parameters and buffers, each storage once."""
    if model is None:
        return 0
    seen: dict[Any, int] = {}
    for t in list(model.parameters()) + list(model.buffers()):
        st = t.untyped_storage()
        seen.setdefault((t.device, st.data_ptr() if t.device.type != "meta" else id(st)), st.nbytes())
    return sum(seen.values())


def step_of(tr: Any, strategy: Strategy | None = None, optimizer: str | int | None = None) -> StepPeak:
    """The whole step of the trace ``tr`` partitioned with ``strategy`` (default: what the user's
    ``torch.compile`` step runs, ``choices.step_strategy``): saved bytes and recompute cost as its
    step memory table's ``total`` row says (``tr.memory_table([strategy], scope="step")``:
    :func:`held_for_backward`); the peak taken apart (``anatomy.step_peak``), or the table's step peak where
    it gives one."""
    cap: Capture = tr.capture
    s = step_strategy(cap) if strategy is None else strategy
    facts = piece_facts(cap)
    pieces = []
    for p in tr.pieces:
        if not p.graph.has_backward:
            continue
        part = p.partition(s)
        if part.error is not None:
            raise InputError(f"{s.name} fails on graph {p.graph.index + 1}: {part.error}",
                             "advice needs a partition to change")
        pieces.append((p.graph, part, max(1, len(facts.runs_of(p.graph.index)))))
    if not pieces:
        raise InputError("the model has no backward graph: a step that trains nothing saves nothing",
                         "trace a model whose loss depends on parameters or inputs that require grad")
    # optimizer state is kept for the parameters it trains: frozen ones (a LoRA's backbone) have none
    trained = sum(t.numel() * t.element_size() for t in cap.model.parameters() if t.requires_grad) \
        if cap.model is not None else 0
    step = step_peak(pieces, model_state_bytes(cap.model), optimizer_bytes(optimizer, trained))
    if s.kind != "optimal":  # the bound's figures are its partition's (the table would solve two MILPs more)
        total = _total_row(tr, s)
        step.saved_bytes = held_for_backward(total) + _eager_held_elsewhere(tr, cap, s, total)
        step.recompute_flops, step.recompute_bytes = int(total["recompute_flops"]), int(total["recompute_bytes"])
        if _table_peak(total) is not None:  # the step runs inductor's code: its peak, taken apart
            resident = int(total["resident_bytes"])
            whole = tr._whole  # noqa: SLF001 - the step the same floor's Trace holds, its caches shared
            compiled = whole_step_peak(whole, s, resident, min(resident, model_state_bytes(cap.model)),
                                       step.by_kind["optimizer state"])
            if compiled is not None:
                compiled.saved_bytes = step.saved_bytes
                compiled.recompute_flops, compiled.recompute_bytes = step.recompute_flops, step.recompute_bytes
                step = compiled
    return step


def _total_row(tr: Any, s: Strategy, compiled: bool = True) -> pd.Series:
    # a model's: inductor's code of this strategy's partitions (a lowering per graph: its layout copies and
    # peak), unless ``compiled`` is False; a log's graphs can be thousands of layers' worth, lowered only where
    # the table lowers them anyway
    table = tr.memory_table([s], scope="step", compiled=compiled and not tr.capture.from_log)
    rows = table[(table["piece"] == "total") & (table["strategy"] == s.name)]
    if rows.empty or (isinstance(rows.iloc[0]["error"], str) and rows.iloc[0]["error"]):
        why = rows.iloc[0]["error"] if not rows.empty else "no total row"
        raise InputError(f"{s.name} fails on this step: {why}", "advice needs a partition to change")
    return rows.iloc[0]


def _eager_held_elsewhere(tr: Any, cap: Capture, s: Strategy, total: pd.Series) -> int:
    """What eager code between the graphs holds, where ``s``'s total does not say (it is measured on the step
    inductor's code runs, the step's own strategy's): the same code runs whatever the graphs save."""
    import pandas as pd

    own = step_strategy(cap)
    if s == own or not pd.isna(total.get("eager_held_bytes", pd.NA)) or len(cap.graphs) < 2:
        return 0
    held = _total_row(tr, own).get("eager_held_bytes")
    return 0 if held is None or pd.isna(held) else int(held)


def held_for_backward(total: pd.Series) -> int:
    """What the step holds for its backward, by its memory table's ``total`` row: the saved activations (a
    tensor crossing a graph break once), inductor's layout copies, what eager code between graphs holds."""
    import pandas as pd

    return sum(int(v) for c in ("saved_activation_bytes", "layout_copy_bytes", "eager_held_bytes")
               if (v := total.get(c)) is not None and not pd.isna(v))


def _table_peak(total: pd.Series) -> int | None:
    """The step's peak where the step memory table gives one (its ``total`` row; parameters, gradients
    and inputs in it, optimizer state not), else None (the table's peaks are per graph)."""
    import pandas as pd

    values = [total.get(c) for c in ("forward_peak_bytes", "backward_peak_bytes")]
    known = [int(v) for v in values if v is not None and not pd.isna(v)]
    return max(known) if known else None


class _Search:
    def __init__(self, tr: Any, target: Target, optimizer: str | int | None, flops_per_s: float,
                 bytes_per_s: float, memo: StepMemo) -> None:
        self.tr, self.cap, self.target, self.optimizer, self.memo = tr, tr.capture, target, optimizer, memo
        self.flops_per_s, self.bytes_per_s = flops_per_s, bytes_per_s
        self.kept = KeptSteps(self.cap, optimizer)  # a log's: what an earlier advise of it partitioned
        self.plain = self.step(step_strategy(self.cap))
        self.optimizer_state = self.plain.by_kind["optimizer state"]
        self.goal = target.bytes_for(self.plain.saved_bytes)
        self._plain_flops: int | None = None
        self.say: Callable[[str], None] = lambda _what: None

    def step(self, strategy: Strategy) -> StepPeak:
        """:func:`step_of` the trace under ``strategy`` with the optimizer's state, or as an earlier advise of
        the same log kept it (``kept.KeptSteps``: the same figures, without partitioning); kept for the next."""
        kept = self.kept.get(strategy)
        if kept is not None:
            return kept
        try:
            step = step_of(self.tr, strategy, self.optimizer)
        except InputError as exc:
            self.kept.keep(strategy, exc)
            raise
        self.kept.keep(strategy, step)
        return step

    def value(self, step: StepPeak) -> int:
        return step.saved_bytes if self.target.kind == "saved" else step.peak_bytes

    def option(self, change: Change | None, step: StepPeak, name: str | None = None, seconds: float | None = None,
               moved: int = 0) -> Option:
        if seconds is None:
            seconds = step.recompute_flops / self.flops_per_s + step.recompute_bytes / self.bytes_per_s
        short = max(0, self.value(step) - self.goal)
        return Option(name or (change.name if change else ""), change.kind if change else "plain", change, step,
                      seconds, short == 0, short, self.plain.peak_bytes, self.cap, type(self.tr), moved)

    def budget(self) -> Option:
        """The largest budget that meets the target (the least recompute); when none does, the one
        that comes closest (a lower budget can raise the peak: the backward recomputes more at once).
        A budget whose partitions alone save more than a saved-bytes target allows is passed over
        without lowering its graphs (:meth:`_short_for_sure`) until one meets."""
        solver = self.cap.torch_budget[1]
        tried: dict[float, Option] = {}
        for b in BUDGETS:
            strategy = budget_strategy(b, solver)  # a partition each: seconds apiece on a big graph
            self.say(f"activation_memory_budget={b:g}" + (" (kept from an earlier advise of this log)"
                                                          if self.kept.has(strategy) else ""))
            if self._short_for_sure(strategy):
                continue
            tried[b] = option = self.option(budget_change(b), self.step(strategy))
            if option.meets:
                return option
        closest: Option | None = None  # none meets: every budget's step, the closest first on the grid
        for b in BUDGETS:
            option = tried[b] if b in tried else self.option(budget_change(b), self.step(budget_strategy(b, solver)))
            if closest is None or option.short_by < closest.short_by:
                closest = option
        assert closest is not None
        return closest

    def _short_for_sure(self, strategy: Strategy) -> bool:
        """Whether ``strategy``'s step misses a saved-bytes target by what its partitions alone save: the
        step table's saved activations without inductor's code (no lowering), a lower bound of the step's
        saved bytes, to which inductor's layout copies and eager code's holdings only add.  False for a
        peak target (no partition-only bound of a compiled peak) and for a log (its tables lower nothing)."""
        if self.target.kind != "saved" or self.cap.from_log:
            return False
        try:
            total = _total_row(self.tr, strategy, compiled=False)
        except FxvizError:  # the strategy fails here: its step, lowered, says how
            return False
        return held_for_backward(total) > self.goal

    def evaluate(self, make: Callable[[bool | None], Change]) -> Evaluated:
        """The change ``make(None)`` makes, tried (memoized by its code): its step with the optimizer's
        state, or why not."""
        change = make(None)
        if change.code not in self.memo:  # the step's figures, not the changed model's capture: a memo
            self.memo[change.code] = self._tried(change, make)  # of captures kept a model per change alive
        change, step = self.memo[change.code]
        if isinstance(step, str) or not self.optimizer_state:
            return change, step
        step = dataclasses.replace(step, by_kind=dict(step.by_kind), peak_bytes=step.peak_bytes + self.optimizer_state)
        step.by_kind["optimizer state"] = self.optimizer_state
        return change, step

    def _tried(self, change: Change, make: Callable[[bool | None], Change]) -> Evaluated:
        assert self.cap.model is not None
        applied = change.apply(self.cap.model)
        ran = run_eagerly(self.cap, applied)
        if ran.error is not None:
            return change, f"its code fails when the model runs it, eagerly, forward and backward ({ran.error})"
        try:  # the code's torch config (dynamo's side-effect setting), restored; the changed model's
            with change.settings(), warnings.catch_warnings():  # warnings are about a model the user has not
                warnings.simplefilter("ignore", FxvizWarning)  # (what it means is in the advice's notes)
                changed: Capture | None = recapture(self.cap, applied)
        except FxvizError as exc:  # dynamo compiles no graph at all once the layers are wrapped
            changed, failed = None, f"with the layers checkpointed, {exc.message}"
        if changed is not None:
            added = [b for b in changed.graph_breaks if b not in self.cap.graph_breaks]
            added += [f for f in changed.eager_frames if f not in self.cap.eager_frames]
            inside = _checkpoint_regions(changed) >= len(change.modules)  # else some ran outside the graphs
            if not added and inside and len(changed.graphs) <= len(self.cap.graphs):
                return change, step_of(type(self.tr)(changed), optimizer=None)
            failed = "; ".join(dict.fromkeys(b.splitlines()[0] for b in added + changed.graph_breaks))[:240] \
                or "a graph break"
        if _torch.SIDE_EFFECTS_SETTING not in change.config and _torch.has_side_effects_setting() \
                and "side effect" in failed.lower():  # dynamo refused a Python side effect in the region:
            retry = make(True)  # its setting keeps the region in the graph
            return self.memo.setdefault(retry.code, self._tried(retry, make))
        if changed is None:
            return change, failed
        if self._plain_flops is None:
            self._plain_flops = plain_backward_flops(self.cap)
        eager = max(0, ran.backward_flops - self._plain_flops)
        cost = f"{seconds_text(eager / self.flops_per_s)} at {self.flops_per_s / 1e12:g} TFLOP/s"
        return change, (f"it breaks torch.compile's graph ({failed}): the checkpointed layers would run outside every "
                        f"graph, recomputing {format_flops(eager) or '0 FLOP'} eagerly (about {cost}), where fxviz "
                        "predicts nothing")

    def checkpoint(self, prefix: str, count: int, selective: bool) -> Option | str:
        """The fewest leading layers whose checkpointing meets the target: all of them tried first
        (the most it can do), then the estimate from the bytes each layer frees, stepping up; or why
        checkpointing is not offered."""
        model = self.cap.model
        assert model is not None
        steps: dict[int, Option | str] = {}

        def at(k: int) -> Option | str:
            if k not in steps:
                change, step = self.evaluate(lambda side: checkpoint_change(prefix, range(k), selective, model, side))
                steps[k] = step if isinstance(step, str) else self.option(change, step)
            return steps[k]

        def meets(k: int) -> bool:
            o = at(k)
            return isinstance(o, Option) and o.meets

        every = at(count)
        if isinstance(every, str) or not every.meets:
            return every
        per_layer = max(1, (self.value(self.plain) - self.value(every.peak)) // count)
        k = min(count, max(1, -(-(self.value(self.plain) - self.goal) // per_layer)))
        while not meets(k) and k < count:
            k += 1
        while k > 1 and (k - 1 in steps or len(steps) < 4) and meets(k - 1):  # the estimate overshot
            k -= 1
        found = at(k)
        return found if isinstance(found, Option) else every

    def offload(self) -> Option | str:
        """torch's activation offloading of every saved activation it can move, on an accelerator's step;
        why not, elsewhere."""
        if not _torch.has_activation_offloading():
            return "this torch has no activation offloading"
        if self.cap.log_config.get("enable_activation_offloading"):
            return ("the run already had activation offloading on (enable_activation_offloading=True): the logged "
                    "step is its partition with it")
        devices = _devices(self.cap)
        if not devices or all(d == "cpu" for d in devices):
            where = ", ".join(sorted(devices)) or "a device the graph does not record"
            return (f"this step's tensors are on {where}: its activations are in host memory already (torch's pass "
                    "would copy each to the CPU it is on, and the step would hold as much)")
        strategy = step_strategy(self.cap)
        facts = piece_facts(self.cap)
        moved = sum(offloaded_bytes(p.graph, p.partition(strategy)) * max(1, len(facts.runs_of(p.graph.index)))
                    for p in self.tr.pieces if p.graph.has_backward)
        if moved == 0:
            return "torch's pass would move none of this step's saved activations (views, or outputs of the model)"
        step = dataclasses.replace(self.plain, saved_bytes=self.plain.saved_bytes - moved,
                                   by_kind=dict(self.plain.by_kind), recompute_flops=0, recompute_bytes=0)
        at_peak = min(moved, step.by_kind["saved activations"])  # the moved values are not on the device then
        step.by_kind["saved activations"] -= at_peak
        step.peak_bytes -= at_peak
        bandwidth = _torch.offload_bandwidth()
        return self.option(offload_change(), step, seconds=2 * moved / bandwidth, moved=moved)

    def bound(self) -> Option | None:
        graphs = [g for g in self.cap.graphs if g.has_backward]
        if self.target.kind != "saved" or len(graphs) != 1:
            return None
        try:  # one MILP: step_of partitions, and refuses where no partition meets the goal
            step = self.step(Strategy("optimal", budget_bytes=self.goal))
        except InputError:
            return None
        option = self.option(None, step, name=f"exact optimum at {format_bytes(self.goal) or '0 B'} saved (bound)")
        return dataclasses.replace(option, kind="optimum")


def advise(tr: Any, target: Target, optimizer: str | int | None = None, *, flops_per_s: float = FLOPS_PER_S,
           bytes_per_s: float = BYTES_PER_S, kinds: tuple[str, ...] = KINDS,
           progress: Callable[[str], None] | None = None, memo: StepMemo | None = None) -> Advice:
    """Ranked options that bring the step of the trace ``tr`` to ``target`` (``target.parse_target``),
    each predicted by fxviz's trace of the changed model (see the module docstring).  ``memo``: the
    changed models tried before, by the change's code and optimizer (``Trace.advise`` keeps one per
    trace); an option's ``trace()`` makes a trace of ``tr``'s class."""
    cap: Capture = tr.capture
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise InputError(f"kinds={tuple(kinds)!r}: fxviz has no change of kind {sorted(unknown)}",
                         f"kinds are {', '.join(KINDS)}")
    if cap.model is None:
        kinds = tuple(k for k in kinds if k in ("budget", "offload"))  # a log or a function: nothing to wrap
    search = _Search(tr, target, optimizer, flops_per_s, bytes_per_s, {} if memo is None else memo)
    notes: list[str] = []
    options: list[Option] = []
    say = progress or (lambda _what: None)
    search.say = lambda what: say(f"  {what}")
    if "budget" in kinds:
        say("activation_memory_budget")
        options.append(search.budget())
    if cap.model is not None and set(kinds) & {"checkpoint", "selective"}:
        _add_checkpointing(search, cap.model, kinds, say, options, notes)
    if "offload" in kinds:
        _add_offload(search, cap, options, notes)
    notes += _step_notes(search, options, cap)
    if search.target.kind == "saved":
        kept = search.kept.has(Strategy("optimal", budget_bytes=search.goal))
        say("the exact optimum (a MILP: the bound)" + (" (kept from an earlier advise of this log)" if kept else ""))
    bound = search.bound()
    if bound is None:
        notes.append("no exact-optimum bound here: fxviz gives one for a saved-bytes target on a single graph "
                     "when some partition of it meets the target")
    budget = cap.torch_budget[0]
    name = (f"the logged step (activation_memory_budget={budget:g})" if cap.route == "log" and budget < 1
            else "plain step")
    return Advice(target, search.goal, search.plain, options, bound, notes, flops_per_s, bytes_per_s, name,
                  graphs=sum(g.has_backward for g in cap.graphs))


def _add_checkpointing(search: _Search, model: Any, kinds: tuple[str, ...], say: Callable[[str], None],
                       options: list[Option], notes: list[Any]) -> None:
    """The checkpoint and selective options on the model's stack of identical layers, or why each is not offered."""
    blocks = repeated_blocks(model)
    if blocks is None:
        notes.append("checkpointing: the model has no stack of identical layers to wrap (a ModuleList or Sequential "
                     "of two or more layers alike)")
        return
    for kind in ("checkpoint", "selective"):
        if kind not in kinds:
            continue
        say(f"{kind} on the layers of {blocks[0]}")
        found = search.checkpoint(blocks[0], blocks[1], kind == "selective")
        if isinstance(found, str):
            what = "selective checkpointing" if kind == "selective" else "checkpointing"
            notes.append(f"{what} {blocks[0]}: not offered: {found}")
        else:
            options.append(found)


def _add_offload(search: _Search, cap: Capture, options: list[Option], notes: list[Any]) -> None:
    """The offload option (where the step's tensors are on an accelerator), or why it is not offered."""
    offload = search.offload()
    if isinstance(offload, str):
        notes.append(f"offloading: not offered: {offload}")
        return
    options.append(offload)
    where = ", ".join(sorted(_devices(cap)))
    notes.append(f"offloading: this step's tensors are on {where}: the option moves "
                 f"{format_bytes(offload.moved_bytes)} of saved activations to the host and back, at torch's "
                 f"stated {_torch.offload_bandwidth() / 1e9:g} GB/s (activation_offload_cpu_gpu_bw; set yours) "
                 "on the compute stream: its est. time is those transfers, its peak the plain step's less "
                 "what it moves (fxviz has not checked it against a real accelerator's step)")


def _step_notes(search: _Search, options: list[Option], cap: Capture) -> list[Any]:
    """What the advice covers and what it leaves out, in words; options that change nothing dropped."""
    notes: list[Any] = []
    if cap.route == "log" and len(cap.graphs) == 1:  # one graph of a run: never the whole step unsaid
        notes.append(Say(f"a log's graph ({cap.origin}): the advice is of this graph's saved bytes and peak (where "
                         "the run compiled other graphs with a backward, advise each: ",
                         Do("trace", (("compile_id", Blank("'ID'", "ID")),), on="run"),
                         "); only the activation_memory_budget is offered: a log has no model to wrap"))
    elif cap.route == "log":  # the logged step (the command line's merge of run.traces())
        notes.append(f"a log's step of {len(cap.graphs)} graphs: the advice is of their saved bytes and peak, a "
                     "tensor one graph makes and a later one's backward reads counted once (those whose gradient "
                     "the later graph computes: a log holds no values to tell the rest); only the "
                     "activation_memory_budget is offered: a log has no model to wrap")
    unchanged = [o for o in options if o.saved_bytes == search.plain.saved_bytes
                 and o.peak_bytes == search.plain.peak_bytes and o.recompute_flops == 0 and not o.moved_bytes]
    if unchanged:  # an option that changes nothing is no advice, even as the closest one
        for o in unchanged:
            options.remove(o)
        notes.append(", ".join(o.name for o in unchanged) + ": changes nothing on this step (the same saved bytes "
                     "and peak): not offered")
    floor = sum(search.plain.by_kind.get(k, 0) for k in ("parameters", "inputs", "model state outside the graph",
                                                          "optimizer state"))
    if search.target.kind == "peak" and search.goal < floor:
        notes.append(f"the step's parameters, inputs, model state and optimizer state alone hold "
                     f"{format_bytes(floor)} throughout: no partition brings the peak to {format_bytes(search.goal)}")
    if cap.eager_frames:
        notes.append(f"the step runs {'; '.join(cap.eager_frames[:3])} as plain Python, outside every graph: what "
                     "that code holds for the backward is in none of these figures")
    return notes


def _checkpoint_regions(cap: Capture) -> int:
    """How many ``torch.utils.checkpoint`` calls the step runs inside its graphs: each graph's regions
    (torch's ``ac_graph_id``) times the graph's runs.  A checkpointed layer whose region dynamo could
    not trace runs eagerly, in no region, while its graph break may read like the plain step's."""
    facts = piece_facts(cap)
    found = 0
    for g in cap.graphs:
        regions = {r for n in g.gm.graph.nodes if (r := _torch.checkpoint_region(n)) is not None}
        found += len(regions) * max(1, len(facts.runs_of(g.index)))
    return found


def _devices(cap: Capture) -> set[str]:
    """The devices of the graphs' inputs: their traced (fake) values, which a log's graph has too
    (``placeholder_values`` holds real tensors only when fxviz ran the model)."""
    found = {str(t.device) for g in cap.graphs for t in g.placeholder_values.values() if hasattr(t, "device")}
    return found.union(*(input_devices(g.gm) for g in cap.graphs))
