"""Start-up of ``import fxviz`` and of the CLI's cheap paths against ``import torch`` (issue 26).

Each command runs in a fresh interpreter; the commands are interleaved round by round (torch, fxviz,
the CLI paths, torch, ...) so a shared machine's load falls on every side alike, and each side's
median and fastest round are kept.  ``uptime`` is read before and after.

    python -m benchmarks.startup --rounds 7 [--json out.json] [--before DIR]

``--before DIR``: also time ``import fxviz`` and ``fxviz --help`` of another checkout (``DIR`` holds its
``fxviz/``), interleaved in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent  # the checkout whose fxviz is timed (run from a temp dir)

COMMANDS: dict[str, list[str]] = {
    "import torch": [sys.executable, "-c", "import torch"],
    "import fxviz": [sys.executable, "-c", "import fxviz"],
    "import fxviz (then fxviz.trace)": [sys.executable, "-c", "import fxviz; fxviz.trace"],
    "fxviz --help": [sys.executable, "-m", "fxviz", "--help"],
    "fxviz logs /missing": [sys.executable, "-m", "fxviz", "logs", "/no/such/log"],
    "fxviz table no_such_example": [sys.executable, "-m", "fxviz", "table", "no_such_example"],
}


def load() -> str:
    return os.getloadavg().__repr__()


def measure(rounds: int, before: str | None) -> dict[str, list[float]]:
    here = {**os.environ, "PYTHONPATH": str(ROOT)}
    commands: dict[str, tuple[list[str], dict[str, str]]] = {k: (v, here) for k, v in COMMANDS.items()}
    if before:
        env = {**os.environ, "PYTHONPATH": before}
        for name in ("import fxviz", "import fxviz (then fxviz.trace)", "fxviz --help", "fxviz logs /missing"):
            commands[f"before: {name}"] = (COMMANDS[name], env)
    times: dict[str, list[float]] = {k: [] for k in commands}
    for r in range(rounds):
        order = list(commands) if r % 2 == 0 else list(reversed(commands))
        for name in order:
            argv, env = commands[name]
            t0 = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=False, env=env, cwd=tempfile.gettempdir())
            times[name].append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    ap.add_argument("--before", help="a directory holding another checkout's fxviz/ to time beside")
    args = ap.parse_args()
    before = load()
    times = measure(args.rounds, args.before)
    after = load()
    base = statistics.median(times["import torch"])
    print(f"load (1, 5, 15 min) before {before}, after {after}; {args.rounds} rounds, interleaved")
    print("| command | median s | fastest s | median / import torch |\n|---|---|---|---|")
    for name, ts in times.items():
        print(f"| `{name}` | {statistics.median(ts):.2f} | {min(ts):.2f} | {statistics.median(ts) / base:.2f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_before": before, "load_after": after, "times": times}, f, indent=1)


if __name__ == "__main__":
    main()
