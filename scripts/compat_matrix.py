"""Write docs/COMPAT.md from the compatibility run's results (scripts/compat.sh): one row per torch
version, one column per check of tests/test_compat.py (the test function), each cell the count of its
cases that passed; then every failure in pytest's own words.

    python scripts/compat_matrix.py RESULTS_DIR docs/COMPAT.md
"""

from __future__ import annotations

import datetime
import pathlib
import re
import sys
import xml.etree.ElementTree as ET

CHECKS = ["import", "trace", "strategies", "table", "doctor", "draw", "report", "explorer", "log", "opinfo"]
WHAT = {
    "import": "import fxviz: this torch imports; one reporting 2.8.0 is refused, 2.16.0 warned, each naming the range",
    "trace": "fxviz.trace; gradients equal eager autograd's; model untouched",
    "strategies": "every offered strategy partitions; default and min-cut save what torch's partitioners save",
    "table": "memory_table: a row per strategy, no error",
    "doctor": "missing gradients equal eager autograd's; no 'None' in its words",
    "draw": "joint, forward and backward drawings (SVG)",
    "report": "fxviz.report: strict JSON data holding every node",
    "explorer": "the explorer's payloads and widget",
    "log": "a TORCH_TRACE log this torch writes (torch.compile, aot_eager): read, and min-cut agrees with fxviz.trace",
    "opinfo": "14 OpInfo ops' first samples (tests/opinfo_sweep.py), or refused where torch.compile alone captures "
              "no graph",
}

# Found by this run; each shim says its version where it lives.  Update when a run finds another.
ADAPTED = [
    "- torch 2.9: `reversed(graph.nodes)` is an iterable, not an iterator (`TypeError: '_node_list' object is "
    "not an iterator`): `fxviz/core/fx_facts.py` takes `iter()` of it.",
    "- torch 2.9: dynamo's `Source.name` is a method, not a property (`TypeError: expected string or bytes-like "
    "object, got 'method'` naming graph inputs): `fxviz/_torch/tracing.py` calls it.",
    "- older than 2.9: `import fxviz` raises one ImportError naming the supported range (`fxviz/core/supported.py`); "
    "newer than 2.15: an FxvizWarning.",
]


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _cases(xml_path: pathlib.Path) -> tuple[str, list[tuple[str, str, str, str, str]]]:
    """(timestamp, [(check, case id, outcome, message, what fxviz did)])."""
    root = ET.parse(xml_path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    stamp = suite.get("timestamp", "") if suite is not None else ""
    out = []
    for case in root.iter("testcase"):
        name = case.get("name", "")
        # a check's tests: test_<check> and test_<check>_<what> (test_trace_graph_break_..., a regression)
        check = next((c for c in CHECKS if name == f"test_{c}" or name.startswith((f"test_{c}[", f"test_{c}_"))),
                     name)
        outcome, message = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = "failed" if tag != "skipped" else "skipped"
                message = (el.get("message") or el.text or "").strip()
                break
        did = next((p.get("value", "") for p in case.iter("property") if p.get("name") == "fxviz"), "")
        out.append((check, name, outcome, message, did))
    return stamp, out


def _first_line(text: str, width: int = 300) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def main(results: pathlib.Path, target: pathlib.Path) -> None:
    versions = sorted({p.name[len("torch-"):].split(".install")[0].removesuffix(".xml").removesuffix(".installed")
                       for p in results.glob("torch-*") if p.suffix in (".xml", ".installed")}, key=_version_key)
    rows, failures, dates, refusals = [], [], [], []
    for v in versions:
        xml_path = results / f"torch-{v}.xml"
        installed = results / f"torch-{v}.installed"
        if not xml_path.exists():
            if installed.exists() and installed.read_text().strip().splitlines()[-1:] == ["failed"]:
                rows.append(f"| {v} | " + " | ".join("not installed" for _ in CHECKS) + " |")
            continue
        stamp, cases = _cases(xml_path)
        dates.append(stamp[:10])
        cells = []
        for check in CHECKS:
            mine = [c for c in cases if c[0] == check]
            passed = sum(c[2] == "passed" for c in mine)
            ran = sum(c[2] != "skipped" for c in mine)
            if not mine:
                cells.append("—")
            else:
                cells.append(("✓" if passed == ran and ran else "✗") + f" {passed}/{ran}")
        rows.append(f"| {v} | " + " | ".join(cells) + " |")
        for _check, name, outcome, message, did in cases:
            if outcome == "failed":
                failures.append(f"- **{v}** `{name}`: {_first_line(message)}")
            elif did.startswith("refused") and outcome == "passed":
                refusals.append(f"- **{v}** `{name}`: {_first_line(did, 200)}")
    today = max(dates) if dates else datetime.date.today().isoformat()
    lines = [
        "# fxviz on each torch",
        "",
        f"Written by `bash scripts/run.sh compat` (scripts/compat.sh), last run {today}, on CPU (Linux x86-64, "
        "Python 3.11). Each torch version in its own fresh venv; the checks are `tests/test_compat.py` "
        "(pytest marker `compat`), each compared with torch itself on AlexNet, mini_gpt, a graph-broken model "
        "and a checkpointed model. A cell counts the check's cases that passed.",
        "",
        "| torch | " + " | ".join(CHECKS) + " |",
        "|---|" + "---|" * len(CHECKS),
        *rows,
        "",
        "The checks:",
        "",
        *[f"- **{c}**: {WHAT[c]}" for c in CHECKS],
        "",
        "## What fxviz adapts to per torch version",
        "",
        *ADAPTED,
        "",
        "## Failures",
        "",
        *(failures or ["None."]),
        "",
        "## OpInfo samples fxviz refuses (as torch.compile alone, which captures no graph for them either)",
        "",
        *(refusals or ["None."]),
        "",
    ]
    target.write_text("\n".join(lines))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
