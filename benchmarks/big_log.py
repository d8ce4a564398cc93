"""``fxviz logs`` on a big TORCH_TRACE log against ``tlparse`` (issue 26), start-up included.

The big log is made from a real one: a fresh process compiles the tests' mini_gpt training step with
``TORCH_TRACE`` set (``aot_eager``: joint, forward and backward graphs, dynamo's graph, metrics), and
its records are repeated, each copy under a new compile id, until the file reaches ``--mb`` megabytes
(the way ``benchmarks/logs_memory.py`` makes its 1 GB log).  Then, interleaved round by round, each in
a fresh process:

* ``fxviz logs BIG`` (``python -m fxviz logs BIG``, stdout to a pipe): the whole command, and the time
  until its first table row arrives (the table streams as the file is read);
* ``tlparse BIG --no-browser --overwrite -o OUT`` (tlparse writes its HTML index and one page per
  artifact; it is what torch.compile users run on these logs).

    python -m benchmarks.big_log --mb 100 --rounds 3 [--log existing.log] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def make_big_log(directory: pathlib.Path, mb: float) -> pathlib.Path:
    sys.path.insert(0, str(ROOT))
    from tests.logs_util import MINI_GPT, make_log

    src = make_log(MINI_GPT, directory / "src", "aot_eager")
    (one,) = list(src.iterdir())
    text = one.read_bytes()
    big = directory / "big.log"
    k = 0
    with open(big, "wb") as f:
        while f.tell() < int(mb * 1e6):
            f.write(re.sub(rb'"frame_compile_id": 0', b'"frame_compile_id": %d' % k, text))
            k += 1
    return big


def time_fxviz(log: pathlib.Path, checkout: pathlib.Path = ROOT) -> tuple[float, float, int]:
    """(whole command s, first row s, rows printed) of ``checkout``'s fxviz."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "fxviz", "logs", str(log)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=tempfile.gettempdir(), text=True)
    assert proc.stdout is not None
    first, rows = None, 0
    for line in proc.stdout:
        if re.match(r"^\s*\d+\s+\S+/\S+", line):  # a table row: rank, compile id
            rows += 1
            if first is None:
                first = time.perf_counter() - t0
    proc.wait()
    whole = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"fxviz logs exited {proc.returncode}")
    return whole, first if first is not None else whole, rows


def time_tlparse(log: pathlib.Path, out: pathlib.Path) -> float:
    exe = shutil.which("tlparse") or str(pathlib.Path(sys.executable).with_name("tlparse"))
    t0 = time.perf_counter()
    subprocess.run([exe, str(log), "--no-browser", "--overwrite", "-o", str(out)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--log", help="an existing big log (skip making one)")
    ap.add_argument("--keep", help="make the log in this directory and keep it")
    ap.add_argument("--before", help="a directory holding another checkout's fxviz/ to time beside")
    args = ap.parse_args()
    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="fxviz_biglog_"))
    log = pathlib.Path(args.log) if args.log else make_big_log(work, args.mb)
    size = log.stat().st_size / 1e6
    before = os.getloadavg()
    fx: list[tuple[float, float, int]] = []
    old: list[tuple[float, float, int]] = []
    tl: list[float] = []
    for r in range(args.rounds):
        steps = [lambda: fx.append(time_fxviz(log)), lambda: tl.append(time_tlparse(log, work / "tl_out"))]
        if args.before:
            steps.append(lambda: old.append(time_fxviz(log, pathlib.Path(args.before))))
        for step in steps if r % 2 == 0 else reversed(steps):
            step()
    after = os.getloadavg()
    whole = statistics.median(f[0] for f in fx)
    first = statistics.median(f[1] for f in fx)
    tlp = statistics.median(tl)
    print(f"log {log} {size:.1f} MB, {fx[0][2]} table rows; load before {before}, after {after}; "
          f"{args.rounds} rounds interleaved")
    print("| command | median s | fastest s | ratio to tlparse (median) |\n|---|---|---|---|")
    print(f"| `fxviz logs BIG` (whole) | {whole:.2f} | {min(f[0] for f in fx):.2f} | {whole / tlp:.2f}x |")
    print(f"| `fxviz logs BIG` (first row) | {first:.2f} | {min(f[1] for f in fx):.2f} | {first / tlp:.2f}x |")
    print(f"| `tlparse BIG --no-browser -o OUT` | {tlp:.2f} | {min(tl):.2f} | 1.00x |")
    if old:
        o = statistics.median(f[0] for f in old)
        print(f"| before: `fxviz logs BIG` (whole) | {o:.2f} | {min(f[0] for f in old):.2f} | {o / tlp:.2f}x |")
    if not args.keep and not args.log:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
