"""fxviz on a ladder of models, measured against torch alone doing the same work.

    python benchmarks/bench.py                 # the full ladder (tens of minutes on 2 cores)
    python benchmarks/bench.py --quick         # a small subset, under a minute on an idle machine
    python benchmarks/bench.py --models mlp,gpt2 --markdown --json out.json
    python benchmarks/bench.py --from-json out.json      # the table and verdicts again

Every model runs in three fresh subprocesses: one times fxviz's analysis against torch alone,
interleaved (the ratio), and one per side measures what only that side does and its peak RSS
(``--quick``: one process for all its models does both, without per-side RSS):

* ``fxviz``: ``fxviz.trace`` (torch.compile + AOTAutograd, or aot_function over fake tensors for a
  meta-device model), ``Trace.partition("default")`` and ``("min_cut")``, the memory table of those
  two partitions, the collapsed drawing (what ``Trace.draw`` shows above its node limit: modules
  as boxes, repeated blocks marked) and the full one (or ``refused`` above the limit), the
  explorer (first render, a view not seen yet, the slowest of six switches between views already
  seen, as the explorer times them in the kernel), the full HTML report, and the report in
  headless Chromium (the slowest switch between views already shown, until painted).
* ``torch``: the same capture route with torch alone (torch.compile with an aot_autograd backend
  whose ``partition_fn`` copies the joint graph and calls ``default_partition``, exactly what
  fxviz's capture does), then ``default_partition`` and ``min_cut_rematerialization_partition`` on
  fresh copies of that joint graph.  fxviz is never imported there.

Both sides first run their own path once on a tiny model (warm-up: torch's lazy imports and
dynamo's first-compile costs are paid once per session by any user, and would otherwise land on
whichever side ran first).  Then each side runs its analysis ``--repeat`` times (default 3) and
keeps the fastest repeat: on a shared machine the minimum is the least disturbed measurement (all
totals are in the JSON).  The ratio column is (trace + default + min_cut + memory table) of
fxviz over (trace + default + min_cut) of torch alone.  Wall seconds are the headline; CPU seconds
(user + system of the process) are in the JSON and tell whether a slow wall time was the machine
being busy.

After the table come the issue's targets, each MET or MISSED with the measured value.  A column
shows ``n/a (not built)`` when that fxviz feature is not in this checkout yet,
``refused`` when fxviz itself declines (the full drawing above its node limit), ``skipped`` when
this benchmark leaves it out for that row, and ``error``/``timeout`` otherwise (details follow the
table).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

__all__ = ["LADDER", "QUICK", "Spec", "main"]

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULT_TAG = "BENCH-RESULT "
GPT2_SMALL = dict(n_embd=768, n_head=12, vocab=50257, block_size=1024, batch=1, seq=128)


@dataclasses.dataclass(frozen=True)
class Spec:
    """One rung of the ladder: an ``fxviz.examples`` factory and its arguments."""

    name: str
    factory: str
    kwargs: dict[str, Any]
    meta: bool = False  # built on the meta device, traced with the token ids only (no targets)
    views: bool = True  # drawings, explorer and report (not for the billion-parameter meta row)
    note: str = ""


LADDER: dict[str, Spec] = {s.name: s for s in [
    Spec("mlp", "mlp", {}, note="examples.mlp() defaults: 32-64-64-10, batch 8"),
    Spec("alexnet", "alexnet", {}, note="torchvision layout, 1x3x224x224, dropout active"),
    Spec("resnet8", "resnet_block", dict(blocks=8, channels=64, size=32, batch=2),
         note="8 BasicBlocks, 64 channels, 2x64x32x32, BatchNorm training"),
    Spec("gpt-tiny", "mini_gpt", dict(n_layer=2, n_embd=32, n_head=4, vocab=64, block_size=32, seq=16),
         note="the test suite's mini_gpt"),
    Spec("gpt2", "mini_gpt", dict(n_layer=2, **GPT2_SMALL), note="2 layers, width 768, 1x128 tokens"),
    Spec("gpt6", "mini_gpt", dict(n_layer=6, **GPT2_SMALL), note="6 layers, width 768, 1x128 tokens"),
    Spec("gpt12", "mini_gpt", dict(n_layer=12, **GPT2_SMALL), note="GPT-2 small: 12 layers, width 768"),
    Spec("gpt-1b-meta", "mini_gpt", dict(n_layer=20, n_embd=2048, n_head=16, vocab=50257, block_size=1024,
                                         batch=1, seq=128, device="meta"),
         meta=True, views=False, note="1.1e9 parameters on the meta device, token ids only"),
]}
DEFAULT_MODELS = ["mlp", "alexnet", "resnet8", "gpt2", "gpt6", "gpt12", "gpt-1b-meta"]
QUICK = ["mlp", "gpt-tiny"]
WARMUP = "mlp"
VIEW_STAGES = ("draw_collapsed", "draw_full", "explore_first", "explore_new_view", "explore_switch", "report",
               "report_browser")
STRATEGIES = ("default", "min_cut")
ANALYSIS = ("trace", *STRATEGIES, "memory")


# --- shared by both workers ---------------------------------------------------------------------
def _load_examples() -> Any:
    """``fxviz/examples.py`` loaded by path: the torch-alone worker must not import the fxviz
    package (its import cost and its imports of pandas, graphviz... belong to fxviz's side)."""
    path = ROOT / "fxviz" / "examples.py"
    spec = importlib.util.spec_from_file_location("_bench_examples", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["_bench_examples"] = mod
    spec.loader.exec_module(mod)
    return mod


def _build(spec: Spec) -> tuple[Any, tuple[Any, ...]]:
    model, inputs = getattr(_load_examples(), spec.factory)(**spec.kwargs)
    if spec.meta:
        inputs = inputs[:1]  # cross_entropy on meta drops the grad_fn: trace the logits instead
    return model, tuple(inputs)


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)  # dot runs as a child process
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


class Recorder:
    """Times named stages; a stage that raises is recorded as an error, not fatal."""

    def __init__(self) -> None:
        self.out: dict[str, Any] = {"stages": {}, "errors": {}, "notes": []}

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        w0, c0 = time.perf_counter(), _cpu()
        try:
            value = fn()
        except Exception as exc:  # a broken feature must not hide the other columns
            self.out["stages"][name] = "error"
            self.out["errors"][name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            self.out["errors"][name + " traceback"] = traceback.format_exc(limit=6)[-1500:]
            return None
        self.out["stages"][name] = {"wall": time.perf_counter() - w0, "cpu": _cpu() - c0}
        return value

    def mark(self, name: str, status: str) -> None:
        self.out["stages"][name] = status


def best_of(repeat: int, rec: Recorder, names: tuple[str, ...], once: Callable[[Recorder], Any]) -> Any:
    """Run ``once`` ``repeat`` times (each into a fresh Recorder, dynamo reset and garbage collected
    in between) and keep the repeat with the smallest total wall time over ``names``: the minimum
    is the measurement least disturbed by other work on a shared machine.  All totals are kept."""
    import gc

    import torch._dynamo

    best, best_total, best_value, totals = None, float("inf"), None, []
    for _ in range(max(1, repeat)):
        r = Recorder()
        value = once(r)
        total = _sum(r.out, names)
        totals.append(total)
        if best is None or (total is not None and total < best_total):
            best, best_total, best_value = r, total if total is not None else float("inf"), value
        value = None
        torch._dynamo.reset()
        gc.collect()
    assert best is not None
    for key, v in best.out.items():
        if key in ("stages", "errors"):
            rec.out[key].update(v)
        elif key == "notes":
            rec.out[key] += v
        else:
            rec.out[key] = v
    rec.out["repeat_totals"] = totals
    return best_value


# --- torch alone ----------------------------------------------------------------------------------
def _torch_reduce(out: Any) -> Any:
    """The loss fxviz builds by default: the output if it is a scalar, else the sum of it."""
    return out.reshape(()) if out.numel() == 1 else out.sum()


class TorchAlone:
    """One AOT trace and the same partitioner calls as fxviz, with torch alone (no fxviz code)."""

    stages = ("trace", *STRATEGIES)

    def __init__(self) -> None:
        import copy

        import torch
        import torch.fx as fx
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch import partitioners
        from torch._functorch.aot_autograd import aot_function, make_boxed_func
        from torch._subclasses.fake_tensor import FakeTensorMode

        self.torch, self.fx, self.copy = torch, fx, copy
        self.aot_autograd, self.aot_function, self.make_boxed_func = aot_autograd, aot_function, make_boxed_func
        self.partitioners, self.FakeTensorMode = partitioners, FakeTensorMode

    def _nop(self, gm: Any, _inputs: Any) -> Any:
        return self.make_boxed_func(gm.forward)

    def _copy(self, gm: Any) -> Any:  # partitioners mutate their input
        return self.fx.GraphModule(gm, self.copy.deepcopy(gm.graph))

    def run(self, model: Any, inputs: tuple[Any, ...], meta: bool) -> dict[str, Any]:
        torch, record = self.torch, {}

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
        else:  # fxviz's dynamo route: torch.compile with an AOTAutograd backend
            backend = self.aot_autograd(fw_compiler=self._nop, bw_compiler=self._nop, partition_fn=partition_fn)
            compiled = torch.compile(lambda *a: _torch_reduce(model(*a)), backend=backend, dynamic=False)
            with torch._dynamo.config.patch(automatic_dynamic_shapes=False, assume_static_by_default=True):
                compiled(*inputs)
        return record

    def partition(self, record: dict[str, Any], which: str) -> Any:
        fn = {"default": self.partitioners.default_partition,
              "min_cut": self.partitioners.min_cut_rematerialization_partition}[which]
        return fn(self._copy(record["joint"]), record["joint_inputs"], **record["kw"])

    def analysis(self, rec: Recorder, spec: Spec, model: Any, inputs: tuple[Any, ...]) -> Any:
        record = rec.stage("trace", lambda: self.run(model, inputs, spec.meta))
        rec.out["rss_after_trace_mib"] = _peak_rss_mib()
        if record and "joint" in record:
            rec.out["joint_nodes"] = len(record["joint"].graph.nodes)
            for s in STRATEGIES:
                rec.stage(s, lambda s=s: self.partition(record, s))
        return record

    def warm_up(self, rec: Recorder) -> None:
        tiny, tiny_in = _build(LADDER[WARMUP])
        rec.stage("warmup", lambda: self.analysis(Recorder(), LADDER[WARMUP], tiny, tiny_in))


# --- fxviz ----------------------------------------------------------------------------------------
def _memory_table(tr: Any) -> Any:
    if hasattr(tr, "memory_table"):
        return tr.memory_table(strategies=list(STRATEGIES))
    from fxviz.analysis.memory import memory_table  # landed as a module, not yet on Trace

    return memory_table(tr.graph, tr.partition, list(STRATEGIES))


class FxvizSide:
    """fxviz's analysis through its public API: trace, two partitions, the memory table."""

    stages = ANALYSIS

    def __init__(self) -> None:
        import fxviz

        self.fxviz = fxviz
        built = {name: hasattr(fxviz.Trace, name) for name in ("partition", "memory_table", "draw")}
        built["report"] = hasattr(fxviz, "report")  # the public entry point, once exported
        built["explore"] = hasattr(fxviz, "explore")
        built["memory module"] = importlib.util.find_spec("fxviz.analysis.memory") is not None
        self.built = built

    def analysis(self, rec: Recorder, spec: Spec, model: Any, inputs: tuple[Any, ...]) -> Any:
        built = self.built
        tr = rec.stage("trace", lambda: self.fxviz.trace(model, *inputs))
        if tr is None:
            return None
        rec.out["joint_nodes"] = len(tr.joint.graph.nodes)
        rec.out["rss_after_trace_mib"] = _peak_rss_mib()
        for s in STRATEGIES:
            if not built["partition"]:
                rec.mark(s, "n/a (not built)")
                continue
            p = rec.stage(s, lambda s=s: tr.partition(s))
            if p is not None and p.error:
                rec.out["stages"][s] = "error"
                rec.out["errors"][s] = p.error
        if built["memory_table"] or (built["memory module"] and built["partition"]):
            df = rec.stage("memory", lambda: _memory_table(tr))
            if not built["memory_table"]:
                rec.out["notes"].append("memory table via fxviz.analysis.memory (not yet on Trace)")
            if df is not None:
                rec.out["memory_errors"] = [e for e in df["error"].tolist() if e]
        else:
            rec.mark("memory", "n/a (not built)")
        return tr

    def warm_up(self, rec: Recorder, out_dir: pathlib.Path | None) -> None:
        """The same calls on the tiny model (and its views, when ``out_dir`` is given)."""
        warm = Recorder()
        tiny, tiny_in = _build(LADDER[WARMUP])
        tiny_tr = self.analysis(warm, LADDER[WARMUP], tiny, tiny_in)
        if tiny_tr is not None and out_dir is not None:
            _views(tiny_tr, LADDER[WARMUP], warm, self.built, out_dir / "warmup")
        rec.out["warmup_errors"] = {k: v for k, v in warm.out["errors"].items() if not k.endswith("traceback")}


def _reset() -> None:
    import gc

    import torch._dynamo

    torch._dynamo.reset()
    gc.collect()


def torch_worker(spec: Spec, repeat: int = 1) -> dict[str, Any]:
    """torch alone in its own process: its timings and its peak RSS."""
    rec, side = Recorder(), TorchAlone()
    side.warm_up(rec)
    _reset()
    rec.out["rss_before_mib"] = _peak_rss_mib()
    model, inputs = _build(spec)
    best_of(repeat, rec, side.stages, lambda r: side.analysis(r, spec, model, inputs))
    rec.out["peak_rss_mib"] = _peak_rss_mib()
    return rec.out


def fxviz_worker(spec: Spec, out_dir: pathlib.Path, repeat: int = 1) -> dict[str, Any]:
    """fxviz in its own process: the analysis, every view, and the peak RSS of it all."""
    rec, side = Recorder(), FxvizSide()
    rec.out["built"] = side.built
    side.warm_up(rec, out_dir)
    _reset()
    rec.out["rss_before_mib"] = _peak_rss_mib()
    model, inputs = _build(spec)
    tr = best_of(repeat, rec, side.stages, lambda r: side.analysis(r, spec, model, inputs))
    rec.out["rss_after_analysis_mib"] = _peak_rss_mib()
    if tr is None or not spec.views:
        for s in VIEW_STAGES:
            rec.mark(s, "skipped")
    else:
        _views(tr, spec, rec, side.built, out_dir)
    rec.out["peak_rss_mib"] = _peak_rss_mib()
    return rec.out


def pair_worker(spec: Spec, repeat: int, views_dir: pathlib.Path | None = None,
                sides: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """The ratio: torch alone and fxviz in one process, interleaved (torch, fxviz, fxviz, torch,
    torch, fxviz...), each side's fastest repeat kept.  Run minutes apart, two processes see
    different loads on a shared machine; interleaved, both sides see the same.  With
    ``views_dir`` (``--quick``), the views of the last fxviz trace are measured here too."""
    out: dict[str, Any] = {"torch": Recorder(), "fxviz": Recorder()}
    if sides is None:
        torch_side, fx_side = TorchAlone(), FxvizSide()
        torch_side.warm_up(out["torch"])
        fx_side.warm_up(out["fxviz"], views_dir)
        _reset()
    else:  # already warm (--quick: one process for every model)
        torch_side, fx_side = sides
    model, inputs = _build(spec)
    runs: dict[str, list[Recorder]] = {"torch": [], "fxviz": []}
    tr = None
    for r in range(max(1, repeat)):
        order = [("torch", torch_side), ("fxviz", fx_side)]
        for name, side in order if r % 2 == 0 else reversed(order):
            one = Recorder()
            value = side.analysis(one, spec, model, inputs)
            if name == "fxviz":
                tr = value
            value = None
            runs[name].append(one)
            _reset()
    result: dict[str, Any] = {}
    if views_dir is not None:
        views = Recorder()
        if tr is None or not spec.views:
            for s in VIEW_STAGES:
                views.mark(s, "skipped")
        else:
            _views(tr, spec, views, fx_side.built, views_dir)
        result["views"] = views.out
    for name, side in (("torch", torch_side), ("fxviz", fx_side)):
        totals = [_sum(one.out, side.stages) for one in runs[name]]
        if not runs[name]:
            continue
        best = min(range(len(totals)), key=lambda i: totals[i] if totals[i] is not None else float("inf"))
        res = runs[name][best].out
        res["repeat_totals"] = totals
        res["warmup_errors"] = out[name].out.get("warmup_errors", {})
        result[name] = res
    return result


def _views(tr: Any, spec: Spec, rec: Recorder, built: dict[str, bool], out_dir: pathlib.Path) -> None:
    """Drawings, explorer and report, each through its public entry point."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if built["draw"]:
        from fxviz.render.views import NODE_LIMIT

        n = len(tr.graph.info)
        # the view fxviz draws by default above its node limit (modules collapsed into boxes at
        # the depth it picks), forced for every model through the public node_limit argument
        # (half the node count: safely below what the drawing counts, so it always collapses)
        d = rec.stage("draw_collapsed", lambda: _svg(tr.draw(node_limit=max(1, min(n // 2, NODE_LIMIT)))))
        if d is not None:
            rec.out["collapsed_units"] = d.nodes
            rec.out["collapsed_caption"] = d.caption
            (out_dir / f"{spec.name}-collapsed.svg").write_text(d.svg())
        if n > NODE_LIMIT:
            rec.mark("draw_full", f"refused ({n} > {NODE_LIMIT})")
        else:
            rec.stage("draw_full", lambda: _svg(tr.draw(group="none")))
    else:
        rec.mark("draw_collapsed", "n/a (not built)")
        rec.mark("draw_full", "n/a (not built)")

    import fxviz

    if built["explore"]:
        ex = rec.stage("explore_first", lambda: _explore_first(fxviz, tr))
        if ex is not None:
            rec.stage("explore_new_view", lambda: _explore_new(ex))
            worst = rec.stage("explore_switch", lambda: _explore_switch(ex))
            if worst is not None:  # the slowest of six cached switches, not the loop's total
                rec.out["stages"]["explore_switch"] = {"wall": worst, "cpu": None,
                                                       "loop": rec.out["stages"]["explore_switch"]}
    else:
        for s in ("explore_first", "explore_new_view", "explore_switch"):
            rec.mark(s, "n/a (not built)")

    if built["report"]:
        path = out_dir / f"{spec.name}-report.html"
        rec.stage("report", lambda: fxviz.report(tr, path))
        if path.exists():
            rec.out["report_bytes"] = path.stat().st_size
            timing = rec.stage("report_browser", lambda: _browser_switch(path)) if _have_browser() else None
            if not _have_browser():
                rec.mark("report_browser", "n/a (no Playwright/Chromium)")
            elif timing is not None:  # the slowest switch, not the session's total
                rec.out["report_page_load_s"] = timing["load"]
                rec.out["stages"]["report_browser"] = {"wall": timing["switch"], "cpu": None,
                                                      "views": timing["views"], "session": rec.out["stages"]["report_browser"]}
    else:
        rec.mark("report", "n/a (not built)")
        rec.mark("report_browser", "n/a (not built)")


_SWITCH_JS = """async (view) => {
  const button = document.querySelector(`button[data-view="${view}"]`);
  const t0 = performance.now();
  button.click();
  // two animation frames: the new drawing has been laid out and painted
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return performance.now() - t0;
}"""


def _chromium() -> str:
    return os.environ.get("FXVIZ_CHROMIUM", "/usr/bin/chromium")


def _have_browser() -> bool:
    return importlib.util.find_spec("playwright") is not None and os.access(_chromium(), os.X_OK)


def _browser_switch(path: pathlib.Path) -> dict[str, Any]:
    """The report in headless Chromium: seconds to the first drawing, and the slowest switch
    between views already shown once (every view's SVG is inline in the report: all cached)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=["--headless", "--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 950})
            t0 = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector("#fxviz-root svg", timeout=120_000)
            load = time.perf_counter() - t0
            views = page.eval_on_selector_all("button[data-view]", "bs => bs.map((b) => b.dataset.view)")
            views = [v for v in views if v != "compare"] or views
            for v in views:  # each view shown once: parsed and laid out by the browser
                page.evaluate(_SWITCH_JS, v)
            times = [page.evaluate(_SWITCH_JS, v) / 1000.0 for _ in range(2) for v in views]
        finally:
            browser.close()
    return {"load": load, "switch": max(times), "views": views}


def _svg(drawing: Any) -> Any:
    """Lay the drawing out (``dot``), as showing it does; returns the drawing."""
    drawing.svg()
    return drawing


def _explore_first(fxviz: Any, tr: Any) -> Any:
    """``fxviz.explore(tr)``: builds the widget and renders its first view (joint graph, memory
    table of every strategy the explorer offers, doctor)."""
    return fxviz.explore(tr)


def _explore_new(ex: Any) -> None:
    """Switch to a view not seen yet (the forward graph): partition already cached, layout not."""
    ex.view_control.value = "forward"


def _explore_switch(ex: Any, rounds: int = 3) -> float:
    """Switch back and forth between two views already seen; the slowest switch, in seconds,
    as the explorer itself timed it (its ``timings`` say whether it came from the cache)."""
    worst = 0.0
    for _ in range(rounds):
        for view in ("joint", "forward"):
            ex.view_control.value = view
            t = ex.timings[-1]
            if not t.cached:
                raise RuntimeError(f"the switch to {t.key} was not served from the cache")
            worst = max(worst, t.seconds)
    return worst


# --- the parent: subprocesses, the table ----------------------------------------------------------
def _run_worker(kind: str, name: str, timeout: float, out_dir: pathlib.Path, repeat: int) -> dict[str, Any]:
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", kind, "--models", name,
           "--out-dir", str(out_dir), "--repeat", str(repeat)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return {"failed": f"timeout after {timeout:g} s"}
    wall = time.perf_counter() - t0
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            res = json.loads(line[len(RESULT_TAG):])
            res["process_wall"] = wall
            return res
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"failed": f"exit {proc.returncode}: {' | '.join(tail)[:300]}"}


def _secs(stage: Any, key: str = "wall") -> float | None:
    return stage.get(key) if isinstance(stage, dict) else None


def _cell(stage: Any, digits: int = 2) -> str:
    if stage is None:
        return "-"
    if isinstance(stage, dict):
        return f"{stage['wall']:.{digits}f}"
    return str(stage)


def _sum(res: dict[str, Any], names: tuple[str, ...], key: str = "wall") -> float | None:
    vals = [_secs(res.get("stages", {}).get(n), key) for n in names]
    return None if any(v is None for v in vals) else sum(vals)  # type: ignore[arg-type]


COLUMNS = ["model", "joint nodes", "trace s", "default s", "min_cut s", "memory s", "fxviz total s",
           "torch trace s", "torch default s", "torch min_cut s", "torch total s", "ratio", "ratio (CPU s)",
           "draw collapsed s", "draw full s", "explorer first s", "explorer new view s",
           "explorer cached switch s", "report s", "report switch (browser) s", "peak RSS fxviz MiB",
           "peak RSS torch MiB"]


def ratios(fx_res: dict[str, Any], th_res: dict[str, Any]) -> dict[str, float | None]:
    """fxviz (trace + default + min_cut + memory table) over torch (trace + default + min_cut)."""
    out: dict[str, float | None] = {}
    for key in ("wall", "cpu"):
        a, b = _sum(fx_res, ANALYSIS, key), _sum(th_res, ("trace", *STRATEGIES), key)
        out[key] = a / b if a and b else None
    return out


def _timing(entry: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fxviz, torch) analysis timings of one model: from the interleaved pair worker."""
    pair = entry.get("pair", {})
    if pair.get("failed"):
        return {"failed": pair["failed"]}, {"failed": pair["failed"]}
    return pair.get("fxviz", {}), pair.get("torch", {})


def row_of(name: str, entry: dict[str, Any]) -> list[str]:
    fx_res, th_res = _timing(entry)
    views, th_own = entry.get("fxviz", {}), entry.get("torch", {})
    fs, ts, vs = fx_res.get("stages", {}), th_res.get("stages", {}), views.get("stages", {})
    fx_total, th_total = _sum(fx_res, ANALYSIS), _sum(th_res, ("trace", *STRATEGIES))
    r = ratios(fx_res, th_res)
    fx_fail, th_fail, v_fail = fx_res.get("failed"), th_res.get("failed"), views.get("failed")
    nodes = fx_res.get("joint_nodes", th_res.get("joint_nodes", views.get("joint_nodes", "-")))
    row = [name, str(nodes)]
    row += ["failed" if fx_fail else _cell(fs.get(k)) for k in ANALYSIS]
    row += [f"{fx_total:.2f}" if fx_total else "-"]
    row += ["failed" if th_fail else _cell(ts.get(k)) for k in ("trace", *STRATEGIES)]
    row += [f"{th_total:.2f}" if th_total else "-"]
    row += [f"{r[k]:.2f}x" if r[k] else "-" for k in ("wall", "cpu")]
    row += ["failed" if v_fail else _cell(vs.get(k), 3 if k in ("explore_switch", "report_browser") else 2)
            for k in VIEW_STAGES]
    if th_own.get("skipped"):
        row += ["n/a (--quick)", "n/a (--quick)"]
    else:
        row += [f"{views['peak_rss_mib']:.0f}" if "peak_rss_mib" in views else "failed" if v_fail else "-",
                f"{th_own['peak_rss_mib']:.0f}" if "peak_rss_mib" in th_own else "failed" if th_own.get("failed") else "-"]
    return row


def format_table(rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    fmt = "  ".join("{:<%d}" % w if i == 0 else "{:>%d}" % w for i, w in enumerate(widths))
    return "\n".join([fmt.format(*COLUMNS)] + [fmt.format(*r) for r in rows])


def machine() -> dict[str, Any]:
    import torch

    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f"{int(f.readline().split()[1]) / 2**20:.1f} GiB"
    except OSError:
        pass
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "nproc": os.cpu_count(), "ram": mem, "cpu": cpu, "torch": torch.__version__,
            "python": platform.python_version(), "load_before": list(os.getloadavg())}


def notes(results: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for name, entry in results.items():
        fx_t, th_t = _timing(entry)
        sides = {"fxviz": entry.get("fxviz", {}), "torch": entry.get("torch", {})}
        if not entry.get("pair", {}).get("failed"):
            sides.update({"pair/fxviz": fx_t, "pair/torch": th_t})
        else:
            sides["pair"] = entry["pair"]
        for side, res in sides.items():
            if res.get("failed"):
                out.append(f"{name} [{side}]: {res['failed']}")
            for stage, err in res.get("errors", {}).items():
                if not stage.endswith("traceback"):
                    out.append(f"{name} [{side}] {stage}: {err}")
            for n in res.get("notes", []):
                out.append(f"{name} [{side}]: {n}")
            if res.get("memory_errors"):
                out.append(f"{name} [{side}] memory table rows failed: {res['memory_errors']}")
    return list(dict.fromkeys(out))


# the targets
RATIO_TARGET = 1.3
REPORT_TARGET_S, REPORT_MODEL = 60.0, "gpt12"
COLLAPSED_TARGET_S = 5.0
SWITCH_TARGET_S = 0.3
META_RSS_TARGET_MIB, META_MODEL = 2048.0, "gpt-1b-meta"


def _verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else "MET" if ok else "MISSED"


def targets(results: dict[str, dict[str, Any]]) -> list[str]:
    """One line per target of the issue: the measured value, the limit, met or missed."""
    lines = []
    rs = {n: ratios(*_timing(p)) for n, p in results.items()}
    walls = {n: r["wall"] for n, r in rs.items() if r["wall"]}
    cpus = {n: r["cpu"] for n, r in rs.items() if r["cpu"]}
    if walls:
        worst = max(walls, key=walls.get)  # type: ignore[arg-type]
        worst_cpu = max(cpus, key=cpus.get) if cpus else None  # type: ignore[arg-type]
        lines.append(f"analysis overhead <= {RATIO_TARGET}x torch alone: worst wall ratio {walls[worst]:.2f}x "
                     f"({worst}), worst CPU ratio "
                     + (f"{cpus[worst_cpu]:.2f}x ({worst_cpu})" if worst_cpu else "-")
                     + f": wall {_verdict(walls[worst] <= RATIO_TARGET)}, CPU "
                     + _verdict(cpus[worst_cpu] <= RATIO_TARGET if worst_cpu else None))
    else:
        lines.append(f"analysis overhead <= {RATIO_TARGET}x torch alone: not measured")
    rep = _secs(results.get(REPORT_MODEL, {}).get("fxviz", {}).get("stages", {}).get("report"))
    lines.append(f"{REPORT_MODEL} full HTML report <= {REPORT_TARGET_S:g} s: "
                 + (f"{rep:.1f} s: {_verdict(rep <= REPORT_TARGET_S)}" if rep is not None else "not measured"))
    col = {n: _secs(p["fxviz"].get("stages", {}).get("draw_collapsed")) for n, p in results.items()}
    col = {n: v for n, v in col.items() if v is not None}
    if col:
        worst = max(col, key=col.get)  # type: ignore[arg-type]
        lines.append(f"collapsed module view <= {COLLAPSED_TARGET_S:g} s: slowest {col[worst]:.2f} s ({worst}): "
                     + _verdict(col[worst] <= COLLAPSED_TARGET_S))
    else:
        lines.append(f"collapsed module view <= {COLLAPSED_TARGET_S:g} s: not measured")
    for stage, what in (("explore_switch", "in the explorer (kernel side)"),
                        ("report_browser", "in the HTML report (Chromium, until painted)")):
        sw = {n: _secs(p["fxviz"].get("stages", {}).get(stage)) for n, p in results.items()}
        sw = {n: v for n, v in sw.items() if v is not None}
        if sw:
            worst = max(sw, key=sw.get)  # type: ignore[arg-type]
            lines.append(f"cached view switch {what} <= {SWITCH_TARGET_S:g} s: slowest {sw[worst]:.3f} s "
                         f"({worst}): " + _verdict(sw[worst] <= SWITCH_TARGET_S))
        else:
            lines.append(f"cached view switch {what} <= {SWITCH_TARGET_S:g} s: not measured")
    meta = results.get(META_MODEL, {}).get("fxviz", {})
    if "rss_after_trace_mib" in meta:
        lines.append(f"peak RSS tracing a 1e9-parameter model <= {META_RSS_TARGET_MIB:g} MiB: "
                     f"{meta['rss_after_trace_mib']:.0f} MiB after fxviz.trace, {meta['peak_rss_mib']:.0f} MiB "
                     f"after trace + partitions + memory table: {_verdict(meta['peak_rss_mib'] <= META_RSS_TARGET_MIB)}")
    else:
        lines.append(f"peak RSS tracing a 1e9-parameter model <= {META_RSS_TARGET_MIB:g} MiB: not measured")
    return lines


def print_results(info: dict[str, Any], results: dict[str, dict[str, Any]], markdown: bool) -> None:
    rows = [row_of(name, entry) for name, entry in results.items()]
    print(format_table(rows, markdown))
    print("\ntargets:")
    for line in targets(results):
        print(f"- {line}")
    extra = notes(results)
    if extra:
        print("\nnotes:")
        for line in extra:
            print(f"- {line}")
    print(f"\nmachine: {json.dumps(info)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    ap.add_argument("--models", help=f"comma-separated, from: {', '.join(LADDER)}")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per worker process")
    ap.add_argument("--repeat", type=int, default=None,
                    help="run trace + partitions (+ memory table) this many times per side and keep the "
                         "fastest (default 3, 1 with --quick): the minimum is least disturbed by a busy machine")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--json", help="write every measurement (wall and CPU per stage) here")
    ap.add_argument("--out-dir", help="where drawings and reports go (default: a temporary folder)")
    ap.add_argument("--from-json", help="print the table and verdicts of a saved --json run, measure nothing")
    ap.add_argument("--worker", choices=("fxviz", "torch", "pair", "quick"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    names = args.models.split(",") if args.models else QUICK if args.quick else DEFAULT_MODELS
    if args.repeat is None:
        args.repeat = 1 if args.quick or args.worker else 3
    unknown = [n for n in names if n not in LADDER]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(LADDER)}")
    out_dir = pathlib.Path(args.out_dir or tempfile.mkdtemp(prefix="fxviz-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)

    if args.worker == "quick":  # every model in this one process, warmed up once
        sides = (TorchAlone(), FxvizSide())
        warm = Recorder()
        sides[0].warm_up(warm)
        sides[1].warm_up(warm, out_dir)
        _reset()
        res = {name: pair_worker(LADDER[name], args.repeat, out_dir, sides) for name in names}
        res["warmup_errors"] = warm.out.get("warmup_errors", {})
        print(RESULT_TAG + json.dumps(res), flush=True)
        return 0
    if args.worker:
        spec = LADDER[names[0]]
        if args.worker == "pair":
            res = pair_worker(spec, args.repeat)
        elif args.worker == "torch":
            res = torch_worker(spec)
        else:
            res = fxviz_worker(spec, out_dir)
        print(RESULT_TAG + json.dumps(res), flush=True)
        return 0

    if args.from_json:
        saved = json.loads(pathlib.Path(args.from_json).read_text())
        print_results(saved["machine"], saved["results"], args.markdown)
        return 0

    info = machine()
    info["repeat"] = args.repeat
    print(f"# {info['date']}  nproc={info['nproc']}  RAM={info['ram']}  torch {info['torch']}  "
          f"python {info['python']}  load(1/5/15 min)={', '.join(f'{x:.2f}' for x in info['load_before'])}",
          file=sys.stderr, flush=True)
    results: dict[str, dict[str, Any]] = {}
    if args.quick:  # one process for every model: the views measured in it too, no per-side RSS
        print(f"  {', '.join(names)}: one process ...", file=sys.stderr, flush=True)
        res = _run_worker("quick", ",".join(names), args.timeout * len(names), out_dir, args.repeat)
        info["warmup_errors"] = res.pop("warmup_errors", {})
        for name in names:
            both = res.get(name, {"failed": res.get("failed", "no result")})
            views = both.pop("views", {"failed": both.get("failed", "no views measured")})
            results[name] = {"pair": both, "fxviz": views,
                             "torch": {"skipped": "--quick runs one process: no per-side peak RSS"}}
    for name in [] if args.quick else names:
        pair = {}
        for kind in ("pair", "torch", "fxviz"):
            print(f"  {name}: {kind} ...", file=sys.stderr, flush=True)
            pair[kind] = _run_worker(kind, name, args.timeout, out_dir, args.repeat)
        results[name] = pair
    info["load_after"] = list(os.getloadavg())
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"machine": info, "results": results,
                                                       "specs": {n: dataclasses.asdict(LADDER[n]) for n in names}},
                                                      indent=1, default=str))
    print_results(info, results, args.markdown)
    print(f"artifacts: {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
