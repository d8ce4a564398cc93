"""The missing-gradient doctor: one small purpose-built model per cause, each checked against what
torch itself does (eager autograd, the joint graph's own nodes, torch's partitioner)."""

from __future__ import annotations

import html.parser

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fxviz
from fxviz import _torch
from fxviz.frontends.cli.entry import main

from .conftest import assert_unchanged, snapshot

ALEXNET_PARAMS = [f"features.{i}.{k}" for i in (0, 3, 6, 8, 10) for k in ("weight", "bias")] + [
    f"classifier.{i}.{k}" for i in (1, 4, 6) for k in ("weight", "bias")]


# --- one model per cause (kept in this file so findings can name its source lines) -----------------
class TwoLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)


class Detached(TwoLinear):
    def forward(self, x):
        return self.b(self.a(x).detach())  # CUT: detach


class NoGradRegion(TwoLinear):
    def forward(self, x):
        with torch.no_grad():
            h = self.a(x)  # CUT: no_grad
        return self.b(h)


class DotData(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        return self.b(x @ self.w.data)  # CUT: data


class IntCast(TwoLinear):
    def forward(self, x):
        return self.b(self.a(x).mul(10).long().float())  # CUT: cast


class Rounded(TwoLinear):
    def forward(self, x):
        return self.b(self.a(x).round())  # CUT: zero_derivative


class ArgmaxIndex(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 5)
        self.emb = nn.Embedding(5, 2)

    def forward(self, x):
        return self.emb(self.a(x).argmax(-1))  # CUT: argmax


class Comparison(TwoLinear):
    def forward(self, x):
        return self.b(x * (self.a(x) > 0))  # CUT: comparison


class Overwritten(TwoLinear):
    def forward(self, x):
        h = self.a(x)
        h.copy_(x)  # CUT: overwrite
        return self.b(h)


class IgnoredHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 3)  # the "pooler": its output is returned but the loss ignores it

    def forward(self, x):
        h = self.a(x)
        return h, self.b(h)  # CUT: ignored_output


class Unused(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.b = nn.Linear(4, 4)
        self.a = nn.Linear(4, 4)  # never called

    def forward(self, x):
        return self.b(x)


class BreakThenDetach(nn.Module):
    """A graph break (data-dependent if) and a detach in the second graph."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        h = self.first(x)
        if h.sum() > 0:
            h = h * 2
        else:
            h = h * 3
        return self.b(self.a(h).detach())  # CUT: detach


class CachedTranspose(nn.Module):
    """Keeps a transposed copy of its weight as a plain tensor attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.fc_t = self.fc.weight.detach().t().contiguous()

    def forward(self, x):
        return x @ self.fc_t + self.fc(x)


class Memory(nn.Module):
    """Attention over a learned memory: the fused attention backward computes grad_k and grad_v
    whether or not anyone wants them."""

    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(8, 8)
        self.mem_k = nn.Parameter(torch.randn(1, 2, 6, 4))
        self.mem_v = nn.Parameter(torch.randn(1, 2, 6, 4))

    def forward(self, x):
        q = self.q(x).view(1, 5, 2, 4).transpose(1, 2)
        return F.scaled_dot_product_attention(q, self.mem_k, self.mem_v)


def _x(n: int = 3) -> torch.Tensor:
    return torch.randn(n, 4, generator=torch.Generator().manual_seed(1))


def _model(cls):
    with torch.random.fork_rng():
        torch.manual_seed(0)
        return cls()


def _line_of(cls) -> int:
    import inspect

    lines, start = inspect.getsourcelines(cls)
    for i, line in enumerate(lines):
        if "# CUT: " in line:
            return start + i
    raise AssertionError(cls)


def _eager_grads(model, x, loss_fn=None):
    """The reference: plain eager autograd on the real model (grads collected, model restored)."""
    before = {n: p.grad for n, p in model.named_parameters()}
    with torch.random.fork_rng():
        out = model(x)
        loss = loss_fn(out) if loss_fn else out.sum()
        params = [p for p in model.parameters() if p.requires_grad]
        grads = torch.autograd.grad(loss, params, allow_unused=True) if loss.requires_grad else [None] * len(params)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    for n, p in model.named_parameters():
        p.grad = before[n]
    return dict(zip(names, grads))


CUT_CASES = [
    # model, cause, parameters cut, op of the named joint node (None: torch deleted the ops)
    (Detached, "detach", ["a.weight", "a.bias"], "detach"),
    (NoGradRegion, "no_grad", ["a.weight", "a.bias"], "addmm"),
    (DotData, "detach", ["w"], "detach"),  # .data is traced as aten.detach
    (IntCast, "cast", ["a.weight", "a.bias"], "_to_copy"),
    (Rounded, "zero_derivative", ["a.weight", "a.bias"], "round"),
    (ArgmaxIndex, "argmax", ["a.weight", "a.bias"], "argmax"),
    (Comparison, "comparison", ["a.weight", "a.bias"], "gt"),
    (Overwritten, "overwrite", ["a.weight", "a.bias"], "copy"),
    (IgnoredHead, "ignored_output", ["b.weight", "b.bias"], None),
]


CUT_IDS = [c[0].__name__ for c in CUT_CASES]
# the ignored head twice: its loss traced into the graph (the graph shows which outputs it reads) and,
# as by default, applied outside it (every output gets a tangent: the loss itself is the judge)
CUT_CASES_LOSS = [(*c, False) for c in CUT_CASES] + [(IgnoredHead, "ignored_output", ["b.weight", "b.bias"], None,
                                                      True)]


@pytest.mark.parametrize("cls,cause,cut,op,compile_loss", CUT_CASES_LOSS,
                         ids=[*CUT_IDS, "IgnoredHead-compile_loss"])
def test_each_cut_names_parameter_node_and_line(cls, cause, cut, op, compile_loss):
    model, x = _model(cls), _x()
    loss_fn = (lambda out: out[0].sum()) if cls is IgnoredHead else None
    # the nodes named are AOTAutograd's own ops (detach, _to_copy, copy): inductor decomposes some and
    # its joint passes remove others (a detach becomes an alias, then nothing), so aot_eager's graph
    tr = fxviz.trace(model, x, loss_fn=loss_fn, compile_loss=compile_loss, backend="aot_eager")
    # on inductor's graph (the default) the doctor finds the same parameters cut
    default = fxviz.trace(model, x, loss_fn=loss_fn, compile_loss=compile_loss)
    assert sorted(default.doctor().missing) == sorted(cut)
    before = snapshot(model)
    report = tr.doctor()
    assert_unchanged(model, before)
    eager = _eager_grads(model, x, loss_fn)
    assert not report.healthy
    assert sorted(report.missing) == sorted(cut)
    for name in cut:
        # torch agrees: eager autograd gives no gradient, or one that is exactly zero
        assert eager[name] is None or not eager[name].any(), name
        (f,) = report.diagnosis.for_parameter(name)
        assert f.kind == "no_path" and f.severity == "error" and f.cause == cause, f
        assert name in f.message
        if op is None:
            assert f.module == "b", f
        else:
            node = f.nodes[0]
            assert tr.nodes.loc[node, "short_op"] == op, f
        assert f.source == f"test_doctor.py:{_line_of(cls)}", f
    for name, g in eager.items():
        if name not in cut:
            assert g is not None and g.any()
            assert not report.diagnosis.for_parameter(name)
            row = report.table.set_index("parameter").loc[name]
            assert row["gets_gradient"] and row["reason"] == "gets a gradient"


def test_overwrite_gradient_exists_but_is_zero():
    """In-place overwrite: torch returns a gradient, and it is all zeros; the doctor says so."""
    model, x = _model(Overwritten), _x()
    tr = fxviz.trace(model, x, backend="aot_eager")  # the copy node (inductor's passes remove it)
    check = tr.check_gradients().set_index("parameter")
    assert check.loc["a.weight", "has_gradient"] and check.loc["a.weight", "ok"]
    (f,) = tr.doctor().diagnosis.for_parameter("a.weight")
    assert "always zero" in f.message
    row = tr.doctor().table.set_index("parameter").loc["a.weight"]
    assert not row["gets_gradient"] and row["gradient_node"]  # a gradient node exists, but it is zero


def test_unused_parameter():
    model, x = _model(Unused), _x()
    tr = fxviz.trace(model, x)
    report = tr.doctor()
    assert sorted(report.missing) == ["a.bias", "a.weight"]
    assert _eager_grads(model, x)["a.weight"] is None
    for name in ("a.weight", "a.bias"):
        (f,) = report.diagnosis.for_parameter(name)
        assert f.kind == "unused" and f.severity == "warning"
        assert report.table.set_index("parameter").loc[name, "in_graph"] == "not in the graph"


def test_frozen_is_information_and_healthy():
    model, x = _model(TwoLinear), _x()
    model.forward = lambda x: model.b(model.a(x))  # type: ignore[method-assign]
    model.a.requires_grad_(False)
    tr = fxviz.trace(model, x)
    report = tr.doctor()
    assert report.healthy and report.missing == []
    frozen = report.diagnosis.of_kind("frozen")
    assert sorted(f.parameter for f in frozen) == ["a.bias", "a.weight"]
    assert all(f.severity == "info" for f in frozen)
    assert not [f for f in report.findings if f.severity != "info"]


def test_graph_breaks_are_diagnosed_across_pieces():
    model, x = _model(BreakThenDetach), _x()
    tr = fxviz.trace(model, x, backend="aot_eager")  # the detach node (inductor's passes remove it)
    assert len(tr.pieces) > 1
    report = tr.doctor()
    assert sorted(report.missing) == ["a.bias", "a.weight"]
    (f,) = report.diagnosis.for_parameter("a.weight")
    assert f.cause == "detach" and f.graph is not None and f.graph > 0
    piece = tr.pieces[f.graph]
    assert piece.nodes.loc[f.nodes[0], "short_op"] == "detach"
    assert report.diagnosis.graphs == len(tr.pieces)
    # every other parameter gets a gradient, in the graph that uses it
    rows = report.table.set_index("parameter")
    assert rows.loc["first.weight", "gets_gradient"] and rows.loc["b.weight", "gets_gradient"]
    assert report is tr.pieces[-1].doctor()  # one diagnosis for the whole trace


def test_closure_small_model_every_parameter_captured():
    model, x = _model(Comparison), _x()
    tr = fxviz.trace(model, x, params="closure")
    report = tr.doctor()
    consts = tr.nodes[tr.nodes.role == "constant"]
    for name, _ in model.named_parameters():
        (f,) = [f for f in report.diagnosis.for_parameter(name) if f.severity == "error"]
        assert f.kind == "captured_as_constant"
        assert set(f.nodes) == set(consts[consts.qualname == name].index)
        assert "params='lifted'" in f.fix and "functional_call" in f.fix


def test_alexnet_closure_all_parameters_flagged_and_what_torch_computes(traces):
    tr = traces[("alexnet", "closure")]
    report = tr.doctor()
    assert not report.healthy
    assert sorted(report.missing) == sorted(ALEXNET_PARAMS)
    flagged = report.diagnosis.of_kind("captured_as_constant")
    assert sorted(f.parameter for f in flagged) == sorted(ALEXNET_PARAMS)
    # What torch 2.13 really does: the joint graph computes no weight gradient at all.  Every
    # convolution_backward asks only for the input gradient, so there is nothing to drop.
    nodes = {n.name: n for n in tr.joint.graph.nodes}
    conv_bw = [n for n in nodes.values() if tr.nodes.loc[n.name, "short_op"] == "convolution_backward"]
    assert len(conv_bw) == 5
    for n in conv_bw:
        mask = _torch.op_argument(n, "output_mask")
        assert list(mask) == [True, False, False]
        assert _torch.meta_val(n)[1] is None  # the weight-gradient slot is not even computed
        weight = next(f for f in flagged if n.name in f.message)
        assert "output_mask=[True, False, False]" in weight.message and weight.parameter.endswith("weight")
    assert not report.diagnosis.of_kind("gradient_dropped")
    assert tr.partition("default").removed == set()  # torch's partitioner had nothing to remove
    # Where the story's "each weight held twice (once transposed)" comes from in torch 2.13: a conv
    # weight is read by two get_attr nodes (forward and backward), and the default partition saves
    # each Linear weight's transpose `t` for the backward: one storage, counted twice per node.
    dups = {f.parameter: f for f in report.diagnosis.of_kind("duplicate_data")}
    assert sorted(dups) == sorted([f"features.{i}.weight" for i in (0, 3, 6, 8, 10)]
                                  + [f"classifier.{i}.weight" for i in (1, 4, 6)])
    f = dups["features.0.weight"]
    assert set(f.nodes) == {"_param_constant0", "_param_constant0_1"}
    held = {getattr(tr.joint, str(nodes[n].target)) for n in f.nodes}
    assert len(held) == 1 and held.pop() is tr.capture.model.features[0].weight
    assert f.bytes == tr.capture.model.features[0].weight.numel() * 4
    f = dups["classifier.1.weight"]
    const, saved = f.nodes
    assert getattr(tr.joint, str(nodes[const].target)) is tr.capture.model.classifier[1].weight
    assert saved in tr.partition("default").saved and tr.nodes.loc[saved, "short_op"] == "t"
    assert nodes[saved].args[0] is nodes[const]  # the saved value is t(weight): a view, same storage
    assert f.bytes == tr.capture.model.classifier[1].weight.numel() * 4 and "transpose" in f.message


def test_alexnet_lifted_is_healthy(traces):
    tr = traces[("alexnet", "lifted")]
    report = tr.doctor()
    assert report.healthy and report.findings == []
    check = tr.check_gradients().set_index("parameter")
    table = report.table.set_index("parameter")
    assert (table["gets_gradient"] == check["has_gradient"]).all()
    assert set(table["gradient_node"]) == set(tr.nodes[tr.nodes.role == "gradient"].index)


def test_gradient_computed_and_thrown_away():
    """The fused attention backward returns grad_k for a frozen mem_k: computed, then discarded."""
    model = _model(Memory)
    model.mem_k.requires_grad_(False)
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(2))
    tr = fxviz.trace(model, x)
    report = tr.doctor()
    assert report.healthy
    (f,) = report.diagnosis.of_kind("gradient_dropped")
    assert f.parameter == "mem_k" and f.severity == "info" and f.cause == "discarded"
    node = next(n for n in tr.joint.graph.nodes if n.name == f.nodes[0])
    value = _torch.meta_val(node)
    assert len(value) == 3 and tuple(value[1].shape) == tuple(model.mem_k.shape)  # computed...
    assert 1 not in {u.args[1] for u in node.users}  # ... and nobody reads it
    assert node.name in tr.partition("default").bw_to_joint.values()  # still runs in the backward

    closure = fxviz.trace(model, x, params="closure").doctor()
    dropped = {f.parameter: f for f in closure.diagnosis.of_kind("gradient_dropped")}
    assert dropped["mem_v"].severity == "warning"
    (const,) = closure.diagnosis.for_parameter("mem_v")[:1]
    assert "throws it away" in const.message


def test_gradient_dropped_by_a_partitioner():
    """A partitioner whose backward graph does not return a gradient the joint graph computes."""
    model, x = _model(TwoLinear), _x()
    model.forward = lambda x: model.b(model.a(x))  # type: ignore[method-assign]
    tr = fxviz.trace(model, x)
    grad = tr.nodes[(tr.nodes.role == "gradient") & (tr.nodes.qualname == "a.weight")].index[0]

    def lossy(joint, joint_inputs, compiler=None, **kwargs):  # inductor calls a partitioner with compiler=
        fwd, bwd = _torch.default_partition(joint, joint_inputs, **kwargs)
        out = list(bwd.graph.nodes)[-1]
        out.args = (tuple(None if getattr(a, "name", None) == grad else a for a in out.args[0]),)
        bwd.graph.eliminate_dead_code()
        bwd.recompile()
        return fwd, bwd

    report = tr.doctor(strategy=lossy)
    lost = [f for f in report.diagnosis.of_kind("gradient_dropped") if f.cause == "partitioner"]
    assert [(f.parameter, f.nodes) for f in lost] == [("a.weight", (grad,))]
    assert grad in tr.partition(lossy).removed
    assert not tr.doctor().diagnosis.of_kind("gradient_dropped")


@pytest.mark.parametrize("params", ["lifted", "closure"])
def test_constant_holding_a_copy_of_a_parameter(params):
    model, x = _model(CachedTranspose), _x()
    tr = fxviz.trace(model, x, params=params)
    (f,) = [f for f in tr.doctor().findings if f.kind == "duplicate_data" and f.severity == "warning"]
    assert f.parameter == "fc.weight" and f.cause == "transposed"
    assert f.bytes == model.fc_t.numel() * 4
    node = f.nodes[0]
    value = tr.graph.placeholder_values.get(node)
    if value is None:
        value = getattr(tr.joint, str(next(n for n in tr.joint.graph.nodes if n.name == node).target))
    assert torch.equal(value, model.fc.weight.t())
    assert value.untyped_storage().data_ptr() != model.fc.weight.untyped_storage().data_ptr()


def test_report_displays_as_text_and_html():
    model, x = _model(Comparison), _x()
    report = fxviz.trace(model, x, params="closure").doctor()
    text = str(report)
    assert text.startswith("fxviz doctor: Comparison") and "ERROR" in text and "fix:" in text
    page = report._repr_html_()

    class Strict(html.parser.HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.stack: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.stack.append(tag)

        def handle_endtag(self, tag):
            assert self.stack.pop() == tag

    p = Strict()
    p.feed(page)
    assert p.stack == []
    for name, _ in model.named_parameters():
        assert name in page
    assert "<code" in page and "ERROR" in page


def test_cli_doctor_exit_status(capsys):
    assert main(["doctor", "mlp"]) == 0
    assert "healthy" in capsys.readouterr().out
    assert main(["doctor", "mlp", "--params", "closure"]) == 1
    out = capsys.readouterr().out
    assert "layers.0.weight is a constant in the graph" in out
