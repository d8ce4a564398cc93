#!/usr/bin/env bash
# The compiled step's memory on CUDA: fxviz's predicted peaks (inductor's code, simulated) against the real
# torch.compile step's (torch.cuda.max_memory_allocated per phase), on the example models and HF models
# called with keywords, plus a real CUDA TORCH_TRACE log read back (kept under OUT/cuda_log as a test fixture).
#
#   scripts/gpu_check.sh [OUT_DIR]        (default: $OUT, else ./gpu-check-out)
#
# Writes OUT_DIR/gpu_check.jsonl (one record per check) and OUT_DIR/gpu_check.md (a table), and exits 1 when a
# prediction misses by more than 5%, 2 when there is no CUDA device (nothing was checked).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${1:-${OUT:-$root/gpu-check-out}}"
mkdir -p "$out"
py="${PYTHON:-python}"
export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
export TORCHINDUCTOR_AUTOGRAD_CACHE=0 TORCHINDUCTOR_FX_GRAPH_CACHE=0 TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO=0
exec "$py" "$root/scripts/gpu_check.py" "$out"
