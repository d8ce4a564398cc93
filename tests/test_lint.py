"""Types and lint are checked, as part of the suite: ``mypy`` (configured in pyproject.toml) and
``ruff check`` over the package, the tests and the benchmarks."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mypy_passes():
    pytest.importorskip("mypy", reason="mypy is in the dev extras")
    result = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, timeout=900,
                            check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_ruff_passes():
    pytest.importorskip("ruff", reason="ruff is in the dev extras")
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "fxviz", "tests", "benchmarks"], cwd=REPO,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
