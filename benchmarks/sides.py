"""The two sides compared: torch alone, and fxviz doing the same capture and partitioner calls.

Each side's ``analysis`` records the stages in its ``stages`` tuple, and the ratio compares the
sums of those tuples.  To add an analysis stage, time it in ``FxvizSide.analysis`` and add its
name to ``FXVIZ_STAGES`` (and, when torch alone can do the same work, in ``TorchAlone.analysis``
and ``TORCH_STAGES``): it then has a table column and counts in the ratio.  A stage that only
fxviz's views have belongs in ``views.py`` instead.

Nothing here imports torch or fxviz at import time: the torch-alone worker never imports fxviz,
and ``--from-json`` needs neither.
"""

from __future__ import annotations

import functools
import importlib.util
import pathlib
from collections.abc import Callable
from typing import Any

from benchmarks.ladder import LADDER, WARMUP, Spec, build_model
from benchmarks.recorder import Recorder, peak_rss_mib
from benchmarks.views import measure_views

__all__ = ["FXVIZ_STAGES", "STRATEGIES", "TORCH_STAGES", "FxvizSide", "TorchAlone"]

STRATEGIES = ("default", "min_cut")
TORCH_STAGES = ("trace", *STRATEGIES)
FXVIZ_STAGES = ("trace", *STRATEGIES, "memory")


def _torch_reduce(out: Any) -> Any:
    """The loss fxviz builds by default: the output if it is a scalar, else the sum of it."""
    return out.reshape(()) if out.numel() == 1 else out.sum()


class TorchAlone:
    """One AOT trace and the same partitioner calls as fxviz, with torch alone (no fxviz code)."""

    stages = TORCH_STAGES

    def __init__(self) -> None:
        import copy

        import torch
        from torch import fx
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch import config as functorch_config
        from torch._functorch import partitioners
        from torch._functorch.aot_autograd import aot_function, make_boxed_func
        from torch._inductor import config as inductor_config
        from torch._inductor.compile_fx import compile_fx
        from torch._inductor.custom_graph_pass import CustomPartitionerFn
        from torch._subclasses.fake_tensor import FakeTensorMode

        # held as Any: these are called with duck-typed callables, as fxviz's capture calls them
        self.torch: Any = torch
        self.fx: Any = fx
        self.copy: Any = copy
        self.aot_autograd: Any = aot_autograd
        self.aot_function: Any = aot_function
        self.make_boxed_func: Any = make_boxed_func
        self.partitioners: Any = partitioners
        self.FakeTensorMode: Any = FakeTensorMode
        self.functorch_config: Any = functorch_config
        self.inductor_config: Any = inductor_config
        self.compile_fx: Any = compile_fx
        self.CustomPartitionerFn: Any = CustomPartitionerFn

    def _nop(self, gm: Any, _inputs: Any) -> Any:
        return self.make_boxed_func(gm.forward)

    def _copy(self, gm: Any) -> Any:  # partitioners mutate their input
        return self.fx.GraphModule(gm, self.copy.deepcopy(gm.graph))

    def run(self, model: Any, inputs: tuple[Any, ...], meta: bool) -> dict[str, Any]:
        """Capture the joint graph by fxviz's route; returns it with the partitioner's arguments."""
        torch = self.torch
        record: dict[str, Any] = {}

        def partition_fn(joint: Any, joint_inputs: Any, **kw: Any) -> Any:
            record.update(joint=self._copy(joint), joint_inputs=joint_inputs, kw=kw)
            return self.partitioners.default_partition(joint, joint_inputs, **kw)

        if meta:  # fxviz's aot route: aot_function over functional_call, fake tensors
            names = [n for n, _ in model.named_parameters()]
            mode = self.FakeTensorMode(allow_non_fake_inputs=True)
            fakes = [mode.from_tensor(p) for _, p in model.named_parameters()]
            fakes += [mode.from_tensor(t) for t in inputs]

            def step(*flat: Any) -> Any:
                state = dict(zip(names, flat[:len(names)]))
                return _torch_reduce(torch.func.functional_call(model, state, tuple(flat[len(names):])))

            self.aot_function(step, fw_compiler=self._nop, bw_compiler=self._nop, partition_fn=partition_fn)(*fakes)
        else:  # fxviz's dynamo route (its default): torch.compile's inductor up to its partitioner
            self._inductor_capture(model, inputs, record)
        return record

    def _inductor_capture(self, model: Any, inputs: tuple[Any, ...], record: dict[str, Any]) -> None:
        """What fxviz's default capture asks of torch: ``torch.compile`` with inductor's ``compile_fx``
        (its decompositions, joint-graph passes and min-cut as it calls it), the joint graph copied
        at the partitioner, the partitioned graphs run as they are (no kernel generated), caches
        off so that the trace reaches the partitioner."""
        torch, bench = self.torch, self

        class Recording(self.CustomPartitionerFn):  # type: ignore[misc,name-defined]
            def __call__(self, joint: Any, joint_inputs: Any, **kw: Any) -> Any:
                record.update(joint=bench._copy(joint), joint_inputs=joint_inputs, kw=kw)
                return bench.partitioners.min_cut_rematerialization_partition(joint, joint_inputs, **kw)

            def uuid(self) -> Any:
                return None

        def inner_compile(gm: Any, _inputs: Any, **_kw: Any) -> Any:
            return self.make_boxed_func(gm.forward)

        def backend(gm: Any, example_inputs: Any) -> Any:
            return self.compile_fx(gm, example_inputs, inner_compile=inner_compile)

        compiled = torch.compile(lambda *a: _torch_reduce(model(*a)), backend=backend, dynamic=False)
        with torch._dynamo.config.patch(automatic_dynamic_shapes=False, assume_static_by_default=True), \
                self.inductor_config.patch(custom_partitioner_fn=Recording(), fx_graph_cache=False), \
                self.functorch_config.patch(enable_autograd_cache=False):
            compiled(*inputs)

    def partition(self, record: dict[str, Any], which: str) -> Any:
        fn: Callable[..., Any] = {"default": self.partitioners.default_partition,
                                  "min_cut": self.partitioners.min_cut_rematerialization_partition}[which]
        # min-cut as inductor calls it (compiler="inductor"); default_partition takes no compiler
        kw = {k: v for k, v in record["kw"].items() if which == "min_cut" or k != "compiler"}
        return fn(self._copy(record["joint"]), record["joint_inputs"], **kw)

    def analysis(self, rec: Recorder, spec: Spec, model: Any, inputs: tuple[Any, ...]) -> Any:
        record = rec.stage("trace", lambda: self.run(model, inputs, spec.meta))
        rec.out["rss_after_trace_mib"] = peak_rss_mib()
        if record and "joint" in record:
            rec.out["joint_nodes"] = len(record["joint"].graph.nodes)
            for s in STRATEGIES:
                rec.stage(s, functools.partial(self.partition, record, s))
        return record

    def warm_up(self, rec: Recorder) -> None:
        tiny, tiny_in = build_model(LADDER[WARMUP])
        rec.stage("warmup", lambda: self.analysis(Recorder(), LADDER[WARMUP], tiny, tiny_in))


def _memory_table(tr: Any) -> Any:
    if hasattr(tr, "memory_table"):
        return tr.memory_table(strategies=list(STRATEGIES))
    # landed as a module, not yet on Trace
    from fxviz.analysis.memory.table import memory_table

    return memory_table(tr.graph, tr.partition, list(STRATEGIES))


class FxvizSide:
    """fxviz's analysis through its public API: trace, two partitions, the memory table."""

    stages = FXVIZ_STAGES

    def __init__(self) -> None:
        import fxviz

        self.fxviz = fxviz
        built = {name: hasattr(fxviz.Trace, name) for name in ("partition", "memory_table", "draw")}
        built["report"] = hasattr(fxviz, "report")  # the public entry point, once exported
        built["explore"] = hasattr(fxviz, "explore")
        built["memory module"] = importlib.util.find_spec("fxviz.analysis.memory.storage") is not None
        self.built = built

    def analysis(self, rec: Recorder, spec: Spec, model: Any, inputs: tuple[Any, ...]) -> Any:
        built = self.built
        tr = rec.stage("trace", lambda: self.fxviz.trace(model, *inputs))
        if tr is None:
            return None
        rec.out["joint_nodes"] = len(tr.joint.graph.nodes)
        rec.out["rss_after_trace_mib"] = peak_rss_mib()
        for s in STRATEGIES:
            if not built["partition"]:
                rec.mark(s, "n/a (not built)")
                continue
            p = rec.stage(s, functools.partial(tr.partition, s))
            if p is not None and p.error:
                rec.out["stages"][s] = "error"
                rec.out["errors"][s] = p.error
        if built["memory_table"] or (built["memory module"] and built["partition"]):
            df = rec.stage("memory", lambda: _memory_table(tr))
            if not built["memory_table"]:
                rec.out["notes"].append("memory table via fxviz.analysis.memory.storage (not yet on Trace)")
            if df is not None:
                rec.out["memory_errors"] = [e for e in df["error"].tolist() if e]
        else:
            rec.mark("memory", "n/a (not built)")
        return tr

    def warm_up(self, rec: Recorder, out_dir: pathlib.Path | None) -> None:
        """The same calls on the tiny model (and its views, when ``out_dir`` is given)."""
        warm = Recorder()
        tiny, tiny_in = build_model(LADDER[WARMUP])
        tiny_tr = self.analysis(warm, LADDER[WARMUP], tiny, tiny_in)
        if tiny_tr is not None and out_dir is not None:
            measure_views(tiny_tr, LADDER[WARMUP], warm, self.built, out_dir / "warmup")
        rec.out["warmup_errors"] = {k: v for k, v in warm.out["errors"].items() if not k.endswith("traceback")}
