"""fxviz adds no op to a captured graph that the user's own training step does not run (issue 27).

The reference is a real ``torch.compile`` training step, run in a fresh process with ``TORCH_TRACE``
set: ``loss_fn(model(x)).backward()`` (or the sum the user would write for the default loss).  Its
logged ``aot_joint_graph`` must be fxviz's joint graph, op for op and in order.  Before the fix a
``loss_fn`` that returned a 0-dim loss gave fxviz two ``aten.view`` nodes more (its own
``loss.reshape(())`` and that reshape's backward).
"""

from __future__ import annotations

import re
import shutil

import pytest
import torch
import torch.fx as fx

import fxviz

from .compile_log import read_log
from .logs_util import cached_log
from .loss_models import CASES, build

_SCRIPT = """
import torch
from tests.loss_models import build
for name in {names!r}:
    model, inputs, _, user_step = build(name)
    scope = {{"model": model, "user_step": user_step}}
    # one code object (one logged frame) per case, each under its own name
    exec(compile("def step(*args):\\n    return user_step(model, *args)", f"<step {{name}}>", "exec"), scope)
    torch.compile(scope["step"], backend={backend!r})(*inputs).backward()
"""


def _logged_joints(names: list[str], backend: str) -> dict[str, list[str]]:
    """The ops of each case's logged ``aot_joint_graph``, in graph order, from a real run
    (``logs_util.cached_log``)."""
    log = cached_log(_SCRIPT.format(names=names, backend=backend))
    joints = [r for r in read_log(log) if r.kind == "aot_joint_graph"]
    assert len(joints) == len(names), f"one joint graph per case expected, the log has {len(joints)}"
    return {name: _ops_of_code(r.code) for name, r in zip(names, joints)}


def _ops_of_code(code: str) -> list[str]:
    pattern = re.compile(r"^\s*\w+(?::\s*\"[^\"]*\")? = torch\.ops\.([\w.]+)\(")
    return [m.group(1) for m in map(pattern.match, code.splitlines()) if m]


def _ops(gm: fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]


@pytest.fixture(scope="module")
def joints() -> dict[str, list[str]]:
    return _logged_joints(list(CASES), "aot_eager")


@pytest.mark.parametrize("name", list(CASES))
def test_joint_graph_is_the_user_steps(joints, name):
    model, inputs, loss_fn, _ = build(name)
    # the user's step computes the loss inside the compiled function: compile_loss=True; the log's
    # backend (aot_eager: its joint graph is the one AOTAutograd traced, before inductor's passes)
    tr = fxviz.trace(model, *inputs, loss_fn=loss_fn, compile_loss=loss_fn is not None, backend="aot_eager")
    assert _ops(tr.graph.gm) == joints[name]


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="a real inductor compile needs a C++ compiler (scripts/run.sh installs g++)")
def test_inductor_joint_graph_is_the_user_steps():
    name = "mse_0dim"
    logged = _logged_joints([name], "inductor")
    model, inputs, loss_fn, _ = build(name)
    tr = fxviz.trace(model, *inputs, loss_fn=loss_fn, backend="inductor", compile_loss=loss_fn is not None)
    assert tr.graph.before_joint_passes is not None
    assert _ops(tr.graph.before_joint_passes) == logged[name]
