"""``Trace.replay(strategies)``: each partition's forward and backward graphs run on real tensors,
the bytes alive by storage recorded at every node, so each estimate of the memory table has a
measured twin (``replayed_*`` columns) and a wall time.

The memory table's figures come from a liveness walk over the graphs' fake tensors
(``memory.saved_memory``, ``memory.peak_bytes``).  Here the same graphs run (``fx.Interpreter``,
which lets a value go after its last use, as the walk assumes) on the capture's own tensors: after
each node, every storage a value still held references is counted once, parameters and user inputs
apart (resident, as in the table).  The forward's inputs stay held by the caller throughout; the
backward's (saved values, tangents) go once read, as AOTAutograd hands them over.  What this
replays is the unfused graph: a compiled step (``Trace.measure()``) fuses and may copy, so it is
measured apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.fx as fx

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.analysis.real.runtime_args import backward_args, forward_args
from fxviz.analysis.strategy.partition import Partition
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import FxvizError
from fxviz.core.state import preserved
from fxviz.sources.graphs import Capture, JointGraph
from fxviz.sources.roles import STATE_ROLES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["REPLAYED_COLUMNS", "Replayed", "replay_partition", "replay_strategies", "add_replayed"]

REPLAYED_COLUMNS: list[str] = ["replayed_saved_activation_bytes", "replayed_forward_peak_bytes",
                               "replayed_backward_peak_bytes", "replayed_forward_seconds", "replayed_backward_seconds"]
"""The replayed twins, beside ``saved_activation_bytes``, ``forward_peak_bytes``, ``backward_peak_bytes``."""


@dataclass
class Replayed:
    """One partition run on real tensors: saved activation bytes, live bytes after each node of each
    graph (resident bytes apart), peaks (resident included, as the table counts them), wall times."""

    saved_activation_bytes: int
    forward_live: list[int]
    backward_live: list[int]
    resident_bytes: int
    forward_seconds: float
    backward_seconds: float

    @property
    def forward_peak_bytes(self) -> int:
        return max(self.forward_live, default=0) + self.resident_bytes

    @property
    def backward_peak_bytes(self) -> int:
        return max(self.backward_live, default=0) + self.resident_bytes


def _leaves(value: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _nbytes(t: torch.Tensor) -> int:
    return int(t.untyped_storage().nbytes())


class _LiveBytes(fx.Interpreter):
    """An interpreter that records, after each node, the bytes of every storage a value it still
    holds references (each storage once; ``resident`` ones and empty ones left out)."""

    def __init__(self, gm: fx.GraphModule, resident: set[int], held: Sequence[torch.Tensor]) -> None:
        super().__init__(gm, garbage_collect_values=True)
        self.resident, self.held = resident, list(held)
        self.live: list[int] = []

    def run_node(self, n: fx.Node) -> Any:
        out = super().run_node(n)
        seen: dict[int, int] = {}
        # a value nobody reads lives only while its own node runs (the liveness walk's rule); the
        # interpreter keeps it to the end, having no last use to drop it at
        kept = [v for node, v in self.env.items() if node.users or node.op == "output"]
        for t in [*self.held, *_leaves(kept), *_leaves(out)]:
            key = _torch.storage_key(t)
            if key not in self.resident:
                seen[key] = _nbytes(t)
        self.live.append(sum(seen.values()))
        return out



def replay_partition(graph: JointGraph, part: Partition) -> Replayed:
    """Run ``part``'s forward then backward graph on the capture's tensors, counting live storages."""
    if part.forward is None or part.backward is None:
        raise FxvizError(f"{part.label} has no forward and backward graphs to run", "pick a partitioned strategy")
    fw_args = _forward_args(graph, part)
    resident = {_torch.storage_key(t) for n, v in zip(_placeholders(part.forward), fw_args)
                for t in _leaves(v) if _resident(graph, part.fw_to_joint.get(n, n))}
    resident_bytes = sum({_torch.storage_key(t): _nbytes(t) for t in _leaves(fw_args)
                          if _torch.storage_key(t) in resident}.values())
    fw = _LiveBytes(part.forward, resident, _leaves(fw_args))
    with torch.no_grad():
        outs = _outputs(fw.run(*fw_args, enable_io_processing=False))
    saved = {_torch.storage_key(t): _nbytes(t) for t in _leaves(outs[graph.num_fwd_outputs:])
             if _torch.storage_key(t) not in resident}
    bw_args = backward_args(graph, part, outs[graph.num_fwd_outputs:])
    del outs
    bw = _LiveBytes(part.backward, resident, [])
    with torch.no_grad():
        bw.run(*bw_args, enable_io_processing=False)
    del bw_args
    # wall time: the graph modules called as the runtime calls them, without the counting; the
    # fastest of three calls after a first that builds the modules' code
    fwd, bwd = part.forward, part.backward
    times: list[tuple[float, float]] = []
    for _ in range(4):
        fw_args = _forward_args(graph, part)
        with torch.no_grad():
            start = time.perf_counter()
            outs = _outputs(fwd(*fw_args))
            middle = time.perf_counter()
            bw_args = backward_args(graph, part, outs[graph.num_fwd_outputs:])
            del outs
            start_bw = time.perf_counter()
            bwd(*bw_args)
            times.append((middle - start, time.perf_counter() - start_bw))
    fw_seconds, bw_seconds = min(t[0] for t in times[1:]), min(t[1] for t in times[1:])
    return Replayed(sum(saved.values()), fw.live, bw.live, resident_bytes, fw_seconds, bw_seconds)


def _outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _forward_args(graph: JointGraph, part: Partition) -> list[Any]:
    """The forward's inputs: the capture's tensors, buffers and user inputs cloned (the graph may
    update them in place: batch norm's running statistics)."""
    values = graph.placeholder_values
    if not values or any(isinstance(v, torch.Tensor) and (_torch.is_fake(v) or v.device.type == "meta")
                         for v in values.values()):
        raise FxvizError("replay(strategies) runs the partitions on real tensors, and this trace holds none",
                         "trace the model itself on a real device (a log's graphs have no tensors)")

    def prepare(joint: str, v: Any) -> Any:
        info = graph.info.get(joint)
        if isinstance(v, torch.Tensor):
            mutable = info is not None and info.role in ("buffer", "primal")
            return v.detach().clone() if mutable else v.detach()
        return v

    return forward_args(part, values, prepare)


def _placeholders(gm: fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.nodes if n.op == "placeholder"]


def _resident(graph: JointGraph, joint: str) -> bool:
    """A parameter, buffer or user input: held outside the step (the table's resident bytes)."""
    info = graph.info.get(joint)
    return info is not None and info.role in (*STATE_ROLES, "primal")


_Frame = TypeVar("_Frame", bound="pd.DataFrame")


def add_replayed(table: _Frame, replays: Iterable[tuple[Strategy, Replayed | str]]) -> _Frame:
    """``table`` (the memory table of the same strategies) with the ``REPLAYED_COLUMNS`` twins; a
    strategy whose replay failed keeps them empty and says why in the caption."""
    import pandas as pd

    out = table.copy()
    out.attrs = dict(table.attrs)
    by_name = {s.name: r for s, r in replays}
    cols: dict[str, list[Any]] = {c: [] for c in REPLAYED_COLUMNS}
    failed = []
    for name in out["strategy"]:
        r = by_name.get(str(name))
        ok = isinstance(r, Replayed)
        if isinstance(r, str):
            failed.append(f"{name} ({r})")
        values = [r.saved_activation_bytes, r.forward_peak_bytes, r.backward_peak_bytes, r.forward_seconds,
                  r.backward_seconds] if isinstance(r, Replayed) else [None] * 5
        for c, v in zip(REPLAYED_COLUMNS, values if ok else [None] * 5):
            cols[c].append(v)
    for c, vs in cols.items():
        out[c] = pd.array(vs, dtype="Float64" if c.endswith("_seconds") else "Int64")
    out.attrs["caption"] = (str(out.attrs.get("caption", "")) + " replayed_*: each partition's forward and "
                            "backward graphs run on the capture's real tensors (Trace.replay(strategies)), the "
                            "storages alive after every node counted once, parameters and inputs resident; the "
                            "unfused graphs, not a compiled step."
                            + (f" Not replayed: {'; '.join(failed)}." if failed else "")).strip()
    return out


def replay_strategies(cap: Capture, graph: JointGraph, get_partition: Callable[[Strategy], Partition],
                      strategies: Sequence[Strategy]) -> list[tuple[Strategy, Replayed | str]]:
    """:func:`replay_partition` for each strategy (a reason instead where it cannot run: a failed or
    measured strategy, no backward); the model, its buffers and the RNG are put back afterwards."""
    out: list[tuple[Strategy, Replayed | str]] = []
    with torch.inference_mode(False), preserved(cap.model, cap.example_inputs), _torch.quiet_torch():
        for s in strategies:
            p = get_partition(s)
            if p.error is not None or p.forward is None or p.backward is None:
                out.append((s, p.error or "no forward and backward graphs to run (measured, not partitioned)"))
                continue
            try:
                out.append((s, replay_partition(graph, p)))
            except FxvizError:
                raise
            except Exception as exc:  # one strategy's failure must not sink the others
                out.append((s, f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"))
    return out
