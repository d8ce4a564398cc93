"""The teaching notebooks: committed without outputs, and each runs top to bottom in a real Jupyter
kernel (this venv's Python) without an error, anything written to stderr, or a figure that shows
only as ``<Figure size ...>`` text.

The executed copies, their images and their run times land in ``test-artifacts/notebooks/`` so a
person can look at what a reader would see.
"""

from __future__ import annotations

import base64
import json
import pathlib
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # imported where used: nbformat loads jsonschema's format checkers (seconds of the
    import nbformat  # whole suite's collection, for the few tests here that read a notebook)

ROOT = pathlib.Path(__file__).parent.parent
NOTEBOOK_DIR = ROOT / "notebooks"
NOTEBOOKS = ["00_partitioning_by_hand.ipynb", "01_partitioning_explained.ipynb", "02_what_torch_compile_runs.ipynb",
             "03_memory_budget.ipynb", "04_checkpointing.ipynb", "05_missing_gradients.ipynb"]
KERNEL = "fxviz-test-venv"
CELL_TIMEOUT = 300  # seconds; each notebook takes well under a minute on 2 idle cores


def _load(name: str) -> nbformat.NotebookNode:
    import nbformat

    return nbformat.read(NOTEBOOK_DIR / name, as_version=4)


def test_every_notebook_is_listed():
    assert sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb")) == sorted(NOTEBOOKS)


def test_notebooks_are_committed_stripped():
    """Outputs belong to runs, not to git: ``python scripts/strip_notebooks.py`` strips them."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "strip_notebooks.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_strip_script_removes_outputs(tmp_path):
    """The --check above can only be trusted if the script does notice outputs."""
    import nbformat

    nb = _load(NOTEBOOKS[0])
    code = next(c for c in nb.cells if c.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
    code.execution_count = 3
    nb.metadata["widgets"] = {"state": {}}
    path = tmp_path / "dirty.ipynb"
    nbformat.write(nb, path)
    script = [sys.executable, str(ROOT / "scripts" / "strip_notebooks.py")]
    check = subprocess.run(script + ["--check", str(path)], capture_output=True, text=True)
    assert check.returncode == 1 and "output" in check.stdout and "widgets" in check.stdout
    subprocess.run(script + [str(path)], check=True, capture_output=True)
    assert subprocess.run(script + ["--check", str(path)], capture_output=True).returncode == 0
    clean = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in clean.cells if c.cell_type == "code")
    assert [c.source for c in clean.cells] == [c.source for c in nb.cells]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_says_who_it_is_for_and_what_next(name):
    cells = _load(name).cells
    assert cells[0].cell_type == "markdown" and cells[-1].cell_type == "markdown"
    first = next(line for line in cells[0].source.splitlines() if line.strip() and not line.startswith("#"))
    assert "is for" in first, first
    assert "what to try next" in cells[-1].source.lower()


@pytest.fixture(scope="module")
def kernel_dirs(tmp_path_factory) -> pathlib.Path:
    """A kernelspec that starts *this* interpreter, so the notebooks run against this checkout's
    venv whatever ``python3`` kernel the machine or the user has registered."""
    root = tmp_path_factory.mktemp("kernels")
    spec = root / KERNEL
    spec.mkdir()
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "fxviz tests (venv)",
        "language": "python",
    }))
    return root


def _figure_without_image(output: nbformat.NotebookNode) -> bool:
    """A figure whose only display is ``<Figure size ...>``: the reader sees no plot (a pyplot-free
    ``Figure`` gets an image only once the inline backend is active)."""
    data = output.get("data", {})
    text = data.get("text/plain", "")
    return text.startswith("<Figure size") and not any(k.startswith("image/") for k in data)


def _save_images(nb: nbformat.NotebookNode, stem: str, out: pathlib.Path) -> list[pathlib.Path]:
    saved = []
    for i, cell in enumerate(nb.cells):
        for j, o in enumerate(cell.get("outputs", [])):
            data = o.get("data", {})
            if "image/png" in data:
                p = out / f"{stem}-cell{i:02d}-{j}.png"
                p.write_bytes(base64.b64decode(data["image/png"]))
                saved.append(p)
            if "image/svg+xml" in data:
                p = out / f"{stem}-cell{i:02d}-{j}.svg"
                svg = data["image/svg+xml"]
                p.write_text(svg if isinstance(svg, str) else "".join(svg))
                saved.append(p)
    return saved


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_top_to_bottom(name, kernel_dirs, artifacts):
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient

    nb = _load(name)
    n_cells = len(nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.prefix)"))
    km = KernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernel_dirs)]))
    client = NotebookClient(nb, km=km, timeout=CELL_TIMEOUT, allow_errors=True,
                            resources={"metadata": {"path": str(NOTEBOOK_DIR)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start

    probe = nb.cells.pop()
    out = artifacts / "notebooks"
    out.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out / name)
    _save_images(nb, pathlib.Path(name).stem, out)
    timings = out / "timings.json"
    times = json.loads(timings.read_text()) if timings.exists() else {}
    times[name] = round(seconds, 1)
    timings.write_text(json.dumps(times, indent=1, sort_keys=True))

    kernel_prefix = "".join(o.get("text", "") for o in probe.outputs).strip()
    assert kernel_prefix == sys.prefix, f"the notebook ran in {kernel_prefix!r}, not in this venv ({sys.prefix})"
    assert len(nb.cells) == n_cells
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        assert cell.execution_count is not None, f"cell {i} did not run"
        for o in cell.outputs:
            if o.output_type == "error":
                problems.append(f"cell {i}: {o.ename}: {o.evalue}")
            elif o.output_type == "stream" and o.name == "stderr":
                problems.append(f"cell {i} wrote to stderr: {o.text[:500]}")
            elif _figure_without_image(o):
                problems.append(f"cell {i} shows a matplotlib figure as text only: {o.data['text/plain']!r}")
    more = [f"... and {len(problems) - 5} more (often follow-ups of the first)"] if len(problems) > 5 else []
    shown = problems[:5] + more
    assert not problems, f"{name} (executed copy: {out / name}):\n" + "\n".join(shown)
