"""The memory table's columns, its frame and its caption: what ``memory_table`` fills from partitions, and
what a log's own row (``api.logged``, read from the log's text) is printed with, without torch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COLUMNS", "INT_COLUMNS", "PROGRAM_WORDS", "CaptionFacts", "table_frame", "caption", "checkpoint_summary"]

COLUMNS: list[str] = [
    "strategy", "saved_tensors", "saved_symints", "saved_storages", "saved_activation_bytes", "saved_param_bytes",
    "saved_input_bytes", "offloaded_bytes", "layout_copy_bytes", "recomputed_ops", "recomputed_random_ops",
    "recompute_flops", "recompute_bytes", "forward_graph_ops", "backward_graph_ops", "forward_flops",
    "forward_peak_bytes", "backward_peak_bytes", "unfused_forward_peak_bytes", "unfused_backward_peak_bytes",
    "resident_bytes", "torch_estimate_bytes", "gap_to_optimal_flops", "gap_to_optimal_bytes", "seconds", "error",
]
"""``forward_peak_bytes`` / ``backward_peak_bytes``: the peaks of the program the step runs (inductor's
code, or the graphs op by op under ``aot_eager``: ``analysis.memory.program``), ``resident_bytes``
included; ``unfused_*``: the liveness walk over the unfused graphs, every row; ``layout_copy_bytes``:
copies inductor's code saves in place of a parameter or input the partition saves as itself."""
INT_COLUMNS = [c for c in COLUMNS if c not in ("strategy", "seconds", "error")]

PROGRAM_WORDS = {
    True: "the code inductor generates for the row's partition (fused, buffers reused, layout copies and its "
          "kernels' own scratch included), simulated line by line",
    False: "a liveness walk over the partition's graphs, op by op, as aot_eager runs them",
}
"""What the peaks are of, by whether the step runs inductor's code (``program.compiles``)."""


class CaptionFacts(Protocol):
    """What the caption says of a joint graph (a ``JointGraph`` has it all)."""

    @property
    def backend(self) -> str: ...
    @property
    def partitioner_caller(self) -> str: ...
    @property
    def partitioner_note(self) -> str: ...
    @property
    def num_fwd_outputs(self) -> int: ...
    @property
    def static_lifetime_input_indices(self) -> Sequence[int]: ...
    @property
    def compiler(self) -> str | None: ...
    @property
    def info(self) -> Mapping[str, Any]: ...  # node name -> what has checkpoint_region and checkpoint_policy


def _index_list(indices: list[int]) -> str:
    """A long index list as runs (a 60-layer GPT's 724 parameter inputs, not 37 lines of numbers).

    >>> _index_list([0, 1, 2, 5, 7, 8, 9, 10, 11, 12, 13, 20, 21, 30])
    '[0-2, 5, 7-13, 20-21, 30] (14 inputs)'
    """
    if len(indices) <= 12:
        return str(indices)
    runs: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return f"[{', '.join(runs)}] ({len(indices)} inputs)"


def caption(graph: CaptionFacts, symbolic: bool = False, notes: Sequence[str] = ()) -> str:
    """What the partitioners were given and how the bytes were counted."""
    static = list(graph.static_lifetime_input_indices)
    compiled = graph.backend == "inductor"  # program.compiles, without importing it (torch-free here)
    why = ("the parameter inputs: torch.compile treats them as free to save" if static
           else "none: aot_function / aot_module pass []")
    caller, note = graph.partitioner_caller, graph.partitioner_note
    how = f" ({note})" if note else ""
    parts = [
        f"Joint graph of backend={graph.backend!r}.",
        f"Partitioners called as {caller} calls them{how}: num_fwd_outputs={graph.num_fwd_outputs}, "
        f"static_lifetime_input_indices={_index_list(static)} ({why})"
        + (f", compiler={graph.compiler!r}." if graph.compiler is not None else "."),
        "Bytes count unique storages: views and aliases count once; saves that view a parameter/buffer "
        "(saved_param_bytes) or a user input (saved_input_bytes) are not activations.",
        f"Peaks (forward_peak_bytes, backward_peak_bytes): {PROGRAM_WORDS[compiled]}; bytes above the "
        "step's start plus the parameters and inputs resident throughout (resident_bytes)"
        + ("; unfused_*: the liveness walk over the unfused graphs, which the fused code never runs." if compiled
           else "; unfused_* are the same walk."),
        "FLOPs from torch.utils.flop_counter (pointwise ops count 0; recompute_bytes shows their cost).",
        "torch_estimate_bytes: torch's own per-value numel*itemsize sum over the saved values, blind to aliasing.",
    ]
    if symbolic:
        parts.append("Symbolic sizes were evaluated at the example inputs' sizes.")
    checkpoint = checkpoint_summary(graph)
    if checkpoint:
        parts.append(checkpoint)
    parts += list(dict.fromkeys(notes))
    return " ".join(parts)


def checkpoint_summary(graph: CaptionFacts) -> str:
    """One line on the model's torch.utils.checkpoint regions ("" without any): how many, and how
    many forward ops carry each policy (min-cut honours them: must_* always, prefer_* unless
    inductor decides otherwise)."""
    regions = {i.checkpoint_region for i in graph.info.values() if i.checkpoint_region is not None}
    if not regions:
        return ""
    policies: dict[str, int] = {}
    for i in graph.info.values():
        if i.checkpoint_policy is not None:
            policies[i.checkpoint_policy] = policies.get(i.checkpoint_policy, 0) + 1
    counts = ", ".join(f"{n} {name}" for name, n in sorted(policies.items()))
    return (f"Checkpointed: {len(regions)} torch.utils.checkpoint region(s); ops tagged {counts} "
            "(Trace.nodes columns checkpoint_policy, checkpoint_region); the partitioners honour the tags.")


def table_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The memory table's frame of ``rows`` (dicts of :data:`COLUMNS`): exact integers, NA where a row has none."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in INT_COLUMNS:
        df[c] = df[c].astype("Int64")
    df["seconds"] = df["seconds"].astype("float64")
    df["error"] = pd.Series([r.get("error") for r in rows], index=df.index, dtype="object")  # None when fine
    return df


