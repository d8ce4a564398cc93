"""Every CLI error is one line on stderr and a non-zero exit; ``--debug`` shows the traceback.

Most cases call ``fxviz.cli.main`` in this process (fast); a few run the real ``python -m fxviz``
to check what a shell sees: the exit status and stderr of the process itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fxviz import cli

ROOT = __import__("pathlib").Path(__file__).parent.parent


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    """``fxviz.cli.main(argv)`` -> (exit status, stdout, stderr); argparse's exits included."""
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code != 0, "an error must exit non-zero"
    lines = err.splitlines()
    assert len(lines) == 1, f"stderr must be one line, got {len(lines)}:\n{err}"
    assert lines[0].startswith("fxviz"), lines[0]
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.fixture
def spec_file(tmp_path):
    """Write a model-spec file and return 'path.py:factory' for it."""

    def write(body: str, factory: str = "make") -> str:
        path = tmp_path / "user_model.py"
        path.write_text(textwrap.dedent(body))
        return f"{path}:{factory}"

    return write


# --- model specs that name no model -----------------------------------------------------------------
def test_unknown_builtin_model(capsys):
    code, _, err = run_main(["nodes", "no_such_model"], capsys)
    assert_one_line_error(code, err, "no_such_model", "hint:")


def test_missing_model_file(capsys, tmp_path):
    code, _, err = run_main(["nodes", f"{tmp_path}/absent.py:make"], capsys)
    assert_one_line_error(code, err, "absent.py", "does not exist")


def test_module_that_does_not_import(capsys):
    code, _, err = run_main(["nodes", "no_such_package_xyz.models:make"], capsys)
    assert_one_line_error(code, err, "cannot import", "no_such_package_xyz")


def test_file_without_the_factory(capsys, spec_file):
    code, _, err = run_main(["nodes", spec_file("x = 1\n", factory="make")], capsys)
    assert_one_line_error(code, err, "no callable 'make'")


def test_file_that_raises_on_import(capsys, spec_file):
    code, _, err = run_main(["nodes", spec_file("raise ValueError('bad\\nmultiline\\nimport')\n")], capsys)
    assert_one_line_error(code, err, "cannot import", "ValueError")


def test_factory_that_raises(capsys, spec_file):
    spec = spec_file("""
        def make():
            raise RuntimeError("the factory\\nfailed")
    """)
    code, _, err = run_main(["nodes", spec], capsys)
    assert_one_line_error(code, err, "RuntimeError", "the factory failed")


def test_factory_returning_the_wrong_thing(capsys, spec_file):
    spec = spec_file("""
        import torch
        def make():
            return torch.nn.Linear(2, 2)
    """)
    code, _, err = run_main(["nodes", spec], capsys)
    assert_one_line_error(code, err, "not (model, example_inputs)")


def test_model_that_rejects_its_inputs(capsys, spec_file):
    spec = spec_file("""
        import torch
        def make():
            return torch.nn.Linear(4, 2), (torch.randn(3, 5),)
    """)
    code, _, err = run_main(["nodes", spec], capsys)
    assert_one_line_error(code, err, "shapes cannot be multiplied", "hint:")


def test_every_command_reports_a_missing_model_in_one_line(capsys):
    for name in cli.COMMANDS:
        code, _, err = run_main([name, "no_such_model"], capsys)
        assert_one_line_error(code, err, "no_such_model")


# --- argparse's own errors -----------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["nodes"], ["nodes", "mlp", "--params", "bogus"],
                                  ["nodes", "mlp", "--no-such-flag"]],
                         ids=["no-command", "unknown-command", "no-model", "bad-choice", "unknown-flag"])
def test_usage_errors_are_one_line(argv, capsys):
    code, _, err = run_main(argv, capsys)
    assert code == 2
    assert_one_line_error(code, err, "error:", "--help")


# --- internal errors and --debug ------------------------------------------------------------------------
def test_internal_error_is_one_line_and_debug_shows_the_traceback(capsys, monkeypatch):
    from fxviz import Trace

    def broken(self):
        raise ZeroDivisionError("a bug\nspanning lines")

    monkeypatch.setattr(Trace, "summary", broken)
    code, _, err = run_main(["nodes", "mlp"], capsys)
    assert code == 3
    assert_one_line_error(code, err, "internal error", "ZeroDivisionError", "--debug")
    for argv in (["--debug", "nodes", "mlp"], ["nodes", "mlp", "--debug"]):
        code, _, err = run_main(argv, capsys)
        assert code == 3 and "Traceback (most recent call last)" in err and "in broken" in err, argv
        assert err.splitlines()[-1].startswith("fxviz: internal error"), err


@pytest.mark.parametrize("argv", [["--debug", "nodes", "no_such_model"], ["nodes", "no_such_model", "--debug"]],
                         ids=["before", "after"])
def test_debug_flag_shows_the_traceback_wherever_it_is_given(argv, capsys):
    code, _, err = run_main(argv, capsys)
    assert code == 2
    assert "Traceback (most recent call last)" in err and "ModelSpecError" in err
    assert err.splitlines()[-1].startswith("fxviz: error: unknown model 'no_such_model'")


# --- the real process ----------------------------------------------------------------------------------
def _fxviz(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fxviz", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_process_exit_status_and_stderr():
    proc = _fxviz("nodes", "no_such_model")
    assert proc.returncode == 2 and proc.stdout == ""
    assert_one_line_error(proc.returncode, proc.stderr, "no_such_model")
    proc = _fxviz("--debug", "nodes", "no_such_model")
    assert proc.returncode == 2 and "Traceback" in proc.stderr


def test_process_success_writes_no_stderr():
    proc = _fxviz("nodes", "mlp")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "" and "layers.0.weight" in proc.stdout
