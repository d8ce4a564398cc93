"""``Trace.code``: the partition's graphs as Python with real names; the printed source is exec'd
and must reproduce eager autograd's gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxviz
from fxviz.analysis.graph.code import python_name
from fxviz.analysis.real.gradients import run_joint
from fxviz.core.errors import InputError
from fxviz.frontends.cli.entry import main


def _eager(tr) -> dict[str, torch.Tensor | None]:
    """Reference gradients of the loss: plain eager autograd on clones, from the current RNG state
    (so dropout draws the same masks as the traced forward run right after it)."""
    cap = tr.capture
    params = {n: p.detach().clone().requires_grad_(p.requires_grad) for n, p in cap.model.named_parameters()}
    buffers = {n: b.detach().clone() for n, b in cap.model.named_buffers()}
    closure = cap.params == "closure"  # closure capture marks floating inputs as requiring grad
    inputs = [t.detach().clone().requires_grad_(closure and t.is_floating_point()) for t in cap.example_inputs]
    loss = cap.reduce(torch.func.functional_call(cap.model, {**params, **buffers}, tuple(inputs)))
    wanted = {**{n: p for n, p in params.items() if p.requires_grad},
              **{name: t for name, t in zip(cap.input_names, inputs) if t.requires_grad}}
    grads = torch.autograd.grad(loss, list(wanted.values()), allow_unused=True)
    return dict(zip(wanted, grads))


def _run_printed_code(tr, strategy="default") -> dict[str, torch.Tensor]:
    """Exec the printed forward and backward code, hand the saved values over by name, and return
    the backward's outputs by name."""
    fwd_code, bwd_code = tr.code("forward", strategy), tr.code("backward", strategy)
    fwd, bwd = fwd_code.compile(), bwd_code.compile()
    values = tr.graph.placeholder_values
    args = [values[v.joint].detach().clone() for v in fwd_code.inputs]
    outs = fwd(*args)
    by_name = {v.name: o for v, o in zip(fwd_code.outputs, outs) if v.name is not None}
    bw_args = []
    for v in bwd_code.inputs:
        if v.role == "tangent":
            bw_args.append(torch.ones((), dtype=torch.float32))
        else:
            bw_args.append(by_name[v.name])
    grads = bwd(*bw_args)
    return {v.name: g for v, g in zip(bwd_code.outputs, grads) if v.name is not None}


@pytest.mark.parametrize("name,params,strategy", [
    ("mlp", "lifted", "default"),
    ("mlp", "lifted", "min_cut"),
    ("alexnet", "lifted", "default"),
    ("alexnet", "closure", "default"),
    ("resnet_block", "lifted", "default"),
])
def test_printed_code_reproduces_eager_gradients(traces, example_models, name, params, strategy):
    tr = traces[(name, params)]
    if tr.capture.backend == "inductor" and _draws_with_inductors_seeds(tr):
        # inductor's graph draws its dropout masks from seeds of its own (eager's differ from one RNG
        # state): the printed code of AOTAutograd's own graph is the one eager autograd can check
        model, inputs = example_models[name]
        tr = fxviz.trace(model, *inputs, params=params, backend="aot_eager")
    with torch.random.fork_rng():
        state = torch.get_rng_state()
        eager = _eager(tr)
        torch.set_rng_state(state)
        got = _run_printed_code(tr, strategy)
    py = {python_name(n): n for n in eager}
    returned = {k[len("grad_"):]: v for k, v in got.items() if k.startswith("grad_")}
    expected = {k for k, n in py.items() if eager[n] is not None}
    if params == "lifted":
        assert set(returned) == expected  # every parameter gradient, and the input's if it has one
    else:
        assert set(returned) == set(tr.capture.input_names)  # closure: only the input's gradient
    for k, g in returned.items():
        ref = eager[py[k]]
        assert torch.allclose(g, ref, rtol=1e-4, atol=1e-5 * max(1.0, float(ref.abs().max()))), k
    if params == "lifted" and name != "alexnet":  # (AlexNet's check runs in test_capture)
        assert tr.check_gradients().ok.all()  # fxviz's own check agrees


def _draws_with_inductors_seeds(tr) -> bool:
    return any("inductor_random" in str(n.target) for n in tr.joint.graph.nodes)


def test_real_names_in_the_code(traces):
    tr = traces[("alexnet", "lifted")]
    fwd, bwd = tr.code("forward"), tr.code("backward")
    src_f, src_b = str(fwd), str(bwd)
    assert "def forward(self, features_0_weight, features_0_bias, x," in src_f.replace("\n", " ")
    assert "loss = torch.ops.aten.sum.default" in src_f
    assert "grad_features_0_weight" in src_b and "grad_classifier_6_bias" in src_b
    assert "tangent_loss" in src_b
    assert [v.role for v in bwd.inputs].count("tangent") == 1
    # the forward's saved outputs are the backward's inputs, by name; both are joint-graph names
    saved_out = [v.name for v in fwd.outputs if v.role == "saved"]
    saved_in = [v.name for v in bwd.inputs if v.role == "saved"]
    assert saved_out == saved_in
    part = tr.partition()  # the code's default strategy is every view's
    assert [v.joint for v in fwd.outputs if v.role == "saved"] == part.saved
    for v in bwd.outputs:
        if v.name is not None:
            assert v.role == "gradient" and tr.nodes.loc[v.joint, "role"] == "gradient"
            assert v.name == "grad_" + python_name(tr.nodes.loc[v.joint, "qualname"])
    compile(fwd.src, "f", "exec")
    assert str(tr.code("forward")) is not None and tr.code("forward") is fwd  # cached


def test_closure_code_reads_constants_by_their_parameter_names(traces):
    tr = traces[("alexnet", "closure")]
    src = str(tr.code("forward"))
    assert "features_0_weight = self._param_constant0" in src
    assert [v.name for v in tr.code("backward").outputs] == ["grad_x"]


def test_joint_code_runs_like_the_joint_graph(traces):
    tr = traces[("mlp", "lifted")]
    code = tr.code("joint")
    values = tr.graph.placeholder_values
    args = [torch.ones(()) if v.role == "tangent" else values[v.joint] for v in code.inputs]
    with torch.no_grad():
        got = code.compile()(*args)
    ref = run_joint(tr.graph)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        assert (a is None and b is None) or torch.equal(a, b)


def test_names_never_shadow_code_globals():
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.torch = nn.Linear(3, 3)  # a module called "torch": its weight is torch.weight
            self.relu = nn.Parameter(torch.ones(3))  # a parameter named like a joint node

        def forward(self, x):
            return torch.relu(self.torch(x)) * self.relu

    tr = fxviz.trace(Odd(), torch.randn(2, 3))
    with torch.random.fork_rng():
        eager = _eager(tr)
        got = _run_printed_code(tr)
    names = {v.name for v in tr.code("forward").inputs}
    assert "torch_weight" in names and "relu" not in names
    assert torch.allclose(got["grad_torch_weight"], eager["torch.weight"])
    relu_grad = next(v for k, v in got.items() if k.startswith("grad_relu"))
    assert torch.allclose(relu_grad, eager["relu"])


def test_graph_breaks_each_piece_has_code():
    class Breaks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 2)

        def forward(self, x):
            h = self.a(x)
            if h.sum() > 0:
                h = h + 1
            return self.b(h)

    tr = fxviz.trace(Breaks(), torch.randn(3, 4))
    assert len(tr.pieces) > 1
    for piece in tr.pieces:
        if piece.graph.has_backward:
            assert "def forward(" in str(piece.code("backward"))
    grads = {v.name for p in tr.pieces if p.graph.has_backward for v in p.code("backward").outputs if v.name}
    assert {"grad_a_weight", "grad_b_weight"} <= grads


def test_bad_part_and_no_backward(traces):
    tr = traces[("mlp", "lifted")]
    with pytest.raises(InputError):
        tr.code("sideways")
    no_bw = traces[("mini_gpt", "closure")]  # token ids only: nothing requires grad
    assert not no_bw.graph.has_backward
    with pytest.raises(InputError, match="no backward"):
        no_bw.code("backward")
    assert "def forward(" in str(no_bw.code("joint"))


def test_cli_code(capsys):
    assert main(["code", "mlp", "--part", "backward"]) == 0
    out = capsys.readouterr().out
    assert "def forward(self" in out and "grad_layers_0_weight" in out
    assert main(["code", "mlp", "--part", "forward", "--strategy", "min_cut"]) == 0
    out = capsys.readouterr().out
    assert "layers_0_weight" in out and "min_cut" in out
