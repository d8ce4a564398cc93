"""Advice on logs of real runs (issue 34): ``fxviz advise --logs`` names the graph it advises on, takes
``--graph``/``--rank`` as the other log commands do, and says plainly that it covers that graph alone
when the run's step has others (a graph break).  Logs are written by real ``torch.compile`` runs here."""

from __future__ import annotations

import pytest

import fxviz
from fxviz.cli import main

from .advice_log_models import SCRIPT
from .logs_util import make_log


@pytest.fixture(scope="module")
def break_log(tmp_path_factory):
    return make_log(SCRIPT, tmp_path_factory.mktemp("advbrk") / "trace", "break")


def test_advise_on_a_log_names_its_graph_and_covers_it_alone(break_log, capsys):
    run = fxviz.load_logs(break_log)
    ids = [str(c) for c in run.graphs[run.graphs["backward"].astype(bool)]["compile_id"]]
    assert len(ids) == 2  # the graph break: two graphs with a backward in one step
    for args, cid in (([], ids[0]), (["--graph", ids[1]], ids[1]), (["--graph", ids[1], "--rank", "0"], ids[1])):
        assert main(["advise", "--logs", str(break_log), "--saved", "50%", *args]) == 0
        out = capsys.readouterr().out
        other = ids[1 - ids.index(cid)]
        assert f"compile {cid}" in out.splitlines()[0]  # which graph, first
        assert f"advice on graph {cid} of rank 0 only" in out and other in out.split("advice on graph")[1]
        # the table is the Python API's advice of that very graph, which says so in its notes
        advice = run.trace(compile_id=cid).advise(saved="50%")
        assert advice.text() in out
        assert any(f"compile {cid}" in n and "covers that graph alone" in n for n in advice.notes)
        logged = int(run.trace(compile_id=cid).memory_table(["logged"]).iloc[0]["saved_activation_bytes"])
        assert advice.plain.saved_bytes == logged > 0  # the plain step is what the run saved
    assert main(["advise", "--logs", str(break_log), "--saved", "50%", "--graph", "9/0"]) == 2
    assert "9/0" in capsys.readouterr().err
    assert main(["advise", "--logs", str(break_log), "--saved", "50%", "--rank", "3"]) == 2
    assert "rank" in capsys.readouterr().err
