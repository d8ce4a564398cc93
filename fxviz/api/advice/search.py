"""``advise``: the changes to a training step that meet a memory target, each predicted by tracing
the changed model with fxviz and partitioning it as the user's ``torch.compile`` step does.

Kinds of change, as torch offers them: ``activation_memory_budget`` (min-cut as a knapsack; the
largest budget on a grid that meets the target), ``torch.utils.checkpoint`` around the first k
layers of the model's stack of identical layers (the fewest that meet the target), the same with a
selective-checkpoint policy that saves the matmuls; and fxviz's exact optimum at the target (a
bound: no partition of this graph saves as little with less recompute).  The time cost is an
estimate: recompute FLOPs at ``flops_per_s`` plus the bytes recomputation moves at ``bytes_per_s``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fxviz import _torch
from fxviz.analysis.advice.anatomy import StepPeak, step_peak
from fxviz.analysis.advice.changes import Change, budget_change, checkpoint_change, repeated_blocks
from fxviz.analysis.advice.target import Target, optimizer_bytes
from fxviz.analysis.graph.pieces import piece_facts
from fxviz.analysis.strategy.choices import budget_strategy, step_strategy
from fxviz.analysis.strategy.partition import partition
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.api.advice.options import Advice, Option
from fxviz.core.errors import Blank, Do, InputError, Say
from fxviz.core.graph_facts import input_devices
from fxviz.core.units import format_bytes
from fxviz.sources.graphs import Capture
from fxviz.sources.model.routes import recapture

if TYPE_CHECKING:  # pragma: no cover
    import torch.nn as nn

__all__ = ["advise", "step_of", "BUDGETS", "FLOPS_PER_S", "BYTES_PER_S"]

BUDGETS: tuple[float, ...] = tuple(round(1 - i / 20, 2) for i in range(1, 21))  # 0.95 ... 0
FLOPS_PER_S = 100e12  # the time estimate's device: 100 TFLOP/s ...
BYTES_PER_S = 2e12  # ... and 2 TB/s of memory bandwidth (a current datacenter GPU, roughly)


StepMemo = dict[tuple[str, "str | int | None"], StepPeak]
"""Steps of changed models, by (the change's code, the optimizer): kept across ``advise`` calls."""


def model_state_bytes(model: nn.Module | None) -> int:
    """Bytes of the model's parameters and buffers, each storage once."""
    if model is None:
        return 0
    seen: dict[Any, int] = {}
    for t in list(model.parameters()) + list(model.buffers()):
        st = t.untyped_storage()
        seen.setdefault((t.device, st.data_ptr() if t.device.type != "meta" else id(st)), st.nbytes())
    return sum(seen.values())


def step_of(cap: Capture, strategy: Strategy | None = None, optimizer: str | int | None = None) -> StepPeak:
    """The whole step of ``cap`` partitioned with ``strategy`` (default: what the user's
    ``torch.compile`` step runs, ``choices.step_strategy``): saved bytes, recompute cost, peak."""
    s = step_strategy(cap) if strategy is None else strategy
    facts = piece_facts(cap)
    pieces = []
    for g in cap.graphs:
        if not g.has_backward:
            continue
        p = partition(g, s, cap)
        if p.error is not None:
            raise InputError(f"{s.name} fails on graph {g.index + 1}: {p.error}", "advice needs a partition to change")
        pieces.append((g, p, max(1, len(facts.runs_of(g.index)))))
    if not pieces:
        raise InputError("the model has no backward graph: a step that trains nothing saves nothing",
                         "trace a model whose loss depends on parameters or inputs that require grad")
    # optimizer state is kept for the parameters it trains: frozen ones (a LoRA's backbone) have none
    trained = sum(t.numel() * t.element_size() for t in cap.model.parameters() if t.requires_grad) \
        if cap.model is not None else 0
    return step_peak(pieces, model_state_bytes(cap.model), optimizer_bytes(optimizer, trained))


class _Search:
    def __init__(self, cap: Capture, target: Target, optimizer: str | int | None, flops_per_s: float,
                 bytes_per_s: float, memo: StepMemo, as_trace: Callable[[Capture], Any] | None) -> None:
        self.cap, self.target, self.optimizer, self.memo, self.as_trace = cap, target, optimizer, memo, as_trace
        self.flops_per_s, self.bytes_per_s = flops_per_s, bytes_per_s
        self.plain = step_of(cap, optimizer=optimizer)
        self.goal = target.bytes_for(self.plain.saved_bytes)

    def value(self, step: StepPeak) -> int:
        return step.saved_bytes if self.target.kind == "saved" else step.peak_bytes

    def option(self, change: Change | None, step: StepPeak, name: str | None = None) -> Option:
        seconds = step.recompute_flops / self.flops_per_s + step.recompute_bytes / self.bytes_per_s
        short = max(0, self.value(step) - self.goal)
        return Option(name or (change.name if change else ""), change.kind if change else "plain", change, step,
                      seconds, short == 0, short, self.plain.peak_bytes, self.cap, self.as_trace)

    def budget(self) -> Option:
        """The largest budget that meets the target (the least recompute); when none does, the one
        that comes closest (a lower budget can raise the peak: the backward recomputes more at once)."""
        solver = self.cap.torch_budget[1]
        closest: Option | None = None
        for b in BUDGETS:
            option = self.option(budget_change(b), step_of(self.cap, budget_strategy(b, solver), self.optimizer))
            if option.meets:
                return option
            if closest is None or option.short_by < closest.short_by:
                closest = option
        assert closest is not None
        return closest

    def checkpoint(self, prefix: str, count: int, selective: bool) -> Option:
        """The fewest leading layers whose checkpointing meets the target: all of them traced first
        (the most it can do), then the estimate from the bytes each layer frees, stepping up."""
        model = self.cap.model
        assert model is not None
        steps: dict[int, Option] = {}

        def at(k: int) -> Option:
            if k not in steps:
                change = checkpoint_change(prefix, range(k), selective)
                key = (change.code, self.optimizer)  # the step's figures, not the changed model's capture:
                if key not in self.memo:  # a memo of captures kept a copy of the model per change alive
                    self.memo[key] = step_of(recapture(self.cap, change.apply(model)), optimizer=self.optimizer)
                steps[k] = self.option(change, self.memo[key])
            return steps[k]

        every = at(count)
        if not every.meets:
            return every
        per_layer = max(1, (self.value(self.plain) - self.value(every.peak)) // count)
        k = min(count, max(1, -(-(self.value(self.plain) - self.goal) // per_layer)))
        while not at(k).meets and k < count:
            k += 1
        while k > 1 and (k - 1 in steps or len(steps) < 4) and at(k - 1).meets:  # the estimate overshot
            k -= 1
        return at(k)

    def bound(self) -> Option | None:
        graphs = [g for g in self.cap.graphs if g.has_backward]
        if self.target.kind != "saved" or len(graphs) != 1:
            return None
        try:  # one MILP: step_of partitions, and refuses where no partition meets the goal
            step = step_of(self.cap, Strategy("optimal", budget_bytes=self.goal), self.optimizer)
        except InputError:
            return None
        option = self.option(None, step, name=f"exact optimum at {format_bytes(self.goal) or '0 B'} saved (bound)")
        return dataclasses.replace(option, kind="optimum")


def advise(cap: Capture, target: Target, optimizer: str | int | None = None, *, flops_per_s: float = FLOPS_PER_S,
           bytes_per_s: float = BYTES_PER_S, kinds: tuple[str, ...] = ("budget", "checkpoint", "selective"),
           progress: Callable[[str], None] | None = None,
           memo: StepMemo | None = None,
           as_trace: Callable[[Capture], Any] | None = None) -> Advice:
    """Ranked options that bring ``cap``'s step to ``target`` (``target.parse_target``), each
    predicted by fxviz's trace of the changed model (see the module docstring).  ``memo``: the steps
    of changed models traced before, by the change's code and optimizer (``Trace.advise`` keeps one
    per trace); ``as_trace``: makes a ``Trace`` of a capture, for ``Option.trace`` (the facade passes
    its own class)."""
    if cap.model is None and set(kinds) - {"budget"}:
        kinds = ("budget",)  # a log or a function: nothing to wrap
    search = _Search(cap, target, optimizer, flops_per_s, bytes_per_s, {} if memo is None else memo, as_trace)
    notes: list[str] = []
    options: list[Option] = []
    say = progress or (lambda _what: None)
    if "budget" in kinds:
        say("activation_memory_budget")
        options.append(search.budget())
    blocks = repeated_blocks(cap.model) if cap.model is not None else None
    if cap.model is not None and blocks is None and set(kinds) & {"checkpoint", "selective"}:
        notes.append("checkpointing: the model has no stack of identical layers to wrap (a ModuleList or Sequential "
                     "of two or more layers alike)")
    for kind in ("checkpoint", "selective"):
        if kind in kinds and blocks is not None:
            say(f"{kind} on the layers of {blocks[0]}")
            options.append(search.checkpoint(blocks[0], blocks[1], kind == "selective"))
    if cap.route == "log":  # one graph of a run: never the whole step unsaid
        notes.append(Say(f"a log's graph ({cap.origin}): the advice is of this graph's saved bytes and peak (where "
                         "the run compiled other graphs with a backward, advise each: ",
                         Do("trace", (("compile_id", Blank("'ID'", "ID")),), on="run"),
                         "); only the activation_memory_budget is offered: a log has no model to wrap"))
    unchanged = [o for o in options if o.saved_bytes == search.plain.saved_bytes
                 and o.peak_bytes == search.plain.peak_bytes and o.recompute_flops == 0]
    if unchanged:  # an option that changes nothing is no advice, even as the closest one
        options = [o for o in options if o not in unchanged]
        notes.append(", ".join(o.name for o in unchanged) + ": changes nothing on this step (the same saved bytes "
                     "and peak): not offered")
    floor = sum(search.plain.by_kind.get(k, 0) for k in ("parameters", "inputs", "model state outside the graph",
                                                          "optimizer state"))
    if target.kind == "peak" and search.goal < floor:
        notes.append(f"the step's parameters, inputs, model state and optimizer state alone hold "
                     f"{format_bytes(floor)} throughout: no partition brings the peak to {format_bytes(search.goal)}")
    notes.append(_offload_note(cap))
    bound = search.bound()
    if bound is None:
        notes.append("no exact-optimum bound here: fxviz gives one for a saved-bytes target on a single graph "
                     "when some partition of it meets the target")
    budget = cap.torch_budget[0]
    name = (f"the logged step (activation_memory_budget={budget:g})" if cap.route == "log" and budget < 1
            else "plain step")
    return Advice(target, search.goal, search.plain, options, bound, notes, flops_per_s, bytes_per_s, name)


def _offload_note(cap: Capture) -> str:

    if not _torch.has_activation_offloading():
        return "offloading: this torch has no activation offloading; not offered"
    if cap.route == "log" and cap.log_config.get("enable_activation_offloading"):
        return ("offloading: the run already had activation offloading on (enable_activation_offloading=True); "
                "the logged step is its partition with it; no other offloading is offered")
    where = ", ".join(sorted(_devices(cap))) or "a device the graph does not record"
    return (f"offloading: torch has activation offloading (functorch config, for CUDA activations); this step's "
            f"tensors are on {where}; not offered, as fxviz cannot yet check its prediction against a real step")


def _devices(cap: Capture) -> set[str]:
    """The devices of the graphs' inputs: their traced (fake) values, which a log's graph has too
    (``placeholder_values`` holds real tensors only when fxviz ran the model)."""
    found = {str(t.device) for g in cap.graphs for t in g.placeholder_values.values() if hasattr(t, "device")}
    return found.union(*(input_devices(g.gm) for g in cap.graphs))
