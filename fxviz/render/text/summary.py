"""A trace in a few readable lines (``Trace.summary``, its ``repr``): what was captured, how, and
what the backward returns.  Formats facts the analysis counted; derives nothing."""

from __future__ import annotations

from fxviz.analysis.graph.tables import GradientCounts
from fxviz.analysis.strategy.choices import named, step_names, step_strategy
from fxviz.core.errors import Blank, Do, Say
from fxviz.core.graph_facts import input_devices, joint_node_count
from fxviz.sources.graphs import INFERENCE_NOTE, Capture, graph_of
from fxviz.sources.roles import ROLES, role_counts

__all__ = ["ROUTES", "route_text", "summary_text"]

ROUTES: dict[str, str] = {
    "dynamo": "torch.compile (dynamo) + AOTAutograd",
    "aot": "aot_function over fake tensors",
    "closure": "aot_function on a closure (parameters captured as constants)",
    "log": "torch.compile in a real run, read from its log",
}
"""How each capture route is named in the summary."""


def route_text(capture: Capture) -> str:
    """The capture route in words, with the log's origin or the backend."""
    route = ROUTES[capture.route]
    if capture.route == "log":  # the device a run's tensors were on, when not the CPU this reads on
        devices = [d for g in capture.graphs for d in input_devices(g.gm) if d != "cpu"]
        on = f", tensors on {', '.join(dict.fromkeys(devices))}" if devices else ""
        return f"{route} ({capture.origin}{on})"
    return f"{route}, {capture.backend_label}"


def _parameter_line(counts: GradientCounts) -> str | Say:
    head = f"  parameters: {counts.parameters} ({counts.requires_grad} require grad); "
    if not counts.recorded:
        return head + f"{counts.with_gradient} get a gradient from the backward graph"
    return Say(head + f"{counts.with_gradient} get a gradient from the captured graphs ({counts.reused} through a "
               f"graph reused for another module), {counts.outside} are used only outside every graph "
               "(eager code; ", Do("doctor"), " says which)")


def summary_text(capture: Capture, index: int, gradients: GradientCounts | None) -> Say:
    """The summary of graph ``index`` of ``capture``; ``gradients``: the parameter line's counts
    (None without parameters)."""
    graph = capture.graphs[index]
    info = graph.info.values()
    counts = role_counts(info)
    lines: list[str | Say] = [
        f"{capture.title}: joint graph of {joint_node_count(info)} nodes ({counts['forward']} forward ops, "
        f"{counts['backward']} backward ops), parameters {capture.params}, captured with {route_text(capture)}",
        "  " + ", ".join(f"{counts[r]} {r}" for r in ROLES if counts[r]),
    ]
    if graph.inference:  # no loss: what the frame returned is an output, nothing is differentiated
        lines.append(f"  {INFERENCE_NOTE} (no backward was compiled: gradients were off, or nothing in it needed one)")
    else:
        lines.append(f"  {capture.loss}")
    if not graph.inference and not graph.has_backward:
        lines.append("  no backward graph: nothing the loss depends on requires grad")
    if gradients is not None:
        lines.append(_parameter_line(gradients))
    if graph.has_backward and graph.logged is None:
        lines.append(_default_line(capture))
    if capture.route_note:  # the route fxviz chose is not the step's: said before any number is read
        lines.append(f"  note: the model is on the meta device, which torch.compile cannot run: traced with "
                     f"{ROUTES[capture.route]} (backend={capture.backend!r}), shown with "
                     f"{step_strategy(capture).name}; "
                     "a torch.compile step runs inductor's graph with min_cut, which saves differently (build the "
                     "model on a real device, cpu is fine, to see that)")
    total, breaks = len(capture.graphs), capture.graph_breaks
    if total > 1 or breaks:
        lines.append(Say("  ", _where(capture, index), f"; {len(breaks)} graph break(s): " + "; ".join(breaks[:3])))
    lines += [f"  warning: {w}" for w in capture.warnings]
    return Say("\n").join(lines)


def _where(capture: Capture, index: int) -> Say:
    """Where this graph sits: its place among the capture's graphs, or, for a log (one compile of the
    run), that the code after the break is another compile of the run, picked by compile id."""
    total = len(capture.graphs)
    if capture.route == "log" and capture.graph_breaks:
        head = f"{graph_of(index, total)} of one compile" if total > 1 else "one compile of the run"
        return Say(f"{head} ({capture.origin}); the code after the break is another compile (",
                   Do("trace", (("compile_id", Blank("'ID'", "ID")),), on="run"), "; ", Do("graphs", on="run",
                                                                                          attr=True),
                   " lists them) unless it ran as plain Python")
    return Say(graph_of(index, total) if total > 1 else "one graph captured; the code at the break ran outside it")


def _default_line(capture: Capture) -> str:
    """Which partition every view shows when none is named, what it is, and the others one option away."""
    step = step_strategy(capture)
    other = ("strategy='min_cut' (torch.compile's)" if step.kind == "default"
             else "strategy='default_partition' (aot_function's)")
    graph = ", backend='aot_eager' (AOTAutograd's own graph)" if capture.backend == "inductor" else ""
    return f"  views show {named(step, step_names(capture))} by default; one option away: {other}{graph}"
