"""What ``import fxviz`` and the CLI's cheap paths load (issue 26): dynamo, inductor and the optional
libraries load when first needed, and ``fxviz --help`` or an argument error imports no torch at all.
Each check runs in a fresh interpreter (this process has long imported everything)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

# loaded only by the work that needs them: tracing/partitioning (dynamo, inductor, sympy), tables
# (pandas), plots (matplotlib), the notebook explorer (ipywidgets, anywidget), solvers (scipy)
HEAVY = ("torch._dynamo", "torch._inductor", "torch._functorch.partitioners", "sympy", "scipy", "matplotlib",
         "jinja2", "ipywidgets", "anywidget", "pandas", "networkx")


def _loaded_after(code: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, timeout=300, env=os.environ.copy(), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m in HEAVY]


def test_import_fxviz_loads_no_heavy_module():
    assert _heavy(_loaded_after("import fxviz")) == []


def test_public_names_still_resolve_lazily():
    code = ("import fxviz, fxviz.frontends.report.page, fxviz.api.run\n"
            "assert callable(fxviz.trace) and fxviz.trace.__module__ == 'fxviz.api.tracing', fxviz.trace\n"
            "assert fxviz.Trace.__name__ == 'Trace' and fxviz.Run.__name__ == 'Run'\n"
            "from fxviz.core.example_names import NAMES\nassert tuple(fxviz.examples.EXAMPLES) == NAMES\n"
            "from fxviz import trace, load_logs, report, explore, partitioner\n"
            "assert trace is fxviz.trace\n"
            "import fxviz.api.facade, fxviz.api.tracing, fxviz.api.diffing\n"  # loading the modules hides no function
            "assert callable(fxviz.trace) and callable(fxviz.diff) and fxviz.diff.__module__ == 'fxviz.api.diffing'")
    assert "torch._dynamo" not in _loaded_after(code)  # none of these names needs dynamo to resolve


@pytest.mark.parametrize("argv", [["--help"], ["logs", "--help"], ["report", "--help"], ["table", "--help"],
                                  ["logs", "/no/such/log"], ["table", "no_such_example"],
                                  ["draw", "--logs", "/no/such/log"], ["report", "missing_file.py:factory"],
                                  ["table", "--view"]])
def test_cli_help_and_argument_errors_import_no_torch(argv):
    code = ("import sys\nfrom fxviz.frontends.cli.entry import main\n"
            f"try:\n    rc = main({argv!r})\nexcept SystemExit as e:\n    rc = e.code\n"
            "print('RC', rc, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, timeout=300, env=os.environ.copy())
    assert "RC " in out.stderr, out.stderr
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert [m for m in loaded if m == "torch" or m.startswith("torch.")] == [], argv
    if argv[-1] != "--help":
        assert "fxviz: error:" in out.stderr and "RC 0" not in out.stderr, out.stderr
