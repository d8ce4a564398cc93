"""Graph breaks: code that ran outside every captured graph, frames dynamo ran as plain Python,
graphs run for several modules."""

from __future__ import annotations

from fxviz.analysis.doctor.findings import Finding, Param
from fxviz.analysis.doctor.gradient_paths import EagerPath
from fxviz.analysis.graph.pieces import ROOT, PieceFacts, PieceRun, collapse_modules, modules_of
from fxviz.sources.graphs import Capture, graph_name


# --- graph breaks: code outside the graphs, graphs run for several modules -------------------------
def reused_gradient_node(params: dict[str, Param], facts: PieceFacts, run: PieceRun | None, name: str) -> str | None:
    """The gradient node of graph ``run.graph`` that returns ``name``'s gradient in that run: the
    gradient of the parameter its first run received at the same input position."""
    owner = facts.counterpart.get(name)
    if run is None or owner is None or owner not in params:
        return None
    nodes = [n for g, n in params[owner].grads if g == run.graph]
    return nodes[0] if nodes else None


def outside_findings(names: list[str], eager: dict[str, EagerPath], facts: PieceFacts,
                     title: str = "the model") -> list[Finding]:
    """One finding per module whose parameters get their gradient from code outside every graph
    (the root module's own parameters are named after the model, ``title``)."""
    groups: dict[str, list[str]] = {}
    for n in names:
        owner = modules_of([n])[0]
        groups.setdefault(f"{title} (the root module)" if owner == ROOT else owner, []).append(n)
    findings = []
    frames = (" (in " + ", ".join(facts.eager_frames) + ", a frame dynamo ran as plain Python)"
              if facts.eager_frames else "")
    for module, members in groups.items():
        ep = eager.get(members[0])
        first = ep.first_use if ep is not None else None
        where = ""
        if first is not None and first[1]:
            where = f", called at {first[1]}" + (f": {first[2]}" if first[2] else "")
        shown = ", ".join(members[:4]) + (" ..." if len(members) > 4 else "")
        findings.append(Finding(
            "outside_graphs", "warning", None, (),
            f"{module} ran outside every captured graph{where}{frames}. Its parameters ({shown}) get their "
            "gradient from eager autograd, but no graph fxviz shows contains its ops: the drawings, the "
            "graph rows of the memory table and the per-piece saved bytes leave it out (only the eager row "
            "counts what it saves).",
            "nothing to fix for correctness; for graphs that cover it, remove the graph break that makes dynamo "
            "skip the frame (a graph break inside a for/while loop skips the whole frame)",
            cause="outside", module=module))
    return findings


def frame_findings(facts: PieceFacts) -> list[Finding]:
    return [Finding(
        "eager_frame", "info", None, (),
        f"dynamo skipped the frame {frame} and ran it as plain eager Python (torch: 'graph break in a "
        "for/while loop ... Skipping the frame and falling back to eager'): the functions it calls are "
        "compiled on their own, each into its own graphs, and what it computes itself is in no graph.",
        "move the graph break out of the loop (or the loop into a function of its own) for one graph per "
        "iteration", cause="skipped_frame") for frame in facts.eager_frames]


def _graph_code(cap: Capture, g: int) -> str:
    """What graph ``g`` runs, named for a reused graph whose runs receive no parameter: the modules of
    its nodes (collapsed as ``modules_of`` collapses parameters), else the source lines of its ops."""
    info = cap.graphs[g].info.values()
    mods = collapse_modules({i.module for i in info if i.module})
    if mods:
        return "; ".join(mods)
    lines = list(dict.fromkeys(i.source for i in info if i.source and i.role == "forward"))
    if lines:
        return "the code at " + ", ".join(lines[:2]) + (" ..." if len(lines) > 2 else "")
    return "code outside any module"


def reuse_findings(facts: PieceFacts, cap: Capture) -> list[Finding]:
    findings = []
    for g, runs in facts.reused.items():
        if not any(r.parameters for r in runs):
            findings.append(_reused_without_parameters(g, len(runs), _graph_code(cap, g)))
            continue
        mods = ["; ".join(r.modules) or f"run {r.run + 1} (no parameters)" for r in runs]
        first = mods[0]
        others = ", ".join(mods[1:])
        findings.append(Finding(
            "reused_graph", "info", None, (),
            f"{graph_name(g)} was compiled once, for {first}, and ran {len(runs)} times: also for {others}, each run "
            f"with that module's own parameters. Their gradients come from the same backward graph, run again; "
            f"fxviz draws and measures one run of {graph_name(g)}, so this step holds its saved values "
            f"{len(runs)} times.",
            "nothing to fix: dynamo reuses a graph for every call its guards accept", cause="reused",
            graph=g, module=first))
    return findings


def _reused_without_parameters(g: int, runs: int, code: str) -> Finding:
    return Finding(
        "reused_graph", "info", None, (),
        f"{graph_name(g)} ({code}; no parameters) was compiled once and ran {runs} times, once for every call "
        f"its guards accepted. Its backward runs as often; fxviz draws and measures one run of {graph_name(g)}, "
        f"so this step holds its saved values {runs} times.",
        "nothing to fix: dynamo reuses a graph for every call its guards accept", cause="reused",
        graph=g, module=code)
