"""What the step does outside its compiled graphs, measured with the model present: the eager code at
graph breaks and around the graphs (a head dynamo did not compile, a loss computed outside the model,
``torch.autograd.backward``'s ones, AOTAutograd's zero tangents, an eager layer's backward), and when
each graph output loses its last reference.

One real step runs with every graph's code inside a named profiler range (``_torch.run_marked_step``):
an allocation outside every range is the eager code's, a free outside every range of an eager
allocation too, a free inside a range of an eager allocation is a graph consuming it (a tangent the
eager backward made), a death mark says when the Python side let a graph output go.  The same in
every strategy, so it is measured once per trace; the compiled step splices it between its graphs'
codes (``analysis.memory.compiled_step.step_memory(tape=...)``).  A log holds none of this: there the
step says the eager code is not in the log.
"""

from __future__ import annotations

import bisect

import torch

from fxviz import _torch
from fxviz._torch.compiled import MarkedRun, run_marked_step
from fxviz.analysis.memory.compiled_step import TapeEvent
from fxviz.analysis.real.step_call import StepCall, function_state, model_copy, refuse
from fxviz.core.collector import old_objects_frozen
from fxviz.core.state import preserved, restore_rng, rng_state
from fxviz.sources.graphs import Capture

__all__ = ["eager_tape", "needs_tape", "tape_events"]


def needs_tape(cap: Capture) -> bool:
    """Whether code outside the graphs takes part in the step: several graphs (breaks between them), frames
    dynamo ran eagerly, or a loss no graph returns."""
    return (len(cap.graphs) > 1 or bool(cap.eager_frames)
            or not any(g.loss_output is not None for g in cap.graphs))


def eager_tape(cap: Capture) -> list[TapeEvent]:
    """The step's events outside its graphs, in time order (one real step on fxviz's copies)."""
    refuse(cap, "the eager tape")
    with torch.inference_mode(False), torch.enable_grad(), \
            preserved(cap.model, (cap.example_inputs, [t for _, t, _ in function_state(cap)])), _torch.quiet_torch():
        step = StepCall(cap, model_copy(cap, "the eager tape"))
        rng = rng_state()
        with old_objects_frozen():  # the step's collections walk what the step made, not the session
            run = run_marked_step(step, step.make_call, lambda: restore_rng(rng), step.outside)
        restore_rng(rng)
    return tape_events(run)


def _graph_spans(run: MarkedRun) -> list[tuple[int, int, int, str]]:
    """(start, end, graph, fw|bw) of every graph code range, in time order."""
    spans = []
    for name, found in run.trace.ranges.items():
        if name.startswith("fxviz::graph::"):
            _, _, k, phase = name.split("::")
            spans += [(start, end, int(k), phase) for start, end in found]
    return sorted(spans)


def tape_events(run: MarkedRun) -> list[TapeEvent]:
    """The marked run read as ``TapeEvent``s (module docstring)."""
    spans = _graph_spans(run)
    starts = [s for s, _, _, _ in spans]
    backward = run.trace.ranges.get("fxviz::backward", [(1 << 62, 0)])[0][0]
    moments: list[tuple[int, int, int, int]] = [(a.t, 0, a.ptr, a.nbytes) for a in run.allocations]
    for name, found in run.trace.ranges.items():
        if name.startswith("fxviz::dead::"):
            _, _, r, j = name.split("::")
            moments += [(start, 1, int(r), int(j)) for start, _ in found]
    moments.sort()
    events: list[TapeEvent] = []
    eager: set[int] = set()  # pointers eager code allocated and has not freed
    next_span = 0
    for t, kind, a, b in moments:
        while next_span < len(spans) and spans[next_span][1] < t:
            _, _, k, phase = spans[next_span]
            events.append(TapeEvent("forward" if phase == "fw" else "backward",
                                    "backward" if spans[next_span][0] >= backward else "forward", graph=k))
            next_span += 1
        phase = "backward" if t >= backward else "forward"
        if kind == 1:
            events.append(TapeEvent("dead", phase, run=a, output=b))
            continue
        i = bisect.bisect_right(starts, t) - 1
        inside = i >= 0 and spans[i][0] <= t <= spans[i][1]
        if not inside and b > 0:
            eager.add(a)
            events.append(TapeEvent("alloc", phase, ptr=a, nbytes=b))
        elif b < 0 and a in eager:
            eager.discard(a)
            events.append(TapeEvent("freed_in_graph" if inside else "free", phase, ptr=a, nbytes=-b))
    for _, start, k, phase in ((s[0], s[0], s[2], s[3]) for s in spans[next_span:]):
        events.append(TapeEvent("forward" if phase == "fw" else "backward",
                                "backward" if start >= backward else "forward", graph=k))
    return events
