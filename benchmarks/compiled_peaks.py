"""What the compiled step's peaks cost: inductor's lowering of the step's partition (fxviz stops at the
wrapper code, compiling no kernel), probing the extern kernels, simulating the code, on ``mini_gpt`` of
a given depth, in a fresh process (the lowering's one-time warm-up, the vector-ISA check, included).

    python -m benchmarks.compiled_peaks 6 60     # layers; one line of JSON each, results in RESULTS.md

Figures: wall and CPU seconds of ``fxviz.trace`` (for scale), of the first ``memory_table()`` (the step's
row lowered), of a second ``memory_table()`` (cached), of ``memory_table(compiled=True)`` (every offered
row with graphs lowered), and of the unfused walk alone (``unfused=True`` timeline).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any


def _timed(fn: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, round(time.perf_counter() - wall, 2), round(time.process_time() - cpu, 2)


def one(layers: int) -> dict[str, Any]:
    import fxviz

    model, inputs = fxviz.examples.mini_gpt(n_layer=layers)
    tr, trace_wall, trace_cpu = _timed(lambda: fxviz.trace(model, *inputs))
    _, unfused_wall, unfused_cpu = _timed(lambda: tr.memory_timeline(unfused=True))
    table, first_wall, first_cpu = _timed(tr.memory_table)
    _, again_wall, _ = _timed(tr.memory_table)
    _, all_wall, all_cpu = _timed(lambda: tr.memory_table(compiled=True))
    compiled = tr.memory_table(compiled=True)
    lowered = compiled["forward_peak_bytes"].notna().sum()
    row = table.set_index("strategy").loc[tr.default_strategy.name]
    return {"layers": layers, "nodes": len(tr.joint.graph.nodes), "trace_wall": trace_wall, "trace_cpu": trace_cpu,
            "unfused_timeline_wall": unfused_wall, "unfused_timeline_cpu": unfused_cpu,
            "first_table_wall": first_wall, "first_table_cpu": first_cpu, "cached_table_wall": again_wall,
            "every_row_wall": all_wall, "every_row_cpu": all_cpu, "rows_lowered": int(lowered),
            "forward_peak": int(row["forward_peak_bytes"]), "backward_peak": int(row["backward_peak_bytes"]),
            "unfused_forward_peak": int(row["unfused_forward_peak_bytes"]),
            "unfused_backward_peak": int(row["unfused_backward_peak_bytes"]),
            "load": round(os.getloadavg()[0], 1)}


def main(argv: list[str]) -> None:
    if argv and argv[0] == "--one":
        print("RESULT " + json.dumps(one(int(argv[1]))), flush=True)
        return
    for layers in argv or ["6", "60"]:
        done = subprocess.run([sys.executable, "-m", "benchmarks.compiled_peaks", "--one", layers],
                              capture_output=True, text=True, check=False)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        print(lines[-1][len("RESULT "):] if lines else json.dumps({"layers": layers, "error": done.stderr[-2000:]}),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
