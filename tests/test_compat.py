"""The compatibility smoke subset (issue 27): what ``bash scripts/run.sh compat`` runs on every supported
torch minor, each in its own venv (``scripts/compat.sh``); the suite runs it on its own torch too.

One test per check (the columns of ``docs/COMPAT.md``), each on the four structures the issue names
(AlexNet, mini_gpt, a graph-broken model, a checkpointed model); every check compares with torch itself
run on the same model: eager autograd's gradients, torch's partitioners called directly, a TORCH_TRACE
log written by that same torch in a fresh process, torch's own OpInfo samples.
"""

from __future__ import annotations

import json
import re
import xml.dom.minidom

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import fxviz
from fxviz import _torch
from fxviz.core.errors import FxvizWarning
from fxviz.core.graph_facts import joint_node_count
from fxviz.render.page.embed import unpack_json

from . import opinfo_sweep
from .conftest import assert_unchanged, make_example, snapshot
from .logs_util import MINI_GPT, make_log
from .opinfo_sweep import direct_saved

pytestmark = pytest.mark.compat


# --- the structures -------------------------------------------------------------------------------
class _Routed(nn.Module):
    """A router (topk), then a graph break, then the experts in an eager loop: several graphs."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.embed = nn.Linear(d, d)
        self.gate = nn.Linear(d, 2)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(2))
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.embed(x))
        top, idx = torch.topk(torch.softmax(self.gate(h), -1), 1, dim=-1)
        torch._dynamo.graph_break()
        out = torch.zeros_like(h)
        for i, expert in enumerate(self.experts):
            out = out + expert(h) * (top * (idx[:, :1] == i))
        return self.head(h + out).sum()


class _Checkpointed(nn.Module):
    """Two blocks, each its own ``torch.utils.checkpoint`` region, and one parameter the loss never
    reads (the doctor must say so, as eager autograd does)."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d)) for _ in range(2))
        self.unused = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x.pow(2).mean()


def _model(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    if name == "graph_broken":
        return _Routed(), (torch.randn(4, 8),)
    if name == "checkpointed":
        return _Checkpointed(), (torch.randn(4, 16),)
    model, inputs = make_example(name)
    return model, tuple(inputs)


MODELS = ["alexnet", "mini_gpt", "graph_broken", "checkpointed"]
_TRACES: dict[str, tuple[nn.Module, tuple[torch.Tensor, ...], fxviz.Trace]] = {}


def _traced(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], fxviz.Trace]:
    if name not in _TRACES:
        model, inputs = _model(name)
        _TRACES[name] = (model, inputs, fxviz.trace(model, *inputs))
    return _TRACES[name]


def _eager_missing(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> list[str]:
    """The parameters eager autograd gives no gradient (on a copy: the user's model is never run)."""
    import copy

    twin = copy.deepcopy(model)
    twin.zero_grad(set_to_none=True)
    out = twin(*inputs)
    (out if out.dim() == 0 else out.float().sum()).backward()
    return [n for n, p in twin.named_parameters() if p.requires_grad and p.grad is None]


# --- the checks -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_trace(name):
    """The captured graphs' gradients are eager autograd's, and the model is untouched."""
    model, inputs = _model(name)
    before = snapshot(model)
    tr = fxviz.trace(model, *inputs)
    assert_unchanged(model, before)
    assert tr.graph.has_backward
    broken = name == "graph_broken"
    assert bool(tr.capture.graph_breaks) == broken and (len(tr.pieces) > 1) == broken
    grads = tr.check_gradients()
    assert grads["ok"].all(), grads[~grads["ok"]].to_string()
    if name == "checkpointed":
        assert tr.nodes["checkpoint_region"].dropna().nunique() == 2  # one region per checkpoint call


def _torch_compile_graphs(step, *inputs) -> tuple[list, list[str]]:
    """The graphs plain torch.compile (no fxviz) captures for ``step``, and the frames it skipped."""
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    before = _torch.unimplemented_count()
    try:
        with _torch.quiet_torch():
            torch.compile(step, backend=keep)(*inputs)
    finally:
        skipped = _torch.skipped_frames(before)
        torch._dynamo.reset()
    return graphs, skipped


class _Corrcoef(nn.Module):
    """OpInfo's first corrcoef sample as a module: a 1-D weight of two elements; the op returns a scalar
    and graph-breaks at ``aten.equal`` (data-dependent), in 2.13 and 2.14 alike."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.tensor([0.3, -1.2]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: fxviz.trace takes example inputs
        return torch.corrcoef(self.w)


def test_trace_graph_break_at_the_only_op():
    """Issue 27 (OpInfo's corrcoef/cov): the op's graph break leaves no op in any graph, and fxviz's
    wrapper makes dynamo skip no frame: fxviz captures what torch.compile captures for the same step,
    nothing without a loss op, the loss op after the break with one."""
    model, x = _Corrcoef(), torch.zeros(1)
    graphs, skipped = _torch_compile_graphs(model, x)
    assert graphs == [] and skipped == []  # torch alone: the only op runs eagerly, no frame skipped
    with pytest.raises(fxviz.TraceError, match="every op ran outside the graphs, at graph breaks") as err:
        fxviz.trace(model, x)
    assert "Data dependent operator" in err.value.message and "plain Python" not in err.value.message
    assert "compile_loss=True" in err.value.hint

    def loss(out):
        return out * 3

    # torch.compile(model) then loss(out).backward(): the loss is outside the compiled model, no graph
    with pytest.raises(fxviz.TraceError, match="every op ran outside the graphs"):
        fxviz.trace(model, x, loss_fn=loss)
    # torch.compile of a step that computes the loss compiles the loss's op after the break
    graphs, skipped = _torch_compile_graphs(lambda x: loss(model(x)), x)
    with pytest.warns(FxvizWarning, match="compute no gradient for the 1 parameter"):  # w: corrcoef ran eagerly
        tr = fxviz.trace(model, x, loss_fn=loss, compile_loss=True)
    assert len(graphs) == len(tr.pieces) == 1 and skipped == [] and tr.capture.eager_frames == []
    dynamo_ops = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert len(dynamo_ops) == 1 and "mul" in dynamo_ops[0], dynamo_ops
    fwd = [str(n.target) for n in tr.joint.graph.nodes
           if n.op == "call_function" and tr.graph.info[n.name].phase == "forward"]
    # the loss op after the break is in fxviz's graph, and nothing else: a 0-dim loss is used as it is
    assert fwd == ["aten.mul.Tensor"], fwd
    grads = tr.check_gradients()
    assert grads["ok"].all(), grads.to_string()


@pytest.mark.parametrize("name", MODELS)
def test_strategies(name):
    """Every offered strategy partitions every graph; default and min-cut save what torch's own
    partitioners save on the same joint graph."""
    _, _, tr = _traced(name)
    for piece in tr.pieces:
        if not piece.graph.has_backward:
            continue
        for strategy in piece.offered:
            p = piece.partition(strategy)
            assert p.ok, f"{strategy.name} on graph {piece.graph.index + 1}: {p.error}"
        for strategy in ("default", "min_cut"):
            assert list(piece.partition(strategy).saved) == direct_saved(piece.graph, strategy), strategy


@pytest.mark.parametrize("name", MODELS)
def test_table(name):
    """One row per strategy, no errors; min-cut never saves more activation bytes than default."""
    _, _, tr = _traced(name)
    table = tr.memory_table(scope="graph")
    assert list(table["strategy"]) == [s.name for s in tr.offered]
    assert table["error"].isna().all(), table[["strategy", "error"]].to_string()
    rows = table.set_index("strategy")
    assert rows.loc["min_cut", "saved_activation_bytes"] <= rows.loc["default_partition", "saved_activation_bytes"]


@pytest.mark.parametrize("name", MODELS)
def test_doctor(name):
    """The doctor's missing gradients are eager autograd's, and its words never say "None"."""
    model, inputs, tr = _traced(name)
    doc = tr.doctor()
    assert sorted(doc.missing) == sorted(_eager_missing(model, inputs))
    assert doc.healthy == (name != "checkpointed")
    words = " ".join(f.message + " " + f.fix for f in doc.findings)
    assert not re.search(r"\bNone\b", words), words


@pytest.mark.parametrize("name", MODELS)
def test_draw(name):
    """The joint, forward and backward drawings are SVG and name the graph's ops."""
    _, _, tr = _traced(name)
    piece = tr.pieces[0]
    svg = piece.draw("joint").svg()
    xml.dom.minidom.parseString(svg)
    ops = {str(n.target).split(".")[1] for n in piece.joint.graph.nodes if str(n.target).startswith("aten.")}
    assert "<svg" in svg and sum(op in svg for op in ops) >= len(ops) // 2, sorted(ops)
    for view in ("forward", "backward"):
        xml.dom.minidom.parseString(piece.draw(view, strategy="min_cut").svg())


@pytest.mark.parametrize("name", MODELS)
def test_report(name, tmp_path):
    """The HTML report's data holds every node of the joint graph, and is strict JSON."""
    _, _, tr = _traced(name)
    path = fxviz.report(tr, tmp_path / "r.html", strategies=("default", "min_cut"))
    html = path.read_text()
    m = re.search(r'<script type="application/json" id="fxviz-data">(.*?)</script>', html, re.S)
    assert m, "no data element"
    data = unpack_json(m.group(1))
    json.dumps(data, allow_nan=False)
    nodes = json.dumps(data)
    for n in tr.pieces[0].joint.graph.nodes:
        assert f'"{n.name}"' in nodes, n.name


@pytest.mark.parametrize("name", MODELS)
def test_explorer(name):
    """The explorer's payloads (the same front end as the report): every view of the first graph."""
    from fxviz.payloads.panels import node_data
    from fxviz.payloads.report import report_data

    _, _, tr = _traced(name)
    piece = tr.pieces[0]
    data = report_data(piece, strategies=("default", "min_cut"))
    json.dumps(data, allow_nan=False)
    assert set(node_data(piece)) == {n.name for n in piece.joint.graph.nodes if n.op != "output"}
    pytest.importorskip("anywidget")
    w = fxviz.explore(tr)
    assert set(w.pane.nodes) <= set(w.trace.graph.info)


def test_log(tmp_path):
    """A TORCH_TRACE log written by this same torch (torch.compile, aot_eager, a fresh process):
    the run min-cut saved what fxviz's own trace's min-cut saves, and its joint graph rebuilds."""
    run = fxviz.load_logs(make_log(MINI_GPT, tmp_path / "trace", "aot_eager"))
    tr = run.trace()
    assert tr.graph.has_backward and int(run.graphs["nodes"].iloc[0]) == joint_node_count(tr.graph.info.values())
    model, (idx, tgt) = fxviz.examples.mini_gpt(n_layer=1, n_embd=16, n_head=2, vocab=32, block_size=16, batch=2,
                                                seq=8, dropout=0.0)
    live = fxviz.trace(model, idx, tgt, backend="aot_eager")  # the log's backend
    assert tr.partition("logged").saved == live.partition("min_cut").saved
    assert tr.partition("min_cut").saved == live.partition("min_cut").saved
    assert {i.qualname for i in tr.graph.info.values() if i.role == "gradient"} == {n for n, _ in
                                                                                   model.named_parameters()}


# A quick OpInfo subset: common ops, ops with effect tokens (linalg), a data-dependent one, and the
# two the 2.14 capture wrapper lost (corrcoef, cov).
OPINFO = ["add", "mul", "matmul", "sum", "cumsum", "softmax", "nn.functional.layer_norm", "nn.functional.conv2d",
          "nn.functional.cross_entropy", "index_select", "linalg.solve", "masked_select", "corrcoef", "cov"]


@pytest.fixture(scope="module")
def canary():
    return opinfo_sweep.Canary()


def _graphs_torch_alone(op) -> int:
    """How many graphs plain ``torch.compile`` (no fxviz) captures for the op's sample module."""
    sample = opinfo_sweep.first_sample(op)
    model = opinfo_sweep.OpModule(op.op, sample)
    return len(_torch_compile_graphs(model, *model.inputs(sample))[0])


@pytest.mark.parametrize("op", OPINFO)
def test_opinfo(op, canary, record_property):
    """fxviz on the op's first float32 sample: the partitions are torch's, the gradients eager
    autograd's, nothing touched, the session not poisoned (``tests/opinfo_sweep.py``).  A refusal
    is right only where torch.compile alone captures no graph either."""
    ops = [o for o in opinfo_sweep.differentiable_ops() if opinfo_sweep.op_name(o) == op]
    assert ops, f"{op} is not in this torch's op_db"
    res = opinfo_sweep.sweep_op(ops[0], canary)
    record_property("fxviz", f"{res.cls}: {res.detail}")  # docs/COMPAT.md lists the refusals
    if res.cls == "refused":
        assert _graphs_torch_alone(ops[0]) == 0, f"fxviz refused ({res.detail}) where torch.compile captures a graph"
    else:
        assert res.cls in ("ok", "known"), f"{res.cls}: {res.detail}"


@pytest.mark.parametrize("version, outcome", [("2.8.0", "refused"), ("2.16.0", "warned"),
                                              (torch.__version__, "imported")])
def test_import_states_the_supported_range(version, outcome):
    """``import fxviz`` under a torch reporting ``version`` (a fresh process): older than the range is
    refused in one line naming it; newer is imported with a warning naming it."""
    import subprocess
    import sys

    code = ("import torch, warnings\n"
            f"torch.__version__ = torch.torch_version.TorchVersion({version!r})\n"
            "warnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            "    try:\n"
            "        import fxviz\n"
            "    except ImportError as exc:\n"
            "        print('refused:', exc)\n"
            "        raise SystemExit(0)\n"
            "said = [str(w.message) for w in seen if type(w.message).__name__ == 'FxvizWarning']\n"
            "print(('warned: ' + said[0]) if said else 'imported')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(outcome), run.stdout
    if outcome != "imported":
        assert fxviz.core.supported.TORCH_RANGE in lines[0] and version in lines[0]
