"""A real run's logs read as faithfully as a model (issue 23): a 2-block GPT with
nn.MultiheadAttention, LayerNorm and a GELU MLP, checkpointed (non-reentrant, and a selective
policy) under aot_eager and inductor, an inference-only run and a graph break inside the top-level
forward's loop.  Every log is written by this module's one subprocess (``tests/logs_gpt.py``), and
every expectation is read from the log's own text or from torch's partitioner run on the log."""

from __future__ import annotations

import os
import pathlib
import re

import pytest

import fxviz
from fxviz.capture import INFERENCE_NOTE
from fxviz.cli import main
from fxviz.logs.reader import ReadStats, read_records

from .logs_gpt import make_gpt_logs

NAMES = ("ckpt_aot", "sac_aot", "ckpt_ind", "infer", "break")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    reuse = os.environ.get("FXVIZ_DEV_GPT_LOGS")  # DEV ONLY: remove before commit
    if reuse:
        return {n: pathlib.Path(reuse) / n for n in NAMES}
    return make_gpt_logs(tmp_path_factory.mktemp("gpt"), NAMES)


_OPS = re.compile(r"torch\.ops\.aten\.[\w.]+")


def _payloads(directory, kind):
    """The payload texts of every record of ``kind``, in log order (the plain reader)."""
    out = []
    for f in sorted(pathlib.Path(directory).iterdir()):
        with open(f, "rb") as fh:
            out += [r.payload for r in read_records(fh, ReadStats(), keep=lambda r: r.kind == kind) if r.kind == kind]
    return out


def _cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- (6) an inference-only log is a forward graph, never a corrupt log ----------------------------------
def test_inference_only_log_reads_as_a_forward_graph(logs, capsys, tmp_path):
    run = fxviz.load_logs(logs["infer"])
    assert run.graphs["inference"].tolist() == [True]
    tr = run.trace()
    assert tr.graph.inference and not tr.has_backward
    assert INFERENCE_NOTE in tr.summary()
    doc = tr.doctor()
    assert doc.healthy and not doc.findings and INFERENCE_NOTE in doc.headline()
    code, out, err = _cli(capsys, "table", "--logs", logs["infer"])
    assert code == 0 and not err and out.strip().endswith(INFERENCE_NOTE) and "failed" not in out
    code, out, err = _cli(capsys, "code", "--logs", logs["infer"])
    assert code == 0 and f"forward graph ({INFERENCE_NOTE})" in out
    # the printed forward graph is the logged one: every op the log's inference graph calls is there
    logged_ops = set(_OPS.findall(_payloads(logs["infer"], "aot_inference_graph")[0]))
    assert logged_ops and logged_ops <= set(_OPS.findall(out))
    code, out, err = _cli(capsys, "doctor", "--logs", logs["infer"])
    assert code == 0 and "0 errors" in out
    code, out, err = _cli(capsys, "draw", "--logs", logs["infer"], "-o", tmp_path / "i.svg")
    assert code == 0 and (tmp_path / "i.svg").exists()
    code, out, err = _cli(capsys, "report", "--logs", logs["infer"], "-o", tmp_path / "i.html")
    assert code == 0 and INFERENCE_NOTE in (tmp_path / "i.html").read_text()


# --- (4) a log trace's default strategy is what the run saved, everywhere --------------------------------
def test_logged_is_the_default_everywhere(logs, capsys):
    tr = fxviz.load_logs(logs["ckpt_aot"]).trace()
    assert tr.default_strategy.name == "logged"
    assert tr.partition().name == "logged"
    assert tr.doctor().diagnosis.strategy == "logged"
    assert 'partition "logged' in str(tr.code())
    assert tr.draw() is tr.draw(strategy="logged")  # the joint drawing marks what the run saved
    code, out, _ = _cli(capsys, "doctor", "--logs", logs["ckpt_aot"])
    assert "partition 'logged'" in out.splitlines()[0]
    code, out, _ = _cli(capsys, "code", "--logs", logs["ckpt_aot"])
    assert '"logged' in out.splitlines()[0]
    # a traced model keeps torch's default
    import torch

    model = torch.nn.Linear(4, 2)
    assert fxviz.trace(model, torch.randn(3, 4)).default_strategy.name == "default"
