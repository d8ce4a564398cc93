#!/usr/bin/env bash
# The compatibility run (issue 27): `bash scripts/run.sh compat` (not part of CI: about 15 minutes of
# installs per torch minor here). For each supported torch minor (the newest patch the package index has),
# one fresh venv: torch (the CPU build where the index has one, else the CUDA build, which runs on CPU;
# --no-cache-dir, multi-GB), fxviz's dependencies, then the smoke subset (tests/test_compat.py, marked
# `compat`) with fxviz from this tree; the venv is deleted right after its run. The next version installs
# while the current one is tested (one install and one test run at a time). docs/COMPAT.md is rewritten
# from every result so far after each version (scripts/compat_matrix.py).
#
#   FXVIZ_COMPAT_VERSIONS  the torch versions (default below: `pip index versions torch`, newest patch per minor)
#   FXVIZ_COMPAT_DIR       where the venvs and the per-version results go (default /tmp/fxviz-compat)
#   FXVIZ_COMPAT_KEEP      versions whose venv is kept after its run (e.g. "2.14.1" to debug on it)
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
VERSIONS=(${FXVIZ_COMPAT_VERSIONS:-2.15.0 2.14.1 2.9.1 2.10.0 2.11.0 2.12.1 2.13.0})
WORK="${FXVIZ_COMPAT_DIR:-/tmp/fxviz-compat}"
KEEP=" ${FXVIZ_COMPAT_KEEP:-} "
RESULTS="$WORK/results"
mkdir -p "$RESULTS"
# fxviz's runtime dependencies and what the smoke tests import (the explorer: anywidget, ipywidgets)
DEPS=(pandas graphviz tqdm jinja2 scipy pytest expecttest anywidget ipywidgets)

venv_of() { echo "$WORK/venv-$1"; }

has_torch() {  # the venv exists and holds exactly torch $2
  [ -x "$1/bin/python" ] && [ "$("$1/bin/python" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null)" = "$2" ]
}

install() {  # install torch $1 and the dependencies into its venv; the log says what pip said
  local v="$1" venv log spec
  venv="$(venv_of "$v")"; log="$RESULTS/torch-$v.install.log"
  if has_torch "$venv" "$v"; then
    "$venv/bin/python" -m pip install -q "${DEPS[@]}" >>"$log" 2>&1 && return 0
  fi
  rm -rf "$venv"
  python3 -m venv "$venv" || return 1
  spec="torch==$v"
  # the CPU build where the index has one (pip prints e.g. "2.13.0+cpu" among the versions)
  if python3 -m pip index versions torch 2>/dev/null | grep -q "\b$v+cpu\b"; then spec="torch==$v+cpu"; fi
  echo "== $(date +%T) installing $spec into $venv" | tee -a "$log" >&2
  "$venv/bin/python" -m pip install -q --no-cache-dir "$spec" >>"$log" 2>&1 || return 1
  "$venv/bin/python" -m pip install -q "${DEPS[@]}" >>"$log" 2>&1 || return 1
  has_torch "$venv" "$v"
}

smoke() {  # run the compat tests on torch $1; junit XML for the matrix
  local v="$1" venv
  venv="$(venv_of "$v")"
  echo "== $(date +%T) torch $v: tests/test_compat.py"
  ( cd "$ROOT" && PYTHONPATH="$ROOT" OMP_NUM_THREADS=1 FXVIZ_TEST_ARTIFACTS="$WORK/artifacts-$v" \
      timeout 3600 "$venv/bin/python" -m pytest tests/test_compat.py -m compat -q -p no:cacheprovider \
      -W ignore::DeprecationWarning -o junit_family=legacy --junitxml="$RESULTS/torch-$v.xml" ) >"$RESULTS/torch-$v.log" 2>&1
  tail -3 "$RESULTS/torch-$v.log"
}

pending=""
start_install() {  # $1 in the background; its status lands in $RESULTS/torch-$1.installed
  local v="$1"
  rm -f "$RESULTS/torch-$v.installed" "$RESULTS/torch-$v.install.log"
  ( if install "$v"; then echo ok; else echo failed; fi >"$RESULTS/torch-$v.installed" ) &
  pending=$!
}

start_install "${VERSIONS[0]}"
for i in "${!VERSIONS[@]}"; do
  v="${VERSIONS[$i]}"
  wait "$pending"
  next="${VERSIONS[$((i + 1))]:-}"
  [ -n "$next" ] && start_install "$next"
  if [ "$(tail -n 1 "$RESULTS/torch-$v.installed" 2>/dev/null)" = ok ]; then
    rm -f "$RESULTS/torch-$v.xml"
    smoke "$v"
  else
    echo "!! torch $v did not install: $RESULTS/torch-$v.install.log"
  fi
  [[ "$KEEP" == *" $v "* ]] || rm -rf "$(venv_of "$v")" "$WORK/artifacts-$v"
  python3 scripts/compat_matrix.py "$RESULTS" docs/COMPAT.md
done
echo "== $(date +%T) done: docs/COMPAT.md"
