"""``Trace.measure()``: what the user's real compiled step keeps for its backward, value by value,
beside what the partition fxviz computes saves.

Every other memory figure is computed from a partition's graphs.  The real step can keep more: on
CPU inductor runs convolutions in channels-last layout (mkldnn), so a convolution weight (and the
input) the partition saves as itself is saved as a channels-last *copy*, new memory the graphs do
not show.  Measured as a user would: ``torch.compile`` of a deep copy of the model with the trace's
backend and the session's torch config, on fxviz's copy of the example inputs, every tensor the
step saves caught with ``saved_tensors_hooks`` (``_torch.run_compiled_step``).  The user's model,
``.grad``, RNG and dynamo caches are left as they were (``preserved``, ``fresh_dynamo_caches``).

Each saved storage is then named: a parameter or input saved as itself; a copy of one (same shape,
dtype and values, another storage); or the partition's saved value it holds, found by running the
partition's forward graph on the same tensors from the same RNG state and matching shape, dtype and
values (shape and dtype alone where values differ: a random mask drawn by inductor's own kernels).
AlexNet, batch 1, CPU, torch 2.13: inductor keeps 11,814,400 B (min-cut's 1,338,112 B plus
channels-last copies of the five conv weights, 9,874,176 B, and of the input, 602,112 B);
aot_eager keeps 3,099,136 B, min-cut's figure on its graph.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.fx as fx
from torch import nn

from fxviz import _torch
from fxviz.analysis.graph.pieces import piece_facts
from fxviz.analysis.memory.saved import saved_table
from fxviz.analysis.memory.storage import saved_memory
from fxviz.analysis.real.step_call import StepCall, function_state, model_copy, refuse, step_device
from fxviz.analysis.strategy.choices import budget_strategy
from fxviz.analysis.strategy.partition import Partition
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.collector import old_objects_frozen
from fxviz.core.state import preserved, restore_rng, rng_state
from fxviz.core.units import format_bytes
from fxviz.sources.graphs import Capture, JointGraph, graph_name
from fxviz.sources.roles import STATE_ROLES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Measured", "MEASURED_COLUMNS", "MEASURED_KINDS", "MEASURED_TABLE_COLUMNS", "measure_step",
           "session_step_strategy", "mark_saved", "add_measured"]

MEASURED_COLUMNS: list[str] = ["bytes", "kind", "value", "values", "graph", "what", "source", "shape", "dtype",
                               "layout", "matched_by", "views"]
MEASURED_KINDS = ("activation", "parameter", "input", "parameter copy", "input copy")
COPY_KINDS = ("parameter copy", "input copy")
MEASURED_TABLE_COLUMNS: list[str] = ["measured_saved_bytes", "measured_difference_bytes", "measured_reason",
                                     "measured_forward_peak_bytes", "measured_backward_peak_bytes"]


@dataclass
class Measured:
    """What one real compiled step saved for its backward (``Trace.measure()``).

    ``saved``: one row per storage (``MEASURED_COLUMNS``), biggest first.  ``saved_bytes``: the
    storages that are not a parameter or an input (activations and copies), each counted once: the
    twin of the memory table's ``saved_activation_bytes``.  ``estimated_bytes``: that figure for
    ``strategy`` (the partition torch.compile used), over every graph and run of the step.
    """

    saved: pd.DataFrame
    saved_bytes: int
    param_bytes: int
    input_bytes: int
    copy_bytes: int
    backend: str
    strategy: str
    estimated_bytes: int | None
    saves: int
    compile_seconds: float
    forward_seconds: float
    backward_seconds: float | None
    peaks: dict[str, int] = field(default_factory=dict)  # CUDA only: the allocator's own readings
    graphs: int = 1
    notes: list[str] = field(default_factory=list)
    # the real step's peaks, bytes above the state before it (parameters and inputs allocated, no
    # gradients): the forward's and the backward's highest points, what was held when the backward
    # began, and how they were read (``_torch.compiled``)
    forward_peak_bytes: int | None = None
    backward_peak_bytes: int | None = None
    after_forward_bytes: int | None = None
    peak_method: str = ""

    @property
    def seconds(self) -> float:
        """Wall time of one compiled training step (forward, loss and backward), compiled already."""
        return self.forward_seconds + (self.backward_seconds or 0.0)

    @property
    def difference(self) -> int | None:
        """Measured minus estimated saved activation bytes (None without an estimate)."""
        return None if self.estimated_bytes is None else self.saved_bytes - self.estimated_bytes

    @property
    def copies(self) -> pd.DataFrame:
        """The rows that are copies of a parameter or an input the step made."""
        return self.saved[self.saved["kind"].isin(COPY_KINDS)]

    def __repr__(self) -> str:
        """Its figures, wrapped at 100 columns (the dataclass's own repr printed the whole ``saved`` frame)."""
        estimate = ("" if self.estimated_bytes is None else
                    f" (estimated {format_bytes(self.estimated_bytes)}"
                    + (", equal)" if not self.difference else f", {self.difference:+,} B)"))
        graphs = f" over {self.graphs} graphs" if self.graphs > 1 else ""
        return textwrap.fill(f"Measured({self.strategy} compiled by {self.backend}{graphs}: "
                f"{format_bytes(self.saved_bytes)} of activations kept for the backward{estimate}, "
                f"{self.saves} saved values; parameters {format_bytes(self.param_bytes)}, inputs "
                f"{format_bytes(self.input_bytes)}, copies {format_bytes(self.copy_bytes)}; "
                + (f"peaks forward {format_bytes(self.forward_peak_bytes)}, backward "
                   f"{format_bytes(self.backward_peak_bytes)} above the step's start; "
                   if self.forward_peak_bytes is not None else "")
                + "one step "
                f"{self.seconds * 1e3:.1f} ms; .saved: {len(self.saved)} storages)", 100, subsequent_indent="  ")

    def reason(self) -> str:
        """The difference from the estimate, in words ("" when there is none to explain)."""
        parts = []
        copies = self.copies
        if len(copies):
            params = copies[copies["kind"] == "parameter copy"]
            inputs = copies[copies["kind"] == "input copy"]
            layouts = sorted({str(x) for x in copies["layout"]})
            what = []
            if len(params):
                what.append(f"{len(params)} parameter(s) ({', '.join(str(s) for s in params['source'])})")
            if len(inputs):
                what.append(f"{len(inputs)} input(s) ({', '.join(str(s) for s in inputs['source'])})")
            parts.append(f"{self.backend} keeps copies of {' and '.join(what)} in another layout "
                         f"({', '.join(layouts)}): {format_bytes(self.copy_bytes)}, which the partition saves "
                         "as the parameters and inputs themselves")
        acts = self.saved[self.saved["kind"] == "activation"]
        extra = acts[acts["value"].isna()]
        if len(extra):
            parts.append(f"{len(extra)} saved value(s) the partition does not save: "
                         f"{format_bytes(int(extra['bytes'].sum()))}")
        diff = self.difference
        rest = (diff or 0) - self.copy_bytes - int(extra["bytes"].sum())
        if self.estimated_bytes is not None and rest:
            parts.append(f"the partition's other saved values differ by {rest:+,} B (values the step does not "
                         "keep, or keeps at another size)")
        return "; ".join(parts)


def session_step_strategy() -> Strategy:
    """The partition torch.compile's step uses, under both backends (``aot_eager`` and inductor call
    min-cut): plain min-cut, or min-cut under the session's activation-memory budget, read now, when
    the step is compiled (the views' ``choices.step_strategy`` reads it as it was at trace time)."""
    return budget_strategy(*_torch.step_budget())


def measure_step(cap: Capture, parts: Sequence[tuple[JointGraph, Partition | None]],
                 strategy: Strategy | None = None) -> Measured:
    """Run ``cap``'s step through ``torch.compile`` (its backend) and name what it saved.  ``parts``:
    each graph of the capture with its partition under ``strategy`` (default :func:`session_step_strategy`)."""
    refuse(cap, "measure()")
    strategy = strategy or session_step_strategy()
    with torch.inference_mode(False), torch.enable_grad(), \
            preserved(cap.model, (cap.example_inputs, [t for _, t, _ in function_state(cap)])), _torch.quiet_torch():
        model = model_copy(cap, "measure()")
        step = StepCall(cap, model)
        rng = rng_state()
        with old_objects_frozen():  # the step's collections before each run walk what the step made, not the session
            run = _torch.run_compiled_step(step, step.make_call, cap.backend, cap.dynamic,
                                           lambda: restore_rng(rng), step_device(cap), step.outside)
        restore_rng(rng)
        held = _partition_values(parts, step, model)
        rows, notes = _rows(run.saved, step, model, held, cap)
    return _measured(rows, notes, run, cap, parts, strategy)


# --- the partition's values, on the same tensors -------------------------------------------------
@dataclass
class _Held:
    """One value a partition saves, computed by its forward graph on the step's tensors."""

    graph: int
    name: str
    tensor: torch.Tensor
    what: str
    storage: int


def _placeholder_value(graph: JointGraph, name: str, step: StepCall, state: Mapping[str, torch.Tensor]) -> Any:
    """The tensor the step ran with for joint input ``name``: fxviz's copy's buffers as the hooked
    run began and its parameters; the capture's own value otherwise (inputs, a later graph's inputs)."""
    info = graph.info.get(name)
    qual = info.qualname if info is not None and info.role in STATE_ROLES else None
    if qual is not None and qual in step.buffers:
        return step.buffers[qual].clone()
    if qual is not None and qual in state:
        return state[qual].detach()
    value = graph.placeholder_values.get(name)
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _forward_outputs(graph: JointGraph, part: Partition, step: StepCall, model: nn.Module | None
                     ) -> tuple[list[Any], set[int]]:
    """The forward graph run on the step's tensors: its outputs, and its inputs' storages."""
    assert part.forward is not None
    state = dict(model.named_parameters()) if model is not None else {}
    args = []
    for n in part.forward.graph.nodes:
        if n.op != "placeholder":
            continue
        desc = _torch.node_desc(n)
        if desc is not None and _torch.describe_input(desc).kind == "token":
            args.append(torch.empty(0))
        else:
            args.append(_placeholder_value(graph, part.fw_to_joint.get(n.name, n.name), step, state))
    with torch.no_grad():
        out = fx.Interpreter(part.forward).run(*args, enable_io_processing=False)
    inputs = {_torch.storage_key(a) for a in args if isinstance(a, torch.Tensor)}
    return (list(out) if isinstance(out, (tuple, list)) else [out]), inputs


def _partition_values(parts: Sequence[tuple[JointGraph, Partition | None]], step: StepCall,
                      model: nn.Module | None) -> list[_Held]:
    """Every activation each partition saves, as a real tensor (empty where a forward cannot run)."""
    held: list[_Held] = []
    for graph, part in parts:
        if part is None or part.forward is None or not part.ok:
            continue
        try:
            out, inputs = _forward_outputs(graph, part, step, model)
        except Exception:  # matched by shape and dtype alone then
            continue
        words = saved_table(graph, part)["what"].to_dict()
        for name, t in zip(part.saved, out[graph.num_fwd_outputs:]):
            if isinstance(t, torch.Tensor) and _torch.storage_key(t) not in inputs:
                held.append(_Held(graph.index, name, t, str(words.get(name, "")), _torch.storage_key(t)))
    return held


# --- naming what was saved -----------------------------------------------------------------------
def _same_values(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
        return False
    if a.numel() == 0:
        return True
    if a.is_floating_point():
        scale = float(b.abs().max()) if b.numel() else 1.0
        return bool(torch.allclose(a, b, rtol=1e-3, atol=1e-4 * max(1.0, scale), equal_nan=True))
    return bool(torch.equal(a, b))


def _varied(t: torch.Tensor) -> bool:
    """Not constant-valued (zeros, ones): equal values then say nothing about being a copy."""
    flat = t.detach().reshape(-1)
    return flat.numel() > 1 and not bool((flat == flat[0]).all())


def layout_of(t: torch.Tensor) -> str:
    """``contiguous``, ``channels_last``, ``channels_last_3d`` or the strides."""
    if t.is_contiguous():
        return "contiguous"
    if t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last):
        return "channels_last"
    if t.dim() == 5 and t.is_contiguous(memory_format=torch.channels_last_3d):
        return "channels_last_3d"
    return f"strides {tuple(t.stride())}"


@dataclass
class _Sources:
    """The step's parameters and inputs, by storage and for value comparison."""

    owners: dict[int, tuple[str, str]]  # storage -> (parameter | input, name)
    tensors: list[tuple[str, str, torch.Tensor]]  # (parameter | input, name, tensor), constant-valued left out
    primal: dict[str, str]  # parameter / input name -> its joint placeholder
    label: dict[str, str]  # parameter name -> "Conv2d weight"


def _sources(step: StepCall, model: nn.Module | None, cap: Capture) -> _Sources:
    owners: dict[int, tuple[str, str]] = {}
    tensors: list[tuple[str, str, torch.Tensor]] = []
    label: dict[str, str] = {}
    state = function_state(cap)
    named = (list(model.named_parameters()) + list(model.named_buffers()) if model is not None
             else [(qual, t) for qual, t, _ in state])
    modules = dict(model.named_modules()) if model is not None else {}
    for qual, t in named:
        owners[_torch.storage_key(t)] = ("parameter", qual)
        if _varied(t):
            tensors.append(("parameter", qual, t))
        parent = modules.get(qual.rpartition(".")[0])
        label[qual] = f"{type(parent).__name__} {qual.rpartition('.')[2]}" if parent is not None else "parameter"
    names = list(cap.input_names) + [f"input {i}" for i in range(len(cap.input_names), len(step.inputs))]
    for name, t in zip(names, step.inputs):
        owners.setdefault(_torch.storage_key(t), ("input", name))
        if _varied(t):
            tensors.append(("input", name, t))
    primal: dict[str, str] = {}  # a parameter's or an input's name -> its joint placeholder
    for g in cap.graphs:
        for n, info in g.info.items():
            if info.role in (*STATE_ROLES, "primal") and info.qualname:
                primal.setdefault(info.qualname, n)
    for qual, _, n in state:
        primal[qual] = n
    return _Sources(owners, tensors, primal, label)


def _copy_of(t: torch.Tensor, sources: _Sources) -> tuple[str, str, str] | None:
    """(parameter | input, its name, how) when ``t`` holds a parameter's or an input's values in a
    storage of its own: in another layout, or transposed (a weight saved as ``w.t()`` made contiguous)."""
    for kind, name, src in sources.tensors:
        if src.dtype != t.dtype:
            continue
        if src.shape == t.shape and _same_values(t.detach(), src.detach()):
            return kind, name, f"in another layout ({layout_of(t)})"
        if src.dim() == 2 and tuple(src.shape) == tuple(t.shape)[::-1] and _same_values(t.detach(), src.detach().t()):
            return kind, name, "transposed"
    return None


def _match(views: list[torch.Tensor], held: list[_Held], used: set[int]) -> tuple[list[_Held], str | None]:
    """The partition's values these views hold: by values first, else by shape and dtype."""
    found: list[_Held] = []
    how = None
    for v in views:
        same = [h for h in held if id(h) not in used and h.tensor.shape == v.shape and h.tensor.dtype == v.dtype]
        exact = [h for h in same if _same_values(v.detach(), h.tensor)]
        pick = exact[0] if exact else (same[0] if same else None)
        if pick is None:
            continue
        how = "values" if exact and how in (None, "values") else "shape and dtype"
        # every saved value of the same storage (a view and its base) is held with it
        for h in held:
            if h.storage == pick.storage and h.graph == pick.graph and id(h) not in used:
                used.add(id(h))
                found.append(h)
    return found, how


def _what(views: list[torch.Tensor], owner: tuple[str, str] | None, sources: _Sources, held: list[_Held],
          used: set[int], backend: str) -> dict[str, Any]:
    """What one saved storage is: a parameter or input itself, a copy of one, or the partition's value."""
    if owner is not None:
        kind, name = owner
        primal = sources.primal.get(name)
        return {"kind": kind, "value": primal, "values": (primal,) if primal else (), "source": name,
                "matched_by": "storage",
                "what": f"{kind} `{name}`" + (f" ({primal})" if primal else "") + ", saved as itself"}
    copied = _copy_of(views[0], sources)
    if copied is not None:
        kind, name, how = copied
        primal = sources.primal.get(name)
        whose = f"{sources.label.get(name, 'parameter')} `{name}`" if kind == "parameter" else f"input `{name}`"
        out = {"kind": f"{kind} copy", "value": primal, "values": (primal,) if primal else (), "source": name,
               "matched_by": "values",
               "what": f"a copy of `{primal or name}` ({whose}) {how}, made by {backend}"}
        return out | ({"layout": "transposed"} if how == "transposed" else {})
    found, matched_by = _match(views, held, used)
    return {"kind": "activation", "value": ", ".join(h.name for h in found) or None,
            "values": tuple(h.name for h in found), "matched_by": matched_by,
            "graph": found[0].graph if found else None,
            "what": (f"the partition's `{found[0].name}` ({found[0].what})" if found else
                     f"a value the partition does not save (made by {backend}'s compiled code)")}


def _rows(saved: list[torch.Tensor], step: StepCall, model: nn.Module | None, held: list[_Held],
          cap: Capture) -> tuple[list[dict[str, Any]], list[str]]:
    sources = _sources(step, model, cap)
    groups: dict[int, list[torch.Tensor]] = {}
    for t in saved:
        groups.setdefault(_torch.storage_key(t), []).append(t)
    used: set[int] = set()
    rows = []
    for key, views in groups.items():
        t = views[0]
        row: dict[str, Any] = {"bytes": int(t.untyped_storage().nbytes()), "graph": None, "source": None,
                               "shape": tuple(t.shape), "dtype": str(t.dtype).replace("torch.", ""),
                               "layout": layout_of(t), "matched_by": None, "views": len(views)}
        row.update(_what(views, sources.owners.get(key), sources, held, used, cap.backend))
        if len(cap.graphs) > 1 and row["graph"] is not None:  # names repeat across graphs: say whose
            row["what"] = row["what"].replace("the partition's", f"{graph_name(row['graph'])}'s partition's", 1)
        rows.append(row)
    notes = []
    missing = [h for h in held if id(h) not in used]
    if missing:
        notes.append(f"{len(missing)} value(s) the partition saves that the step does not keep: "
                     + ", ".join(h.name for h in missing[:8]) + (" ..." if len(missing) > 8 else ""))
    return rows, notes


def _measured(rows: list[dict[str, Any]], notes: list[str], run: Any, cap: Capture,
              parts: Sequence[tuple[JointGraph, Partition | None]], strategy: Strategy) -> Measured:
    import pandas as pd

    df = pd.DataFrame(rows, columns=MEASURED_COLUMNS)
    df = df.sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)
    df["bytes"] = df["bytes"].astype("int64")
    df["graph"] = df["graph"].astype("Int64")
    df["value"] = df["value"].astype("object").where(df["value"].notna(), None)

    def total(*kinds: str) -> int:
        return int(df[df["kind"].isin(kinds)]["bytes"].sum())

    estimated: int | None = 0
    facts = piece_facts(cap)
    for graph, part in parts:
        if not graph.has_backward:
            continue
        if part is None or part.forward is None or not part.ok:
            estimated = None
            break
        runs = max(1, len(facts.runs_of(graph.index)))
        estimated = (estimated or 0) + runs * saved_memory(part, graph).activation_bytes
    if len(cap.graphs) > 1:
        notes.append(f"measured over the whole step ({len(cap.graphs)} graphs; graph breaks run eager code "
                     f"between them); the estimate adds up every {graph_name(0)}..{graph_name(len(cap.graphs) - 1)} "
                     "partition, once per run")
    if cap.params == "closure":
        notes.append("closure mode: the copy's parameters are held constant and the floating inputs require "
                     "grad, as in the capture")
    m = Measured(saved=df, saved_bytes=total("activation", *COPY_KINDS), param_bytes=total("parameter"),
                 input_bytes=total("input"), copy_bytes=total(*COPY_KINDS), backend=cap.backend,
                 strategy=strategy.name, estimated_bytes=estimated, saves=run.saves,
                 compile_seconds=run.compile_seconds, forward_seconds=run.forward_seconds,
                 backward_seconds=run.backward_seconds, peaks=dict(run.peaks), graphs=len(cap.graphs), notes=notes,
                 forward_peak_bytes=run.forward_peak, backward_peak_bytes=run.backward_peak,
                 after_forward_bytes=run.after_forward, peak_method=run.peak_method)
    df.attrs["caption"] = _caption(m)
    return m


def _caption(m: Measured) -> str:
    head = (f"What the real torch.compile(backend={m.backend!r}) step saved for its backward: one row per storage, "
            f"{format_bytes(m.saved_bytes)} that is not a parameter or an input")
    if m.estimated_bytes is not None:
        head += f" (the {m.strategy} partition saves {format_bytes(m.estimated_bytes)})"
    reason = m.reason()
    return head + "." + (f" {reason[0].upper()}{reason[1:]}." if reason else "")


# --- the saved table, marked ---------------------------------------------------------------------
def mark_saved(table: pd.DataFrame, measured: Measured, graph: JointGraph) -> pd.DataFrame:
    """``tr.saved()`` of ``graph`` with a ``measured`` column: what the real step holds for each value
    (``held``, ``held as a copy (channels_last, 90.8 KiB)``, ``not held``)."""
    import pandas as pd

    out = table.copy()
    out.attrs = dict(table.attrs)
    held: dict[str, str] = {}

    def here(name: str, row: Any) -> bool:
        """Whether ``name`` in this graph is the row's value: an activation of this graph, or this
        graph's placeholder of the row's parameter or input (placeholder names repeat across graphs)."""
        if not pd.isna(row["graph"]):
            return int(row["graph"]) == graph.index
        if row["kind"] == "activation" or not isinstance(row["source"], str) or name not in graph.info:
            return True
        return graph.info[name].qualname == row["source"]

    for _, row in measured.saved.iterrows():
        for name in (n for n in row["values"] if here(n, row)):
            if row["kind"] in COPY_KINDS:
                held[name] = f"held as a copy ({row['layout']}, {format_bytes(int(row['bytes']))})"
            else:
                held.setdefault(name, "held")
    out["measured"] = [held.get(str(name), "not held") for name in out.index]
    return out

_Frame = TypeVar("_Frame", bound="pd.DataFrame")


def add_measured(table: _Frame, measured: Measured) -> _Frame:
    """``table`` with the measured twin (``MEASURED_TABLE_COLUMNS``) on the row of the strategy the
    real step used (``measured.strategy``), empty on the others.  A step of several graphs is
    measured whole: its twin belongs beside ``memory_table(scope="step")``'s total row, not one graph's."""
    import pandas as pd

    out = table.copy()
    out.attrs = dict(table.attrs)
    row = (out["strategy"] == measured.strategy) & out["error"].isna()
    whole = "piece" in out.columns
    if whole:
        row &= out["piece"] == "total"
    elif measured.graphs > 1:
        row &= False
    out["measured_saved_bytes"] = pd.array([measured.saved_bytes if r else None for r in row], dtype="Int64")
    diff = [measured.saved_bytes - int(b) if r and not pd.isna(b) else None
            for r, b in zip(row, out["saved_activation_bytes"])]
    out["measured_difference_bytes"] = pd.array(diff, dtype="Int64")
    reason = measured.reason() or "none: the step keeps what the partition saves"
    out["measured_reason"] = pd.Series([reason if r else None for r in row], index=out.index, dtype="object")
    for phase, value in (("forward", measured.forward_peak_bytes), ("backward", measured.backward_peak_bytes)):
        twin = [value + int(res) if r and value is not None and not pd.isna(res) else None
                for r, res in zip(row, out["resident_bytes"])]
        at = list(out.columns).index(f"{phase}_peak_bytes") + 1 if f"{phase}_peak_bytes" in out else len(out.columns)
        out.insert(at, f"measured_{phase}_peak_bytes", pd.array(twin, dtype="Int64"))
    where = "its row" if bool(row.any()) else "no row here (measured over the whole step: see the total row)"
    peaks = (f" measured_forward_peak_bytes / measured_backward_peak_bytes: the real step's peaks, read from "
             f"{measured.peak_method}, plus the row's resident_bytes." if measured.forward_peak_bytes is not None
             else "")
    out.attrs["caption"] = (str(out.attrs.get("caption", "")) + f" measured_*: the real torch.compile(backend="
                            f"{measured.backend!r}) step, caught with saved-tensor hooks (Trace.measure()), beside "
                            f"the {measured.strategy} partition it used: {where}.{peaks}").strip()
    return out
