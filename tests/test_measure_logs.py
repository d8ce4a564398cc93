"""A log has no model to measure: ``--measure`` with ``--logs`` reads what the log's inductor forward
(post-grad graph and output code) says of the copies it returns for the backward; checked against the
test's own hook count of the same real step (``tests/test_measure.independent_count``), and refused in
one line where the log has no inductor records."""

from __future__ import annotations

import pytest
import torch

import fxviz
from fxviz.core.units import format_bytes
from fxviz.sources.log.layout import read_logged_layout
from fxviz.sources.log.reader import log_files

from .logs_util import make_log
from .test_cli_errors import assert_one_line_error, run_main
from .test_measure import convbn, independent_count

STEPS = """
import os
os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"  # a cache hit logs neither graph nor output code
os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
import torch
from tests.test_measure import convbn
model, (x,) = convbn()
torch.compile(model, backend="inductor")(x).sum().backward()
lin = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
torch.compile(lin, backend="aot_eager")(torch.randn(2, 4)).sum().backward()
"""


@pytest.fixture(scope="module")
def steps_log(tmp_path_factory):
    """A real run: the conv net under inductor (compile 0/0), a small MLP under aot_eager (1/0)."""
    return make_log(STEPS, tmp_path_factory.mktemp("measure") / "trace")


def test_the_logs_copies_are_the_real_steps(steps_log):
    found = read_logged_layout(log_files(steps_log)[0], "0/0")
    assert found is not None and found.copies
    # the same step, run by the test with saved-tensor hooks: the storages holding a parameter's or
    # the input's values in another storage are the copies, byte for byte
    model, inputs = convbn()
    count = independent_count(model, inputs, "inductor")
    sources = [*count["params"].values(), inputs[0]]
    copied = sorted(t.untyped_storage().nbytes() for t in count["tensors"]
                    if any(t.shape == s.shape and torch.equal(t, s.detach()) for s in sources))
    assert sorted(c.bytes for c in found.copies) == copied
    assert {c.layout for c in found.copies} == {"channels_last"}
    # each copy names the graph input it copies: the log trace's parameter or input of that shape
    tr = fxviz.load_logs(steps_log).trace(compile_id="0/0")
    named = {tr.graph.info[c.value].qualname for c in found.copies}
    assert {"features.0.weight", "features.3.weight"} <= named


def test_cli_measure_with_logs(steps_log, capsys):
    code, out, err = run_main(["table", "--logs", str(steps_log), "--graph", "0/0", "--measure"], capsys)
    assert code == 0, err
    found = read_logged_layout(log_files(steps_log)[0], "0/0")
    assert found is not None
    assert "a log has no model" in out and "`features.0.weight`" in out
    assert format_bytes(found.copy_bytes) in out
    code, _, err = run_main(["table", "--logs", str(steps_log), "--graph", "1/0", "--measure"], capsys)
    assert_one_line_error(code, err, "--measure", "no model")
    code, _, err = run_main(["report", "--logs", str(steps_log), "--measure"], capsys)
    assert_one_line_error(code, err, "--measure", "no model")


def test_returns_of_another_length_are_not_called_an_agreement(steps_log, monkeypatch):
    """Where the output code returns another number of values than the post-grad graph, nothing is
    paired, and the text says so instead of "agree on all N forward outputs"."""
    from fxviz.sources.log import layout as logged_layout

    seen = {}
    real = logged_layout.layout_copies

    def short_code(post_grad, code):
        seen["real"] = real(post_grad, code)
        lines = code.splitlines()
        i = max(k for k, ln in enumerate(lines) if ln.strip().startswith("return ("))
        entries = logged_layout._returned(lines[i])  # top-level entries: reinterpret_tensor(buf7, (8, ), ...)
        lines[i] = lines[i][:lines[i].index("return (")] + "return (" + ", ".join(entries[:-1]) + ", )"
        return real(post_grad, "\n".join(lines))

    monkeypatch.setattr(logged_layout, "layout_copies", short_code)
    found = read_logged_layout(log_files(steps_log)[0], "0/0")
    assert found is not None and not found.copies and seen["real"].copies
    assert found.returned == (seen["real"].outputs, seen["real"].outputs - 1)
    assert "cannot pair" in found.text() and "agree" not in found.text()


def test_replaying_a_logs_partitions_is_refused_in_one_line(steps_log):
    """``replay(strategies)`` runs partitions on the capture's tensors; a log holds none (it read as an
    embedding's "Expected a proper Tensor but got None" in the table's caption)."""
    tr = fxviz.load_logs(steps_log).trace(compile_id="1/0")
    with pytest.raises(fxviz.FxvizError, match="real tensors") as info:
        tr.replay(["logged", "min_cut"])
    assert "\n" not in str(info.value) and "log" in info.value.hint
