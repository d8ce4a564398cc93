"""The doctor's vocabulary (``Finding``, ``Diagnosis``, the kinds and their words) and what it
gathers first: every parameter, its graph nodes and its gradient outputs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
import torch.fx as fx

from fxviz.analysis.doctor.gradient_paths import tangent_valued
from fxviz.analysis.real.gradients import gradient_outputs
from fxviz.core.fx_facts import output_values
from fxviz.sources.graphs import Capture, JointGraph
from fxviz.sources.roles import PARAMETER_ROLES

if TYPE_CHECKING:
    import pandas as pd

KINDS = ("captured_as_constant", "no_path", "unused", "gradient_dropped", "outside_graphs", "eager_frame",
         "reused_graph", "duplicate_data", "measured_copies", "measured_extra", "frozen", "run_config", "allgathered")
SEVERITIES = ("error", "warning", "info")
TABLE_COLUMNS = ["parameter", "requires_grad", "gets_gradient", "gradient_node", "in_graph", "reason"]

FIX_LIFT = ("lift the parameters into graph inputs: fxviz.trace(model, x) (params='lifted'), "
            "aot_module(model, ...), or aot_function over torch.func.functional_call(model, params, x) "
            "with the parameters passed as arguments")

CAUSE_WORDS = {
    "detach": ("is detached (.detach() or .data)",
               "remove the .detach() / .data (or compute this value from the parameter without it)"),
    "data": ("is read through .data", "use the parameter itself, not .data"),
    "no_grad": ("is computed inside torch.no_grad() (gradient tracking off)",
                "move the computation out of the torch.no_grad() / set_grad_enabled(False) block"),
    "cast": ("is cast to an integer/bool dtype", "keep the value floating point on the way to the loss"),
    "argmax": ("goes through argmax/argmin/indices (integer results carry no gradient)",
               "use a differentiable relaxation (softmax weights, Gumbel-softmax, a straight-through estimator)"),
    "comparison": ("goes through a comparison (a bool result carries no gradient)",
                   "use a differentiable relaxation (e.g. a sigmoid instead of x > 0) or a straight-through estimator"),
    "integer": ("becomes an integer value (no gradient)", "keep the value floating point on the way to the loss"),
    "zero_derivative": ("goes through an op whose derivative is zero everywhere",
                        "use a straight-through estimator (x + (round(x) - x).detach()) if the rounding is intended"),
    "overwrite": ("is overwritten in place before the loss reads it",
                  "write into a new tensor (torch.where, out = x.clone()) instead of overwriting the parameter's "
                  "result"),
    "shape_only": ("is used only for its shape", "use the value itself if it should influence the loss"),
    "ignored_output": ("reaches an output that the loss ignores",
                       "include that output in the loss (or pass loss_fn=...), or drop the unused module"),
    "other": ("goes through a non-differentiable operation", "make that operation differentiable"),
    "graph_break": ("is used by code that ran outside the captured graph(s) at a graph break",
                    "nothing is wrong in a real run (eager autograd differentiates that code); to see it in "
                    "the graph, avoid the graph break (or try capture_route='aot')"),
}


@dataclass(frozen=True)
class Finding:
    """One thing the doctor found.  ``nodes`` are joint-graph node names (of graph ``graph``)."""

    kind: str
    severity: str
    parameter: str | None
    nodes: tuple[str, ...]
    message: str
    fix: str
    cause: str | None = None
    graph: int | None = None
    module: str | None = None
    source: str | None = None
    bytes: int | None = None


@dataclass
class Diagnosis:
    """Every finding, and one table row per model parameter."""

    findings: list[Finding]
    table: pd.DataFrame
    strategy: str
    graphs: int = 1
    title: str = ""
    params_mode: str = "lifted"
    strategy_words: str = ""  # what ``strategy`` is when it is the user's step's ("what torch.compile does")
    origin: str = ""  # a log's graph: which compile of the run it is ("rank 0, compile 0/0"), checked alone
    inference: bool = False  # every graph is a forward graph only: nothing was partitioned

    @property
    def healthy(self) -> bool:
        """True when every parameter that requires grad gets a (non-zero) gradient."""
        t = self.table
        if not len(t):
            return True
        return bool((t["gets_gradient"] | ~t["requires_grad"]).all())

    @property
    def missing(self) -> list[str]:
        """Parameters that require grad and get no gradient."""
        t = self.table
        if not len(t):
            return []
        return list(t[t["requires_grad"] & ~t["gets_gradient"]]["parameter"])

    def for_parameter(self, name: str) -> list[Finding]:
        return [f for f in self.findings if f.parameter == name]

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]




# --- gathering ------------------------------------------------------------------------------------
@dataclass
class Param:
    name: str
    tensor: torch.Tensor
    nodes: dict[int, list[str]] = field(default_factory=dict)  # graph -> its placeholder/constant nodes
    role: str | None = None  # parameter | constant
    grads: list[tuple[int, str]] = field(default_factory=list)  # (graph, gradient output node)
    zero_grads: list[tuple[int, str]] = field(default_factory=list)


def gradient_nodes(graph: JointGraph) -> list[tuple[str | None, str | None, str]]:
    """(real name, gradient node name, role of the input) for every gradient output."""
    if not graph.has_backward:
        return []
    args = output_values(graph.gm)
    res = []
    for j, qual, role in gradient_outputs(graph):
        node = args[j] if j < len(args) else None
        res.append((qual, node.name if isinstance(node, fx.Node) else None, role))
    return res


def collect_parameters(cap: Capture) -> dict[str, Param]:
    params: dict[str, Param] = {}
    for name, p in cap.named_parameters():  # a log's parameters when there is no model
        params[name] = Param(name, p)
    for g in cap.graphs:
        for n, info in g.info.items():
            if info.qualname in params and info.role in PARAMETER_ROLES:
                entry = params[info.qualname]
                entry.nodes.setdefault(g.index, []).append(n)
                entry.role = "constant" if info.role == "constant" or entry.role == "constant" else "parameter"
        dep = tangent_valued(g) if g.has_backward else set()
        for qual, node, role in gradient_nodes(g):
            if qual in params and role == "parameter" and node is not None:
                (params[qual].grads if node in dep else params[qual].zero_grads).append((g.index, node))
    return params




def reason_of(f: Finding) -> str:
    if f.kind == "unused":
        return "never used in the forward"
    words = CAUSE_WORDS.get(f.cause or "other", CAUSE_WORDS["other"])[0]
    if f.cause == "ignored_output":
        where = f" (module {f.module})" if f.module else ""
    else:
        where = f" at {f.nodes[0]}" if f.nodes else (f" in {f.module}" if f.module else "")
    return f"no path to the loss: value {words}{where}"
