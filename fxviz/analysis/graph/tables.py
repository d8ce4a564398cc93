"""The per-node and per-parameter tables of a capture (``Trace.nodes``, ``Trace.parameters``): one
row per joint-graph node; per model parameter, how it appears in the captured graphs and which node
is its gradient.  A log's trace has no model: the parameters its graphs name stand in
(``Capture.named_parameters``).  ``shape`` is a tuple of ints in both, as in every table of fxviz."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fxviz.sources.graphs import Capture, JointGraph, graph_name
from fxviz.sources.roles import PARAMETER_ROLES, ROLES, STATE_ROLES

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fxviz.analysis.graph.pieces import PieceFacts

__all__ = ["NODE_COLUMNS", "PARAMETER_COLUMNS", "GradientCounts", "node_table", "parameter_table",
           "gradient_counts"]

NODE_COLUMNS: list[str] = ["op", "target", "short_op", "role", "phase", "qualname", "module", "shape", "dtype",
                           "bytes", "source", "source_code", "seq_nr", "symbolic_shape", "checkpoint_policy",
                           "checkpoint_region", "note"]
"""``Trace.nodes``' columns (``roles.NodeInfo``'s fields): ``op`` is the FX opcode, ``short_op`` the aten op;
``shape`` has symbolic sizes at their example value (``symbolic_shape`` keeps them); ``note``: what a view
must say beside the op (a log's custom op this torch lacks: its shapes are the log's)."""

PARAMETER_COLUMNS: list[str] = ["parameter", "shape", "dtype", "requires_grad", "graph_role", "graph_nodes",
                                "gradient_node"]
"""``shape`` is a tuple of ints, as in every table of fxviz."""


def node_table(graph: JointGraph) -> pd.DataFrame:
    """One row per joint-graph node of ``graph``, indexed by node name (``NODE_COLUMNS``)."""
    import pandas as pd

    rows = [{k: getattr(info, k) for k in NODE_COLUMNS} for info in graph.info.values()]
    df = pd.DataFrame(rows, columns=NODE_COLUMNS, index=pd.Index(list(graph.info), name="name"))
    df["role"] = pd.Categorical(df["role"], categories=list(ROLES))
    for c in ("bytes", "seq_nr", "checkpoint_region"):
        df[c] = df[c].astype("Int64")
    return df


def _nodes_by_parameter(capture: Capture, index: int) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(parameter -> its nodes, parameter -> its gradient node): graph ``index`` by bare node
    names, then the later graphs with the graph named after each node."""
    by_name: dict[str, list[str]] = {}
    grads: dict[str, str] = {}
    for info in capture.graphs[index].info.values():
        if info.qualname is None:
            continue
        if info.role in STATE_ROLES:
            by_name.setdefault(info.qualname, []).append(info.name)
        elif info.role == "gradient":
            grads.setdefault(info.qualname, info.name)
    for g in capture.graphs[1:]:
        for info in g.info.values():
            if info.qualname and info.role in PARAMETER_ROLES:
                by_name.setdefault(info.qualname, []).append(f"{info.name} ({graph_name(g.index)})")
            elif info.qualname and info.role == "gradient":
                grads.setdefault(info.qualname, f"{info.name} ({graph_name(g.index)})")
    return by_name, grads


def parameter_table(capture: Capture, index: int = 0) -> pd.DataFrame:
    """One row per parameter of the model (``PARAMETER_COLUMNS``), seen from graph ``index``:
    ``graph_role`` its role there (``—`` when no graph holds it), ``graph_nodes`` the nodes that hold
    it, ``gradient_node`` the node that is its gradient (``none`` when no graph computes one)."""
    import pandas as pd

    named = capture.named_parameters()
    if not named:
        return pd.DataFrame(columns=PARAMETER_COLUMNS)
    info = capture.graphs[index].info
    by_name, grads = _nodes_by_parameter(capture, index)
    rows: list[dict[str, Any]] = []
    for name, p in named:
        nodes = by_name.get(name, [])
        found = next((info[n] for n in nodes if n in info), None)
        role = found.role if found is not None else "parameter" if nodes else "—"
        rows.append({"parameter": name, "shape": tuple(int(s) for s in p.shape),
                     "dtype": str(p.dtype).replace("torch.", ""), "requires_grad": p.requires_grad,
                     "graph_role": role, "graph_nodes": ", ".join(nodes) or "—",
                     "gradient_node": grads.get(name, "none")})
    return pd.DataFrame(rows, columns=PARAMETER_COLUMNS)


@dataclass(frozen=True)
class GradientCounts:
    """How many parameters the captured graphs give a gradient (the summary's parameter line).
    ``reused`` and ``outside`` are counted only when dynamo's runs of each graph are recorded
    (``recorded``): a graph reused for another module returns that module's gradients through its
    own nodes; a parameter used only outside every graph gets its gradient from eager code."""

    parameters: int
    requires_grad: int
    with_gradient: int
    recorded: bool = False
    reused: int = 0
    outside: int = 0


def gradient_counts(table: pd.DataFrame, facts: PieceFacts) -> GradientCounts:
    """The counts of a :func:`parameter_table`, with the runs of ``facts`` when the model is several graphs."""
    if not len(table):
        return GradientCounts(0, 0, 0)
    graded = set(table[table["gradient_node"] != "none"]["parameter"])
    n_req = int(table["requires_grad"].sum())
    if facts.graphs > 1 and facts.recorded:
        reused = {p for p, first in facts.counterpart.items() if first in graded and p not in graded}
        outside = [p for p in facts.outside if p not in graded]
        return GradientCounts(len(table), n_req, len(graded | reused), True, len(reused), len(outside))
    return GradientCounts(len(table), n_req, len(graded))
