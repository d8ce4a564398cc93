#!/usr/bin/env bash
# One entry point for people and CI: `bash scripts/run.sh demo` or `bash scripts/run.sh test [pytest args]`
# (the suite on 2 workers, pytest-xdist; FXVIZ_TEST_WORKERS=N for another count, 0 for one process; the long
# sweeps' full runs left out), `bash scripts/run.sh sweeps [pytest args]` (those full runs: the op database,
# the corpus, the lab; not CI); `bash scripts/run.sh compat`: fxviz on every supported torch, one venv each
# (not CI; scripts/compat.sh). All create ./.venv and install what they need (system: graphviz, the DejaVu
# fonts, chromium; Python: torch CPU build + fxviz with its notebook and dev extras).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "compat" ]; then shift; exec bash scripts/compat.sh "$@"; fi
TORCH_SPEC="${FXVIZ_TORCH:-torch==2.13.0}"
VENV="${FXVIZ_VENV:-.venv}"

need_apt=()
command -v dot >/dev/null 2>&1 || need_apt+=(graphviz)
# the drawings' font (fxviz/render/theme.py FONT): dot measures text with it, the golden report pins the sizes
[[ "$(fc-match -f '%{family}' 'DejaVu Sans' 2>/dev/null)" == *"DejaVu Sans"* ]] || need_apt+=(fonts-dejavu-core)
case "${1:-}" in test|sweeps) testing=1;; *) testing=0;; esac
if [ $testing = 1 ] && ! command -v chromium >/dev/null 2>&1; then need_apt+=(chromium); fi
# tests/test_inductor.py runs a real torch.compile (inductor, CPU) step: it compiles C++ kernels
if [ $testing = 1 ] && ! command -v g++ >/dev/null 2>&1; then need_apt+=(g++); fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing ${need_apt[*]} with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "!! please install: ${need_apt[*]} (Debian/Ubuntu: apt-get install ${need_apt[*]}; conda: environment.yml)" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV"
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
"$PY" -c "import torch" 2>/dev/null || { echo "== installing $TORCH_SPEC"; "$PY" -m pip install -q "$TORCH_SPEC"; }
"$PY" -m pip install -q -e ".[notebook,dev]"

case "${1:-demo}" in
  demo)
    shift || true
    "$VENV/bin/fxviz" demo "$@"
    ;;
  test|sweeps)
    what=$1; shift
    workers="${FXVIZ_TEST_WORKERS:-2}"
    args=()
    if [ "$workers" != 0 ]; then args+=(-n "$workers" --dist loadscope); fi
    if [ "$what" = test ]; then args+=(-m "not sweep"); else args+=(-m sweep); fi
    set +e
    "$PY" -m pytest "${args[@]}" "$@"
    rc=$?
    if [ $rc -eq 5 ]; then echo "!! pytest collected no tests: failing" >&2; exit 1; fi
    exit $rc
    ;;
  *)
    echo "usage: bash scripts/run.sh demo|test|sweeps [args] | compat" >&2; exit 2;;
esac
