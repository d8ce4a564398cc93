#!/usr/bin/env python3
"""Strip outputs, execution counts and run metadata from the teaching notebooks.

The notebooks are committed without outputs: the test suite executes them (tests/test_notebooks.py),
so outputs in git would only go stale, bloat diffs with SVG, and hide whether a notebook still runs.

    python scripts/strip_notebooks.py            # strip notebooks/*.ipynb in place
    python scripts/strip_notebooks.py --check    # exit 1 and name the files that still hold outputs
    python scripts/strip_notebooks.py a.ipynb    # only these files

Standard library only, so it runs before anything is installed (e.g. as a pre-commit hook).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

__all__ = ["strip", "problems", "main"]

ROOT = pathlib.Path(__file__).resolve().parent.parent
# notebook-level metadata worth keeping; everything else (widget state, timings) is run debris
KEEP_METADATA = ("kernelspec", "language_info")


def strip(nb: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``nb`` with no outputs, no execution counts and no per-run metadata."""
    nb = json.loads(json.dumps(nb))
    nb["metadata"] = {k: v for k, v in nb.get("metadata", {}).items() if k in KEEP_METADATA}
    for cell in nb.get("cells", []):
        cell["metadata"] = {k: v for k, v in cell.get("metadata", {}).items() if k in ("tags",)}
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
    return nb


def problems(nb: dict[str, Any]) -> list[str]:
    """What ``strip`` would remove, in words (empty when the notebook is clean)."""
    found = []
    extra = sorted(set(nb.get("metadata", {})) - set(KEEP_METADATA))
    if extra:
        found.append(f"notebook metadata {extra}")
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") == "code":
            if cell.get("outputs"):
                found.append(f"cell {i}: {len(cell['outputs'])} output(s)")
            if cell.get("execution_count") is not None:
                found.append(f"cell {i}: execution_count {cell['execution_count']}")
        extra = sorted(set(cell.get("metadata", {})) - {"tags"})
        if extra:
            found.append(f"cell {i}: metadata {extra}")
    return found


def _dump(nb: dict[str, Any]) -> str:
    # nbformat's own layout (indent 1, keys sorted, trailing newline) keeps diffs small
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=pathlib.Path, help="notebooks (default: notebooks/*.ipynb)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if any notebook holds outputs")
    args = ap.parse_args(argv)
    paths = args.paths or sorted((ROOT / "notebooks").glob("*.ipynb"))
    dirty = 0
    for path in paths:
        text = path.read_text(encoding="utf-8")
        nb = json.loads(text)
        if args.check:
            found = problems(nb)
            if found:
                dirty += 1
                print(f"{path}: not stripped: {'; '.join(found[:5])}" + (" ..." if len(found) > 5 else ""))
        else:
            clean = _dump(strip(nb))
            if clean != text:
                path.write_text(clean, encoding="utf-8")
                print(f"stripped {path}")
    if args.check and dirty:
        print(f"run: python scripts/strip_notebooks.py  ({dirty} notebook(s) to strip)")
    return 1 if dirty else 0


if __name__ == "__main__":
    sys.exit(main())
