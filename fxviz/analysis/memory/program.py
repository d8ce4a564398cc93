"""Which program a memory figure is of, and the compiled step's peaks for the memory table.

A trace of torch.compile's default backend (inductor) runs inductor's generated code: pointwise
chains fused (their intermediates never exist), buffers reused, freed where the code says, convolution
weights copied to channels-last on CPU.  Its peaks are the simulated code's
(``analysis.memory.compiled_step``): on the real steps the tests make (mini_gpt, an AlexNet, HF Llama
and GPT-2 called with keywords, a net with graph breaks) they equal the profiler's reading.  An
``aot_eager`` trace runs the partition's graphs op by op: the liveness walk over the unfused graph
(``storage.peak_bytes``) is its truth, and stays every row's ``unfused_*`` figure.

The code comes from inductor's own lowering of the row's partition (``inductor_code.compiled_graph``;
seconds per graph) or, for the partition a logged run used, from the log's ``inductor_output_code``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fxviz.analysis.memory.columns import PROGRAM_WORDS
from fxviz.analysis.memory.compiled_step import StepMemory, StepRun, TapeEvent, step_memory
from fxviz.analysis.memory.inductor_code import CompiledGraph, compiled_graph, from_code
from fxviz.analysis.memory.storage import crossing_inputs, input_positions
from fxviz.analysis.strategy.partition import Partition
from fxviz.sources.graphs import Capture, JointGraph, LogSource
from fxviz.sources.log.output_code import read_output_code

__all__ = ["compiles", "compiled_for", "RowPeaks", "graph_step", "row_peaks", "step_runs", "whole_step",
           "PROGRAM_WORDS"]



def compiles(graph: JointGraph) -> bool:
    """Whether the step runs inductor's generated code for ``graph`` (else the graphs op by op)."""
    return graph.backend == "inductor"


def compiled_for(graph: JointGraph, capture: Capture, p: Partition) -> CompiledGraph:
    """The code of ``p``: a logged run's own output code for its ``logged`` partition, else lowered now."""
    source = capture.source
    if p.strategy.kind == "logged" and isinstance(source, LogSource):
        code = read_output_code(source.file, source.compile_id, source.piece)
        if code is None:
            return CompiledGraph(None, error="the log holds no inductor_output_code for this compile")
        # a log's code is read, never run: its extern kernels' own scratch is not probed (a file someone
        # else wrote is no code to execute; tests/test_safety.py)
        return from_code(graph, p, code.forward, code.backward, probe=False, source="the log's inductor_output_code")
    return compiled_graph(graph, p)


@dataclass(frozen=True)
class RowPeaks:
    """One row's program peaks, bytes above the step's start (the table adds ``resident_bytes``)."""

    forward: int | None
    backward: int | None
    layout_copy_bytes: int | None = None
    note: str | None = None


def _made_outside(graph: JointGraph, p: Partition, compiled: CompiledGraph) -> frozenset[int]:
    assert compiled.code is not None
    crossing = crossing_inputs(graph)
    return frozenset(k for k, name in enumerate(compiled.code.forward.inputs)
                     if p.fw_to_joint.get(name, name) in crossing)


def graph_step(graph: JointGraph, p: Partition, compiled: CompiledGraph, last: bool) -> StepMemory | None:
    """The graph's own step under ``p`` as its compiled code runs it: its forward, then its backward,
    nothing else running (None without code).  The loss is its output where a run of it returns the
    step's loss (a log's last graph: its first output)."""
    if compiled.code is None:
        return None
    if graph.loss_output is not None:
        loss: tuple[int, int] | None = (0, graph.loss_output[1])
    else:
        loss = (0, 0) if last and graph.logged is not None else None
    return step_memory([compiled.code], [StepRun(0, {}, _made_outside(graph, p, compiled))], loss)


def row_peaks(step: StepMemory | None, compiled: CompiledGraph) -> RowPeaks:
    """The memory table's program peaks of a graph's own step, or why there are none."""
    if step is None:
        return RowPeaks(None, None, None, compiled.error)
    return RowPeaks(step.forward_peak.nbytes, step.backward_peak.nbytes, compiled.layout_copy_bytes)


def step_runs(capture: Capture, parts: Sequence[tuple[JointGraph, Partition, CompiledGraph]]
              ) -> tuple[list[StepRun], tuple[int, int] | None]:
    """The step's graph runs in order (every run dynamo recorded; one per graph where none was, as in
    a log), each with the inputs an earlier run fed, and (run position, output) of the loss."""
    recorded = sorted((seq, k) for k, (g, _, _) in enumerate(parts) for seq, _ in g.runs)
    if not recorded:
        order = [(k, k) for k in range(len(parts))]
    else:
        order = recorded
    position = {seq: r for r, (seq, _) in enumerate(order)}
    runs: list[StepRun] = []
    for seq, k in order:
        graph, p, compiled = parts[k]
        if compiled.code is None:
            runs.append(StepRun(k))
            continue
        by_index = {i: name for name, i in input_positions(graph).items()}
        code_position = {p.fw_to_joint.get(n, n): pos for pos, n in enumerate(compiled.code.forward.inputs)}
        links = {}
        for i, (producer, j) in graph.run_links.get(seq, {}).items():
            name = by_index.get(i)
            if name in code_position and producer in position:
                links[code_position[name]] = (position[producer], j)
        runs.append(StepRun(k, links, _made_outside(graph, p, compiled)))
    loss = None
    for g, _, _ in parts:
        if g.loss_output is not None and g.loss_output[0] in position:
            loss = (position[g.loss_output[0]], g.loss_output[1])
    if loss is None and not recorded and parts and parts[-1][0].logged is not None:
        loss = (len(order) - 1, 0)  # a log: the last graph's first output
    return runs, loss


def whole_step(capture: Capture, parts: Sequence[tuple[JointGraph, Partition, CompiledGraph]],
               tape: Sequence[TapeEvent] | None = None) -> StepMemory | None:
    """The whole step over every graph's compiled code (None where a graph has none); ``tape``: what
    the real step did outside its graphs (``analysis.real.eager_tape``), spliced in."""
    codes = [c.code for _, _, c in parts]
    if any(code is None for code in codes):
        return None
    runs, loss = step_runs(capture, parts)
    return step_memory([code for code in codes if code is not None], runs, loss, tape)
