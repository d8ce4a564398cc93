"""Every CLI error is one line on stderr and a non-zero exit; ``--debug`` shows the traceback.

Most cases call ``fxviz.frontends.cli.entry.main`` in this process (fast); a few run the real ``python -m fxviz``
to check what a shell sees: the exit status and stderr of the process itself.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap

import pytest

from fxviz.frontends.cli import entry as cli
from fxviz.frontends.cli.specs import load_model_spec

ROOT = __import__("pathlib").Path(__file__).parent.parent


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    """``fxviz.frontends.cli.entry.main(argv)`` -> (exit status, stdout, stderr); argparse's exits included."""
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
    assert_one_line_error(code, err, "returned Linear, not (model, inputs)",
                          "make the factory return (model, inputs) for positional inputs, (model, {'input_ids': "
                          "ids, 'labels': ids}) for keyword inputs, or (model, args, kwargs)")


def test_factory_returning_three_values_without_keywords(capsys, spec_file):
    spec = spec_file("""
        import torch
        def make():
            return torch.nn.Linear(2, 2), torch.randn(3, 2), torch.randn(3, 2)
    """)
    code, _, err = run_main(["nodes", spec], capsys)
    assert_one_line_error(code, err, "whose third is Tensor, not a dict of keyword inputs", "(model, args, kwargs)")


class _Keyed(__import__("torch").nn.Module):
    """A model called as Hugging Face's are: ``model(x, scale=s, labels=y)`` returns its own ``.loss``."""

    def __init__(self) -> None:
        import torch

        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x, scale=None, labels=None):
        out = self.fc(x) * (1.0 if scale is None else scale)
        return {"logits": out, "loss": ((out - labels) ** 2).mean()} if labels is not None else {"logits": out}


@pytest.mark.parametrize("returns", ["{'x': x, 'labels': y, 'scale': 2.0}", "(x,), {'labels': y, 'scale': 2.0}"])
def test_factories_return_keyword_inputs(capsys, spec_file, returns):
    """Issue 47: a factory may return (model, kwargs) or (model, args, kwargs); the model is called with
    them as fxviz.trace calls it, and its own .loss is the loss, as in Python."""
    import torch

    import fxviz

    spec = spec_file(f"""
        import torch
        from tests.test_cli_errors import _Keyed
        def make():
            torch.manual_seed(0)
            x, y = torch.randn(3, 4), torch.randn(3, 4)
            return _Keyed(), {returns}
    """)
    code, out, err = run_main(["nodes", spec], capsys)
    assert code == 0, err
    assert "loss = the model's own loss (output .loss), applied outside the graph" in " ".join(out.split()), out
    loaded = load_model_spec(spec)
    assert loaded.kwargs["scale"] == 2.0 and set(loaded.kwargs) >= {"labels", "scale"}
    tr = fxviz.trace(loaded.model, *loaded.args, **loaded.kwargs)
    torch.manual_seed(0)
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    assert tr.partition().saved == fxviz.trace(_Keyed(), x, labels=y, scale=2.0).partition().saved
    code, out, err = run_main(["table", spec, "--strategies", "min_cut"], capsys)
    assert code == 0, err
    assert f"{tr.memory_table(['min_cut']).loc['min_cut', 'saved_tensors']}" in out


def test_loss_option_names_a_function_beside_the_factory(capsys, spec_file):
    spec = spec_file("""
        import torch
        from tests.test_cli_errors import _Keyed
        def make():
            return _Keyed(), {"x": torch.randn(3, 4)}
        def logits_squared(out):
            return out["logits"].pow(2).mean()
    """)
    code, out, err = run_main(["nodes", spec, "--loss", "logits_squared"], capsys)
    assert code == 0, err
    assert "loss = loss_fn(outputs), applied outside the graph" in " ".join(out.split()), out
    code, out, err = run_main(["nodes", spec], capsys)  # without it: the sum of the outputs, in the graph
    assert code == 0 and "loss = sum of every floating output" in " ".join(out.split()), err
    code, _, err = run_main(["nodes", spec, "--loss", "logit_squared"], capsys)
    assert_one_line_error(code, err, "--loss logit_squared", "has no function 'logit_squared'")
    code, _, err = run_main(["nodes", "mlp", "--loss", "logits_squared"], capsys)
    assert_one_line_error(code, err, "a built-in example has no file", "--loss package.module:NAME")


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


@pytest.mark.parametrize("command", ["draw", "report"])
def test_an_output_path_that_cannot_be_written_is_refused_before_tracing(command, capsys, tmp_path, monkeypatch):
    """``-o`` into a missing directory is refused (not created: a typo would make one silently) and so is a
    directory as the file; both before the model is traced, naming the path and the fix."""
    import fxviz.frontends.cli.files as files

    def must_not_trace(args):
        raise AssertionError("the model was traced before the output path was checked")

    monkeypatch.setattr(files, "open_trace", must_not_trace)
    missing = tmp_path / "no_such_dir" / "out.svg"
    code, _, err = run_main([command, "mlp", "-o", str(missing)], capsys)
    assert_one_line_error(code, err, str(missing.parent), "does not exist", "mkdir -p")
    assert not missing.parent.exists()
    code, _, err = run_main([command, "mlp", "-o", str(tmp_path)], capsys)
    assert_one_line_error(code, err, str(tmp_path), "is a directory")


def test_a_write_into_a_missing_directory_raises_an_output_error_that_is_an_oserror(tmp_path):
    import fxviz
    from fxviz.core.atomic import write_atomic

    with pytest.raises(fxviz.OutputError, match="does not exist") as info:
        write_atomic(tmp_path / "missing" / "r.html", "x")
    assert isinstance(info.value, OSError) and not (tmp_path / "missing").exists()
    assert write_atomic(tmp_path / "r.html", "x").read_text() == "x"


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


# --- hints: what to do, as data, spelled as options here and as calls in Python ------------------------
PYTHON_CALL = re.compile(r"\btr\.|\brun\.|\bdraw\(|\w=\.\.\.|\bpiece=")


def _do_calls() -> list[tuple[str, ast.Call]]:
    """Every ``Do(...)`` written in fxviz/, with where it is."""
    found = []
    for path in sorted((ROOT / "fxviz").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Do":
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node))
    return found


def test_every_action_fxviz_asks_for_has_words_on_the_command_line(capsys):
    """No hint falls back to Python here: each ``Do`` names a command, or options ``fxviz draw`` takes."""
    from fxviz.frontends.cli import words
    from fxviz.frontends.cli.entry import parser

    try:  # the options as the parser takes them: its usage line for 'fxviz draw'
        parser().parse_args(["draw", "--help"])
    except SystemExit:
        pass
    flags = set(re.findall(r"--[a-z-]+", capsys.readouterr().out))
    calls = _do_calls()
    assert len(calls) >= 15, calls  # the messages the regexes used to rewrite, and the draw view errors
    for where, node in calls:
        name = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
        assert name in words.COMMAND_FOR or name in words.OPTION_CALLS, (where, name)
        if name == "draw" and len(node.args) > 1:
            for pair in ast.walk(node.args[1]):
                if isinstance(pair, ast.Tuple) and len(pair.elts) == 2 and isinstance(pair.elts[0], ast.Constant):
                    key = pair.elts[0].value
                    assert key is None or f"--{key}" in flags, (where, key)


def test_an_error_names_the_option_here_and_the_call_in_python(capsys):
    import fxviz
    from fxviz.core.errors import InputError
    from fxviz.examples import get_example

    code, _, err = run_main(["draw", "mlp", "--view", "compare"], capsys)
    assert_one_line_error(code, err, "hint: call --view compare --strategy A --compare B")
    assert not PYTHON_CALL.search(err), err
    model, inputs = get_example("mlp")
    with pytest.raises(InputError, match=re.escape("call draw('compare', strategy=A, compare=B)")):
        fxviz.trace(model, *inputs).draw("compare")


def test_a_render_timeout_says_which_options_draw_less(capsys, tmp_path):
    import fxviz
    from fxviz.core.errors import RenderError
    from fxviz.examples import get_example

    code, _, err = run_main(["draw", "mlp", "--timeout", "0.000001", "-o", str(tmp_path / "m.svg")], capsys)
    assert_one_line_error(code, err, "graphviz took longer", "--group module --depth 1 collapses modules",
                          "--highlight NAME or --view forward shows less", "--timeout SECONDS")
    assert not PYTHON_CALL.search(err), err
    model, inputs = get_example("mlp")
    with pytest.raises(RenderError) as info:
        fxviz.trace(model, *inputs).draw(timeout=0.000001).svg()
    assert "tr.draw(group='module', depth=1) collapses modules" in str(info.value)
    assert "tr.draw(timeout=<seconds>)" in str(info.value)


def test_the_summary_and_the_table_caption_name_the_doctor_command(capsys):
    """A model with graph breaks: parameters used outside every graph, and the whole-step table's caption,
    point to the doctor, as ``'fxviz doctor'`` here and ``tr.doctor()`` in Python."""
    import fxviz

    spec = "tests.test_breaks:_mixtral"
    code, out, err = run_main(["nodes", spec], capsys)
    assert code == 0, err
    assert "'fxviz doctor' says which" in " ".join(out.split()) and not PYTHON_CALL.search(out), out
    code, out, err = run_main(["table", spec, "--strategies", "default"], capsys)
    assert code == 0, err
    assert "'fxviz doctor' names it" in " ".join(out.split()) and not PYTHON_CALL.search(out), out
    loaded = load_model_spec(spec)
    tr = fxviz.trace(loaded.model, *loaded.args, **loaded.kwargs)
    assert "tr.doctor() says which" in tr.summary()
    assert "(tr.doctor() names it)" in tr.memory_table(["default"], scope="step").attrs["caption"]


def test_warnings_spell_their_actions_as_options(capsys):
    from fxviz.core.errors import Do, FxvizWarning, Say
    from fxviz.frontends.cli.words import show_warning

    warning = FxvizWarning(Say("a big graph: ", Do("draw", (("group", "none"),)), " draws every node"))
    assert str(warning) == "a big graph: tr.draw(group='none') draws every node"
    show_warning(warning, FxvizWarning, "file.py", 1)
    assert capsys.readouterr().err == "fxviz: warning: a big graph: --group none draws every node\n"


def test_hints_of_the_doctor_and_of_code_in_both_spellings():
    """Two hints no small model reaches (a cut the doctor cannot place; a partition that failed): each
    ``Say`` is one text, spelled for Python as ``str`` and for the CLI by its words."""
    from fxviz.core.errors import Do, Say
    from fxviz.frontends.cli.words import cli_text

    hint = Say("compare ", Do("check_gradients"), " and report this model to fxviz")
    assert str(hint) == "compare tr.check_gradients() and report this model to fxviz"
    assert cli_text(hint) == "compare fxviz.trace(model, x).check_gradients() in Python and report this model to fxviz"
    hint = Say("check ", Do("graph.has_backward", attr=True), ", or pick another strategy")
    assert (str(hint), cli_text(hint)) == ("check tr.graph.has_backward, or pick another strategy",
                                           "check 'fxviz nodes', or pick another strategy")


# --- a model file imports the files beside it (issue 32) -----------------------------------------------
def test_a_model_file_imports_its_neighbours_and_sys_path_is_restored(capsys, tmp_path):
    (tmp_path / "fxviz_test_neighbour.py").write_text(textwrap.dedent("""
        import torch
        def build():
            return torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    """))
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch
        from fxviz_test_neighbour import build
        def make():
            import fxviz_test_neighbour  # imported again inside the factory: the folder is still there
            return fxviz_test_neighbour.build(), (torch.randn(2, 4),)
    """))
    before = list(sys.path)
    try:
        code, out, err = run_main(["nodes", f"{tmp_path / 'model.py'}:make"], capsys)
        assert code == 0, err
        assert "0.weight" in out and "2.bias" in out
        assert sys.path == before
    finally:
        sys.modules.pop("fxviz_test_neighbour", None)


def test_a_reader_that_stops_early_is_no_error():
    """``fxviz nodes mlp | head -1``: the pipe closes before fxviz has written everything; the command
    ends quietly with the shell's status for it (141), not 'internal error: BrokenPipeError'."""
    proc = subprocess.Popen([sys.executable, "-m", "fxviz", "nodes", "mlp"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader gone before fxviz writes (head after its lines, on a longer output)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=600) in (0, 141) and "Error" not in err and "error" not in err, err
