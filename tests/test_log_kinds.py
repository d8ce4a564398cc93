"""Every view on every kind of log works or refuses in one line that fits what the log holds (issue
33's walk): a dynamic-shape recompile, an inference-only run, a graph break.  Logs are written by
real ``torch.compile`` runs here; what the views say is checked against the run's own graphs."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

import fxviz
from fxviz.core.errors import FxvizWarning
from fxviz.frontends.cli.entry import main

from .logs_util import BREAK_AND_RECOMPILE, make_log

INFERENCE = """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
with torch.no_grad():
    torch.compile(m, backend="aot_eager")(torch.randn(3, 4))
"""


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Two runs, logged in parallel: a graph break with a recompile (compiles 0/0, 0/1 with symbolic
    sizes, 1/0, 1/1) and an inference-only step."""
    from concurrent.futures import ThreadPoolExecutor

    root = tmp_path_factory.mktemp("kinds")
    with ThreadPoolExecutor(2) as pool:
        made = pool.map(lambda kv: make_log(kv[1], root / kv[0]),
                        (("breakrecompile", BREAK_AND_RECOMPILE), ("inference", INFERENCE)))
        return dict(zip(("breakrecompile", "inference"), made))


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_advise_on_a_dynamic_shape_graph_reads_sizes_at_the_logged_hints(logs, capsys):
    """A recompile's graph has symbolic sizes: the peak's tensors are listed at the sizes the run
    traced them with (the graph's own SymInt hints), not an internal error."""
    run = fxviz.load_logs(logs["breakrecompile"])
    tr = run.trace(compile_id="0/1")
    assert tr.graph.dynamic or any(isinstance(s, __import__("torch").SymInt) for n in tr.graph.gm.graph.nodes
                                   for s in getattr(n.meta.get("val"), "shape", ()))
    for target in (["--saved", "50%"], ["--peak", "2KiB"]):
        rc, out, err = _cli(capsys, "advise", "--logs", str(logs["breakrecompile"]), "--graph", "0/1", *target)
        assert rc == 0, err
        assert "internal error" not in err and "compile 0/1" in out.splitlines()[0]
    advice = tr.advise(saved="50%")
    logged = int(tr.memory_table(["logged"]).iloc[0]["saved_activation_bytes"])
    assert advice.plain.saved_bytes == logged > 0
    nodes = {n.name: n for n in tr.partition("logged").forward.graph.nodes} | {
        n.name: n for n in tr.partition("logged").backward.graph.nodes}
    from fxviz.core.graph_facts import concrete

    live = [t for t in advice.plain.at.live if t.node in nodes]
    assert live
    for t in live:  # each shape is the node's value at the run's sizes (the second call's batch of 6)
        val = nodes[t.node].meta["val"]
        assert t.shape == tuple(concrete(s) for s in val.shape)
    assert any(6 in (t.shape or ()) for t in live)


def test_advise_says_the_device_the_graph_records(logs):
    """The offloading note reads the devices from the graph's traced values, which a log has."""
    run = fxviz.load_logs(logs["breakrecompile"])
    note = next(n for n in run.trace(compile_id="0/0").advise(saved="50%").notes if n.startswith("offloading"))
    devices = {str(n.meta["val"].device) for n in run.trace(compile_id="0/0").graph.gm.graph.nodes
               if n.op == "placeholder" and hasattr(n.meta.get("val"), "device")}
    assert devices == {"cpu"}
    assert "tensors are on cpu" in note and "does not record" not in note


def test_advise_on_an_inference_log_refuses_in_one_line_as_diff_does(logs, capsys):
    log = str(logs["inference"])
    rc, out, err = _cli(capsys, "advise", "--logs", log, "--saved", "50%")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "trace a model" not in err
    rc, _, diff_err = _cli(capsys, "diff", "--logs-a", log, "--logs-b", log)  # diff's words on this log
    assert rc == 2
    words = diff_err.split("error: ")[1].split(" (hint")[0]
    assert words.startswith("the log has no graph with a backward") and "inference" in words
    assert words in err


def test_draw_backward_of_an_inference_graph_says_it_has_none(logs, capsys, tmp_path):
    out_file = str(tmp_path / "x.svg")
    rc, out, err = _cli(capsys, "draw", "--logs", str(logs["inference"]), "--view", "backward", "-o", out_file)
    assert rc == 2 and out == "" and "no backward" in err and "inference" in err
    assert "--view joint" in err and "--view forward" in err
    assert "min_cut" not in err and "pick another strategy" not in err


def test_a_log_trace_says_it_is_one_compile_and_names_the_others(logs, capsys, tmp_path):
    """After a graph break the resumed code is another compile of the log: nodes, doctor and draw say
    that the trace is one compile and name the others, to pick with --graph."""
    log = str(logs["breakrecompile"])
    run = fxviz.load_logs(log)
    ids = list(dict.fromkeys(str(c) for c in run.graphs[run.graphs["rank"] == 0]["compile_id"]))
    assert len(ids) == 4 and ids[0] == "0/0"  # two frames (the break), each compiled twice (the recompile)
    others = ", ".join(ids[1:])
    rc, out, err = _cli(capsys, "nodes", "--logs", log)
    assert rc == 0 and "one graph captured" not in out and "ran outside it" not in out
    assert "1 of 4 compile(s) on rank 0;" in out and f"--graph ID picks another graph ({others})" in " ".join(
        out.split())
    assert "another compile (--graph ID" in " ".join(out.split()) and "compile_id" not in out
    rc, out, err = _cli(capsys, "doctor", "--logs", log)
    flat = " ".join(out.split())
    assert rc == 0 and f"another graph ({others})" in flat and "compile 0/0 of a log, checked alone" in flat
    # the doctor of 1/0 checks b.*, which 0/0's does not hold: each compile is checked on its own
    assert set(run.trace(compile_id="0/0").doctor().table["parameter"]) == {"a.weight", "a.bias"}
    assert set(run.trace(compile_id="1/0").doctor().table["parameter"]) == {"b.weight", "b.bias"}
    rc, out, err = _cli(capsys, "draw", "--logs", log, "--piece", "2", "-o", str(tmp_path / "p.svg"))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "--graph ID" in err and others in err and "which has 1 graph " in err and "--piece 1 to 1" not in err
    rc, out, err = _cli(capsys, "draw", "--logs", log, "--piece", "overview", "-o", str(tmp_path / "o.svg"))
    assert rc == 0 and "1 graph in execution order" in " ".join(out.split()) and "1 graphs" not in out
    assert "1 graph, execution order" in (tmp_path / "o.svg").read_text()


def test_an_inference_log_has_no_loss_and_no_partition(logs, capsys):
    log = str(logs["inference"])
    tr = fxviz.load_logs(log).trace()
    assert tr.graph.inference and not tr.graph.has_backward
    rc, out, _ = _cli(capsys, "nodes", "--logs", log)
    assert rc == 0 and "loss:" not in out and "inference only" in out
    rc, out, _ = _cli(capsys, "doctor", "--logs", log)
    assert rc == 0 and "partition '" not in out and "no partition (inference)" in " ".join(out.split())


def test_a_cuda_log_read_on_the_cpu_names_its_device(logs, capsys, tmp_path):
    """A log of a CUDA run (here the CPU run's log with its device labels moved to cuda:0, md5s
    recomputed) reads on the CPU; the header and summary say where its tensors were, the CPU's don't."""
    from .test_logs_anywhere import _envelope_on_cuda, _on_cuda, _rewrite

    cuda = _rewrite(logs["breakrecompile"], tmp_path / "cuda", _on_cuda, _envelope_on_cuda)
    tr = fxviz.load_logs(cuda).trace()
    from fxviz.core.graph_facts import input_devices

    assert input_devices(tr.graph.gm) == ["cuda:0"]
    rc, out, _ = _cli(capsys, "nodes", "--logs", str(cuda))
    flat = " ".join(out.split())
    assert rc == 0 and "compile 0/0 (aot_eager, cuda:0)" in flat and "compile 0/0, tensors on cuda:0)" in flat
    rc, out, _ = _cli(capsys, "nodes", "--logs", str(logs["breakrecompile"]))
    assert rc == 0 and "cuda" not in out and "tensors on" not in out
    note = next(n for n in tr.advise(saved="50%").notes if n.startswith("offloading"))
    assert "tensors are on cuda:0" in note


def test_a_saved_value_is_drawn_where_the_partition_computes_it():
    """torch's min-cut computes a backward node in the forward and saves it (the detach of softmax's
    output): the drawing puts it in the forward, beside the graph the run ran, not in the backward."""
    import torch

    from fxviz.render.graph.scene import joint_scene

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Softmax(-1))
    tr = fxviz.trace(model, torch.randn(2, 4), backend="aot_eager")
    p = tr.partition("min_cut")
    in_forward = set(p.fw_to_joint.values())
    moved = [s for s in p.saved if tr.graph.info[s].phase == "backward"]
    assert moved and set(moved) <= in_forward  # torch's forward graph computes and saves it
    scene = joint_scene(tr.graph, p)
    for it in scene.items.values():
        if it.saved or (it.joint in in_forward and it.info.phase == "backward"):
            assert it.side == "forward", it.id
    caption = " ".join(scene.caption)
    n = len(p.recomputed)
    assert f"recomputes {n} op{'s' if n != 1 else ''};" in caption and f"saves {len(p.saved)} values" in caption


# --- issue 46: every log a user brings is read --------------------------------------------------------
EXPORT = """
import torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
torch.export.export(m, (torch.randn(4, 8),))  # no run_decompositions(): no AOT graph is logged
"""

_STEP = """
import os, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
"""

KILLED = _STEP + """
import torch._functorch._aot_autograd.graph_compile as graph_compile
logged = graph_compile.trace_structured
def dying(name, *args, **kwargs):  # the run dies as torch is about to log the backward graph (an OOM kill)
    if name == "aot_backward_graph":
        os._exit(1)
    return logged(name, *args, **kwargs)
graph_compile.trace_structured = dying
torch.compile(m, backend="aot_eager")(torch.randn(4, 8)).sum().backward()
"""

NO_JOINT = _STEP + """
import torch._functorch._aot_autograd.graph_compile as graph_compile
logged = graph_compile.trace_structured
def forward_only(name, *args, **kwargs):  # a logger that writes the forward graph alone (as another tool's)
    if name in ("aot_joint_graph", "aot_backward_graph"):
        return None
    return logged(name, *args, **kwargs)
graph_compile.trace_structured = forward_only
torch.compile(m, backend="aot_eager")(torch.randn(4, 8)).sum().backward()
"""

STACK = _STEP + """
import torch.nn as nn
class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
    def forward(self, x):
        return x + torch.tanh(self.fc(x))
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(8), Block(8), Block(8)])
        self.head = nn.Linear(8, 4)
    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x).sum()
torch.compile(Net(), backend="aot_eager")(torch.randn(4, 8)).backward()
"""

RANKS = """
import os, sys, torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)
    def forward(self, x):
        h = torch.relu(self.a(x))
        if h.sum() > 0:  # a graph break: each rank's step is two graphs
            h = h * 2
        return self.b(h).sum()

def main(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.compile(Net(), backend="aot_eager")(torch.randn(4 + 2 * rank, 8)).backward()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(main, args=(2, int(sys.argv[1])), nprocs=2)
"""


@pytest.fixture(scope="module")
def odd_logs(tmp_path_factory):
    """Logs of real runs a user may bring: a torch.export run, a step killed before its backward graph was
    logged, a logger that wrote the forward graph alone, two ranks of graph-broken steps, a stack of blocks."""
    from concurrent.futures import ThreadPoolExecutor

    from .logs_util import free_port

    root = tmp_path_factory.mktemp("odd")

    def made(kv: tuple[str, str]) -> pathlib.Path:
        name, script = kv
        if name == "killed":  # the run exits 1 on purpose: its log is what a killed run leaves
            directory = root / name
            directory.mkdir()
            env = dict(os.environ, TORCH_TRACE=str(directory), OMP_NUM_THREADS="1")
            subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=600)
            return directory
        return make_log(script, root / name, *([str(free_port())] if name == "ranks" else []))

    with ThreadPoolExecutor(2) as pool:
        names = ("export", "killed", "nojoint", "ranks", "stack")
        return dict(zip(names, pool.map(made, zip(names, (EXPORT, KILLED, NO_JOINT, RANKS, STACK)))))


def test_a_torch_export_log_says_it_holds_no_compiled_graph(odd_logs, capsys, tmp_path):
    """A torch.export log without decompositions holds no compile: the listing says what it holds, and
    every view refuses in one line (it was ``internal error: StopIteration``)."""
    log = str(odd_logs["export"])
    rc, out, err = _cli(capsys, "logs", log)
    assert rc == 0 and "no compiled graph" in out and "run_decompositions" in out
    for argv in (["table"], ["saved"], ["draw", "-o", str(tmp_path / "e.svg")], ["diff", "--rank-a", "0"]):
        rc, out, err = _cli(capsys, argv[0], "--logs", log, *argv[1:])
        assert rc == 2 and "internal error" not in err and len(err.strip().splitlines()) == 1, (argv, err)
        assert "no compiled graph" in err or "no graph with a backward" in err, (argv, err)


def _forward_saved(log: pathlib.Path) -> list[str]:
    """What the logged forward graph returns for the backward (its outputs' descriptors say which)."""
    from fxviz.sources.log.reader import ReadStats, read_records

    for f in sorted(log.iterdir()):
        with open(f, "rb") as fh:
            for rec in read_records(fh, ReadStats(), keep=lambda r: r.kind == "aot_forward_graph"):
                if rec.payload:
                    return re.findall(r"^\s+(\w+),\s+# SavedForBackwardsAOTOutput", rec.payload, re.M)
    raise AssertionError("no forward graph")


@pytest.mark.parametrize("name", ["killed", "nojoint"])
def test_a_step_whose_backward_was_never_logged_shows_its_forward(name, odd_logs, capsys, tmp_path):
    """A run killed before its backward graph was logged, or a log holding the forward graph alone: listed so,
    and every view shows what the log has (it was refused: 'logged no AOT graph'); what the forward returns
    for the backward is the saved table."""
    log = odd_logs[name]
    run = fxviz.load_logs(log)
    status = run.graphs["status"].iloc[0]
    assert status == ("forward only" if name == "killed" else "forward graph only")
    rc, out, err = _cli(capsys, "saved", "--logs", str(log), "--top", "0")
    assert rc == 0, err
    saved = _forward_saved(log)
    assert saved and all(f" {v} " in out for v in saved)
    assert f"{len(saved)} values saved for the backward" in " ".join(out.split())
    rc, out, err = _cli(capsys, "table", "--logs", str(log))
    assert rc == 0 and ("no backward" in " ".join(out.split()) or "no joint" in " ".join(out.split())), err
    for argv in (["nodes"], ["draw", "-o", str(tmp_path / "f.svg")], ["code"]):
        rc, out, err = _cli(capsys, argv[0], "--logs", str(log), *argv[1:])
        assert rc == 0 and "internal error" not in err, (argv, err)


def test_a_damaged_payload_is_said_on_every_reading(logs, capsys, tmp_path):
    """Three bytes of a graph's payload changed (its md5 no longer matches): the index checks every graph
    payload, warns once per file, the listing notes it, and table/saved say it too."""
    src = next(logs["breakrecompile"].iterdir())
    text = src.read_bytes()
    start = text.index(b'{"aot_backward_graph"')
    at = text.index(b'"f32[', start) + 2
    damaged = text[:at] + b"x99" + text[at + 3:]
    assert sum(x != y for x, y in zip(text, damaged)) == 3
    log = tmp_path / "damaged"
    log.mkdir()
    (log / src.name).write_bytes(damaged)
    with pytest.warns(FxvizWarning, match="md5"):
        fxviz.load_logs(log)
    rc, out, err = _cli(capsys, "logs", str(log))
    assert rc == 0 and "md5" in err and "damaged" in out
    for command in ("table", "saved"):
        rc, out, err = _cli(capsys, command, "--logs", str(log))
        assert "md5" in err and "internal error" not in err, (command, err)


def test_two_ranks_of_several_graphs_diffed_from_the_cli(odd_logs, logs, capsys):
    """``fxviz diff --logs DIR --rank-a 0 --rank-b 1``, the README's two-rank command, on ranks of several
    graphs each (a graph break): each side is its rank's whole step; a rank with no graph with a backward
    is one line naming what it holds (it was 'fxviz.diff: a is a list, not a Trace')."""
    log = str(odd_logs["ranks"])
    run = fxviz.load_logs(log)
    assert run.ranks == [0, 1] and all(run.step_graph_count(r) == 2 for r in (0, 1))
    rc, out, err = _cli(capsys, "diff", "--logs", log, "--rank-a", "0", "--rank-b", "1")
    assert rc == 0, err
    assert "rank 0" in out and "rank 1" in out and "internal error" not in err
    rc, out, err = _cli(capsys, "diff", "--logs", log, "--rank-a", "0", "--rank-b", "5")
    assert rc == 2 and "rank 5 is not in the log" in err, err
    inference = str(logs["inference"])
    rc, out, err = _cli(capsys, "diff", "--logs", inference, "--rank-a", "0", "--rank-b", "0")
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "no graph with a backward" in err, err


def test_a_stack_of_identical_blocks_is_recognised(odd_logs, capsys):
    """Three blocks of a ModuleList (same ops on the same shapes) read from the log's text and said once by
    ``fxviz saved --logs``; each block's ops are the ones placed in it.  The first block's backward computes
    no gradient for its input (the user's, which requires none): two ops fewer, a kind of its own."""
    run = fxviz.load_logs(odd_logs["stack"])
    view = run.logged()
    kinds = view.piece.layers
    assert [(k.container, k.layers) for k in kinds] == [("blocks", (0,)), ("blocks", (1, 2))]
    first, rest = kinds
    assert first.ops == rest.ops - 2
    placed = [sum(1 for n, m in view.piece.modules.items() if m.startswith(f"blocks.{k}")
                  and view.piece.graph.by_name[n].op == "call_function") for k in range(3)]
    assert placed == [first.ops, rest.ops, rest.ops]
    rc, out, _ = _cli(capsys, "saved", "--logs", str(odd_logs["stack"]))
    assert rc == 0 and "blocks: 3 layers of 2 kinds" in " ".join(out.split())
