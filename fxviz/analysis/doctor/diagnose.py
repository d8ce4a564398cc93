"""``diagnose``: every family of findings over a capture's graphs and partitions, gathered into one
``Diagnosis`` (the package docstring says what each family finds)."""


from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fxviz.analysis.doctor.allgathered import allgathered_findings
from fxviz.analysis.doctor.dropped import dropped_gradients
from fxviz.analysis.doctor.duplicates import duplicate_findings
from fxviz.analysis.doctor.findings import (
    KINDS,
    SEVERITIES,
    TABLE_COLUMNS,
    Diagnosis,
    Finding,
    collect_parameters,
    reason_of,
)
from fxviz.analysis.doctor.gradient_paths import eager_paths
from fxviz.analysis.doctor.graph_breaks import frame_findings, outside_findings, reuse_findings, reused_gradient_node
from fxviz.analysis.doctor.logged import config_findings
from fxviz.analysis.doctor.measured import measured_findings
from fxviz.analysis.doctor.no_gradient import (
    constant_finding,
    ignored_by_loss,
    ignored_output_finding,
    needs_eager,
    no_gradient_finding,
    outside_loss_candidates,
    where_in_graph,
)
from fxviz.analysis.graph.pieces import piece_facts
from fxviz.analysis.strategy.choices import step_names
from fxviz.analysis.strategy.partition import Partition
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.sources.graphs import INFERENCE_NOTE, Capture, graph_name

if TYPE_CHECKING:
    from fxviz.analysis.real.measure import Measured

__all__ = ["Finding", "Diagnosis", "diagnose", "KINDS", "SEVERITIES", "TABLE_COLUMNS"]


# --- the whole diagnosis --------------------------------------------------------------------------
def diagnose(cap: Capture, parts: Sequence[Partition | None] | None = None,
             measured: Measured | None = None) -> Diagnosis:
    """Diagnose every graph of ``cap`` (all pieces of a trace with graph breaks).

    ``parts`` holds one partition per graph (the strategy whose backward graphs are checked for
    dropped gradients), or None.  ``measured``: ``Trace.measure()``'s result, for the findings on
    what the real compiled step keeps beyond the partition (``measured``)."""
    import pandas as pd
    parts = list(parts) if parts is not None else [None] * len(cap.graphs)
    params = collect_parameters(cap)
    facts = piece_facts(cap)
    many = len(cap.graphs) > 1
    findings: list[Finding] = []
    rows = []
    missing = [p for p in params.values() if p.tensor.requires_grad and p.role != "constant" and not p.grads]
    try:
        # eager autograd is the judge of "gets a gradient" wherever the graphs cannot tell alone:
        # after graph breaks a graph's cut may sit on one path of several, and a parameter may be
        # used only in code that ran outside every graph or in a graph reused for another module
        probe = [p.name for p in missing if many or not p.nodes or needs_eager(p, cap)]
        probe += outside_loss_candidates(cap, params)
        eager = eager_paths(cap, probe) if probe else {}
    except Exception:  # the probe is an aid: a model it cannot run is still diagnosed from its graphs
        eager = {}
    ignored = ignored_by_loss(params, eager)
    dropped = dropped_gradients(cap, parts, params)
    computed = {f.parameter for f in dropped}
    outside: list[str] = []
    inference = all(g.inference for g in cap.graphs)
    for p in params.values():
        reason = "gets a gradient"
        gets = bool(p.grads)
        grad_node = ", ".join(n for _, n in (p.grads or p.zero_grads)) or None
        in_graph = where_in_graph(p, cap)
        ep = eager.get(p.name)
        eager_grad = ep is not None and ep.gets_gradient and not p.zero_grads
        # a later run of a graph dynamo reused returns this parameter's gradient (torch's runtime)
        run = facts.run_of_parameter(p.name)
        reused_from = reused_gradient_node(params, facts, run, p.name)
        if inference:  # compiled with gradients off: no gradient is expected, none is missing
            reason = INFERENCE_NOTE
            rows.append({"parameter": p.name, "requires_grad": False, "gets_gradient": False,
                         "gradient_node": None, "in_graph": in_graph, "reason": reason})
            continue
        if not p.tensor.requires_grad:
            f = Finding("frozen", "info", p.name, tuple(n for ns in p.nodes.values() for n in ns),
                        f"{p.name} is frozen (requires_grad=False): no gradient is expected.",
                        "nothing to fix, unless it should train: call requires_grad_(True) before tracing",
                        cause="frozen")
            findings.append(f)
            reason = "frozen (requires_grad=False)"
        elif p.role == "constant":
            f = constant_finding(p, cap, p.name in computed)
            findings.append(f)
            reason = "captured as a constant (closure)"
        elif not p.grads and not p.zero_grads and (reused_from is not None or (eager_grad and (many or not p.nodes))):
            gets = True
            if run is not None and reused_from is not None:
                template = reused_from
                reason = (f"gets a gradient from {graph_name(run.graph)} (run {run.run + 1}, the graph compiled for "
                          f"{', '.join(facts.runs_of(run.graph)[0].modules) or 'another module'})")
                grad_node = f"{template} ({graph_name(run.graph)}, run {run.run + 1})"
                in_graph = f"{graph_name(run.graph)}, run {run.run + 1}: parameter"
            elif run is not None or p.nodes:
                # in a graph that returns no gradient for it, yet eager autograd gives one: its path to
                # the loss leaves the graph and runs through code outside every graph
                reason = ("gets a gradient from eager autograd through code outside the captured graphs "
                          "(its graph returns none for it)")
            else:
                reason = "gets a gradient from eager code that ran outside every captured graph"
                in_graph = "in no graph (ran as eager Python)"
                outside.append(p.name)
        elif not p.grads:
            f = no_gradient_finding(p, cap, eager)
            findings.append(f)
            reason = reason_of(f)
        elif p.name in ignored:
            f = ignored_output_finding(p, eager[p.name])
            findings.append(f)
            gets, reason = False, reason_of(f)
        rows.append({"parameter": p.name, "requires_grad": bool(p.tensor.requires_grad),
                     "gets_gradient": gets, "gradient_node": grad_node,
                     "in_graph": in_graph, "reason": reason})
    findings += outside_findings(outside, eager, facts, cap.title)
    findings += frame_findings(facts)
    findings += reuse_findings(facts, cap)
    findings += dropped
    findings += duplicate_findings(cap, parts)
    findings += measured_findings(measured)
    findings += config_findings(cap)
    findings += allgathered_findings(cap, parts)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    kinds = {k: i for i, k in enumerate(KINDS)}
    findings.sort(key=lambda f: (order[f.severity], kinds[f.kind]))
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    strategy = next((p.name for p in parts if p is not None), Strategy("default").name)
    return Diagnosis(findings=findings, table=table, strategy=strategy, graphs=len(cap.graphs), title=cap.title,
                     params_mode=cap.params, strategy_words=step_names(cap).get(strategy, ""),
                     origin=(cap.origin or "") if cap.route == "log" else "",
                     inference=all(g.inference for g in cap.graphs))
