"""fxviz on a ladder of models, measured against torch alone doing the same work.

    python benchmarks/bench.py                 # the full ladder (tens of minutes on 2 cores)
    python benchmarks/bench.py --quick         # a small subset, under a minute on an idle machine
    python benchmarks/bench.py --models mlp,gpt2 --markdown --json out.json
    python benchmarks/bench.py --from-json out.json      # the table and verdicts again

Every model runs in three fresh subprocesses: one times fxviz's analysis against torch alone,
interleaved (the ratio), and one per side measures what only that side does and its peak RSS
(``--quick``: one process for all its models does both, without per-side RSS):

* ``fxviz``: ``fxviz.trace`` (by default torch.compile's own capture: inductor's ``compile_fx`` up to
  its partitioner, no kernel generated; aot_function over fake tensors for a meta-device model),
  ``Trace.partition("default")`` and ``("min_cut")``, the memory table of those two partitions, the
  collapsed drawing (what ``Trace.draw`` shows above its node limit: modules as boxes, repeated blocks
  marked) and the full one (or ``refused`` above the limit), the
  explorer (first render, a view not seen yet, the slowest of six switches between views already
  seen, as the explorer times them in the kernel), the full HTML report, and the report in
  headless Chromium (the slowest switch between views already shown, until painted).
* ``torch``: the same capture route with torch alone (torch.compile with inductor's ``compile_fx``,
  kernels not generated, whose partitioner copies the joint graph and calls min-cut as inductor
  calls it, exactly what fxviz's default capture does since issue 32), then ``default_partition``
  and ``min_cut_rematerialization_partition`` on fresh copies of that joint graph.  fxviz is never imported there.

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

Where things live (``benchmarks/`` is a package; this file is only the command line):

* ``ladder.py``: the models.  A new rung is one ``Spec`` in ``LADDER``.
* ``sides.py``: torch alone and fxviz, the same capture and partitioner calls.  A new analysis
  stage is timed in ``FxvizSide.analysis`` and named in ``FXVIZ_STAGES`` (it counts in the ratio).
* ``views.py``: fxviz's drawings, explorer and report.  A new view stage is one ``ViewStage`` in
  ``VIEW_STAGES`` and its timing in ``measure_views``.
* ``recorder.py``: the clocks (wall, CPU, peak RSS) both sides share.
* ``measure.py``: worker processes, interleaving, best of ``--repeat``, the parent that runs them.
* ``report.py``: the table, the notes, and the targets.  A new target is one function in ``TARGETS``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

if __package__ in (None, ""):  # run as a script: import the package ``benchmarks`` of this checkout
    _ROOT = pathlib.Path(__file__).resolve().parent.parent
    if sys.path and pathlib.Path(sys.path[0]).resolve() == _ROOT / "benchmarks":
        sys.path[0] = str(_ROOT)  # and not benchmarks/ itself, whose module names are generic
    else:
        sys.path.insert(0, str(_ROOT))

from benchmarks.ladder import DEFAULT_MODELS, LADDER, QUICK, Spec
from benchmarks.measure import (
    WORKERS,
    machine,
    measure_ladder,
    measure_quick,
    run_worker_here,
)
from benchmarks.report import print_results, write_json

__all__ = ["LADDER", "QUICK", "Spec", "main"]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
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
    ap.add_argument("--worker", choices=WORKERS, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)

    names = args.models.split(",") if args.models else QUICK if args.quick else DEFAULT_MODELS
    if args.repeat is None:
        args.repeat = 1 if args.quick or args.worker else 3
    unknown = [n for n in names if n not in LADDER]
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(LADDER)}")
    out_dir = pathlib.Path(args.out_dir or tempfile.mkdtemp(prefix="fxviz-bench-"))
    out_dir.mkdir(parents=True, exist_ok=True)

    if args.worker:  # a child of the run below: measure, print one result line
        run_worker_here(args.worker, names, args.repeat, out_dir)
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
    if args.quick:
        results, info["warmup_errors"] = measure_quick(names, args.timeout, out_dir, args.repeat)
    else:
        results = measure_ladder(names, args.timeout, out_dir, args.repeat)
    info["load_after"] = list(os.getloadavg())
    if args.json:
        write_json(pathlib.Path(args.json), info, results, names)
    print_results(info, results, args.markdown)
    print(f"artifacts: {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
