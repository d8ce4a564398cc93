"""Logs from anywhere (issue 33): a run logged on another device, by another torch, with ops this
process lacks, with higher-order ops, or ending without a final newline.  Every log is written here
by real torch.compile in a fresh process; where this CPU machine cannot write the kind of log itself,
the test says how it derives it from a real one (and only labels change, never values)."""

from __future__ import annotations

import ast
import hashlib
import json
import re
import warnings

import pytest
import torch

import fxviz
from fxviz import _torch
from fxviz.core.errors import FxvizWarning, LogError
from fxviz.sources.log.reader import ReadStats, other_torch_notes, read_records

from .logs_util import make_log

SMALL = """
import sys, torch, torch.nn as nn
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.ln = nn.LayerNorm(16)
        self.head = nn.Linear(16, 4)
    def forward(self, x):
        h = self.ln(torch.nn.functional.gelu(self.fc(x)))
        h = torch.nn.functional.dropout(h, 0.1, training=True)
        return self.head(h).softmax(-1).sum()
torch.manual_seed(0)
torch.compile(M(), backend=sys.argv[1])(torch.randn(4, 8)).backward()
"""

CUSTOM_OP = """
import torch, torch.nn as nn

@torch.library.custom_op("mylib::scale_shift", mutates_args=())
def scale_shift(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x * w + 1.0, (x * w).sum(-1)

@scale_shift.register_fake
def _(x, w):
    return torch.empty_like(x), x.new_empty(x.shape[:-1])

def backward(ctx, g, g2):
    x, w = ctx.saved_tensors
    g = g + g2.unsqueeze(-1)
    return g * w, (g * x).sum(0)

def setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)

scale_shift.register_autograd(backward, setup_context=setup)

class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.w = nn.Parameter(torch.ones(8))
        self.head = nn.Linear(8, 2)
    def forward(self, x):
        h, s = torch.ops.mylib.scale_shift(torch.tanh(self.fc(x)), self.w)
        return self.head(h).sum() + s.sum()

torch.manual_seed(0)
torch.compile(M(), backend="aot_eager")(torch.randn(4, 8)).backward()
"""

FLEX = """
import torch
from torch.nn.attention.flex_attention import flex_attention
def shift(score, b, h, q, kv):
    return score + (q - kv)
q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
torch.compile(lambda q, k, v: flex_attention(q, k, v, score_mod=shift).sum(), backend="aot_eager")(q, k, v)
"""

_HEADER = re.compile(r"^(.*?\] )(\{.*\})\s*$")


def _records(directory, kinds):
    """(kind, payload) of every record of ``kinds``, in log order, read with the plain reader."""
    out = []
    for f in sorted(directory.iterdir()):
        with open(f, "rb") as fh:
            out += [(r.kind, r.payload) for r in read_records(fh, ReadStats(), keep=lambda r: r.kind in kinds)
                    if r.kind in kinds]
    return out


def _backward_reads(payload):
    """The backward graph's inputs that are not tangents: what the run saved."""
    names = []
    for line in payload.splitlines():
        m = re.match(r'^\s+(\w+): "[^"]*",\s*(?:#\s*(.*))?$', line)
        if m and not (m.group(2) or "").startswith("TangentAOTInput") and not m.group(1).startswith("tangents_"):
            names.append(m.group(1))
    return names


def _rewrite(src_dir, dst_dir, payload_fn=lambda t: t, envelope_fn=lambda e: e):
    """Copy a log, rewriting each record's payload text and envelope; every md5 torch wrote
    (``has_payload``) is recomputed for the new payload, so the copy is a well-formed log."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    for src in src_dir.iterdir():
        lines = src.read_text().splitlines(keepends=True)
        out, i = [], 0
        while i < len(lines):
            m = _HEADER.match(lines[i])
            if m is None:
                out.append(lines[i])
                i += 1
                continue
            env = json.loads(m.group(2))
            j = i + 1
            while j < len(lines) and lines[j].startswith("\t"):
                j += 1
            payload = [line[1:].rstrip("\n") for line in lines[i + 1:j]]
            text = payload_fn("\n".join(payload))
            if "has_payload" in env:
                env["has_payload"] = hashlib.md5(text.encode()).hexdigest()
            out.append(m.group(1) + json.dumps(envelope_fn(env)) + "\n")
            out += ["\t" + p + "\n" for p in text.split("\n")] if payload else []
            i = j
        (dst_dir / src.name).write_text("".join(out))
    return dst_dir


def _on_cuda(text):
    """A payload's device labels moved from cpu to cuda:0 (sizes, strides, dtypes untouched)."""
    text = re.sub(r"\]cpu\b", "]cuda:0", text)
    return text.replace("device(type='cpu')", "device(type='cuda', index=0)")


def _envelope_on_cuda(env):
    for v in env.values():
        if isinstance(v, dict) and v.get("device") == "device(type='cpu')":
            v["device"] = "device(type='cuda', index=0)"
    return env


@pytest.fixture(scope="module")
def aot_log(tmp_path_factory):
    return make_log(SMALL, tmp_path_factory.mktemp("aot") / "trace", "aot_eager")


@pytest.fixture(scope="module")
def inductor_log(tmp_path_factory):
    return make_log(SMALL, tmp_path_factory.mktemp("ind") / "trace", "inductor")


def _every_view(log, tmp_path, capsys):
    """Every CLI view of the log's first graph: each answers (exit 0), none is an internal error."""
    from fxviz.frontends.cli.entry import main

    outs = {}
    for argv in (["logs", str(log)], ["nodes", "--logs", str(log)], ["table", "--logs", str(log)],
                 ["doctor", "--logs", str(log)], ["saved", "--logs", str(log)], ["code", "--logs", str(log)],
                 ["draw", "--logs", str(log), "-o", str(tmp_path / "g.svg")],
                 ["report", "--logs", str(log), "-o", str(tmp_path / "r.html")]):
        assert main(argv) == 0, (argv, capsys.readouterr().err)
        outs[argv[0]] = capsys.readouterr().out
    return outs


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_cuda_log_reads_on_this_cpu(backend, request, tmp_path, capsys):
    """A CUDA run's log read without a GPU.  A CPU-only torch cannot write one: AOTAutograd over
    fake cuda tensors aborts in autograd ("PyTorch is not linked with support for cuda devices",
    autograd's InputMetadata needs a cuda device guard), so the log is a real CPU run's with every
    device label moved to cuda:0 (md5s recomputed): exactly what the run's text would say on cuda
    for these ops.  inductor's joint passes, which trace their patterns with real tensors on the
    graph's device, are replayed and say how."""
    cpu_log = request.getfixturevalue("aot_log" if backend == "aot_eager" else "inductor_log")
    log = _rewrite(cpu_log, tmp_path / "cuda", _on_cuda, _envelope_on_cuda)
    assert "]cuda:0" in next(log.iterdir()).read_text()
    if not torch.cuda.is_available():
        with pytest.raises((RuntimeError, AssertionError)):
            torch.empty(1, device="cuda")  # this torch cannot make the run's tensors
    tr = fxviz.load_logs(log).trace()
    devices = {str(v.device) for n in tr.joint.graph.nodes
               if isinstance(v := _torch.meta_val(n), torch.Tensor)}
    assert devices == {"cuda:0"}
    ((_, bwd),) = _records(log, {"aot_backward_graph"})
    p = tr.partition("logged")
    assert p.ok, p.error
    assert sorted(p.saved) == sorted(_backward_reads(bwd))
    table = tr.memory_table()
    assert table["error"].isna().all(), table[["strategy", "error"]]
    # the same run on cpu: every strategy saves the same values (the device is only a label)
    ref = fxviz.load_logs(cpu_log).trace()
    for s in ("logged", "default", "min_cut"):
        assert tr.partition(s).saved == ref.partition(s).saved, s
    if backend == "inductor":
        note = [w for w in tr.capture.warnings if "joint-graph passes" in w]
        assert note and "as for a cpu graph" in note[0] and "cuda" in note[0]
        assert [n.target for n in tr.joint.graph.nodes] == [n.target for n in ref.joint.graph.nodes]
    outs = _every_view(log, tmp_path, capsys)
    assert "0/0" in outs["logs"]


def test_a_log_without_descriptors_from_an_older_torch(aot_log, tmp_path):
    """A torch older than 2.9 prints no ``# PlainAOTInput`` comments.  The fixture is this torch's
    own log with every descriptor comment stripped and its torch_version artifact saying 2.7.1 (a
    real 2.5-2.8 log needs another torch, in the compatibility venvs, not in CI)."""
    def strip(text):
        return re.sub(r"  # (?:\w+AOT(?:Input|Output)\(.*|None)$", "", text, flags=re.M)

    log = _rewrite(aot_log, tmp_path / "old", strip)
    for f in log.iterdir():
        f.write_text(re.sub(r'"pytorch_version": "[^"]*"', '"pytorch_version": "2.7.1"', f.read_text()))
    text = "".join(f.read_text() for f in log.iterdir())
    assert "PlainAOTInput(" not in text.split("aot_joint_graph")[1]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        run = fxviz.load_logs(log)
    other = [str(w.message) for w in seen if issubclass(w.category, FxvizWarning) and "read with torch" in
             str(w.message)]
    assert len(other) == 1 and "2.7.1" in other[0] and torch.__version__ in other[0]
    assert run.torch_versions == ["2.7.1"]
    tr = run.trace()
    ref = fxviz.load_logs(aot_log).trace()
    roles = {n: (i.role, i.qualname) for n, i in tr.graph.info.items()}
    assert roles == {n: (i.role, i.qualname) for n, i in ref.graph.info.items()}
    assert {i.qualname for i in tr.graph.info.values() if i.role == "gradient"} == {
        "fc.weight", "fc.bias", "ln.weight", "ln.bias", "head.weight", "head.bias"}
    assert any("no AOT descriptors" in w for w in tr.capture.warnings)
    for s in ("logged", "default", "min_cut"):
        assert tr.partition(s).saved == ref.partition(s).saved, s
    # the torch is in the title, not in the frame a whole-step diff pairs graphs by ("why does 2.13 save more?")
    assert tr.capture.title.endswith("[torch 2.7.1]") and ref.capture.title.endswith(f"[torch {torch.__version__}]")
    assert tr.capture.source.frame == ref.capture.source.frame == "forward"
    d = fxviz.diff(run, fxviz.load_logs(aot_log), whole_step=True)
    assert d.totals[0] == d.totals[1] and (d.table["status"] == "both").all()
    assert [(p.a, p.b) for p in d.pairs] == [(0, 0)]
    # the listing counts the same saved values without descriptors (tangents by torch's names)
    listed = list(fxviz.load_logs(aot_log).graphs["saved"])
    assert list(run.graphs["saved"]) == listed == [len(ref.partition("logged").saved)]


def test_other_torch_notes():
    (note,) = other_torch_notes(["2.14.1", "2.14.1"], "2.13.0")
    assert "2.14.1" in note and "2.13.0" in note
    assert other_torch_notes(["2.13.1"], "2.13.0+cpu") == []


def test_a_custom_op_this_process_lacks(tmp_path, capsys):
    """``mylib::scale_shift`` is registered only in the process that writes the log."""
    log = make_log(CUSTOM_OP, tmp_path / "trace")
    assert not hasattr(torch.ops.mylib, "scale_shift")
    tr = fxviz.load_logs(log).trace()
    op = next(n for n in tr.joint.graph.nodes if n.op == "call_function" and "scale_shift" in str(n.target))
    assert tr.graph.info[op.name].short_op == "mylib.scale_shift.default"
    assert _torch.LogGraphBuilder.stand_in_note(op) == "custom op, not registered here: shapes from the log"
    assert any("mylib.scale_shift.default: custom op, not registered here: shapes from the log" in w
               for w in tr.capture.warnings)
    note = "custom op, not registered here: shapes from the log"  # marked in every view, not only the warnings
    assert tr.nodes["note"].dropna().to_dict() == {op.name: note}
    saved = tr.saved("logged")
    of_op = [n for n in saved.index if n == op.name or n in {u.name for u in op.users}]  # its outputs
    assert of_op and all(saved.loc[n, "what"].endswith(f"({note})") for n in of_op)
    assert all(note not in w for n, w in saved["what"].items() if n not in of_op)
    from fxviz.render.text.saved_view import saved_text

    text = saved_text(saved, "t")  # fxviz saved: the note wrapped under its column, not cut
    assert "…" not in text and all(word in text.split() for word in f"({note})".split())
    drawn = [line for line in tr.draw("joint").source.splitlines() if note in line]
    assert len(drawn) == 1 and drawn[0].strip().startswith(f"{op.name} [label=")
    ((_, joint),) = _records(log, {"aot_joint_graph"})
    for user in op.users:  # each output has the logged dtype and shape
        m = re.search(rf'^\s+{user.name}: "(\w+)\[([^\]]*)\]', joint, re.M)
        assert m is not None
        val = _torch.meta_val(user)
        assert [int(s) for s in m.group(2).split(",") if s.strip()] == list(val.shape)
    with pytest.raises(LogError, match="not registered here"):
        op.target(torch.ones(2), torch.ones(2))  # nothing here knows what it computes
    ((_, bwd),) = _records(log, {"aot_backward_graph"})
    assert sorted(tr.partition("logged").saved) == sorted(_backward_reads(bwd))
    assert tr.memory_table()["error"].isna().all()
    assert "torch.ops.mylib.scale_shift.default(" in str(tr.code("forward", strategy="logged"))
    _every_view(log, tmp_path, capsys)


def test_flex_attention_kernel_options_and_subgraphs(tmp_path, capsys):
    """flex attention under torch.compile on CPU: forward only (its backward raises "FlexAttention
    does not support backward on CPU" on this torch), so the log holds an inference graph whose
    higher-order op takes two subgraphs and a kernel-options dict."""
    log = make_log(FLEX, tmp_path / "trace")
    ((_, code),) = _records(log, {"aot_inference_graph"})
    options = re.search(r"flex_attention\(.*?(\{.*?\})", code).group(1)
    run = fxviz.load_logs(log)
    tr = run.trace()
    gm = tr.joint
    # the listing counts the graph's own nodes, not its subgraphs' (it said 38 where the graph has 35)
    assert list(run.graphs["nodes"]) == [sum(n.op != "output" for n in gm.graph.nodes)]
    flex = next(n for n in gm.graph.nodes if n.target is torch.ops.higher_order.flex_attention)
    kernel_options = next(a for a in flex.args if isinstance(a, dict))
    assert kernel_options == ast.literal_eval(options)  # the literal the log prints
    subgraphs = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    assert subgraphs == {"sdpa_score0", "sdpa_mask0"}
    score = gm.get_submodule("sdpa_score0")
    assert [str(n.target) for n in score.graph.nodes if n.op == "call_function"] == ["aten.sub.Tensor",
                                                                                     "aten.add.Tensor"]
    out = next(u for u in flex.users if u.args[1] == 0)
    assert list(_torch.meta_val(out).shape) == [1, 2, 16, 8]
    assert "sdpa_score0" in str(tr.code("forward"))
    _every_view(log, tmp_path, capsys)


def test_truncation_is_judged_by_md5(aot_log, tmp_path):
    """A log whose last record lacks a final newline is whole when its payload matches its md5."""
    (src,) = list(aot_log.iterdir())
    data = src.read_bytes()
    start = data.index(b"aot_backward_graph")
    end = re.compile(rb"\n[VIWEC]\d{4} ").search(data, start).start() + 1  # where the next record starts
    whole = tmp_path / "whole.log"
    whole.write_bytes(data[:end].rstrip(b"\n"))
    cut = tmp_path / "cut.log"
    cut.write_bytes(data[:data.rindex(b"\n\t", start, end - 1) + 1])  # its last payload line missing
    with warnings.catch_warnings():
        warnings.simplefilter("error", FxvizWarning)
        warnings.filterwarnings("ignore", "the log was written by torch")
        run = fxviz.load_logs(whole)
    assert run.trace().partition("logged").ok
    with pytest.warns(FxvizWarning, match="truncated"):
        fxviz.load_logs(cut)
    for path, truncated in ((whole, False), (cut, True)):
        stats = ReadStats()
        with open(path, "rb") as f:
            list(read_records(f, stats))
        assert stats.truncated is truncated, path
