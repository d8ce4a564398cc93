"""Read the graphs a real ``torch.compile`` training step logged (``TORCH_TRACE``, made by
``logs_util.cached_log``): the reference fxviz's ``backend="inductor"`` capture is checked against.

Self-contained on purpose (the full log reader lives in ``fxviz/logs``, written separately): a
record is a glog line whose JSON envelope names its kind (``{"aot_joint_graph": {}, "frame_id": 0,
...}``), followed by tab-indented payload lines holding ``print_readable`` code.
"""

from __future__ import annotations

import json
import pathlib
import re
from collections import Counter
from dataclasses import dataclass, field

from .logs_util import cached_log, make_log

__all__ = ["LoggedGraph", "LoggedStep", "read_log", "run_real_steps", "ops_of_code", "saved_of_backward"]

_HEADER = re.compile(r"^[VIWE]\d{4} [^\]]*\] (\{.*\})\s*$")
_ASSIGN = re.compile(r"^\s*(\w+)(?::\s*\"[^\"]*\")? = torch\.ops\.([\w.]+)\(")


@dataclass
class LoggedGraph:
    kind: str
    frame_id: int
    frame_compile_id: int
    code: str


@dataclass
class LoggedStep:
    """The graphs of one compiled frame: joint, forward and backward ``print_readable`` code."""

    graphs: dict[str, str] = field(default_factory=dict)

    @property
    def joint_ops(self) -> Counter:
        return ops_of_code(self.graphs["aot_joint_graph"])

    @property
    def forward_ops(self) -> Counter:
        return ops_of_code(self.graphs["aot_forward_graph"])

    @property
    def backward_ops(self) -> Counter:
        return ops_of_code(self.graphs["aot_backward_graph"])

    @property
    def saved(self) -> list[str]:
        return saved_of_backward(self.graphs["aot_backward_graph"])


def read_log(directory: pathlib.Path) -> list[LoggedGraph]:
    """Every ``aot_*_graph`` record of every log file under ``directory``, in log order."""
    out: list[LoggedGraph] = []
    for path in sorted(pathlib.Path(directory).glob("*.log")):
        current: LoggedGraph | None = None
        lines: list[str] = []
        for line in path.read_text().splitlines():
            if line.startswith("\t") and current is not None:
                lines.append(line[1:])
                continue
            if current is not None:
                current.code = "\n".join(lines)
                out.append(current)
                current, lines = None, []
            m = _HEADER.match(line)
            if not m:
                continue
            envelope = json.loads(m.group(1))
            kind = next(iter(envelope))
            if kind in ("aot_joint_graph", "aot_forward_graph", "aot_backward_graph"):
                current = LoggedGraph(kind, int(envelope.get("frame_id", -1)),
                                      int(envelope.get("frame_compile_id", -1)), "")
        if current is not None:
            current.code = "\n".join(lines)
            out.append(current)
    return out


def ops_of_code(code: str) -> Counter:
    """Multiset of the aten ops a ``print_readable`` graph calls (``aten.mul.Tensor`` ...)."""
    ops: Counter = Counter()
    for line in code.splitlines():
        m = _ASSIGN.match(line)
        if m:
            ops[m.group(2)] += 1
    return ops


def saved_of_backward(code: str) -> list[str]:
    """The backward graph's non-tangent inputs: what the forward saved (tensors, then SymInts)."""
    names = []
    for line in code.splitlines():
        m = re.match(r'^\s*(\w+): "[^"]*",?\s*(#.*)?$', line)
        if m and not m.group(1).startswith("tangents"):
            names.append(m.group(1))
    return list(dict.fromkeys(names))


_SCRIPT = """
import sys, torch
from tests.compile_models import MODELS
BUDGET = {budget!r}
if BUDGET is not None:  # the user's own knob: torch.compile's min-cut becomes a knapsack
    import torch._functorch.config
    torch._functorch.config.activation_memory_budget = BUDGET
for name in {names!r}:
    model, inputs = MODELS[name]()
    scope = {{"model": model}}
    # one code object (one frame) per model, each under its own name
    exec(compile("def step(*args):\\n    return model(*args)", f"<step {{name}}>", "exec"), scope)
    loss = torch.compile(scope["step"], dynamic={dynamic!r})(*inputs)
    loss.backward()
"""


def run_real_steps(names: list[str], dynamic: bool, directory: pathlib.Path | None = None, timeout: float = 1200,
                   budget: float | None = None) -> dict[str, LoggedStep]:
    """One real ``torch.compile`` (inductor, CPU) training step per model of ``tests/compile_models``
    in a fresh process with ``TORCH_TRACE`` set (``logs_util.cached_log``: made once, shared; ``directory``
    gets a copy); the graphs it logged, by model name.

    Each model is compiled once; frames are logged in model order.  The AOTAutograd cache is
    off (a cache hit logs no joint graph), and so is profile-guided dynamism (the sizes torch saw
    in earlier processes would decide which dimensions are symbolic); inductor's kernel cache
    stays on (it only saves C++ compile time, never changes a graph).  ``budget``: the step runs with
    ``torch._functorch.config.activation_memory_budget`` set to it, as a user's script would.
    """
    script = _SCRIPT.format(names=list(names), dynamic=dynamic, budget=budget)
    log = make_log(script, directory, timeout=timeout) if directory is not None else cached_log(script, timeout=timeout)
    records = read_log(log)
    frames: list[tuple[int, int]] = []
    by_frame: dict[tuple[int, int], LoggedStep] = {}
    for r in records:
        key = (r.frame_id, r.frame_compile_id)
        if key not in by_frame:
            frames.append(key)
            by_frame[key] = LoggedStep()
        by_frame[key].graphs.setdefault(r.kind, r.code)
    if len(frames) != len(names):
        raise RuntimeError(f"expected one compiled frame per model ({len(names)}), the log has {len(frames)}")
    return {name: by_frame[key] for name, key in zip(names, frames)}
