"""Golden CLI output: what ``fxviz table``, ``fxviz saved`` and ``fxviz logs`` print, pinned line for line,
so a refactor of the CLI (or of the text below it) that changes what a terminal shows fails here.
``FXVIZ_UPDATE_GOLDEN=1`` rewrites the files from the current code, as for the golden DOT files
(tests/test_golden.py); read the diff before committing it.

Only what varies between runs is normalised: the log's directory (a fresh temporary one, always of the
same length, so wrapping at 100 columns does not move) is written as ``LOGDIR``, the torch that wrote the
log (the one running the tests) as ``TORCH``.  The log is made here by
a real ``torch.compile`` run with ``TORCH_TRACE`` set (a graph break and a recompile: the table's notes)."""

from __future__ import annotations

import pathlib
import shutil
import tempfile

import pytest

from fxviz.frontends.cli.entry import main

from .logs_util import BREAK_AND_RECOMPILE, fresh_log
from .test_golden import check_golden


def _check(name: str, text: str) -> None:
    import torch

    check_golden(f"{name}.txt", text.replace(f"torch {torch.__version__}", "torch TORCH"), f"the output of {name}")


def _stdout(argv: list[str], capsys) -> str:
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr()
    assert out.err == "", out.err
    return out.out


@pytest.fixture(scope="module")
def break_log():
    where = pathlib.Path(tempfile.mkdtemp(prefix="fxviz"))  # the same length every run: wrapping stays put
    try:
        yield fresh_log(BREAK_AND_RECOMPILE, where / "trace")  # the script's path is in the pinned output
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_table(capsys):
    _check("cli_table_pointwise_chain", _stdout(["table", "pointwise_chain"], capsys))


def test_saved(capsys):
    _check("cli_saved_pointwise_chain", _stdout(["saved", "pointwise_chain"], capsys))


def test_logs(break_log, capsys):
    text = _stdout(["logs", str(break_log)], capsys)
    assert str(break_log.parent) in text  # the one thing that varies, normalised below
    _check("cli_logs_break_and_recompile", text.replace(str(break_log.parent), "LOGDIR"))


def test_table_of_a_log(break_log, capsys):
    """One compile of a logged run: the line saying which graph of the run this is, then its table."""
    text = _stdout(["table", "--logs", str(break_log), "--graph", "0/1"], capsys)
    _check("cli_table_break_log", text.replace(str(break_log.parent), "LOGDIR"))
