"""Issue 14: graph breaks and real-world model shapes, end to end.

Each test builds its own small model (no downloads) and checks fxviz against torch itself: eager
autograd for gradients and saved tensors, dynamo's own node metadata for module paths,
``torch.compile`` for what a capture must accept.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import torch
from torch import nn

import fxviz
from fxviz import _torch


# --- 3. module paths of a submodule called twice in a class with its own __getattr__ -------------
class _GetattrMixin(nn.Module):
    """diffusers' ModelMixin defines ``__getattr__``; dynamo then spells submodule lookups out as
    ``L['fn'].__dict__['_modules'][...]``."""

    def __getattr__(self, name: str):  # type: ignore[override]
        return super().__getattr__(name)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class _TwiceThroughBlocks(_GetattrMixin):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_Block(), _Block()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        for b in self.blocks:  # second call of each block: dynamo keys it "<id>@1"
            x = b(x)
        return x


def test_module_paths_of_a_second_call_in_a_getattr_model() -> None:
    tr = fxviz.trace(_TwiceThroughBlocks(), torch.randn(2, 4))
    gelus = [n for n in tr.joint.graph.nodes if n.op == "call_function" and "gelu" in str(n.target)
             and tr.graph.info[n.name].phase == "forward"]
    assert len(gelus) == 4
    # torch's own record: the second calls carry the "@1" key and the __dict__ spelling
    raw_keys = [next(iter(reversed(n.meta["nn_module_stack"]))) for n in gelus]
    assert sum("@" in k for k in raw_keys) == 2
    assert all("__dict__" in list(n.meta["nn_module_stack"].values())[-1][0] for n in gelus)
    assert [tr.graph.info[n.name].module for n in gelus] == ["blocks.0.act", "blocks.1.act"] * 2
    assert not any("__dict__" in str(m) or "_modules" in str(m) for m in tr.nodes["module"].dropna())
    assert "__dict__" not in tr.draw(group="module").source


def test_module_path_spellings() -> None:
    f = _torch.module_path_from_stack_entry
    assert f("L['fn'].__dict__['_modules']['blocks'].0.act") == "blocks.0.act"
    assert f("L['self']._modules['features'][0]") == "features.0"
    assert f("L['self'].features[0]") == "features.0"


# --- 4. tensors nested in list/tuple/dict arguments are inputs, not activations ----------------------
def test_eager_row_counts_nested_input_tensors_as_inputs() -> None:
    x = torch.randn(64, 64)
    w = torch.randn(64, 64, requires_grad=True)
    tr = fxviz.trace(lambda x, ws: torch.mm(x, ws[0]).sum(), x, [w])
    table = tr.memory_table(["eager", "default"]).set_index("strategy")
    # eager autograd itself: mm saves x (for w's gradient) and nothing it computed
    saved: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        torch.mm(x, w).sum()
    assert [t.data_ptr() for t in saved] == [x.data_ptr()]
    assert table.loc["eager", "saved_activation_bytes"] == 0
    assert table.loc["eager", "saved_input_bytes"] == x.numel() * x.element_size()
    assert table.loc["eager", "saved_activation_bytes"] == table.loc["default", "saved_activation_bytes"]
    assert table.loc["eager", "saved_input_bytes"] == table.loc["default", "saved_input_bytes"]

    d = fxviz.trace(lambda x, ws: torch.mm(x, ws["w"]).sum(), x, {"w": w})
    assert d.memory_table(["eager"])["saved_activation_bytes"].iloc[0] == 0


# --- 5. a non-leaf input written in place through a view -------------------------------------------
def _fill_row(a: torch.Tensor) -> torch.Tensor:
    b = a[0]
    return b.masked_fill_(torch.ones_like(b, dtype=torch.bool), 0)


def test_non_leaf_input_written_in_place_through_a_view() -> None:
    a = torch.ones(2, 2, requires_grad=True).clone()
    before = a.detach().clone()
    tr = fxviz.trace(_fill_row, a)
    assert tr.has_backward
    assert torch.equal(a.detach(), before) and not a.is_leaf  # the caller's tensor is untouched
    # the joint graph's input gradient equals torch.compile's (and eager autograd's) gradient; its
    # forward outputs are the mutated input, then the loss (num_fwd_outputs = mutations + outputs)
    base = torch.ones(2, 2, requires_grad=True)
    _fill_row(base.clone()).sum().backward()
    compiled_base = torch.ones(2, 2, requires_grad=True)
    torch.compile(_fill_row, backend="aot_eager")(compiled_base.clone()).sum().backward()
    assert torch.equal(base.grad, compiled_base.grad)
    assert tr.graph.num_fwd_outputs == 2
    args = (torch.ones(2, 2), torch.zeros(2, 2), torch.ones(()))
    outs = torch.fx.Interpreter(tr.joint).run(*args, enable_io_processing=False)
    assert torch.equal(outs[2], base.grad)


# --- 6. wording and torch's chatter -------------------------------------------------------------------
def test_selective_checkpoint_does_not_leak_torch_warning() -> None:
    code = textwrap.dedent("""
        import functools, torch, torch.nn as nn, fxviz
        from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts, CheckpointPolicy
        def policy(ctx, op, *a, **k):
            return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE
        class M(nn.Module):
            def __init__(s):
                super().__init__(); s.fc = nn.Linear(8, 8)
            def forward(s, x):
                return checkpoint(lambda y: torch.relu(s.fc(y)).sin(), x, use_reentrant=False,
                                  context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
        tr = fxviz.trace(M(), torch.randn(4, 8))
        tr.check_gradients()
        print("saved", tr.partition("default").saved)
    """)
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert "saved" in run.stdout
    assert "context_fn" not in run.stderr
