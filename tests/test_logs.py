"""Logs of real runs (issue 13): every log here is written by the test itself, with real
torch.compile in a fresh process (TORCH_TRACE=dir), and every fact fxviz reads from it is
checked against the log's own text or against torch run on the same model."""

from __future__ import annotations

import re

import pytest
import torch

import fxviz
from fxviz import _torch
from fxviz.core.errors import FxvizWarning, LogError
from fxviz.core.graph_facts import joint_node_count
from fxviz.core.units import format_bytes
from fxviz.render.page.embed import unpack_json
from fxviz.render.text.saved_view import saved_text
from fxviz.sources.log.guards import ALLGATHERED
from fxviz.sources.log.reader import ReadStats, read_records

from .compile_log import saved_of_backward
from .logs_util import (
    BREAK_AND_RECOMPILE,
    DISTRIBUTED,
    FSDP_BLOCKS,
    INFERENCE_ONLY,
    MINI_GPT,
    MISSING_GRADIENTS,
    backward_by_rank,
    make_log,
)

_ANNOT = re.compile(r'^\s+(\w+): "(\w+)\[([^\]]*)\]\[[^\]]*\]\w+"')
_OP = re.compile(r"^\s+(\w+)(?:: \"[^\"]*\")? = (torch\.ops\.[\w.]+)\(")


@pytest.fixture(scope="module")
def aot_log(tmp_path_factory):
    return make_log(MINI_GPT, tmp_path_factory.mktemp("aot") / "trace", "aot_eager")


@pytest.fixture(scope="module")
def inductor_log(tmp_path_factory):
    return make_log(MINI_GPT, tmp_path_factory.mktemp("ind") / "trace", "inductor")


@pytest.fixture(scope="module")
def break_log(tmp_path_factory):
    return make_log(BREAK_AND_RECOMPILE, tmp_path_factory.mktemp("brk") / "trace")


def _payloads(directory, kind):
    """The payload texts of every record of ``kind`` (read with the plain reader)."""
    out = []
    for f in sorted(directory.iterdir()):
        with open(f, "rb") as fh:
            for rec in read_records(fh, ReadStats(), keep=lambda r: r.kind == kind):
                if rec.kind == kind:
                    out.append((rec.compile_key, rec.payload))
    return out


def _text_facts(payload):
    """(node -> shape list, node -> op) as the log's text states them."""
    shapes, ops = {}, {}
    for line in payload.splitlines():
        m = _ANNOT.match(line)
        if m:
            shapes[m.group(1)] = [s.strip() for s in m.group(3).split(",") if s.strip()]
        m = _OP.match(line)
        if m:
            ops[m.group(1)] = m.group(2)[len("torch.ops."):]
    return shapes, ops


def _backward_reads(payload):
    """The backward graph's inputs that are not tangents: what the run saved."""
    names = []
    for line in payload.splitlines():
        m = re.match(r'^\s+(\w+): "[^"]*",\s*(?:#\s*(.*))?$', line)
        if m and not (m.group(2) or "").startswith("TangentAOTInput"):
            names.append(m.group(1))
    return names


def _check_rebuilt(tr, joint_text):
    shapes, ops = _text_facts(joint_text)
    logged = tr.graph.before_joint_passes if tr.graph.before_joint_passes is not None else tr.joint  # inductor
    nodes = {n.name: n for n in logged.graph.nodes}
    assert set(ops) <= set(nodes)
    for name, op in ops.items():
        assert str(nodes[name].target).replace("aten::", "aten.").startswith(op.rsplit(".", 1)[0]), (name, op)
        assert str(nodes[name].target) == str(eval("torch.ops." + op)), (name, op)
    for name, sizes in shapes.items():
        val = _torch.meta_val(nodes[name])
        assert [str(s) for s in val.shape] == sizes, (name, val.shape, sizes)


def _check_logged(tr, bwd_text):
    p = tr.partition("logged")
    assert p.ok, p.error
    # the forward returns saved tensors then sizes; the backward takes sizes first
    assert sorted(p.saved) == sorted(_backward_reads(bwd_text))
    return p


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_one_process_mini_gpt(backend, request):
    log = request.getfixturevalue("aot_log" if backend == "aot_eager" else "inductor_log")
    run = fxviz.load_logs(log)
    g = run.graphs
    assert list(g["rank"]) == [0] and list(g["compile_id"]) == ["0/0"]
    assert g["joint"].all() and g["forward"].all() and g["backward"].all()
    assert g["frame"].iloc[0] == "forward" and g["source"].iloc[0].endswith("examples.py:184")
    tr = run.trace()
    (_, joint_text), = _payloads(log, "aot_joint_graph")
    (_, bwd_text), = _payloads(log, "aot_backward_graph")
    _check_rebuilt(tr, joint_text)
    logged_joint = tr.graph.before_joint_passes if backend == "inductor" else tr.joint  # the graph the log holds
    assert int(g["nodes"].iloc[0]) == joint_node_count(logged_joint.graph.nodes)
    p = _check_logged(tr, bwd_text)
    assert int(g["saved"].iloc[0]) == len(p.saved)
    model, (idx, tgt) = fxviz.examples.mini_gpt(n_layer=1, n_embd=16, n_head=2, vocab=32, block_size=16, batch=2,
                                                seq=8, dropout=0.0)
    params = {n for n, i in tr.graph.info.items() if i.role == "parameter"}
    assert {tr.graph.info[n].qualname for n in params} == {n for n, _ in model.named_parameters()}
    grads = {i.qualname for i in tr.graph.info.values() if i.role == "gradient"}
    assert grads == {n for n, _ in model.named_parameters()}
    assert tr.capture.title == f"forward [torch {torch.__version__}]"  # the frame, and the torch that wrote the log
    table = tr.memory_table()
    assert list(table["strategy"]) == [s.name for s in tr.offered] and "eager" not in list(table["strategy"])
    assert table["error"].isna().all()
    if backend == "aot_eager":
        # aot_eager partitions with min-cut: fxviz.trace of the same model, min-cut, saves the same
        # values; the rebuilt joint graph partitioned by torch again gives the run's choice
        live = fxviz.trace(model, idx, tgt, backend="aot_eager")  # the log's backend
        assert live.partition("min_cut").saved == p.saved
        assert tr.partition("min_cut").saved == p.saved
        assert live.partition("default").saved == tr.partition("default").saved
        mine = tr.memory_table(["logged", "default", "min_cut"]).set_index("strategy")
        theirs = live.memory_table(["default", "min_cut"]).set_index("strategy")
        for col in ("saved_activation_bytes", "saved_param_bytes", "saved_input_bytes", "torch_estimate_bytes"):
            assert mine.loc["min_cut", col] == theirs.loc["min_cut", col], col
            assert mine.loc["default_partition", col] == theirs.loc["default_partition", col], col
            assert mine.loc["logged", col] == theirs.loc["min_cut", col], col
    else:
        # the log reader and fxviz's inductor-faithful capture see the same run: the split the log
        # recorded is the one min-cut makes on the graph fxviz.trace(backend="inductor") hands it,
        # value for value and byte for byte
        live = fxviz.trace(model, idx, tgt, backend="inductor")
        assert live.partition("min_cut").saved == p.saved
        mine = tr.memory_table(["logged"]).set_index("strategy")
        theirs = live.memory_table(["min_cut"]).set_index("strategy")
        for col in ("saved_activation_bytes", "saved_param_bytes", "saved_input_bytes", "saved_tensors",
                    "saved_storages", "torch_estimate_bytes"):
            assert mine.loc["logged", col] == theirs.loc["min_cut", col], col
    with pytest.raises(fxviz.FxvizError, match="a log of a run has no model"):
        tr.check_gradients()
    with pytest.raises(fxviz.StrategyError, match="a log of a run has no model"):
        tr.partition("eager")


def test_views_work_on_a_log(aot_log, tmp_path):
    tr = fxviz.load_logs(aot_log).trace()
    assert "primals_2" in str(tr.code("backward", strategy="logged")) or "wte_weight" in str(
        tr.code("backward", strategy="logged"))
    doc = tr.doctor("logged")
    assert doc.healthy
    d = tr.draw(strategy="logged")
    assert "<svg" in d.svg()
    sweep = tr.memory_sweep([0.0, 1.0], progress=False)
    assert len(sweep) >= 1


def test_recompile_and_graph_break(break_log):
    run = fxviz.load_logs(break_log)
    g = run.graphs
    assert list(g["compile_id"]) == ["0/0", "1/0", "0/1", "1/1"]
    assert g["joint"].all() and g["backward"].all()
    reasons = dict(zip(g["compile_id"], g["recompile_reason"]))
    assert reasons["0/0"] is None and reasons["1/0"] is None
    assert "size mismatch at index 0. expected 4, actual 6" in reasons["0/1"]
    assert "size mismatch at index 0. expected 4, actual 6" in reasons["1/1"]
    breaks = dict(zip(g["compile_id"], g["graph_break_reason"]))
    assert "Data-dependent branching" in breaks["0/0"] and "Data-dependent branching" in breaks["0/1"]
    assert breaks["1/0"] is None
    assert set(g["frame"]) == {"forward", "torch_dynamo_resume_in_forward_at_10"}
    joints = dict((f"{k[0]}/{k[1]}", t) for k, t in _payloads(break_log, "aot_joint_graph"))
    bwds = dict((f"{k[0]}/{k[1]}", t) for k, t in _payloads(break_log, "aot_backward_graph"))
    for cid in g["compile_id"]:
        tr = run.trace(compile_id=cid)
        _check_rebuilt(tr, joints[cid])
        _check_logged(tr, bwds[cid])
        assert tr.partition("min_cut").saved == tr.partition("logged").saved  # aot_eager: min-cut
    # the recompile is dynamic: the batch size is a symbol in the rebuilt graph, with the run's value
    tr = run.trace(compile_id="0/1")
    x = next(n for n in tr.joint.graph.nodes if tr.graph.info[n.name].qualname == "x")
    size = _torch.meta_val(x).shape[0]
    assert isinstance(size, torch.SymInt) and str(size).startswith("s")
    assert tr.graph.info[x.name].shape == (6, 8)
    names = {i.qualname for i in run.trace(compile_id="0/0").graph.info.values() if i.role == "parameter"}
    assert names == {"a.weight", "a.bias"}
    assert "Data-dependent branching" in run.trace(compile_id="0/0").capture.graph_breaks[0]


def test_a_step_runs_one_compile_per_frame(break_log):
    """Recompiles are variants of a frame, not more of the step (walk F5): the step, its totals and
    a whole-step diff take each frame's last compile and say which they left out."""
    from fxviz.frontends.cli.words import cli_text

    run = fxviz.load_logs(break_log)
    assert [t.capture.source.compile_id for t in run.traces()] == ["0/1", "1/1"]
    assert run.step_graph_count() == 2
    note = cli_text(run.step_note())
    assert "0/1 of frame 0 (its earlier compile 0/0 is a recompile" in note and note.endswith("--graph F/N")
    totals = run.totals().set_index("rank")
    step = [run.trace(compile_id=c).memory_table(["logged"]).iloc[0]["saved_activation_bytes"] for c in ("0/1", "1/1")]
    assert totals.loc[0, "saved_activation_bytes"] == sum(step) and totals.loc[0, "graphs"] == 4
    summary = " ".join(run.summary().split())
    assert "saved by one step" in summary and "the other 2 compile(s) are recompiles" in summary
    d = fxviz.diff(run, run)
    assert len(d.pairs) == 2 and any("0/1 of frame 0" in n for n in d.notes)


PER_LAYER = """
import torch, torch.nn as nn
class Block(nn.Module):
    def __init__(self, idx):
        super().__init__(); self.idx = idx; self.lin = nn.Linear(16, 16)
    def forward(self, x):
        return torch.relu(self.lin(x)) * (self.idx + 1)
blocks = nn.ModuleList(Block(i) for i in range(3))
for b in blocks:
    b.compile(backend="aot_eager")
x = torch.randn(4, 16)
for b in blocks:
    x = b(x)
x.sum().backward()
"""


def test_recompiles_a_step_runs_every_time_stay_in_the_step(tmp_path):
    """Blocks compiled one by one share a code object: block 1 recompiles (its input requires grad),
    block 2 too (a guard on its integer attribute).  Every one runs in every step: none is a shape
    variant, so the step keeps all three and its bytes are their sum (review of walk F5)."""
    run = fxviz.load_logs(make_log(PER_LAYER, tmp_path / "trace"))
    assert list(run.graphs["compile_id"]) == ["0/0", "0/1", "0/2"]
    assert len(run.traces()) == run.step_graph_count() == 3 and run.step_note() is None
    each = [run.trace(compile_id=c).memory_table(["logged"]).iloc[0]["saved_activation_bytes"]
            for c in ("0/0", "0/1", "0/2")]
    totals = run.totals().iloc[0]
    assert totals["saved_activation_bytes"] == totals["all_compiles_saved_bytes"] == sum(each) > 0


def test_bad_logs(tmp_path, aot_log):
    with pytest.raises(LogError, match="no such log"):
        fxviz.load_logs(tmp_path / "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(LogError, match="empty"):
        fxviz.load_logs(empty)
    junk = tmp_path / "junk.log"
    junk.write_bytes(b"\x00\x01 not a log\n" * 10)
    with pytest.raises(LogError, match=r"no TORCH_TRACE log records \(1 file\(s\), none a trace log\)"):
        fxviz.load_logs(junk)
    eager = make_log(INFERENCE_ONLY, tmp_path / "eager")
    run = fxviz.load_logs(eager)  # a readable log is always read and listed (issue 33)
    assert run.graphs["status"].tolist() == ["no AOT graph"] and run.graphs["backend"].tolist() == [None]
    with pytest.raises(LogError, match=r"rank 0 logged no AOT graph \(1 no AOT graph\)"):
        run.trace()

    (src,) = list(aot_log.iterdir())
    data = src.read_bytes()
    # truncated inside the joint graph: a warning when read, a one-line error for that graph, whether
    # the cut falls inside a line (the code does not parse) or between two lines (it has no return)
    joint = data.index(b"aot_joint_graph")
    call = data.index(b"torch.ops.aten.", joint)
    inside_a_call = data.index(b"(", call) + 1
    between_lines = data.index(b"\n", call) + 1
    for cut, why in ((inside_a_call, "does not parse"), (between_lines, "has no return")):
        trunc = tmp_path / "trunc.log"
        trunc.write_bytes(data[:cut])
        with pytest.warns(FxvizWarning, match="truncated"):
            run = fxviz.load_logs(trunc)
        with pytest.raises(LogError, match=f"{why}.*: the log is truncated or corrupt"):
            run.trace()
    # corrupt lines and unknown record kinds are skipped and counted
    bad = tmp_path / "bad.log"
    extra = (b'V1201 01:03:06.148000 1 x.py:1] {"fxviz_unknown_kind": {}, "frame_id": 0}\n'
             b"garbage that is no record\n")
    bad.write_bytes(extra + data)
    with pytest.warns(FxvizWarning, match="1 corrupt line"):
        run = fxviz.load_logs(bad)
    assert run.skipped["fxviz_unknown_kind"] == 1
    assert run.trace().partition("logged").ok
    # another torch's log: a warning naming the version
    old = tmp_path / "old.log"
    old.write_bytes(re.sub(rb'"pytorch_version": "[^"]*"', b'"pytorch_version": "2.1.0"', data))
    with pytest.warns(FxvizWarning, match="torch 2.1.0"):
        fxviz.load_logs(old)
    # graphs without AOT descriptors (torch < 2.9): read by torch's input names (tests/test_logs_anywhere.py)
    nodesc = tmp_path / "nodesc.log"
    nodesc.write_bytes(re.sub(rb"  # \w+AOTInput\([^\n]*", b"", data))
    with pytest.warns(FxvizWarning, match="md5"):  # edited after torch wrote it: every graph's md5 is checked
        assert fxviz.load_logs(nodesc).trace().partition("logged").ok
    # a log is data: code smuggled into a graph's text is refused, never run
    for evil in (b"__import__('os').system", b"builtins.exec", b"torch.ops.__class__", b"os.system"):
        hostile = tmp_path / "hostile.log"
        hostile.write_bytes(data.replace(b"torch.ops.aten.arange.default", evil, 1))
        with pytest.raises(LogError), pytest.warns(FxvizWarning, match="md5"):  # (and the edit is said)
            fxviz.load_logs(hostile).trace()
    run = fxviz.load_logs(aot_log)
    with pytest.raises(LogError, match="no rank 3"):
        run.trace(rank=3)
    with pytest.raises(LogError, match="no compile '9/9'"):
        run.trace(compile_id="9/9")


@pytest.mark.parametrize("name", ["aot_log", "inductor_log", "break_log", "ddp_log"])
def test_listing_saved_bytes_are_the_rebuilds(name, request):
    """The listing reads, it does not rebuild (issue 36): the activation bytes each backward reads,
    from the graphs' printed signatures alone, equal what the rebuilt graphs' memory table counts
    (unique storages on fake tensors), graph by graph and summed per rank; under inductor, with
    dynamic sizes (the recompile's batch is a symbol) and on two ranks.  The totals are a step's:
    each frame's last compile (its recompiles are variants a step runs one of)."""
    run = fxviz.load_logs(request.getfixturevalue(name))
    rows = run.graphs
    expected: dict[int, int] = {}
    graphs = rows[rows["joint"] & rows["backward"]]
    assert len(graphs) >= 1
    last = {}  # (rank, frame) -> the frame's last compile id
    for _, r in graphs.iterrows():
        frame, n = map(int, r["compile_id"].split("/"))
        key = (int(r["rank"]), frame)
        last[key] = max(last.get(key, 0), n)
    for _, r in graphs.iterrows():
        table = run.trace(int(r["rank"]), r["compile_id"], int(r["piece"])).memory_table(["logged"]).iloc[0]
        assert int(r["saved_bytes"]) == int(table["saved_activation_bytes"]), (r["rank"], r["compile_id"])
        frame, n = map(int, r["compile_id"].split("/"))
        if last[int(r["rank"]), frame] == n:
            expected[int(r["rank"])] = expected.get(int(r["rank"]), 0) + int(table["saved_activation_bytes"])
    totals = run.totals().set_index("rank")
    assert {r: int(totals.loc[r, "saved_activation_bytes"]) for r in expected} == expected
    assert totals["saved_bytes_exact"].all()
    assert (rows["status"] == "compiled").all()


def _same(a, b) -> bool:
    import pandas as pd

    return (pd.isna(a) and pd.isna(b)) if pd.isna(a) or pd.isna(b) else a == b


@pytest.mark.parametrize("name", ["aot_log", "inductor_log", "break_log", "ddp_log"])
def test_the_logs_text_gives_the_rebuilds_logged_row_and_saved_table(name, request):
    """Issue 46: the run's own partition read from the log's text (``Run.logged``, no torch, no fake
    tensors) is the rebuild's: every column of the memory table's ``logged`` row and every cell of its saved
    table (kind, module, op, words, shape, dtype, bytes, storage shared, source line), the caption's
    description of the graph; under aot_eager and inductor, symbolic sizes and two ranks."""
    import pandas as pd

    from fxviz.analysis.memory.columns import COLUMNS

    run = fxviz.load_logs(request.getfixturevalue(name))
    graphs = [r for r in run.rows() if r["joint"] and r["backward"]]
    assert graphs
    for r in graphs:
        where = (r["rank"], r["compile_id"], r["piece"])
        view, tr = run.logged(*where), run.trace(*where)
        fast, slow = view.memory_table().iloc[0], tr.memory_table(["logged"]).iloc[0]
        # under inductor the rebuild's peaks are of inductor's logged code (issue 44); the text gives the walk
        compiled = (("forward_peak_bytes", "backward_peak_bytes", "layout_copy_bytes")
                    if tr.graph.backend == "inductor" else ())
        for col in COLUMNS:
            if col not in ("seconds", "error", *compiled):
                assert _same(fast[col], slow[col]), (where, col, fast[col], slow[col])
        assert all(pd.isna(fast[c]) for c in compiled[:2])
        base = str(tr.memory_table(["logged"]).attrs["caption"])
        assert str(view.memory_table().attrs["caption"]).startswith(base.split(" *:")[0][:400])
        mine, theirs = view.saved(), tr.saved("logged", compare=[])
        assert list(mine.index) == list(theirs.index) and list(mine.columns) == list(theirs.columns)
        for col in mine.columns:
            assert all(_same(x, y) for x, y in zip(mine[col], theirs[col])), (where, col)


def test_a_logs_own_views_need_no_torch_and_keep_what_a_rebuild_computed(inductor_log, capsys, monkeypatch, tmp_path):
    """``fxviz table|saved --logs`` of the run's own partition import no torch; a strategy named rebuilds the
    graph once and is kept (keyed by the log's md5s): the next default table shows its row and the next
    saved table its column, as the rebuild computed them (issue 46)."""
    import subprocess
    import sys

    from fxviz.frontends.cli.entry import main

    monkeypatch.setenv("FXVIZ_CACHE_DIR", str(tmp_path / "cache"))
    runner = ("import runpy, sys\nsys.argv = ['fxviz'] + sys.argv[1:]\ntry:\n    runpy.run_module('fxviz', "
              "run_name='__main__')\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
              "print('TORCH', 'torch' in sys.modules, file=sys.stderr)\n")
    for command in ("table", "saved"):
        done = subprocess.run([sys.executable, "-c", runner, command, "--logs", str(inductor_log)], text=True,
                              capture_output=True, env={**__import__("os").environ}, timeout=300)
        assert "TORCH False" in done.stderr, done.stderr[-2000:]
        assert "logged" in done.stdout
    assert main(["table", "--logs", str(inductor_log), "--strategies", "logged,min_cut", "--exact"]) == 0
    rebuilt = capsys.readouterr().out
    assert main(["table", "--logs", str(inductor_log), "--exact"]) == 0
    kept = capsys.readouterr().out
    row = lambda text, name: next(line.split() for line in text.splitlines() if line.split()[:1] == [name])  # noqa: E731
    assert row(kept, "min_cut") == row(rebuilt, "min_cut") and row(kept, "logged") == row(rebuilt, "logged")
    tr = fxviz.load_logs(inductor_log).trace()
    want = tr.saved("logged", compare=["min_cut"])
    assert main(["saved", "--logs", str(inductor_log), "--compare", "min_cut", "--top", "0"]) == 0
    capsys.readouterr()
    view = fxviz.load_logs(inductor_log, cache=True).logged()
    assert list(view.saved()["min_cut"]) == list(want["min_cut"])


def test_one_partition_has_one_recompute_count(inductor_log, aot_log):
    """Issue 47: a partition read from the log (``logged``) and the same partition computed (torch's
    ``min_cut`` on the rebuilt graph, which saves what the run saved) count the same ops recomputed, the same
    FLOPs and bytes: the backward's ops are matched to the joint's whichever way the graphs were made."""
    for log in (inductor_log, aot_log):
        tr = fxviz.load_logs(log).trace()
        logged, min_cut = tr.partition("logged"), tr.partition("min_cut")
        assert sorted(logged.saved) == sorted(min_cut.saved)
        assert logged.recomputed == min_cut.recomputed and logged.recomputed
        rows = tr.memory_table(["logged", "min_cut"]).set_index("strategy")
        for col in ("recomputed_ops", "recompute_flops", "recompute_bytes", "backward_graph_ops"):
            assert rows.loc["logged", col] == rows.loc["min_cut", col], col
        view = fxviz.load_logs(log).logged()
        assert view.memory_table().iloc[0]["recomputed_ops"] == len(min_cut.recomputed)


def test_cli_on_logs(aot_log, tmp_path, capsys):
    from fxviz.frontends.cli.entry import main

    assert main(["logs", str(aot_log)]) == 0
    out = capsys.readouterr().out
    assert "0/0" in out and "forward" in out
    assert main(["table", "--logs", str(aot_log), "--exact"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "rank 0, compile 0/0" in lines[0]  # which graph of the run: never picked silently
    header = next(k for k, line in enumerate(lines) if line.split()[:1] == ["strategy"])
    assert lines[header + 1].split()[0] == "logged"
    svg = tmp_path / "g.svg"
    assert main(["draw", "--logs", str(aot_log), "--strategy", "logged", "-o", str(svg)]) == 0
    assert svg.read_text().lstrip().startswith("<?xml") or "<svg" in svg.read_text()
    html = tmp_path / "run.html"
    assert main(["report", "--logs", str(aot_log), "--strategies", "logged,min_cut", "-o", str(html)]) == 0
    text = html.read_text()
    m = re.search(r'<script type="application/json" id="fxviz-data">(.*?)</script>', text, re.S)
    assert m is not None
    data = unpack_json(m.group(1))
    assert data["graphs"] and "rank 0, compile 0/0" in text
    assert [s["key"] for s in data["graphs"][0]["data"]["strategies"]] == ["logged", "min_cut"]
    capsys.readouterr()
    assert main(["logs", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such log" in err
    assert main(["table", "--logs", str(aot_log), "--graph", "7/7"]) == 2
    assert "no compile '7/7'" in capsys.readouterr().err


_JOINT_AND_BACKWARD = ("aot_joint_graph", "aot_backward_graph")


@pytest.fixture(scope="module")
def ddp_log(tmp_path_factory):
    return make_log(DISTRIBUTED, tmp_path_factory.mktemp("ddp") / "trace", "ddp")


def test_two_ranks_ddp(ddp_log):
    run = fxviz.load_logs(ddp_log)
    assert run.ranks == [0, 1]
    g = run.graphs
    assert list(g["rank"]) == [0, 1] and list(g["compile_id"]) == ["0/0", "0/0"]
    joints = {}
    for f in sorted(ddp_log.iterdir()):
        rank = int(re.search(r"rank_(\d+)_", f.name).group(1))
        with open(f, "rb") as fh:
            for rec in read_records(fh, ReadStats(), keep=lambda r: r.kind in _JOINT_AND_BACKWARD):
                if rec.payload:
                    joints.setdefault(rank, {})[rec.kind] = rec.payload
    for rank in (0, 1):
        tr = run.trace(rank=rank)
        _check_rebuilt(tr, joints[rank]["aot_joint_graph"])
        _check_logged(tr, joints[rank]["aot_backward_graph"])
        x = next(i for i in tr.graph.info.values() if i.qualname == "x")
        assert x.shape == (4 + 2 * rank, 8)
        assert {i.qualname for i in tr.graph.info.values() if i.role == "parameter"} == {
            "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}
    diff = run.compare_ranks("0/0")
    x_name = next(n for n, i in run.trace(rank=0).graph.info.items() if i.qualname == "x")
    row = diff[(diff["what"] == "shape") & (diff["node"] == x_name)].iloc[0]
    assert row["rank 0"] == (4, 8) and row["rank 1"] == (6, 8)
    saved = diff[diff["what"] == "saved_bytes"].iloc[0]
    # the saved activations scale with each rank's batch (checked against the memory table per rank)
    for rank in (0, 1):
        table = run.trace(rank=rank).memory_table(["logged"])
        assert saved[f"rank {rank}"] == int(table["saved_activation_bytes"].iloc[0])
    assert saved["rank 1"] > saved["rank 0"]


def test_fsdp2_compiled_root_logs_only_the_glue(tmp_path):
    """FSDP2 as its docs arrange it (fully_shard each block, then the root, then torch.compile the
    root), on CPU with gloo: dynamo breaks the graph at FSDP's hooks, so the AOT graphs it logs
    are the code between the sharded blocks (the ReLU, the sum), not the blocks' Linear layers,
    whose parameters never enter a compiled graph.  fxviz lists every compile with its break
    and rebuilds each AOT graph there is."""
    log = make_log(DISTRIBUTED, tmp_path / "fsdp", "fsdp")
    run = fxviz.load_logs(log)
    assert run.ranks == [0, 1]
    g = run.graphs
    assert g["graph_break_reason"].notna().any()
    assert any("fsdp" in (r or "").lower() for r in g["graph_break_reason"])
    with_joint = g[g["joint"]]
    assert len(with_joint) >= 2
    for _, row in with_joint.iterrows():
        tr = run.trace(rank=int(row["rank"]), compile_id=row["compile_id"])
        assert tr.partition("logged").ok
        assert not [i for i in tr.graph.info.values() if i.role == "parameter"]


def test_explorer_of_a_run(ddp_log):
    pytest.importorskip("ipywidgets")
    run = fxviz.load_logs(ddp_log)
    ex = fxviz.explore(run, rank=1)
    assert [v for _, v in ex.rank_control.options] == [0, 1]
    assert ex.explorer.trace is run.trace(rank=1)
    assert next(v for _, v in ex.explorer.strategy_control.options) == "logged"
    assert "eager" not in [v for _, v in ex.explorer.strategy_control.options]
    ex.rank_control.value = 0
    assert ex.explorer.trace is run.trace(rank=0)
    assert ex.children[1] is ex.explorer


def test_doctor_on_a_log_finds_missing_and_frozen(tmp_path):
    """The doctor's graph facts from a log alone: parameters, requires_grad and shapes come from
    the log's tensor descriptions; which gradient the backward returns from its descriptors."""
    run = fxviz.load_logs(make_log(MISSING_GRADIENTS, tmp_path / "miss"))
    tr = run.trace()
    table = tr.doctor("logged").table.set_index("parameter")
    assert set(table.index) == {"a.weight", "a.bias", "b.weight", "b.bias", "c.weight", "c.bias"}
    assert not table.loc["a.weight", "gets_gradient"] and table.loc["a.weight", "requires_grad"]
    assert table.loc["b.weight", "gets_gradient"]
    assert not table.loc["c.weight", "requires_grad"] and table.loc["c.weight", "reason"].startswith("frozen")
    assert not tr.doctor("logged").healthy
    assert not [f for f in tr.doctor("logged").diagnosis.findings if f.kind == "allgathered"]  # no FSDP2 here
    assert not [i for i in tr.graph.info.values() if i.note]
    params = tr.parameters().set_index("parameter")
    assert params.loc["b.weight", "shape"] == (4, 8) and params.loc["b.weight", "gradient_node"] != "none"
    assert params.loc["a.weight", "gradient_node"] == "none"


def test_fsdp2_compiled_block_forwards_log_the_blocks(tmp_path):
    """FSDP2 with each block's ``forward`` compiled (not the module call, so FSDP's hooks stay
    eager around it): every block is an AOT graph holding its all-gathered (unsharded)
    parameters, on both ranks, and the ranks differ by their batch."""
    log = make_log(DISTRIBUTED, tmp_path / "fsdpf", "fsdp_forward")
    run = fxviz.load_logs(log)
    g = run.graphs
    assert run.ranks == [0, 1] and g["joint"].all() and len(g) == 4  # fc1 and fc2 on each rank
    shapes = {}
    for _, row in g.iterrows():
        tr = run.trace(rank=int(row["rank"]), compile_id=row["compile_id"])
        assert tr.partition("logged").ok
        params = {i.qualname: i.shape for i in tr.graph.info.values() if i.role == "parameter"}
        shapes[(int(row["rank"]), row["compile_id"])] = params
    assert shapes[(0, "0/0")] == shapes[(1, "0/0")] == {"weight": (16, 8), "bias": (16,)}  # fc1, unsharded
    assert shapes[(0, "0/1")] == {"weight": (4, 16), "bias": (4,)}  # fc2
    diff = run.compare_ranks("0/0")
    x = diff[(diff["what"] == "shape") & (diff["node"] == "primals_3")].iloc[0]
    assert x["rank 0"] == (4, 8) and x["rank 1"] == (6, 8)


def test_fsdp2_compiled_blocks_save_all_gathered_parameters(tmp_path):
    """torchtitan's recipe on 2 gloo ranks (each block compiled with ``block.compile()``, then
    ``fully_shard``): FSDP2's hooks run eagerly around the block's graph, which takes the unsharded
    parameters as inputs and saves the weights its backward reads.  The log's guards name the
    compiled module's class (``FSDPBlock``), so fxviz names those saved values as all-gathered
    parameters in the saved table and the doctor, with their bytes per rank beside the activations.
    Checked against the block's eager parameters (full shapes: all-gathered) and the backward graph
    the run logged (which of them it reads)."""
    log = make_log(FSDP_BLOCKS, tmp_path / "titan")
    space: dict = {}
    exec(compile(FSDP_BLOCKS.split("def main")[0], "<fsdp blocks>", "exec"), space)
    full = {n: p.numel() * p.element_size() for n, p in space["Block"](16).named_parameters()}
    backward = backward_by_rank(log)  # one graph per rank (asserted below): its first is its only
    run = fxviz.load_logs(log)
    assert run.ranks == [0, 1] and run.graphs["joint"].all()  # one graph per rank, run for both blocks
    for rank in (0, 1):
        tr = run.trace(rank=rank)
        info = tr.graph.info
        params = {i.qualname: i for i in info.values() if i.role == "parameter"}
        assert {q: i.bytes for q, i in params.items()} == full  # unsharded, as the eager block's
        assert all(i.note.startswith(ALLGATHERED) and "FSDPBlock" in i.note for i in params.values())
        read = {info[n].qualname for n in saved_of_backward(backward[rank])
                if n in info and info[n].role == "parameter"}
        assert read and read <= set(full)
        saved = tr.saved("logged")
        rows = saved[saved["kind"] == "parameter"]
        assert {info[n].qualname for n in rows.index} == read
        assert rows["what"].str.contains("all-gathered by FSDP2's FSDPBlock").all()
        assert "parameters all-gathered by FSDP2" in " ".join(saved_text(saved, "block").split())  # its header
        found = [f for f in tr.doctor("logged").diagnosis.findings if f.kind == "allgathered"]
        assert len(found) == 1 and found[0].bytes == sum(full[q] for q in read)
        table = tr.memory_table(["logged"])
        assert found[0].bytes == int(table["saved_param_bytes"].iloc[0])
        acts = int(table["saved_activation_bytes"].iloc[0])
        assert format_bytes(acts) + " activations" in found[0].message
        assert "reshard_after_forward=True" in found[0].message and all(q in found[0].message for q in read)
