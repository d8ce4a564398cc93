"""tr.saved() and tr.saved().by_module(): the rows against the partition, the bytes against the memory
table and against storages counted on real tensors, the modules against the model's own, the
other-strategy columns against each Partition; on fxviz's examples, a graph-broken model and a log."""

from __future__ import annotations

import pathlib
import re

import pytest
import torch
import torch.nn as nn

import fxviz
from fxviz import examples
from fxviz.analysis.memory.saved_words import FATES, HELD_ANYWAY, KINDS, NO_MODULE, OP_WORDS, ROW_ORDER
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import FxvizError
from fxviz.core.graph_facts import saved_values

from .logs_util import MINI_GPT, make_log


def _real(value: torch.Tensor) -> torch.Tensor:
    shape = [int(s) for s in value.shape]
    if value.dtype.is_floating_point:
        return torch.randn(shape, dtype=value.dtype)
    return torch.zeros(shape, dtype=value.dtype)


def _storages_on_real_tensors(tr: fxviz.Trace, strategy: str) -> dict[str, int]:
    """Run the partition's forward graph on real tensors and count the storages of what it hands
    the backward by ``untyped_storage()``: bytes per owner, independently of fxviz's fake-tensor
    bookkeeping.  A graph input the step made itself (an earlier graph's output, eager code's at a break:
    its real tensor, from the capture's run, is none of the user's) is an activation of the step."""
    p = tr.partition(strategy)
    user = {t.untyped_storage().data_ptr() for t in torch.utils._pytree.tree_leaves(tr.capture.example_inputs)
            if isinstance(t, torch.Tensor)}
    inputs, owner_of = [], {}
    for n in p.forward.graph.nodes:
        if n.op == "placeholder":
            t = _real(n.meta["val"])
            inputs.append(t)
            joint = p.fw_to_joint.get(n.name, n.name)
            role = tr.graph.info[joint].role
            first_run = tr.graph.placeholder_values.get(joint)
            made_by_the_step = (role == "primal" and isinstance(first_run, torch.Tensor)
                                and first_run.untyped_storage().data_ptr() not in user)
            owner_of[t.untyped_storage().data_ptr()] = ("activation" if made_by_the_step
                                                        else "input" if role == "primal" else "parameter")
    with torch.no_grad():
        outputs = p.forward(*inputs)
    saved = [o for o in outputs[tr.graph.num_fwd_outputs:] if isinstance(o, torch.Tensor)]
    assert len(saved) == sum(1 for n in saved_values(p.forward, tr.graph.num_fwd_outputs)
                             if isinstance(n.meta["val"], torch.Tensor))
    sizes: dict[int, int] = {}
    for t in saved:
        sizes[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    out = {"activation": 0, "parameter": 0, "input": 0}
    for ptr, nbytes in sizes.items():
        out[owner_of.get(ptr, "activation")] += nbytes
    return out


def _check(tr: fxviz.Trace, strategy: str | None = None, model: nn.Module | None = None,
           real: bool = True) -> None:
    df = tr.saved(strategy)
    name = df.attrs["strategy"]
    p = tr.partition(name)
    # every saved value once
    assert sorted(df.index) == sorted(p.saved) and df.index.is_unique
    assert set(df["kind"]) <= set(KINDS)
    # activations first, what the step holds anyway (inputs, parameters) last (issue 47: a Qwen3's first
    # 11 rows were parameters); within a kind the biggest storage first; a value sharing a storage sits
    # after the value it names, with 0 bytes
    ranks = [ROW_ORDER.index(k) for k in df["kind"]]
    assert ranks == sorted(ranks), list(df["kind"])
    assert all(k not in HELD_ANYWAY for k in df["kind"][:(~df["kind"].isin(HELD_ANYWAY)).sum()])
    for kind in set(df["kind"]) - {"symint"}:
        firsts = df[df["shares_storage_with"].isna() & (df["kind"] == kind)]
        assert list(firsts["bytes"]) == sorted(firsts["bytes"], reverse=True), kind
    position = {n: i for i, n in enumerate(df.index)}
    for n, first in df["shares_storage_with"].dropna().items():
        assert position[first] < position[n] and df.loc[n, "bytes"] == 0 and df.loc[first, "kind"] == df.loc[n, "kind"]
    # bytes by construction equal the memory table's
    row = tr.memory_table([name], scope="graph").iloc[0]
    sums = df.groupby("kind")["bytes"].sum()
    assert sums.get("activation", 0) == row["saved_activation_bytes"]
    assert sums.get("parameter", 0) == row["saved_param_bytes"]
    assert sums.get("input", 0) == row["saved_input_bytes"]
    assert (df["kind"] != "symint").sum() == row["saved_tensors"]
    assert (df["kind"] == "symint").sum() == row["saved_symints"]
    # ... and storages counted on real tensors
    if real:
        counted = _storages_on_real_tensors(tr, name)
        assert counted == {k: int(sums.get(k, 0)) for k in ("activation", "parameter", "input")}
    # modules are the model's
    if model is not None:
        known = dict(model.named_modules())
        assert {m for m in df["module"].dropna()} <= set(known)
    # one column per strategy, the one listed first, each what that Partition does
    others = [c for c in df.columns if c not in ("kind", "module", "op", "what", "shape", "dtype", "bytes",
                                                 "shares_storage_with", "source")]
    assert others == [name] + [s.name for s in tr.offered if s.name != name]
    assert set(df[name]) <= {"saved", "offloaded"}
    for s in others:
        q = tr.partition(s)
        for n, fate in df[s].items():
            assert fate in FATES
            expected = "failed" if q.error else "saved" if n in q.saved else \
                "recomputed" if n in q.recomputed else "not needed"
            assert fate == expected, (s, n)
    # per module: the activation rows, summed
    by = tr.saved(name).by_module()
    assert by["saved_activation_bytes"].sum() == row["saved_activation_bytes"]
    assert by["saved_activations"].sum() == (df["kind"] == "activation").sum()
    assert list(by["saved_activation_bytes"]) == sorted(by["saved_activation_bytes"], reverse=True)
    if model is not None:
        assert set(by["module"]) - {NO_MODULE} <= set(dict(model.named_modules()))
    top = tr.saved(name).by_module(1)
    assert top["saved_activation_bytes"].sum() == row["saved_activation_bytes"]


@pytest.mark.parametrize("name", ["mlp", "mini_gpt", "resnet_block", "pointwise_chain"])
def test_saved_table_on_the_examples(traces, example_models, name):
    tr = traces[(name, "lifted")]
    _check(tr, model=example_models[name][0])
    _check(tr, "min_cut", model=example_models[name][0])


def test_saved_words_name_multi_output_ops_and_views(example_models):
    model, inputs = example_models["mini_gpt"]
    tr = fxviz.trace(model, *inputs, backend="aot_eager")  # native_layer_norm (inductor decomposes it)
    df = tr.saved()
    ln = df[df["op"] == "native_layer_norm[2]"]
    assert len(ln) and set(ln["what"]) == {"LayerNorm rstd"}
    assert OP_WORDS["native_layer_norm"][1][2] == "rstd"
    for n, what in df["what"].items():  # a view names what it views, by the graph's own edges
        if what.startswith("a view of `"):
            base = what.split("`")[1]
            assert base in {a.name for a in next(x for x in tr.joint.graph.nodes if x.name == n).all_input_nodes}
    params = df[df["kind"] == "parameter"]
    assert all(w.startswith(("parameter `", "a view of parameter `")) for w in params["what"])


def test_saved_rejects_a_measured_strategy_and_a_bad_depth(traces):
    tr = traces[("mlp", "lifted")]
    with pytest.raises(FxvizError, match="measured"):
        tr.saved("eager")
    with pytest.raises(FxvizError, match="depth"):
        tr.saved().by_module(0)


class _Half(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(x))


class _Broken(nn.Module):
    """Two blocks of one shape with a graph break between them: dynamo reuses one graph."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(_Half() for _ in range(2))
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks[0](x)
        torch._dynamo.graph_break()
        x = self.blocks[1](x)
        return self.head(x).sum()


def test_saved_table_on_every_piece_of_a_graph_broken_model():
    torch.manual_seed(0)
    model = _Broken()
    tr = fxviz.trace(model, torch.randn(4, 8))
    assert len(tr.pieces) >= 2
    for piece in tr.pieces:
        if piece.graph.has_backward:
            _check(piece, model=model)


@pytest.fixture(scope="module")
def aot_log(tmp_path_factory):
    return make_log(MINI_GPT, tmp_path_factory.mktemp("saved") / "trace", "aot_eager")


def test_saved_table_of_a_real_log(aot_log):
    tr = fxviz.load_logs(aot_log).trace()
    df = tr.saved()
    assert df.attrs["strategy"] == "logged"
    model = examples.mini_gpt(n_layer=1, n_embd=16, n_head=2, vocab=32, block_size=16, batch=2, seq=8,
                              dropout=0.0)[0]
    _check(tr, model=model)


def test_cli_saved_fits_100_columns(aot_log, capsys):
    from fxviz.frontends.cli.entry import main

    assert main(["saved", "--logs", str(aot_log), "--top", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in out) <= 100, out
    tr = fxviz.load_logs(aot_log).trace()
    df = tr.saved()
    assert "by strategy logged" in out[0] or "by strategy logged" in " ".join(out[:2])
    ranks = [line.split()[1] for line in out if line[:3].strip().isdigit()]
    assert ranks == list(df.index[:5])
    assert f"... {len(df) - 5} more" in "\n".join(out)
    assert main(["saved", "--logs", str(aot_log), "--by-module", "--depth", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in out) <= 100
    by = tr.saved().by_module(1)
    assert [line[:len(m)] for line, m in zip(out[2:], by["module"])] == list(by["module"])
    assert len(out) == 2 + len(by)
    assert main(["saved", "--logs", str(aot_log), "--top", "-1"]) == 2
    capsys.readouterr()
    assert main(["saved", "--logs", str(aot_log), "--kind", "activation", "--top", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    shown = [line.split()[1] for line in out if line[:3].strip().isdigit()]
    assert shown == list(df[df["kind"] == "activation"].index[:3])


def test_saved_per_run_of_a_reused_graph():
    """A graph dynamo ran for two layers: each run's rows name that run's modules, and the runs
    together are the whole step's saved activation bytes (memory_table(scope="step"))."""
    from fxviz.analysis.graph.pieces import piece_facts

    from .test_breaks import MixtralStyle

    torch.manual_seed(0)
    model = MixtralStyle()
    tr = fxviz.trace(model, torch.randn(4, 8))
    facts = piece_facts(tr.capture)
    known = dict(model.named_modules())
    totals = tr.memory_table([tr.default_strategy], scope="step")  # the strategy piece.saved() shows
    total = totals[totals["piece"] == "total"]["saved_activation_bytes"].iloc[0]
    summed = crossing = 0
    reused = [p for p in tr.pieces if p.graph.has_backward and len(facts.runs_of(p.graph.index)) > 1]
    assert reused
    for piece in tr.pieces:
        if not piece.graph.has_backward:
            continue
        runs = facts.runs_of(piece.graph.index)
        for k, r in enumerate(runs):
            df = piece.saved(run=k)
            mods = set(df["module"].dropna())
            assert mods <= set(known)
            # every module is this run's (layers.1 where the first run was layers.0)
            assert all(any(m == x or m.startswith(x + ".") or x.startswith(m + ".") for x in r.modules)
                       for m in mods), (mods, r.modules)
            params = df[df["kind"] == "parameter"]
            # a saved parameter (or a view of one) is one this run received
            assert all(any(p.startswith(m + ".") for p in r.parameters) for m in params["module"].dropna())
            by = piece.saved(run=k).by_module()
            assert set(by["module"]) - {NO_MODULE} <= set(known)
            summed += int(by["saved_activation_bytes"].sum())
            crossing += int(df[(df["kind"] == "activation") & (df["op"] == "placeholder")]["bytes"].sum())
        _check(piece, model=model, real=True)
    # the step's total counts a tensor once where two graphs' runs both save it (a layer's output the
    # next run of the reused graph and the following graph both read): the excess is such inputs only
    assert crossing > 0 and total <= summed <= total + crossing
    with pytest.raises(FxvizError, match="run"):
        reused[0].saved(run=len(facts.runs_of(reused[0].graph.index)))


def test_saved_panel_data_travels_in_the_view_payload(traces):
    """The widget's one view trait and the report's drawings carry the panel's rows: tr.saved()'s,
    as records; the report's shared layout holds every strategy it overlays.  Building them
    partitions no strategy but the view's own (the first picture waits for nothing else)."""
    from fxviz.payloads.panels import saved_data
    from fxviz.payloads.report import report_data
    from fxviz.payloads.views import view_payload
    from fxviz.render.graph.spec import DrawSpec

    model, inputs = examples.mlp()
    fresh = fxviz.trace(model, *inputs)
    view_payload(fresh, DrawSpec.of("forward", "min_cut"))
    assert [k for k in fresh._cache if k[0] == "partition"] == [("partition", Strategy("min_cut"))]
    tr = traces[("mlp", "lifted")]
    payload = view_payload(tr, DrawSpec.of("forward", "min_cut")).to_json()
    rows = payload["saved"]["min_cut"]["rows"]
    df = tr.saved("min_cut")
    assert [r["name"] for r in rows] == list(df.index)
    assert [r["bytes"] for r in rows] == list(df["bytes"])
    assert payload["saved"]["min_cut"]["totals"]["activation"] == \
        tr.memory_table(["min_cut"])["saved_activation_bytes"].iloc[0]
    data = report_data(tr, strategies=["default", "min_cut", "eager"], views=("joint",))
    layout = data["drawings"][data["initial"]["drawing"]]
    assert set(layout["saved"]) == {"default_partition", "min_cut", "eager"}  # "default" written, named as torch's
    assert layout["saved"]["eager"]["message"] and "rows" not in layout["saved"]["eager"]
    assert layout["saved"]["default_partition"] == saved_data(tr, "default")
    pytest.importorskip("anywidget")
    w = fxviz.explore(tr, view="forward", strategy="min_cut")
    assert w.pane.get_state()["view_data"]["saved"] == payload["saved"]


def _without_partitioned_graphs(log: pathlib.Path, to: pathlib.Path) -> pathlib.Path:
    """A copy of ``log`` without its ``aot_forward_graph`` / ``aot_backward_graph`` records (and
    their payload lines): a log that kept only the joint graph, as a run logging fewer artifacts writes."""
    to.mkdir()
    for f in log.iterdir():
        kept, skipping = [], False
        for line in f.read_text().splitlines(keepends=True):
            if line.startswith("\t"):
                if not skipping:
                    kept.append(line)
                continue
            skipping = re.search(r'\] \{"aot_(forward|backward)_graph":', line) is not None
            if not skipping:
                kept.append(line)
        (to / f.name).write_text("".join(kept))
    return to


def test_a_log_without_its_partitioned_graphs_defaults_to_torchs_default_everywhere(aot_log, tmp_path):
    """Issue 31: on a log trace whose forward/backward graphs are not in the log, ``tr.saved()`` said
    "this trace was not read from a log" (it defaulted to ``logged``) while ``tr.partition()`` used
    ``default``.  Every view asks one rule (``analysis.choices``): what torch.compile's step partitions
    with here, ``min_cut`` (issue 32), and no ``logged`` offered."""
    tr = fxviz.load_logs(_without_partitioned_graphs(pathlib.Path(aot_log), tmp_path / "joint_only")).trace()
    assert tr.capture.from_log and tr.graph.logged is None and tr.graph.has_backward
    df = tr.saved()  # raised StrategyError "... this trace was not read from a log"
    assert df.attrs["strategy"] == tr.partition().name == "min_cut"
    assert set(df.index) == set(tr.partition("min_cut").saved)
    assert tr.default_strategy.name == "min_cut" and "logged" not in [s.name for s in tr.offered]
    assert tr.saved().by_module().attrs["strategy"] == "min_cut"
    assert list(tr.memory_table()["strategy"]) == [s.name for s in tr.offered]
