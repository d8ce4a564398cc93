"""Golden ``report_data``: everything one report holds for a small trace, pinned as JSON, so a
refactor of the payloads (``fxviz/payloads/``) that changes what a page receives fails here.
``FXVIZ_UPDATE_GOLDEN=1`` rewrites the files from the current code (as the golden DOT files of
``test_golden.py``); read the diff before committing it.

Only what varies from run to run is normalised: the time the report was made (``generated``).
Each drawing's SVG is written as its SHA-256 and length (the drawings themselves are pinned byte
for byte by the golden DOT files), so the JSON stays small enough to read in a diff."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

import fxviz
from fxviz.examples import get_example
from fxviz.payloads.report import report_data

from .test_golden import _summed, check_golden


@pytest.fixture(scope="module")
def chain():
    model, inputs = get_example("pointwise_chain", batch=4, features=8, depth=2)
    return fxviz.trace(_summed(model), *inputs)


def _normal(value: Any) -> Any:
    """``value`` with the run-dependent parts replaced, and every SVG string by its digest."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "generated":
                v = "<generated>"
            elif k == "svg" and isinstance(v, str) and v:
                v = f"sha256:{hashlib.sha256(v.encode()).hexdigest()[:16]} ({len(v)} chars)"
            out[k] = _normal(v)
        return out
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _check(name: str, data: dict[str, Any]) -> None:
    text = json.dumps(_normal(data), indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    check_golden(f"{name}.json", text, f"report_data of {name}")


def test_report_data_golden(chain):
    """Two strategies, every view, no budget: every payload of the page (statuses, drawings, the index,
    node records, the memory table, the doctor, saved tensors, the timeline)."""
    _check("report_chain", report_data(chain, strategies=("default", "min_cut"), budget=None))


def test_report_data_left_out_golden(chain):
    """A budget of 0 s: the first strategy and the opening view only; every other strategy and view
    is left out by the budget, with what to do (the same on every run: any time spent passes 0 s)."""
    _check("report_chain_budget0", report_data(chain, strategies=("default", "min_cut"), views=("joint", "backward"),
                                               budget=0))
