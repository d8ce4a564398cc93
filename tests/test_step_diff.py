"""``fxviz.diff`` over whole steps (issue 32, item 2): two real ``torch.compile`` runs of a model, one
plain (one graph) and one checkpointed with a graph break inside a submodule (four graphs, the
submodule's frame naming its weights ``layers.0...``).  Checked against the runs' own logs: each
step's total is what the run's backward graphs read (``Run.totals``, from the logged signatures),
fxviz's model traces of the same models give the same totals, and every name is the model's own."""

from __future__ import annotations

import contextlib
import io
import pathlib

import pytest

import fxviz
from fxviz.analysis.diff.step_pairs import PieceKey, pair_pieces, prefixes
from fxviz.api.diffing import StepDiff
from tests.logs_util import cached_log
from tests.step_models import stack

_SCRIPT = """
import torch
from tests.step_models import stack
model, (x,) = stack({split!r})
torch.compile(model, backend="aot_eager")(x).backward()
"""


@pytest.fixture(scope="module")
def runs() -> tuple[pathlib.Path, pathlib.Path]:
    """The logs of the plain and the split step (``logs_util.cached_log``)."""
    return cached_log(_SCRIPT.format(split=False)), cached_log(_SCRIPT.format(split=True))


def _logged_total(path: pathlib.Path, exact: bool = True) -> int:
    """What the run's backward graphs read, summed from their logged signatures by the index
    (``exact=False``: a value whose storage the forward does not determine, counted as its own)."""
    totals = fxviz.load_logs(path).totals()
    assert bool(totals["saved_bytes_exact"].iloc[0]) or not exact
    return int(totals["saved_activation_bytes"].iloc[0])


def test_the_runs_differ_in_their_graphs(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    plain, split = (fxviz.load_logs(p) for p in runs)
    assert len(plain.traces()) == 1
    assert len(split.traces()) > 2  # the break inside Body, and the frames dynamo resumed after it


def test_a_diff_of_two_runs_is_their_whole_steps(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    d = fxviz.diff(fxviz.load_logs(runs[0]), fxviz.load_logs(runs[1]))
    assert isinstance(d, StepDiff)
    assert d.totals == (_logged_total(runs[0]), _logged_total(runs[1]))
    assert d.totals[1] < d.totals[0]  # checkpointing saves less over the step
    summary = d.summary()
    graphs_b = len(fxviz.load_logs(runs[1]).traces())
    assert "whole step" in summary and f"graphs with a backward: A 1, B {graphs_b}" in summary
    # every graph of B is compared with A's one graph, none is left alone
    assert all(p.diff is not None for p in d.pairs if p.b is not None and p.a is not None)
    assert {p.b for p in d.pairs} == set(range(len(fxviz.load_logs(runs[1]).traces())))


def test_names_are_the_models_own_across_breaks(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    model = stack(True)[0]
    modules = dict(model.named_modules())
    d = fxviz.diff(fxviz.load_logs(runs[0]), fxviz.load_logs(runs[1]))
    named = {m for m in d.table["module"] if m is not None}
    assert named and named <= set(modules), named - set(modules)
    # B's submodule frame names its weights layers.N...; rooted, they pair with A's by name
    weights = d.table[(d.table["kind"] == "parameter") & (d.table["status"] == "both")]
    assert {m for m in weights["module"]} >= {"body.layers.0.up", "body.layers.1.up"}


def test_model_traces_give_the_runs_totals(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    a = fxviz.trace(*[stack(False)[0]], *stack(False)[1], backend="aot_eager")
    b = fxviz.trace(*[stack(True)[0]], *stack(True)[1], backend="aot_eager")
    d = fxviz.diff(a, b, "min_cut")  # what torch.compile partitions with, aot_eager included
    assert isinstance(d, StepDiff)
    # one graph: the log's figure; several: the model's step also counts the tensors crossing its breaks as
    # activations (issue 44), which a log's index, reading signatures alone, files under inputs
    assert d.totals[0] == _logged_total(runs[0]) and d.totals[1] > _logged_total(runs[1])
    by_piece = b.memory_table(["min_cut"], scope="step")
    total = by_piece[(by_piece["piece"] == "total") & (by_piece["strategy"] == "min_cut")]
    assert d.totals[1] == int(total["saved_activation_bytes"].iloc[0])
    assert int(d.by_module["bytes_a"].sum()) == d.totals[0] and int(d.by_module["bytes_b"].sum()) == d.totals[1]
    one = fxviz.diff(a, b, "min_cut", whole_step=False)  # the first graphs only, as before
    assert isinstance(one, fxviz.Diff) and one.totals[0] == d.totals[0]


def test_the_cli_compares_whole_steps(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    from fxviz.core.units import format_bytes
    from fxviz.frontends.cli.entry import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["diff", "--logs-a", str(runs[0]), "--logs-b", str(runs[1])]) == 0
    text = out.getvalue()
    assert f"A {format_bytes(_logged_total(runs[0]))}, B {format_bytes(_logged_total(runs[1]))}, change" in text


def test_the_diff_report_draws_each_pair(runs: tuple[pathlib.Path, pathlib.Path], tmp_path: pathlib.Path) -> None:
    d = fxviz.diff(fxviz.load_logs(runs[0]), fxviz.load_logs(runs[1]))
    page = fxviz.report(d, tmp_path / "diff.html").read_text()
    differing = [p for p in d.pairs if p.diff is not None and (p.diff.table["status"] != "both").any()]
    assert page.count("<svg") == len(differing) > 0
    assert "whole step" in page


def _key(i: int, **params: tuple[int, ...]) -> PieceKey:
    names = {k.replace("__", "."): v for k, v in params.items()}
    return PieceKey(i, dict(names), frozenset(n.rsplit(".", 1)[0] for n in names), None)


def test_one_rooting_rule_and_no_guess() -> None:
    a = _key(0, model__layers__0__w=(4,), model__embed__w=(3,))
    b = _key(1, layers__0__w=(4,))
    assert prefixes([a, b]) == ["", "model."]
    twice = _key(2, other__layers__0__w=(4,))
    assert prefixes([a, b, twice])[1] == ""  # model. or other.: not a guess fxviz makes
    shaped = _key(1, layers__0__w=(5,))
    assert prefixes([a, shaped]) == ["", ""]  # a name alone is not enough: the shape must agree


def test_a_graph_pairs_with_every_graph_that_holds_its_parts() -> None:
    whole = _key(0, body__a__w=(2,), body__b__w=(2,))
    first, second, loss = _key(0, body__a__w=(2,)), _key(1, body__b__w=(2,)), _key(2)
    loss_a = _key(1)
    assert pair_pieces([whole, loss_a], [first, second, loss]) == [(0, 0), (0, 1), (1, 2)]


def test_a_logged_steps_memory_table_covers_every_graph(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    run = fxviz.load_logs(runs[1])
    table = run.memory_table(strategies=["logged", "min_cut"])
    per_graph = table[table["piece"] != "total"]
    assert set(per_graph["piece"]) == set(range(len(run.traces())))
    total = table[(table["piece"] == "total") & (table["strategy"] == "logged")]
    assert int(total["saved_activation_bytes"].iloc[0]) == _logged_total(runs[1])  # the backward signatures' sum
    # aot_eager partitions with min-cut: the rebuilt graphs under min_cut save what the run saved
    cut = table[(table["piece"] == "total") & (table["strategy"] == "min_cut")]
    assert int(cut["saved_activation_bytes"].iloc[0]) == _logged_total(runs[1])


_LLAMA = """
import torch
from tests.step_models import tiny_llama
# transformers 5 with `kernels` installed wraps each attention layer's forward in the hub-kernel layer
# wrapper, which sets a context variable: inside a checkpointed decoder layer that is a side effect
# dynamo will not trace ("HOP: Unsafe side effect"), so the layer would run eagerly and its graph hold
# no checkpoint region.  The variable only picks kernels for this forward: not replaying it when the
# backward recomputes the layer is what the user wants, as torch's hint says.
torch._dynamo.config.skip_fwd_side_effects_in_bwd_under_checkpoint = True
model, ids = tiny_llama({checkpointed!r})
torch.compile(model, backend="aot_eager")(input_ids=ids, labels=ids).loss.backward()
"""


def test_a_hugging_face_checkpointed_step() -> None:
    """Hugging Face's gradient checkpointing splits a Llama's compiled step in two graphs (at the
    warning it logs when it turns ``use_cache`` off, transformers 5.x), and each checkpointed decoder
    layer runs inside a compiled graph: the diff of a plain and a checkpointed real run is the whole
    step's change, in the model's own names, with every parameter read by a graph on both sides."""
    pytest.importorskip("transformers")
    from tests.step_models import tiny_llama

    dirs = [cached_log(_LLAMA.format(checkpointed=checkpointed)) for checkpointed in (False, True)]
    plain, ckpt = (fxviz.load_logs(d) for d in dirs)
    assert len(ckpt.traces()) > len(plain.traces())  # checkpointing broke the step
    d = fxviz.diff(plain, ckpt)
    assert isinstance(d, StepDiff)
    # no decoder layer ran eagerly: B's graphs read every parameter, and each layer is a checkpoint region
    # (what A saves inside it, B's graph recomputes under the checkpoint's policy)
    assert "graphs read none of" not in d.summary(), d.summary()
    t = d.table
    recomputed = t[(t["status"] == "only A") & t["why"].str.contains("checkpoint policy", na=False)]
    assert {m.split(".")[2] for m in recomputed["module"] if m and m.startswith("model.layers.")} == {"0", "1"}
    # the checkpointed run saves RNG states (one per checkpointed layer), storages of their own
    assert d.totals == (_logged_total(dirs[0]), _logged_total(dirs[1], exact=False)) and d.totals[1] < d.totals[0]
    modules = set(dict(tiny_llama(False)[0].named_modules()))
    named = {m for m in d.table["module"] if m is not None}
    assert named and named <= modules, named - modules
    assert all(p.a is not None for p in d.pairs)  # every graph of the checkpointed step pairs with the plain one


def test_code_one_side_ran_outside_its_graphs_is_said() -> None:
    """A frame dynamo ran as plain Python (a break inside a checkpointed block) leaves parameters no
    graph of that side reads: the summary says so and the values there get that reason."""
    from fxviz.analysis.diff.step_pairs import outside_notes

    a, b = _key(0, blk__a__w=(2,), head__w=(2,)), _key(0, head__w=(2,))
    lines, why = outside_notes([a], [b])
    assert len(lines) == 1 and lines[0].startswith("B's graphs read none of 1 parameter(s) of blk.a")
    assert set(why) == {"blk.a", "blk"} and why["blk"].startswith("B ran blk outside its compiled graphs")
    assert outside_notes([a], [a]) == ([], {})
    # the root module's own parameter has no module path: the note names the model itself, not ""
    lines, _ = outside_notes([_key(0, scale=(1,), head__w=(2,))], [b])
    assert lines[0].startswith("B's graphs read none of 1 parameter(s) of the model itself (scale): "), lines


def test_a_saved_detach_is_the_value_it_aliases(runs: tuple[pathlib.Path, pathlib.Path]) -> None:
    """B's first graph ends at the break and saves ``detach(tanh)`` where A saves ``tanh``: one storage, so
    the diff pairs them (a user walk found them as "only A: B's backward does not read it" beside "only B:
    A recomputes it")."""
    import torch

    d = fxviz.diff(fxviz.load_logs(runs[0]), fxviz.load_logs(runs[1]))
    t = d.table
    aliased = t[t["why"].str.contains("a detach of it", na=False)]
    assert len(aliased) >= 1 and (aliased["status"] == "both").all()
    traces = fxviz.load_logs(runs[1]).traces()
    for _, row in aliased.iterrows():
        assert row["bytes_a"] == row["bytes_b"] > 0
        node = next(n for n in traces[int(row["graph_b"])].joint.graph.nodes if n.name == row["name_b"])
        assert node.target is torch.ops.aten.detach.default
    only_b = t[t["status"] == "only B"]
    assert not (only_b["op"] == "detach").any(), only_b
