"""The table, the issue's targets (MET or MISSED) and the notes, from measured or saved results.

Reads plain JSON results only (never torch or fxviz), so ``--from-json`` reprints a saved run.
The table's columns follow from the stage tuples in ``sides.py`` and ``views.py``.  To add a
target, write a function ``results -> line`` beside the others and add it to ``TARGETS``.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Callable
from typing import Any

from benchmarks.ladder import LADDER
from benchmarks.recorder import stage_seconds, total_seconds
from benchmarks.sides import FXVIZ_STAGES, TORCH_STAGES
from benchmarks.views import VIEW_STAGES

__all__ = ["COLUMNS", "TARGETS", "format_table", "notes", "print_results", "ratios", "row_of", "targets",
           "write_json"]

Results = dict[str, dict[str, Any]]  # model name -> {"pair": ..., "torch": ..., "fxviz": ...}

COLUMNS = ["model", "joint nodes",
           *(f"{s} s" for s in FXVIZ_STAGES), "fxviz total s",
           *(f"torch {s} s" for s in TORCH_STAGES), "torch total s", "ratio", "ratio (CPU s)",
           *(v.heading for v in VIEW_STAGES),
           "peak RSS fxviz MiB", "peak RSS torch MiB"]


def _cell(stage: Any, digits: int = 2) -> str:
    if stage is None:
        return "-"
    if isinstance(stage, dict):
        return f"{stage['wall']:.{digits}f}"
    return str(stage)


def ratios(fx_res: dict[str, Any], th_res: dict[str, Any]) -> dict[str, float | None]:
    """fxviz (trace + default + min_cut + memory table) over torch (trace + default + min_cut)."""
    out: dict[str, float | None] = {}
    for key in ("wall", "cpu"):
        a, b = total_seconds(fx_res, FXVIZ_STAGES, key), total_seconds(th_res, TORCH_STAGES, key)
        out[key] = a / b if a and b else None
    return out


def _timing(entry: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fxviz, torch) analysis timings of one model: from the interleaved pair worker."""
    pair = entry.get("pair", {})
    if pair.get("failed"):
        return {"failed": pair["failed"]}, {"failed": pair["failed"]}
    return pair.get("fxviz", {}), pair.get("torch", {})


def row_of(name: str, entry: dict[str, Any]) -> list[str]:
    """One table row, in ``COLUMNS`` order."""
    fx_res, th_res = _timing(entry)
    views, th_own = entry.get("fxviz", {}), entry.get("torch", {})
    fs, ts, vs = fx_res.get("stages", {}), th_res.get("stages", {}), views.get("stages", {})
    fx_total, th_total = total_seconds(fx_res, FXVIZ_STAGES), total_seconds(th_res, TORCH_STAGES)
    r = ratios(fx_res, th_res)
    fx_fail, th_fail, v_fail = fx_res.get("failed"), th_res.get("failed"), views.get("failed")
    nodes = fx_res.get("joint_nodes", th_res.get("joint_nodes", views.get("joint_nodes", "-")))
    row = [name, str(nodes)]
    row += ["failed" if fx_fail else _cell(fs.get(k)) for k in FXVIZ_STAGES]
    row += [f"{fx_total:.2f}" if fx_total else "-"]
    row += ["failed" if th_fail else _cell(ts.get(k)) for k in TORCH_STAGES]
    row += [f"{th_total:.2f}" if th_total else "-"]
    row += [f"{r[k]:.2f}x" if r[k] else "-" for k in ("wall", "cpu")]
    row += ["failed" if v_fail else _cell(vs.get(v.name), v.digits) for v in VIEW_STAGES]
    if th_own.get("skipped"):
        row += ["n/a (--quick)", "n/a (--quick)"]
    else:
        row += [f"{views['peak_rss_mib']:.0f}" if "peak_rss_mib" in views else "failed" if v_fail else "-",
                f"{th_own['peak_rss_mib']:.0f}" if "peak_rss_mib" in th_own
                else "failed" if th_own.get("failed") else "-"]
    return row


def format_table(rows: list[list[str]], markdown: bool) -> str:
    """Aligned plain text (model left, numbers right), or a Markdown table."""
    if markdown:
        lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join([fmt.format(*COLUMNS)] + [fmt.format(*r) for r in rows])


def notes(results: Results) -> list[str]:
    """Every failure, stage error and note of every side, once each."""
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


# --- the targets: one function each, listed in TARGETS ------------------------------------
RATIO_TARGET = 1.3
REPORT_TARGET_S, REPORT_MODEL = 60.0, "gpt12"
COLLAPSED_TARGET_S = 5.0
SWITCH_TARGET_S = 0.3
FIRST_PICTURE_TARGET_S = 1.5
META_RSS_TARGET_MIB, META_MODEL = 2048.0, "gpt-1b-meta"


def _verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else "MET" if ok else "MISSED"


def _slowest_view(results: Results, stage: str) -> tuple[str, float] | None:
    """The model whose fxviz views took longest at ``stage``, and its seconds; None if none did."""
    measured = {n: stage_seconds(p["fxviz"].get("stages", {}).get(stage)) for n, p in results.items()}
    timed = {n: v for n, v in measured.items() if v is not None}
    if not timed:
        return None
    worst = max(timed, key=lambda n: timed[n])
    return worst, timed[worst]


def ratio_target(results: Results) -> str:
    """Analysis overhead: fxviz's analysis over torch alone doing the same, worst model."""
    rs = {n: ratios(*_timing(p)) for n, p in results.items()}
    walls = {n: w for n, r in rs.items() if (w := r["wall"])}
    cpus = {n: c for n, r in rs.items() if (c := r["cpu"])}
    if not walls:
        return f"analysis overhead <= {RATIO_TARGET}x torch alone: not measured"
    worst = max(walls, key=lambda n: walls[n])
    worst_cpu = max(cpus, key=lambda n: cpus[n]) if cpus else None
    return (f"analysis overhead <= {RATIO_TARGET}x torch alone: worst wall ratio {walls[worst]:.2f}x "
            f"({worst}), worst CPU ratio "
            + (f"{cpus[worst_cpu]:.2f}x ({worst_cpu})" if worst_cpu else "-")
            + f": wall {_verdict(walls[worst] <= RATIO_TARGET)}, CPU "
            + _verdict(cpus[worst_cpu] <= RATIO_TARGET if worst_cpu else None))


def report_target(results: Results) -> str:
    """The full HTML report of GPT-2 small within a minute."""
    rep = stage_seconds(results.get(REPORT_MODEL, {}).get("fxviz", {}).get("stages", {}).get("report"))
    return (f"{REPORT_MODEL} full HTML report <= {REPORT_TARGET_S:g} s: "
            + (f"{rep:.1f} s: {_verdict(rep <= REPORT_TARGET_S)}" if rep is not None else "not measured"))


def _slowest_within(results: Results, stage: str, what: str, limit: float, digits: int = 2) -> str:
    """``what <= limit s``: the slowest model at view ``stage``, and whether it is within the limit."""
    slowest = _slowest_view(results, stage)
    if slowest is None:
        return f"{what} <= {limit:g} s: not measured"
    name, secs = slowest
    return f"{what} <= {limit:g} s: slowest {secs:.{digits}f} s ({name}): " + _verdict(secs <= limit)


def collapsed_target(results: Results) -> str:
    """The collapsed module view of every model within seconds."""
    return _slowest_within(results, "draw_collapsed", "collapsed module view", COLLAPSED_TARGET_S)


def _switch_target(stage: str, what: str) -> Callable[[Results], str]:
    def switch_target(results: Results) -> str:
        return _slowest_within(results, stage, f"cached view switch {what}", SWITCH_TARGET_S, digits=3)

    switch_target.__doc__ = f"A switch between views already seen, {what}, feels instant."
    return switch_target


def first_picture_target(results: Results) -> str:
    """The explorer's first picture soon after ``explore(tr)`` in a kernel (issue 17)."""
    return _slowest_within(results, "explore_picture", "explorer first picture after explore(tr)",
                           FIRST_PICTURE_TARGET_S)


def meta_rss_target(results: Results) -> str:
    """Tracing a billion-parameter model on the meta device in bounded memory."""
    meta = results.get(META_MODEL, {}).get("fxviz", {})
    if "rss_after_trace_mib" not in meta:
        return f"peak RSS tracing a 1e9-parameter model <= {META_RSS_TARGET_MIB:g} MiB: not measured"
    return (f"peak RSS tracing a 1e9-parameter model <= {META_RSS_TARGET_MIB:g} MiB: "
            f"{meta['rss_after_trace_mib']:.0f} MiB after fxviz.trace, {meta['peak_rss_mib']:.0f} MiB "
            f"after trace + partitions + memory table: {_verdict(meta['peak_rss_mib'] <= META_RSS_TARGET_MIB)}")


TARGETS: tuple[Callable[[Results], str], ...] = (
    ratio_target,
    report_target,
    collapsed_target,
    _switch_target("explore_switch", "in the explorer (kernel side)"),
    _switch_target("report_browser", "in the HTML report (Chromium, until painted)"),
    first_picture_target,
    meta_rss_target,
)


def targets(results: Results) -> list[str]:
    """One line per target of the issue: the measured value, the limit, met or missed."""
    return [target(results) for target in TARGETS]


# --- output ---------------------------------------------------------------------------------------
def print_results(info: dict[str, Any], results: Results, markdown: bool) -> None:
    """The table, the targets, the notes and the machine, on stdout."""
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


def write_json(path: pathlib.Path, info: dict[str, Any], results: Results, names: list[str]) -> None:
    """Every measurement, the machine and the specs of the models run: what ``--from-json`` reads."""
    path.write_text(json.dumps({"machine": info, "results": results,
                                "specs": {n: dataclasses.asdict(LADDER[n]) for n in names}},
                               indent=1, default=str))
