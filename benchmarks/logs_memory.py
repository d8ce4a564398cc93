"""Memory and time of reading a big TORCH_TRACE log (issue 13): ``load_logs`` streams, so peak
memory must stay far below the file's size.

The big log is made from a real one: a fresh process compiles the tests' mini_gpt training step
with ``TORCH_TRACE`` set, then its records are repeated, each copy under a new compile id, until
the file reaches ``--mb`` megabytes.  A child process then runs ``load_logs`` (+ ``graphs`` and
the trace of the last compile) and reports its peak resident memory (``ru_maxrss``).

    python benchmarks/logs_memory.py --mb 1024
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = """
import json, resource, sys, time
import fxviz
t = time.perf_counter()
run = fxviz.load_logs(sys.argv[1])
g = run.graphs
t_load = time.perf_counter() - t
last = g["compile_id"].iloc[-1]
t = time.perf_counter()
tr = run.trace(compile_id=last)
saved = len(tr.partition("logged").saved)
print(json.dumps({"graphs": len(g), "load_s": t_load, "trace_s": time.perf_counter() - t, "saved": saved,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

BASELINE = """
import json, resource
import fxviz
print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=1024.0, help="size of the big log in MB (default 1024)")
    args = ap.parse_args()
    from tests.logs_util import MINI_GPT, make_log

    with tempfile.TemporaryDirectory() as tmp:
        src = make_log(MINI_GPT, pathlib.Path(tmp) / "src", "aot_eager")
        (one,) = list(src.iterdir())
        text = one.read_bytes()
        big = pathlib.Path(tmp) / "big.log"
        target = int(args.mb * 1e6)
        k = 0
        with open(big, "wb") as f:
            while f.tell() < target:
                f.write(re.sub(rb'"frame_compile_id": 0', b'"frame_compile_id": %d' % k, text))
                k += 1
        size_mb = big.stat().st_size / 1e6
        base = json.loads(subprocess.run([sys.executable, "-c", BASELINE], capture_output=True, text=True,
                                         cwd=ROOT, check=True).stdout)
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", CHILD, str(big)], capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            sys.exit(out.stderr[-2000:])
        res = json.loads(out.stdout.strip().splitlines()[-1])
        res.update(file_mb=round(size_mb, 1), copies=k, baseline_rss_mb=base["peak_rss_mb"],
                   wall_s=time.perf_counter() - t)
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
