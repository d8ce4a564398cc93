"""The benchmark harness runs end to end on the tiniest model (no timing assertions: timings
belong in benchmarks/RESULTS.md, not in a test on a shared machine)."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks" / "bench.py"


@pytest.mark.slow
def test_bench_quick_on_mlp(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--models", "mlp", "--timeout", "300",
         "--json", str(out), "--out-dir", str(tmp_path / "artifacts")],
        capture_output=True, text=True, timeout=540, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-2000:]
    header, row = proc.stdout.splitlines()[:2]
    assert header.split()[:3] == ["model", "joint", "nodes"]
    assert row.split()[0] == "mlp"
    for word in ("failed", "error", "timeout"):
        assert word not in row, proc.stdout

    data = json.loads(out.read_text())
    assert data["machine"]["nproc"] and data["machine"]["torch"]
    assert not data["machine"]["warmup_errors"], data["machine"]["warmup_errors"]
    entry = data["results"]["mlp"]
    fx, th, views = entry["pair"]["fxviz"], entry["pair"]["torch"], entry["fxviz"]
    for res in (fx, th, views):
        assert not res.get("errors"), res.get("errors")
    # the torch-alone side captured the very graph fxviz shows (same route, same node count)
    assert fx["joint_nodes"] == th["joint_nodes"] > 10
    for stage in ("trace", "default", "min_cut"):
        assert fx["stages"][stage]["wall"] > 0 and th["stages"][stage]["wall"] > 0
    assert fx["stages"]["memory"]["wall"] > 0
    # every view column is either measured or says why not
    for stage, value in views["stages"].items():
        assert isinstance(value, dict) or value.startswith(("n/a (", "refused", "skipped")), (stage, value)
    # what the benchmark drew and wrote exists and is what it claims to be
    if isinstance(views["stages"].get("draw_collapsed"), dict):
        assert (tmp_path / "artifacts" / "mlp-collapsed.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    if isinstance(views["stages"].get("report"), dict):
        assert "<html" in (tmp_path / "artifacts" / "mlp-report.html").read_text()[:2000].lower()
