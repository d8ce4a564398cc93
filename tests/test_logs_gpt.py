"""A real run's logs read as faithfully as a model (issue 23): a 2-block GPT with
nn.MultiheadAttention, LayerNorm and a GELU MLP, checkpointed (non-reentrant, and a selective
policy) under aot_eager and inductor, an inference-only run and a graph break inside the top-level
forward's loop.  Every log is written by this module's one subprocess (``tests/logs_gpt.py``), and
every expectation is read from the log's own text or from torch's partitioner run on the log."""

from __future__ import annotations

import pathlib
import re

import pytest

import fxviz
from fxviz.frontends.cli.entry import main
from fxviz.sources.graphs import INFERENCE_NOTE
from fxviz.sources.log.reader import ReadStats, read_records

from .logs_gpt import make_gpt_logs

NAMES = ("ckpt_aot", "sac_aot", "ckpt_ind", "infer", "break")


@pytest.fixture(scope="module")
def logs():
    return make_gpt_logs(names=NAMES)


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
    assert tr.graph.inference and not tr.graph.has_backward
    assert INFERENCE_NOTE in tr.summary()
    doc = tr.doctor()
    assert doc.healthy and not doc.findings and INFERENCE_NOTE in doc.headline()
    code, out, err = _cli(capsys, "table", "--logs", logs["infer"])
    assert code == 0 and not err and out.replace("\n    ", " ").strip().endswith(INFERENCE_NOTE) and "failed" not in out
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
    _code, out, _ = _cli(capsys, "doctor", "--logs", logs["ckpt_aot"])
    assert "partition 'logged'" in " ".join(out.split("  0 errors")[0].split())  # the headline, wrapped
    _code, out, _ = _cli(capsys, "code", "--logs", logs["ckpt_aot"])
    assert '"logged' in out.splitlines()[0]
    # a traced model's default is what its step partitions with: torch.compile's min-cut, and
    # default_partition for aot_function's route
    import torch

    model = torch.nn.Linear(4, 2)
    assert fxviz.trace(model, torch.randn(3, 4)).default_strategy.name == "min_cut"
    assert fxviz.trace(model, torch.randn(3, 4), capture_route="aot").default_strategy.name == "default_partition"


# --- (3) no false alarms: returned gradients are not "dropped"; a random op must draw ------------------
def test_doctor_on_healthy_logs_finds_no_error(logs):
    for name in ("ckpt_aot", "sac_aot", "ckpt_ind"):
        tr = fxviz.load_logs(logs[name]).trace()
        _, bwd = tr.graph.logged
        # the run's backward returns a gradient for every parameter (its output slots, as logged)
        grads = [a for a in bwd.graph.output_node().args[0] if a is not None]
        assert len(grads) == len(tr.capture.named_parameters())
        for strategy in ("logged", "default", "min_cut"):
            report = tr.doctor(strategy)
            assert report.healthy and not [f for f in report.findings if f.severity == "error"], (name, strategy)


def test_attention_without_dropout_draws_nothing(logs):
    from fxviz import _torch
    from fxviz.core.graph_facts import draws_random

    tr = fxviz.load_logs(logs["break"]).trace()  # a block's graph, not checkpointed
    sdpa = [n for n in tr.joint.graph.nodes if n.op == "call_function" and "scaled_dot_product" in str(n.target)
            and tr.graph.info[n.name].phase == "forward"]
    assert sdpa and all(_torch.is_random(n) and not draws_random(n) for n in sdpa)  # tagged, yet no draw
    part = tr.partition("budget:0.5")
    assert set(n.name for n in sdpa) & part.recomputed and not part.recomputed_random
    assert tr.memory_table(["budget:0.5"])["recomputed_random_ops"].iloc[0] == 0


def test_random_ops_on_traced_models_need_a_draw():
    """The same rule on a model traced now: attention with dropout_p=0 draws nothing; a dropout
    with p > 0 draws, and recomputing it is still flagged."""
    import torch
    import torch.nn.functional as F

    from fxviz.core.graph_facts import draws_random

    class Attn(torch.nn.Module):
        def __init__(self, p):
            super().__init__()
            self.qkv = torch.nn.Linear(8, 24)
            self.p = p

        def forward(self, x):
            q, k, v = self.qkv(x).view(2, 4, 3, 2, 4).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, v)
            return F.dropout(y, self.p, training=True).sum()

    torch.manual_seed(0)
    x = torch.randn(2, 4, 8)
    tr = fxviz.trace(Attn(0.0), x)
    ops = {str(n.target): draws_random(n) for n in tr.joint.graph.nodes if n.op == "call_function"
           and ("scaled_dot" in str(n.target) or "dropout" in str(n.target))}
    assert ops and not any(ops.values()), ops
    attention = {n.name for n in tr.joint.graph.nodes if str(n.target).startswith("aten._scaled_dot_product")
                 and tr.graph.info[n.name].phase == "forward"}
    assert attention & tr.partition("budget:0").recomputed  # recomputed, and drawing nothing
    assert not tr.partition("budget:0").recomputed_random
    # aot_eager's graph keeps native_dropout (inductor's draws seeds once and replays them)
    dropped = fxviz.trace(Attn(0.5), x, backend="aot_eager")
    drops = [n for n in dropped.joint.graph.nodes
             if n.op == "call_function" and str(n.target) == "aten.native_dropout.default"]
    assert drops and all(draws_random(n) for n in drops)
    assert dropped.partition("budget:0").recomputed_random  # the knapsack recomputes a dropout (2.13)


# --- (1) checkpointing: the policies the log's comments carry, honoured by min-cut ----------------------
_AC = re.compile(r"# ac_graph_id: (\d+) - ([A-Z_]+)")


def test_checkpoint_policies_come_from_the_log(logs):
    for name in ("ckpt_aot", "sac_aot", "ckpt_ind"):
        joint = _payloads(logs[name], "aot_joint_graph")[0]
        tr = fxviz.load_logs(logs[name]).trace()
        tagged = tr.nodes.dropna(subset=["checkpoint_policy"])
        # every policy and region the log's comments name, on the nodes that follow them
        assert {p.lower() for _, p in _AC.findall(joint)} == set(tagged["checkpoint_policy"])
        assert {int(r) for r, _ in _AC.findall(joint)} == set(tagged["checkpoint_region"])
        assert (tr.nodes.loc[tagged.index, "phase"] == "forward").all()
        # the comments hold source lines too: checkpointed ops keep their ``# File:`` line
        assert tagged["source"].notna().all()
    sac = fxviz.load_logs(logs["sac_aot"]).trace().nodes
    must = sac[sac["checkpoint_policy"] == "must_save"]
    assert len(must) and set(must["short_op"]) == {"mm"}  # the selective policy saves mm, as logged


def test_min_cut_on_a_checkpointed_log_is_what_the_run_saved(logs):
    """aot_eager and inductor partition with min-cut: on the log's graph it must save what the run
    saved, node for node and byte for byte (the RNG states min-cut saves for attention too)."""
    for name in ("ckpt_aot", "sac_aot", "ckpt_ind"):
        tr = fxviz.load_logs(logs[name]).trace()
        logged, min_cut = tr.partition("logged"), tr.partition("min_cut")
        assert sorted(min_cut.saved) == sorted(logged.saved), name
        table = tr.memory_table(["logged", "min_cut"]).set_index("strategy")
        assert table.loc["logged", "saved_activation_bytes"] == table.loc["min_cut", "saved_activation_bytes"]
        # the run's backward reads exactly these values (the log's own text)
        bwd = _payloads(logs[name], "aot_backward_graph")[0]
        inputs = re.findall(r'^\s+(\w+): "[^"]*",\s*(?:#\s*(.*))?$', bwd, re.M)
        read = [n for n, d in inputs if not d.startswith("TangentAOTInput")]
        assert len(read) == len(logged.saved)
        # the backward names the saved RNG states itself (rng_state_output_N); every other value by its name
        assert {n for n in read if not n.startswith("rng_state_output")} <= set(logged.saved)


# --- (2) the backend is the run's; inductor's joint passes run on the rebuilt graph --------------------
def test_an_inductor_log_is_read_as_inductor_ran_it(logs, capsys):
    run = fxviz.load_logs(logs["ckpt_ind"])
    assert run.graphs["backend"].tolist() == ["inductor"]
    assert fxviz.load_logs(logs["ckpt_aot"]).graphs["backend"].tolist() == ["aot_eager"]
    tr = run.trace()
    assert tr.graph.backend == tr.capture.backend == "inductor" and tr.graph.compiler == "inductor"
    assert "backend='inductor'" in tr.memory_table(["logged"]).attrs["caption"]
    # the logged joint graph is the one before inductor's passes (kept); min-cut gets the one after
    before = tr.graph.before_joint_passes
    logged_joint = set(re.findall(r"^\s+(\w+)(?:: \"[^\"]*\")? = (?:torch\.ops|\w+\[)", _payloads(logs["ckpt_ind"],
                                                                                         "aot_joint_graph")[0], re.M))
    assert logged_joint == {n.name for n in before.graph.nodes if n.op == "call_function"}
    assert len(tr.joint.graph.nodes) < len(before.graph.nodes)
    # every op the run's forward and backward graphs hold is a node of the graph min-cut gets
    fwd, bwd = tr.graph.logged
    joint = {n.name for n in tr.joint.graph.nodes}
    made_by_partitioner = ("run_and_save_rng_state", "run_with_rng_state", "rng_state_output")
    ran = {n.name for g in (fwd, bwd) for n in g.graph.nodes if n.op == "call_function"}
    assert {n for n in ran if not n.startswith(made_by_partitioner)} - joint <= {
        n for n in ran if n.startswith("getitem")}  # getitems of the partitioner's own RNG wrappers
    assert sorted(tr.partition("min_cut").saved) == sorted(tr.partition("logged").saved)
    code, _, err = _cli(capsys, "table", "--logs", logs["ckpt_ind"], "--backend", "aot_eager")
    assert code == 2 and "compiled this graph with inductor" in err and "--backend" in err


# --- (5) module paths for every op the log lets fxviz place ------------------------------------------
def _saved_activation_modules(tr):
    from fxviz.analysis.memory.storage import saved_memory

    nodes = tr.nodes
    p = tr.partition("logged")
    uses = [u for u in saved_memory(p, tr.graph).storages if u.owner == "activation"]
    # an RNG state min-cut saved belongs to the module of the op it replays
    of = {n: (p.made[n].wraps if n in p.made else n) for u in uses for n in u.names}
    return [(u, [nodes.loc[of[n], "module"] for n in u.names if of[n] in nodes.index]) for u in uses], nodes


def test_every_saved_activation_inside_a_module_has_one(logs):
    for name in ("ckpt_aot", "ckpt_ind", "break"):
        tr = fxviz.load_logs(logs[name]).trace()
        saved, nodes = _saved_activation_modules(tr)
        blocks = nodes.index[nodes["source_code"].isin(_BLOCK_CODE)]
        # only the compiled frame's own ops are in no module, as in a traced model: the loss's line of
        # GPT.forward; with the graph break in the loop each compile's frame is a Block, so the ops of
        # Block.forward's own code (a residual add) are the frame's
        top = {"return F.cross_entropy(logits.flatten(0, 1), tgt.flatten())"}
        top |= _BLOCK_CODE if name == "break" else set()
        for u, mods in saved:
            placed = [m for m in mods if isinstance(m, str)]
            code = {nodes.loc[n, "source_code"] for n in u.names if n in nodes.index}
            assert placed or code <= top, (name, u)
        share = sum(u.nbytes for u, m in saved if any(isinstance(x, str) for x in m)) / sum(u.nbytes for u, _ in saved)
        assert share > (0.85 if name != "break" else 0.5), (name, share)
        # ops on a line of Block.forward are in a block: blocks.N... for the whole model's graph, but
        # autograd's sums of a residual's gradients, which a model trace too leaves in no module
        if name != "break":
            sums = (nodes["phase"] == "backward") & (nodes["short_op"] == "add") & nodes["module"].isna()
            inside = nodes.loc[[b for b in blocks if not sums[b]], "module"]
            assert len(inside) > 50 and inside.notna().all() and inside.str.match(r"blocks\.[01](\.|$)").all()
    tr = fxviz.load_logs(logs["ckpt_aot"]).trace()
    n = tr.nodes
    # backward ops are in the module of the forward op they differentiate
    assert set(n[n.short_op == "gelu_backward"]["module"]) == set(n[n.short_op == "gelu"]["module"]) == {
        "blocks.0", "blocks.1"}
    assert set(n[n.short_op == "embedding_dense_backward"]["module"]) == {"emb"}
    ln = n[n.short_op == "native_layer_norm_backward"]["module"]
    assert set(ln) == set(n[n.short_op == "native_layer_norm"]["module"])


_BLOCK_CODE = {"h = self.ln1(x)", "x = x + self.attn(h, h, h, need_weights=False)[0]",
               "return x + self.proj(F.gelu(self.fc(self.ln2(x))))"}  # Block.forward in tests/logs_gpt.py


# --- (7) the whole run: graph breaks, eager frames, totals ------------------------------------------
def test_a_graph_broken_run_says_what_ran_eagerly_and_totals(logs, capsys):
    run = fxviz.load_logs(logs["break"])
    g = run.graphs
    # dynamo skipped the top-level frame (a break inside its loop) and compiled the block's forward
    skipped = g[~g["joint"] & ~g["inference"]]
    assert len(skipped) == 1 and "falling back to eager" in skipped["graph_break_reason"].iloc[0]
    (frame,) = run.eager_frames(0)
    assert frame.startswith("forward (") and "falling back to eager" in frame
    totals = run.totals().set_index("rank")
    joint = g[g["joint"]]
    assert totals.loc[0, "graphs"] == len(joint) and totals.loc[0, "eager_frames"] == 1
    saved = sum(int(run.trace(0, cid).memory_table(["logged"])["saved_activation_bytes"].iloc[0])
                for cid in joint["compile_id"])
    assert totals.loc[0, "saved_activation_bytes"] == saved > 0
    text = run.summary()
    assert "1 frame(s) ran as plain Python" in text and "eager: forward (" in text
    code, out, _err = _cli(capsys, "logs", logs["break"])
    assert code == 0 and "eager: forward (" in out and "saved by one step" in out
    code, out, _err = _cli(capsys, "table", "--logs", logs["break"])
    first = " ".join(out.split("\n")[:3])
    assert code == 0 and "1 of 2 compile(s)" in first and "ran as plain Python" in first and "--graph ID" in first


# --- (8) the CLI: 100 columns, hints that name its options, no raw warning lines ------------------------
def test_cli_output_fits_and_speaks_cli(logs, capsys, tmp_path):
    for name in ("ckpt_aot", "break", "infer"):
        for argv in (("logs", logs[name]), ("table", "--logs", logs[name]), ("doctor", "--logs", logs[name]),
                     ("nodes", "--logs", logs[name]), ("draw", "--logs", logs[name], "-o", tmp_path / "g.dot")):
            code, out, err = _cli(capsys, *argv)
            assert code == 0, (argv, err)
            wide = [line for line in (out + err).splitlines() if len(line) > 100]
            assert not wide, (argv, wide[:2])
    bad = tmp_path / "notalog.txt"
    bad.write_text("hello\n")
    code, out, err = _cli(capsys, "logs", bad)
    assert code == 2 and not out
    assert err.splitlines() == [line for line in err.splitlines() if line.startswith("fxviz: ")], err
    assert "FxvizWarning" not in err and ".py:" not in err
    # hints say what to type here, not which Python call to make
    from fxviz.core.errors import Blank, Do, Say, Span
    from fxviz.frontends.cli.words import cli_text

    assert cli_text(Say("see ", Do("graphs", on="run", attr=True), " for it")) == "see 'fxviz logs DIR' for it"
    assert cli_text(Say("use ", Do("trace", (("piece", Span(0, 2)),), on="run"))) == "use --piece 1..3"
    assert cli_text(Do("draw", (("expand", Blank("['<module>']", "MODULE")),), on="")) == "--expand MODULE"
    code, out, err = _cli(capsys, "draw", "--logs", logs["ckpt_aot"], "-o", tmp_path / "g.svg")
    assert "draw(" not in out and "tr." not in out


def test_the_report_of_a_run_opens_with_the_whole_run(logs, tmp_path):
    from fxviz.render.page.embed import unpack_json

    run = fxviz.load_logs(logs["break"])
    text = fxviz.report(run, tmp_path / "run.html").read_text()
    m = re.search(r'<script type="application/json" id="fxviz-data">(.*?)</script>', text, re.S)
    data = unpack_json(m.group(1))
    for entry in data["graphs"]:
        summary = entry["data"]["summary"]
        assert summary.startswith(run.summary()) and "this graph: " in summary


# --- values the partitioner made itself (RNG states) claim no joint node ---------------------------
def _check_rng_states(tr, strategy):
    import torch

    """Every saved value that names a joint node IS that node (same op on the forward side); the
    RNG states min-cut's functionalization saves are rows of their own, with the run's bytes."""
    p = tr.partition(strategy)
    joint = {n.name: n for n in tr.graph.gm.graph.nodes}
    fwd = {n.name: n for n in p.forward.graph.nodes}
    saved_fwd = list(p.forward.graph.output_node().args[0])[tr.graph.num_fwd_outputs:]
    for node in saved_fwd:  # a saved value that names a joint node runs its op on its inputs
        j = p.fw_to_joint.get(node.name)
        if node.op == "call_function" and j == node.name:
            mine = torch.fx.map_arg(fwd[j].args, lambda a: p.fw_to_joint.get(a.name))
            theirs = torch.fx.map_arg(joint[j].args, lambda a: a.name)
            assert (fwd[j].target, str(mine)) == (joint[j].target, str(theirs)), j
    states = [n for n in p.forward.graph.nodes if n.op == "call_function"
              and n.args[1:] == (0,) and str(getattr(n.args[0], "target", "")).endswith("run_and_save_rng_state")]
    assert states, "the checkpointed attention's RNG state is saved"
    table = tr.saved(strategy, compare=[])
    rng = table[table["op"] == "rng state"]
    assert len(rng) == len(states) and not set(rng.index) & set(joint)
    assert rng["what"].str.startswith("CPU RNG state saved by run_and_save_rng_state for").all()
    assert rng["module"].notna().all()
    assert (rng["bytes"] > 0).all()
    memory = tr.memory_table([strategy]).set_index("strategy")
    assert table[table["kind"] == "activation"]["bytes"].sum() == memory.loc[strategy, "saved_activation_bytes"]
    # no joint value is named after a forward value the partitioner made
    assert not re.search(r"\bgrad_\w+ = ", tr.code("forward", strategy).src)
    # per module, an RNG state counts under the module of the op it replays (never "no module")
    from fxviz.analysis.memory.saved_words import NO_MODULE

    per_module = tr.saved(strategy).by_module().set_index("module")["saved_activation_bytes"]
    acts = table[table["kind"] == "activation"]
    assert int(per_module.get(NO_MODULE, 0)) == int(acts[acts["module"].isna()]["bytes"].sum())
    return p


def test_rng_states_the_partitioner_made_are_not_joint_values(logs, capsys):
    tr = fxviz.load_logs(logs["ckpt_aot"]).trace()
    _check_rng_states(tr, "logged")
    code, out, _ = _cli(capsys, "code", "--logs", str(logs["ckpt_aot"]), "--part", "forward")
    assert code == 0 and "run_and_save_rng_state" in out
    assert not re.search(r"\bgrad_\w+ = ", out)


def test_rng_states_on_a_traced_checkpointed_model():
    import torch
    from torch.utils.checkpoint import checkpoint

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(16)
            self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, x):
            h = self.ln(x)
            return x + self.attn(h, h, h, need_weights=False)[0]

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()
            self.ln = torch.nn.LayerNorm(16)

        def forward(self, x):
            return self.ln(checkpoint(self.block, x, use_reentrant=False)).sum()

    torch.manual_seed(0)
    tr = fxviz.trace(Net(), torch.randn(2, 4, 16))
    p = _check_rng_states(tr, "min_cut")
    # the values min-cut handed the backward, in its order: each joint value or a made one
    outs = list(p.forward.graph.output_node().args[0])[tr.graph.num_fwd_outputs:]
    assert p.saved == [p.fw_to_joint.get(o.name) or f"forward:{o.name}" for o in outs]
