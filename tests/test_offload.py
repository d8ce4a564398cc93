"""Activation offloading as a fate of its own in every view (issue 33, item 9): the memory table, the
saved table, the timeline's peaks, the diff and the drawing, each checked against the graphs torch
logged.  The logs are real runs (``test_logs_config.OFFLOAD``: torch 2.13 on CPU offloads the ReLU
output a joint pass marks ``should_offload``), one with offloading switched off, and the offloading
run's text with its device labels moved to ``cuda:0`` as a CUDA run writes them: the forward copies
to the CPU (``cpu_offload_relu`` on cpu), the backward reloads onto cuda (``gpu_reload_relu``)."""

from __future__ import annotations

import re

import pytest

import fxviz

from .logs_util import make_log
from .test_logs_anywhere import _envelope_on_cuda, _every_view, _on_cuda, _records, _rewrite
from .test_logs_config import OFFLOAD

_ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8}


def _offload_on_cuda(text: str) -> str:
    """A CPU run's payload as the same run on cuda:0 writes it: every value on cuda:0 except the
    offloaded copies (``cpu_offload_*``), which torch puts on the CPU."""
    lines = _on_cuda(text).split("\n")
    return "\n".join(line.replace("]cuda:0", "]cpu").replace("device(type='cuda', index=0)", "device(type='cpu')")
                     if line.lstrip().startswith("cpu_offload_") else line for line in lines)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    root = tmp_path_factory.mktemp("offload")
    cpu = make_log(OFFLOAD, root / "cpu")
    plain = make_log(OFFLOAD.replace("enable_activation_offloading = True", "enable_activation_offloading = False"),
                     root / "plain")
    cuda = _rewrite(cpu, root / "cuda", _offload_on_cuda, _envelope_on_cuda)
    return {"cpu": cpu, "plain": plain, "cuda": cuda}


def _copy(log, kind="aot_forward_graph"):
    """(name, bytes, device) of each offloaded copy as the logged graph annotates it."""
    ((_, text),) = _records(log, {kind})
    out = []
    for m in re.finditer(r'^\s+(cpu_offload_\w+): "(\w+)\[([\d, ]*)\]\[[\d, ]*\](\S+)"', text, re.M):
        numel = 1
        for s in filter(None, m.group(3).split(",")):
            numel *= int(s)
        out.append((m.group(1), numel * _ITEMSIZE[m.group(2)], m.group(4)))
    return out


def test_offloaded_bytes_are_not_the_devices_activations(logs):
    """The copy torch saves is ``offloaded_bytes`` (its size as the logged forward graph prints it),
    not ``saved_activation_bytes``; the same run without offloading saves the value on the device
    instead, so its activations are this run's plus the copy; the saved table's kinds add up."""
    plain = fxviz.load_logs(logs["plain"]).trace().memory_table(["logged"]).iloc[0]
    for name in ("cpu", "cuda"):
        ((copy, nbytes, device),) = _copy(logs[name])
        assert device == "cpu"
        tr = fxviz.load_logs(logs[name]).trace()
        table = tr.memory_table(["logged", "default_partition"])
        row = table.iloc[0]
        assert row["offloaded_bytes"] == nbytes and table.iloc[1]["offloaded_bytes"] == 0
        assert row["saved_activation_bytes"] + nbytes == plain["saved_activation_bytes"]
        assert "offloaded_bytes: logged offloads 1 saved value(s) with torch's activation offloading (relu to cpu)" \
            in table.attrs["caption"]
        saved = tr.saved("logged", compare=["default_partition"])
        sums = saved.groupby("kind")["bytes"].sum()
        assert sums["offloaded"] == nbytes and sums.get("activation", 0) == row["saved_activation_bytes"]
        off = saved.loc[f"forward:{copy}"]
        assert (off["kind"], off["default_partition"]) == ("offloaded", "saved")  # default saves the value it holds
        assert tr.saved("default_partition", compare=["logged"]).loc["relu", "logged"] == "offloaded"
        assert "offloaded_bytes (kind 'offloaded'" in saved.attrs["caption"]
        assert tr.saved("logged").by_module()["saved_activation_bytes"].sum() == row["saved_activation_bytes"]
        step = tr.memory_table(["logged"], scope="step")  # the whole step: the copies are a total of their own
        total = step[(step["piece"] == "total") & (step["strategy"] == "logged")].iloc[0]
        assert (total["offloaded_bytes"], total["saved_activation_bytes"]) == (nbytes, row["saved_activation_bytes"])
        # the listing reads the same split from the printed graphs alone (fxviz logs, Run.totals)
        run = fxviz.load_logs(logs[name])
        assert list(run.graphs["saved_bytes"]) == [row["saved_activation_bytes"]]
        totals = run.totals().iloc[0]
        assert (totals["saved_activation_bytes"], totals["offloaded_bytes"]) == (row["saved_activation_bytes"], nbytes)


def test_peaks_count_an_offloaded_value_only_on_the_device(logs):
    """On cuda the copy lives on the host: the device's curve is the CPU run's less the copy from the
    forward's copy node to the end and in the backward until the reload reads it; the tables' unfused
    peaks are the curves' tops.  On the CPU run the copy is in the same memory: the caption says so."""
    ((copy, nbytes, _),) = _copy(logs["cuda"])
    ((_, bwd),) = _records(logs["cuda"], {"aot_backward_graph"})
    reload = re.search(rf"^\s+(\w+): \"\w+\[[^\]]*\]\[[^\]]*\]cuda:0\" = torch\.ops\.prims\.device_put\.default\("
                       rf"{copy}, device\(type='cuda'", bwd, re.M)
    assert reload is not None
    cpu, cuda = (fxviz.load_logs(logs[n]).trace() for n in ("cpu", "cuda"))
    curves = {n: t.memory_timeline("logged", unfused=True) for n, t in (("cpu", cpu), ("cuda", cuda))}
    for phase in ("forward", "backward"):
        a = curves["cpu"][curves["cpu"]["phase"] == phase].reset_index(drop=True)
        b = curves["cuda"][curves["cuda"]["phase"] == phase].reset_index(drop=True)
        assert list(a["node"]) == list(b["node"])
        nodes = list(a["node"])
        if phase == "forward":
            off = [i >= nodes.index(copy) for i in range(len(nodes))]
        else:
            off = [i < nodes.index(reload.group(1)) + 1 for i in range(len(nodes))]
        assert list(a["live_bytes"] - b["live_bytes"]) == [nbytes if o else 0 for o in off], phase
    for tr, curve in ((cpu, curves["cpu"]), (cuda, curves["cuda"])):
        row = tr.memory_table(["logged"]).iloc[0]
        peaks = curve.groupby("phase")["total_bytes"].max()
        assert (row["unfused_forward_peak_bytes"], row["unfused_backward_peak_bytes"]) == (peaks["forward"],
                                                                                             peaks["backward"])
    assert "storages on cpu are left out" in cuda.memory_table(["logged"]).attrs["caption"]
    assert "the device the value was on, stays in the same memory" in cpu.memory_table(["logged"]).attrs["caption"]


def test_a_diff_says_saved_on_one_side_and_offloaded_on_the_other(logs, capsys):
    """The run without offloading against the run with it: the ReLU output is one row, saved by A and
    offloaded by B, not a value only one side saves; B's activations are A's less the copy."""
    ((_, nbytes, _),) = _copy(logs["cuda"])
    d = fxviz.diff(fxviz.load_logs(logs["plain"]).trace(), fxviz.load_logs(logs["cuda"]).trace())
    table = d.table
    assert not table["status"].isin(["only A", "only B"]).any(), table
    (row,) = [r for _, r in table.iterrows() if r["status"] == "offloaded"]
    assert (row["name_a"], row["name_b"], row["offloaded"], row["kind"]) == ("relu", "relu", "B", "activation")
    assert row["why"] == "A saves relu; B offloads it to cpu"
    a, b = d.totals
    assert a - b == nbytes and int(d.by_module["change"].sum()) == -nbytes
    from fxviz.frontends.cli.entry import main

    assert main(["diff", "--logs-a", str(logs["plain"]), "--logs-b", str(logs["cuda"])]) == 0
    out = capsys.readouterr().out
    assert "A saves relu; B offloads it to cpu" in out and "1 offloaded" in out
    assert "offloaded (copies on another device): A 0 B, B 1 KiB" in out


def test_ops_that_read_the_reloaded_copy_are_the_joint_ops(logs):
    """The logged backward's ops on the reloaded copy (``mm(t_3, gpu_reload_relu)``) are the joint's
    ops on ``relu``: nothing the backward runs is 'removed' (the gradients of ``a`` were drawn so),
    exactly as in the same run without offloading."""
    plain = fxviz.load_logs(logs["plain"]).trace().partition("logged")
    for name in ("cpu", "cuda"):
        tr = fxviz.load_logs(logs[name]).trace()
        p = tr.partition("logged")
        assert p.removed == plain.removed
        grads = [n for n, i in tr.graph.info.items() if i.role == "gradient"]
        assert grads and not set(grads) & p.removed


def test_the_drawing_marks_an_offloaded_value(logs):
    """The joint view marks the value torch offloaded, the forward its copy and the backward the copy
    it reads: the saved border dashed, 'offloaded to cpu', a legend entry; nothing else is so marked."""
    tr = fxviz.load_logs(logs["cuda"]).trace()
    ((copy, _, _),) = _copy(logs["cuda"])
    for view, node in (("joint", "relu"), ("forward", copy), ("backward", copy)):
        dot = tr.draw(view=view, group="none").source
        marked = re.findall(r'^\s*"?(\w+)"? \[[^\n]*fx-offloaded', dot, re.M)
        assert marked == [node], (view, marked)
        assert "offloaded to cpu 1 KiB" in dot and "offloaded (a copy on another device)" in dot
    assert "offloaded" not in fxviz.load_logs(logs["plain"]).trace().draw(view="joint", group="none").source


@pytest.mark.parametrize("name", ["cpu", "cuda"])
def test_every_view_of_an_offloading_log(logs, name, tmp_path, capsys):
    outs = _every_view(logs[name], tmp_path, capsys)
    assert "1 KiB offloaded" in outs["saved"] and "offloaded_bytes" in outs["table"]
    assert "enable_activation_offloading=True" in outs["doctor"]
