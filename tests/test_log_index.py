"""The log index without torch (issues 31, 33, 36): every compile listed with its status, ranks
from names or records, stray files skipped; views default to the first rank that has the graph.
Every log here is written by a real run the test makes (a failing backend, a backward never run,
torch.export), then copied, renamed or cut by record as a user's directory would be."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import fxviz
from fxviz.core.errors import FxvizWarning, LogError
from fxviz.sources.log import reader
from fxviz.sources.log.index import GRAPH_KINDS, FileIndex, graph_rows
from fxviz.sources.log.signature import ASSIGNS, ITEMSIZE, VIEW_OPS, GraphText, saved_bytes, storage_bytes

from .logs_util import make_log

FAILING_BACKEND = """
import torch
def broken(gm, example_inputs):
    raise RuntimeError("this backend always fails")
def f(x):
    return torch.relu(x) * 2
def g(x):
    return (torch.sin(x) * x).sum()
try:
    torch.compile(f, backend=broken)(torch.randn(4, requires_grad=True))
except Exception as e:
    print("raised", type(e).__name__)
torch.compile(g, backend="aot_eager")(torch.randn(4, requires_grad=True))  # its backward is never run
"""

EXPORT = """
import torch
m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
torch.export.export(m, (torch.randn(2, 4),)).run_decompositions()
"""


VIEWS = """
import torch
def f(x, w):
    h = (x @ w).view(4, 2, 8)
    a, b = h.chunk(2, -1)  # a multi-output view: its items share h's storage
    return (torch.tanh(a) * b.transpose(1, 2).transpose(1, 2).contiguous() + h.sum()).sum()
x, w = torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)
torch.compile(f, backend="aot_eager")(x, w).backward()
"""


@pytest.fixture(scope="module")
def fail_log(tmp_path_factory):
    return make_log(FAILING_BACKEND, tmp_path_factory.mktemp("fail") / "trace")


def _only_file(directory):
    (f,) = [p for p in directory.iterdir() if p.is_file()]
    return f


def _without_aot_graphs(src, dst):
    """A copy of a log without its AOT graph records (header and payload), as a rank that compiled
    nothing through AOTAutograd writes it."""
    out, skipping = [], False
    for line in src.read_bytes().splitlines(keepends=True):
        if line.startswith(b"\t"):
            if not skipping:
                out.append(line)
            continue
        m = re.search(rb'\] (\{"(\w+)")', line)
        skipping = bool(m) and m.group(2).decode() in GRAPH_KINDS
        if not skipping:
            out.append(line)
    dst.write_bytes(b"".join(out))
    return dst


def test_listing_loads_no_torch(fail_log):
    """``fxviz logs`` needs the index only: reading, the rows, the totals and the summary load
    neither torch nor pandas."""
    code = ("import sys, json\nfrom fxviz.api.run import load_logs\n"
            f"run = load_logs({str(fail_log)!r})\nrows = run.rows(); run.total_rows(); text = run.summary()\n"
            "print(json.dumps([len(rows), sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'pandas'))]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env=os.environ.copy(), check=True)
    n, heavy = json.loads(out.stdout.strip().splitlines()[-1])
    assert n == 2 and heavy == []


def test_failed_compile_and_backward_never_run(fail_log):
    run = fxviz.load_logs(fail_log)
    rows = run.graphs.set_index("compile_id")
    failed = rows.loc["0/0"]
    assert failed["status"] == "failed" and failed["fail_type"] == "BackendCompilerFailed"
    assert "this backend always fails" in failed["fail_reason"] and "\n" not in failed["fail_reason"]
    assert failed["backend"] is None and not failed["joint"]  # the frame compiled nothing: no backend shown
    ok = rows.loc["1/0"]
    assert ok["status"] == "compiled" and ok["backend"] == "aot_eager"
    # the backward was never run, yet torch logged it when it partitioned: its saved bytes are listed,
    # and they are what the rebuilt graph's memory table counts
    tr = run.trace()
    assert tr.capture.origin == "rank 0, compile 1/0"
    assert int(ok["saved_bytes"]) == int(tr.memory_table(["logged"]).iloc[0]["saved_activation_bytes"])
    assert "1 failed compile(s)" in run.summary() and "BackendCompilerFailed" in run.summary()
    with pytest.raises(LogError, match="compile 0/0 on rank 0 has no AOT graph to rebuild "
                                       r"\(failed: BackendCompilerFailed: .*this backend always fails"):
        run.trace(compile_id="0/0")


def test_a_log_without_aot_graphs_is_listed(fail_log, tmp_path):
    d = tmp_path / "none"
    d.mkdir()
    _without_aot_graphs(_only_file(fail_log), d / "x.log")
    run = fxviz.load_logs(d)  # never refused: a readable log is listed
    assert run.graphs["status"].tolist() == ["failed", "no AOT graph"]
    with pytest.raises(LogError, match=r"rank 0 logged no AOT graph \(1 failed, 1 no AOT graph\)") as err:
        run.trace()
    assert "2 compile(s): 1 failed, 1 no AOT graph" in err.value.hint


def test_a_log_that_ends_inside_a_compile(fail_log, tmp_path, capsys):
    """A run stopped mid-compile (walk F2): its last compile has dynamo's records and no metrics.  It is
    'unfinished', not 'ran as plain Python' and not a backend without AOTAutograd."""
    text = _only_file(fail_log).read_text()
    last_start = [m.start() for m in re.finditer(r"^\S.*\{\"dynamo_start\"", text, flags=re.M)][-1]
    cut = re.search(r"^\S.*\{\"(?:aot_joint_graph|aot_forward_graph)\"", text[last_start:], flags=re.M)
    d = tmp_path / "cut"
    d.mkdir()
    (d / "x.log").write_text(text[:last_start + cut.start()])  # at a record's start: no false truncation
    run = fxviz.load_logs(d)
    assert run.graphs["status"].tolist() == ["failed", "unfinished"]
    assert [f.split(" ")[0] for f in run.eager_frames(0)] == ["f"]  # the failed one, not the unfinished one
    assert "unfinished: compile 1/0 (g): the log ends inside it" in run.summary()
    from fxviz.frontends.cli.entry import main

    assert main(["logs", str(d)]) == 0
    assert "unfinished" in capsys.readouterr().out


def test_export_inference_graph_without_dynamo(tmp_path):
    """torch.export logs an ``aot_inference_graph`` with no dynamo frame: listed and rebuilt."""
    run = fxviz.load_logs(make_log(EXPORT, tmp_path / "export"))
    row = run.graphs.iloc[0]
    assert (row["compile_id"], row["status"], row["backend"], row["inference"]) == ("-", "inference", "export", True)
    tr = run.trace()
    assert tr.graph.inference and {i.short_op for i in tr.graph.info.values()} >= {"addmm", "relu"}


def test_ranks_from_names_stray_files_and_rank_zero_without_graphs(fail_log, tmp_path):
    src = _only_file(fail_log)
    d = tmp_path / "ranks"
    d.mkdir()
    shutil.copy(src, d / "a_trace_rank_1_x.log")  # sorts first: a rank never comes from file order
    _without_aot_graphs(src, d / "b_trace_rank_0_x.log")
    (d / "notes.txt").write_text("not a log\n")
    (d / "core.json").write_text("{}\n")
    with pytest.warns(FxvizWarning, match=r"2 file\(s\) are not TORCH_TRACE logs") as seen:
        run = fxviz.load_logs(d)
    strays = [w for w in seen if "not TORCH_TRACE logs" in str(w.message)]
    assert len(strays) == 1 and "notes.txt" in str(strays[0].message)  # one warning for them all
    assert run.ranks == [0, 1] and not run.notes
    assert run.graphs[run.graphs["rank"] == 0]["status"].tolist() == ["failed", "no AOT graph"]
    tr = run.trace()  # rank 0 compiled no graph: the first rank that did, and it says so
    assert tr.capture.origin.startswith("rank 1,")
    assert any("rank 0 logged no such graph: this is rank 1's" in w for w in tr.capture.warnings)
    with pytest.raises(LogError, match="rank 0 logged no AOT graph") as err:
        run.trace(rank=0)
    assert "rank(s) 1 have it" in err.value.hint
    assert "no log of rank" not in run.summary()
    (d / "b_trace_rank_0_x.log").unlink()  # rank 0's file missing: said, not just "1 rank(s)"
    with pytest.warns(FxvizWarning):
        alone = fxviz.load_logs(d)
    assert alone.ranks == [1] and "1 rank(s) (no log of rank 0: the directory has no file for it)" in alone.summary()


def _streamed_rows(text):
    """The data rows ``fxviz logs`` printed, cut at its fixed column widths: {graph: {column: cell}}."""
    from fxviz.frontends.cli.logs_table import StreamedTable

    widths = StreamedTable.WIDTHS
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "graph"]) + 1
    rows = {}
    for line in lines[start:]:
        if not re.match(r"^\s*\d+ ", line):
            break
        cells, at = {}, 0
        for name, w in widths.items():
            cells[name] = line[at:at + w].strip()
            at += w + 1
        rows[cells["graph"]] = cells
    return rows


def test_listing_shows_the_writing_torch_and_every_status(fail_log, capsys):
    """``fxviz logs``: the header and the summary name the torch the log's ``torch_version`` record
    names; the streamed table's status column is ``Run.graphs``' status; a failure is a numbered note."""
    from fxviz.frontends.cli.entry import main
    from fxviz.sources.log.reader import ReadStats, read_records

    with open(_only_file(fail_log), "rb") as f:
        (written,) = [json.loads(r.payload)["pytorch_version"] for r in read_records(
            f, ReadStats(), keep=lambda r: r.artifact_name == "torch_version") if r.artifact_name == "torch_version"]
    assert main(["logs", str(fail_log)]) == 0
    text = capsys.readouterr().out
    assert text.replace("\n    ", " ").splitlines()[0].endswith(
        f"the compiles as they are read (written by torch {written})")
    assert f"AOT graph(s), written by torch {written}" in text.replace("\n    ", " ")
    rows = _streamed_rows(text)
    expected = fxviz.load_logs(fail_log).graphs.set_index("compile_id")["status"]
    assert {g: r["status"] for g, r in rows.items()} == expected.to_dict() == {"0/0": "failed", "1/0": "compiled"}
    number = re.fullmatch(r"\[(\d+)\]", rows["0/0"]["notes"])
    assert number is not None
    assert re.search(rf"^\[{number.group(1)}\] 0/0 failed: BackendCompilerFailed: .*this backend always fails",
                     text.replace("\n    ", " "), re.M)
    assert main(["table", "--logs", str(fail_log)]) == 0  # a view's header names the torch too
    assert f"g [torch {written}], rank 0, compile 1/0" in capsys.readouterr().out.replace("\n    ", " ")


def test_no_rank_means_the_first_rank_with_the_graph_in_every_front_end(fail_log, tmp_path, capsys):
    """``--rank`` left out (CLI), ``rank=None`` (report, explorer): rank 0 has no AOT graph, so the
    first rank that has one, and the CLI's line says so."""
    from fxviz.frontends.cli.entry import main

    src = _only_file(fail_log)
    d = tmp_path / "ranks"
    d.mkdir()
    shutil.copy(src, d / "trace_rank_1_x.log")
    _without_aot_graphs(src, d / "trace_rank_0_x.log")
    assert main(["table", "--logs", str(d)]) == 0
    out = capsys.readouterr().out.replace("\n    ", " ")
    assert "rank 1, compile 1/0 (aot_eager): 1 of 2 compile(s) on rank 1 (no --rank: rank 0 has no such graph; " \
           "the first rank that has it)" in out
    assert main(["table", "--logs", str(d), "--rank", "0"]) == 2  # an input error, with its fix
    assert ("rank 0 logged no AOT graph (1 failed, 1 no AOT graph) (hint: rank(s) 1 have it: --rank 1)"
            in capsys.readouterr().err)
    run = fxviz.load_logs(d)
    html = fxviz.report(run, tmp_path / "r.html")
    assert html.exists()
    pytest.importorskip("ipywidgets")
    from fxviz.frontends.widgets.run_explorer import RunExplorer

    explorer = RunExplorer(run)
    assert (explorer.rank_control.value, explorer.graph_control.value) == (1, (1, "1/0", 0))


def test_missing_rank_zero_by_renamed_files(fail_log, tmp_path):
    src = _only_file(fail_log)
    d = tmp_path / "renamed"
    d.mkdir()
    shutil.copy(src, d / "trace_rank_3_.log")
    shutil.copy(src, d / "trace_rank_1_.log")
    run = fxviz.load_logs(d)
    assert run.ranks == [1, 3] and sorted(set(run.graphs["rank"])) == [1, 3]
    tr = run.trace()
    assert tr.capture.origin.startswith("rank 1,")
    assert any("rank 0 is not in the log: this is rank 1's (ranks with it: 1, 3)" in w for w in tr.capture.warnings)
    with pytest.raises(LogError, match="no rank 0"):
        run.trace(rank=0)
    # files that name no rank: the only one is rank 0; several take free ranks, and the run says so
    d2 = tmp_path / "unnamed"
    d2.mkdir()
    shutil.copy(src, d2 / "one.log")
    assert fxviz.load_logs(d2).ranks == [0]
    shutil.copy(src, d2 / "two.log")
    shutil.copy(src, d2 / "trace_rank_0_.log")
    run = fxviz.load_logs(d2)
    assert run.ranks == [0, 1, 2] and len(run.notes) == 2 and "one.log names no rank" in run.notes[0]


def test_view_ops_are_torchs():
    """The torch-free list of ops whose output shares their input's storage is torch's: every aten
    op whose schema returns an alias of its first argument, and no other (``_unsafe_view`` aside,
    whose output shares the storage though its schema does not say so)."""
    torch = pytest.importorskip("torch")
    views = set()
    for s in torch._C._jit_get_all_schemas():
        ret = s.returns[0].alias_info if s.returns else None
        if (s.name.startswith("aten::") and not s.name.endswith("_") and ret is not None and not ret.is_write
                and s.arguments and str(s.arguments[0].type) == "Tensor"):
            views.add(s.name[len("aten::"):])
    assert views == VIEW_OPS - {"_unsafe_view"}


def test_itemsizes_are_torchs():
    """Every dtype abbreviation torch prints in a graph's annotations, with its dtype's item size."""
    pytest.importorskip("torch")
    from torch.utils._dtype_abbrs import dtype_abbrs

    assert {a: dt.itemsize for dt, a in dtype_abbrs.items()} == ITEMSIZE


def test_storage_bytes_from_an_annotation():
    assert storage_bytes("f32[2, 8, 16][128, 16, 1]cpu", {}) == 2 * 8 * 16 * 4
    assert storage_bytes("f32[4, 8, 8][64, 1, 8]cpu", {}) == 4 * 8 * 8 * 4  # a transposed view: same extent
    assert storage_bytes("bf16[s77, 16][16, 1]cuda:0", {"s77": 6}) == 6 * 16 * 2
    assert storage_bytes("f32[2*s0 + 1][1]cpu", {"s0": 3}) == 7 * 4
    assert storage_bytes("f32[s9][1]cpu", {}) is None  # a size the log gives no value for
    assert storage_bytes("f32[0, 4][4, 1]cpu", {}) == 0 and storage_bytes("f32[][]cpu", {}) == 4


def _read(path, block, monkeypatch):
    monkeypatch.setattr(reader, "_BLOCK", block)
    stats = reader.ReadStats()
    with open(path, "rb") as f:
        records = [(r.kind, r.envelope, r.payload_offset, r.payload)
                   for r in reader.read_records(f, stats, lambda r: True)]
    index = FileIndex(str(path))
    index.read()
    return records, stats, [graph_rows(c) for c in index.compiles.values()]


def test_records_whatever_the_block(fail_log, monkeypatch):
    """The reader searches the file a block at a time: every payload is the one torch wrote (its md5 is
    the one torch put in the record's envelope), and records, stats and the index's rows are the same
    whatever the block's size, a record's header or payload split across blocks included."""
    path = _only_file(fail_log)
    records, stats, rows = _read(path, 1 << 23, monkeypatch)
    digests = [(hashlib.md5(payload.encode()).hexdigest(), env["has_payload"]) for _, env, _, payload in records
               if "has_payload" in env]
    assert len(digests) > 20 and all(mine == torchs for mine, torchs in digests)
    assert (stats.truncated, stats.corrupt_lines, stats.bytes) == (False, 0, path.stat().st_size)
    for block in (1, 7, 4096):
        assert _read(path, block, monkeypatch) == (records, stats, rows)


def test_saved_storages_read_lazily_as_in_order(tmp_path):
    """The index reads a forward graph's value lines only along the saved values' storage chains (a view's
    input, a split's items); reading every line in order, as a graph that assigns a name twice is read,
    gives every value the same storage, and the saved bytes are what torch's rebuilt graph counts."""
    log = make_log(VIEWS, tmp_path / "views")
    with open(_only_file(log), "rb") as f:
        kept = reader.read_records(f, reader.ReadStats(), lambda r: r.kind in GRAPH_KINDS)
        graphs = {r.kind: b"\n" + r.raw for r in kept if r.raw is not None}
    lines = graphs["aot_forward_graph"]
    lazy, ordered = GraphText(lines), GraphText(lines)
    found = ASSIGNS.findall(lines)
    ordered._assigned = {line[0]: line for line in found}
    ordered._read_in_order(found)
    names = [line[0].decode() for line in found] + list(lazy.inputs)
    assert [lazy.storage(n) for n in names] == [ordered.storage(n) for n in names]
    assert any(lazy.storage(n)[0] != n for n in names)  # some value lives in another's storage
    backward = GraphText(graphs["aot_backward_graph"])
    assert saved_bytes(lazy, backward, {}) == saved_bytes(ordered, backward, {})
    run = fxviz.load_logs(log)
    assert int(run.graphs.iloc[0]["saved_bytes"]) == int(
        run.trace().memory_table(["logged"]).iloc[0]["saved_activation_bytes"])
