"""A real ``torch.compile`` (inductor, CPU) training step of each advice option, applied the way a user
applies it: the option's code pasted into a script (it sets torch's config itself, for a budget), the
model compiled and stepped once with ``TORCH_TRACE`` set.  What each step's backward read from its
forward is read back from the log (``compile_log``)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

from .compile_log import LoggedStep, read_log

__all__ = ["run_options"]

_SCRIPT = """
import copy, sys, torch
sys.path.insert(0, {root!r})
import torch._functorch.config as functorch_config
from tests.real_models import MODELS
model, inputs = MODELS[{model!r}]()
for i, code in enumerate({codes!r}):
    with functorch_config.patch(activation_memory_budget=1.0):  # what the code sets, for this step only
        applied = copy.deepcopy(model)
        exec(code, {{"model": applied}})
        torch._dynamo.reset()  # a fresh compile for each option: nothing reused from the previous one
        torch.compile(applied)(*inputs, labels=inputs[0]).loss.backward()
"""


def run_options(model: str, codes: list[str], directory: pathlib.Path, timeout: float = 1200) -> list[LoggedStep]:
    """The logged graphs with a backward, in run order (one per piece of each option's step, the
    options in order): ``tests.real_models`` builds the model, each option's copy
    is compiled as ``torch.compile(model)`` and stepped with ``labels=ids`` (its own loss)."""
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    env = dict(os.environ, TORCH_TRACE=str(directory), TORCHINDUCTOR_AUTOGRAD_CACHE="0",
               TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO="0", TORCHINDUCTOR_COMPILE_THREADS="1", PYTHONPATH=root)
    script = textwrap.dedent(_SCRIPT.format(root=root, model=model, codes=codes))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=root)
    if proc.returncode != 0:
        raise RuntimeError(f"the real torch.compile step failed:\n{proc.stderr[-4000:]}")
    steps: list[LoggedStep] = []
    for r in read_log(directory):  # log order: each joint graph starts a compile (frame ids restart on reset)
        if r.kind == "aot_joint_graph":
            steps.append(LoggedStep())
        if steps:
            steps[-1].graphs.setdefault(r.kind, r.code)
    return [s for s in steps if "aot_backward_graph" in s.graphs]
