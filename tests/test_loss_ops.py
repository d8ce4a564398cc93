"""fxviz adds no op to a captured graph that the user's own training step does not run (issue 27).

The reference is a real ``torch.compile`` training step, run in a fresh process with ``TORCH_TRACE``
set: ``loss_fn(model(x)).backward()`` (or the sum the user would write for the default loss).  Its
logged ``aot_joint_graph`` must be fxviz's joint graph, op for op and in order.  Before the fix a
``loss_fn`` that returned a 0-dim loss gave fxviz two ``aten.view`` nodes more (its own
``loss.reshape(())`` and that reshape's backward).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.fx as fx

import fxviz

from .compile_log import read_log
from .loss_models import CASES, build

ROOT = pathlib.Path(__file__).resolve().parents[1]

_SCRIPT = """
import sys, torch
sys.path.insert(0, {root!r})
from tests.loss_models import build
for name in {names!r}:
    model, inputs, _, user_step = build(name)
    scope = {{"model": model, "user_step": user_step}}
    # one code object (one logged frame) per case, each under its own name
    exec(compile("def step(*args):\\n    return user_step(model, *args)", f"<step {{name}}>", "exec"), scope)
    torch.compile(scope["step"], backend={backend!r})(*inputs).backward()
"""


def _logged_joints(names: list[str], backend: str, directory: pathlib.Path) -> dict[str, list[str]]:
    """The ops of each case's logged ``aot_joint_graph``, in graph order, from a real run."""
    env = dict(os.environ, TORCH_TRACE=str(directory), TORCHINDUCTOR_AUTOGRAD_CACHE="0",
               TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO="0", TORCHINDUCTOR_COMPILE_THREADS="1",
               PYTHONPATH=str(ROOT))
    script = textwrap.dedent(_SCRIPT.format(root=str(ROOT), names=names, backend=backend))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    joints = [r for r in read_log(directory) if r.kind == "aot_joint_graph"]
    assert len(joints) == len(names), f"one joint graph per case expected, the log has {len(joints)}"
    return {name: _ops_of_code(r.code) for name, r in zip(names, joints)}


def _ops_of_code(code: str) -> list[str]:
    import re

    pattern = re.compile(r"^\s*\w+(?::\s*\"[^\"]*\")? = torch\.ops\.([\w.]+)\(")
    return [m.group(1) for m in map(pattern.match, code.splitlines()) if m]


def _ops(gm: fx.GraphModule) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]


@pytest.fixture(scope="module")
def logged(tmp_path_factory) -> dict[str, list[str]]:
    return _logged_joints(list(CASES), "aot_eager", tmp_path_factory.mktemp("torch_trace_loss"))


@pytest.mark.parametrize("name", list(CASES))
def test_joint_graph_is_the_user_steps(logged, name):
    model, inputs, loss_fn, _ = build(name)
    # the user's step computes the loss inside the compiled function: compile_loss=True; the log's
    # backend (aot_eager: its joint graph is the one AOTAutograd traced, before inductor's passes)
    tr = fxviz.trace(model, *inputs, loss_fn=loss_fn, compile_loss=loss_fn is not None, backend="aot_eager")
    assert _ops(tr.graph.gm) == logged[name]


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="a real inductor compile needs a C++ compiler (scripts/run.sh installs g++)")
def test_inductor_joint_graph_is_the_user_steps(tmp_path):
    name = "mse_0dim"
    logged = _logged_joints([name], "inductor", tmp_path)
    model, inputs, loss_fn, _ = build(name)
    tr = fxviz.trace(model, *inputs, loss_fn=loss_fn, backend="inductor", compile_loss=loss_fn is not None)
    assert tr.graph.before_joint_passes is not None
    assert _ops(tr.graph.before_joint_passes) == logged[name]
