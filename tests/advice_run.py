"""A real ``torch.compile`` (inductor, CPU) training step of each advice option, applied the way a user
applies it: the option's code pasted into a script (it sets torch's config itself, for a budget), the
model compiled and stepped once with ``TORCH_TRACE`` set.  What each step's backward read from its
forward is read back from the log (``compile_log``)."""

from __future__ import annotations

import pathlib

from .compile_log import LoggedStep, read_log
from .logs_util import cached_log, make_log

__all__ = ["run_options"]

_SCRIPT = """
import copy, torch
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


def run_options(model: str, codes: list[str], directory: pathlib.Path | None = None,
                timeout: float = 1200) -> list[LoggedStep]:
    """The logged graphs with a backward, in run order (one per piece of each option's step, the
    options in order): ``tests.real_models`` builds the model, each option's copy
    is compiled as ``torch.compile(model)`` and stepped with ``labels=ids`` (its own loss).  The log is
    ``logs_util.cached_log``'s (made once, shared; ``directory`` gets a copy)."""
    script = _SCRIPT.format(model=model, codes=codes)
    log = make_log(script, directory, timeout=timeout) if directory is not None else cached_log(script, timeout=timeout)
    steps: list[LoggedStep] = []
    for r in read_log(log):  # log order: each joint graph starts a compile (frame ids restart on reset)
        if r.kind == "aot_joint_graph":
            steps.append(LoggedStep())
        if steps:
            steps[-1].graphs.setdefault(r.kind, r.code)
    return [s for s in steps if "aot_backward_graph" in s.graphs]
