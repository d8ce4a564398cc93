"""How the two sides are measured: fresh processes, interleaving, best of ``--repeat``, peak RSS.

The parent (``measure_quick``, ``measure_ladder``) starts ``bench.py --worker KIND`` subprocesses
and reads back the one JSON line each prints after ``RESULT_TAG``.  Workers:

* ``pair``: the ratio.  Torch alone and fxviz in one process, interleaved, fastest repeat kept.
* ``torch`` / ``fxviz``: one side alone, for what only it does (views) and its own peak RSS.
* ``quick``: every ``--quick`` model in one process, warmed up once: pairs and views, no RSS.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.ladder import LADDER, ROOT, Spec, build_model
from benchmarks.recorder import (
    Recorder,
    peak_rss_mib,
    reset_between_runs,
    total_seconds,
)
from benchmarks.sides import FxvizSide, TorchAlone
from benchmarks.views import mark_views, measure_views

__all__ = ["RESULT_TAG", "WORKERS", "machine", "measure_ladder", "measure_quick", "run_worker_here"]

RESULT_TAG = "BENCH-RESULT "
WORKERS = ("fxviz", "torch", "pair", "quick")
BENCH_SCRIPT = pathlib.Path(__file__).resolve().with_name("bench.py")


# --- inside a worker process -----------------------------------------------------------------------
def _inf_if_none(total: float | None) -> float:
    """An untimed repeat (a stage failed) ranks after every timed one."""
    return float("inf") if total is None else total


def best_of(repeat: int, rec: Recorder, names: tuple[str, ...], once: Callable[[Recorder], Any]) -> Any:
    """Run ``once`` ``repeat`` times (each into a fresh Recorder, dynamo reset and garbage collected
    in between) and keep the repeat with the smallest total wall time over ``names``: the minimum
    is the measurement least disturbed by other work on a shared machine.  All totals are kept."""
    best, best_total, best_value, totals = None, float("inf"), None, []
    for _ in range(max(1, repeat)):
        r = Recorder()
        value = once(r)
        total = total_seconds(r.out, names)
        totals.append(total)
        if best is None or (total is not None and total < best_total):
            best, best_total, best_value = r, _inf_if_none(total), value
        value = None
        reset_between_runs()
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


def torch_worker(spec: Spec, repeat: int = 1) -> dict[str, Any]:
    """torch alone in its own process: its timings and its peak RSS."""
    rec, side = Recorder(), TorchAlone()
    side.warm_up(rec)
    reset_between_runs()
    rec.out["rss_before_mib"] = peak_rss_mib()
    model, inputs = build_model(spec)
    best_of(repeat, rec, side.stages, lambda r: side.analysis(r, spec, model, inputs))
    rec.out["peak_rss_mib"] = peak_rss_mib()
    return rec.out


def fxviz_worker(spec: Spec, out_dir: pathlib.Path, repeat: int = 1) -> dict[str, Any]:
    """fxviz in its own process: the analysis, every view, and the peak RSS of it all."""
    rec, side = Recorder(), FxvizSide()
    rec.out["built"] = side.built
    side.warm_up(rec, out_dir)
    reset_between_runs()
    rec.out["rss_before_mib"] = peak_rss_mib()
    model, inputs = build_model(spec)
    tr = best_of(repeat, rec, side.stages, lambda r: side.analysis(r, spec, model, inputs))
    rec.out["rss_after_analysis_mib"] = peak_rss_mib()
    if tr is None or not spec.views:
        mark_views(rec, "skipped")
    else:
        measure_views(tr, spec, rec, side.built, out_dir)
    rec.out["peak_rss_mib"] = peak_rss_mib()
    return rec.out


def pair_worker(spec: Spec, repeat: int, views_dir: pathlib.Path | None = None,
                sides: tuple[TorchAlone, FxvizSide] | None = None) -> dict[str, Any]:
    """The ratio: torch alone and fxviz in one process, interleaved (torch, fxviz, fxviz, torch,
    torch, fxviz...), each side's fastest repeat kept.  Run minutes apart, two processes see
    different loads on a shared machine; interleaved, both sides see the same.  With
    ``views_dir`` (``--quick``), the views of the last fxviz trace are measured here too."""
    out: dict[str, Any] = {"torch": Recorder(), "fxviz": Recorder()}
    if sides is None:
        torch_side, fx_side = TorchAlone(), FxvizSide()
        torch_side.warm_up(out["torch"])
        fx_side.warm_up(out["fxviz"], views_dir)
        reset_between_runs()
    else:  # already warm (--quick: one process for every model)
        torch_side, fx_side = sides
    model, inputs = build_model(spec)
    runs: dict[str, list[Recorder]] = {"torch": [], "fxviz": []}
    tr = None
    for r in range(max(1, repeat)):
        order: list[tuple[str, Any]] = [("torch", torch_side), ("fxviz", fx_side)]
        for name, side in order if r % 2 == 0 else reversed(order):
            one = Recorder()
            value = side.analysis(one, spec, model, inputs)
            if name == "fxviz":
                tr = value
            value = None
            runs[name].append(one)
            reset_between_runs()
    result: dict[str, Any] = {}
    if views_dir is not None:
        views = Recorder()
        if tr is None or not spec.views:
            mark_views(views, "skipped")
        else:
            measure_views(tr, spec, views, fx_side.built, views_dir)
        result["views"] = views.out
    for name, stages in (("torch", torch_side.stages), ("fxviz", fx_side.stages)):
        totals = [total_seconds(one.out, stages) for one in runs[name]]
        if not runs[name]:
            continue
        best = min(range(len(totals)), key=lambda i: _inf_if_none(totals[i]))
        res = runs[name][best].out
        res["repeat_totals"] = totals
        res["warmup_errors"] = out[name].out.get("warmup_errors", {})
        result[name] = res
    return result


def quick_worker(names: list[str], repeat: int, out_dir: pathlib.Path) -> dict[str, Any]:
    """Every ``--quick`` model in this one process, both sides warmed up once."""
    sides = (TorchAlone(), FxvizSide())
    warm = Recorder()
    sides[0].warm_up(warm)
    sides[1].warm_up(warm, out_dir)
    reset_between_runs()
    res: dict[str, Any] = {name: pair_worker(LADDER[name], repeat, out_dir, sides) for name in names}
    res["warmup_errors"] = warm.out.get("warmup_errors", {})
    return res


def run_worker_here(kind: str, names: list[str], repeat: int, out_dir: pathlib.Path) -> None:
    """The body of ``bench.py --worker KIND``: measure, then print the result line."""
    if kind == "quick":
        res = quick_worker(names, repeat, out_dir)
    elif kind == "pair":
        res = pair_worker(LADDER[names[0]], repeat)
    elif kind == "torch":
        res = torch_worker(LADDER[names[0]])
    else:
        res = fxviz_worker(LADDER[names[0]], out_dir)
    print(RESULT_TAG + json.dumps(res), flush=True)


# --- the parent -----------------------------------------------------------------------------------
def _run_worker(kind: str, name: str, timeout: float, out_dir: pathlib.Path, repeat: int) -> dict[str, Any]:
    """One worker in a fresh process; its result, or ``{"failed": why}``."""
    cmd = [sys.executable, str(BENCH_SCRIPT), "--worker", kind, "--models", name,
           "--out-dir", str(out_dir), "--repeat", str(repeat)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
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


def measure_quick(names: list[str], timeout: float, out_dir: pathlib.Path,
                  repeat: int) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """``--quick``: one process for every model, the views measured in it too, no per-side RSS.
    Returns the results per model and the warm-up's errors."""
    print(f"  {', '.join(names)}: one process ...", file=sys.stderr, flush=True)
    res = _run_worker("quick", ",".join(names), timeout * len(names), out_dir, repeat)
    warmup_errors = res.pop("warmup_errors", {})
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        both = res.get(name, {"failed": res.get("failed", "no result")})
        views = both.pop("views", {"failed": both.get("failed", "no views measured")})
        results[name] = {"pair": both, "fxviz": views,
                         "torch": {"skipped": "--quick runs one process: no per-side peak RSS"}}
    return results, warmup_errors


def measure_ladder(names: list[str], timeout: float, out_dir: pathlib.Path,
                   repeat: int) -> dict[str, dict[str, Any]]:
    """The full run: per model, the pair worker (the ratio), then each side alone (views, RSS)."""
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        pair = {}
        for kind in ("pair", "torch", "fxviz"):
            print(f"  {name}: {kind} ...", file=sys.stderr, flush=True)
            pair[kind] = _run_worker(kind, name, timeout, out_dir, repeat)
        results[name] = pair
    return results


def machine() -> dict[str, Any]:
    """What ran the benchmark: date, cores, RAM, CPU model, versions, load average before."""
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
