"""A logged graph back as a ``Capture``: what ``Run.trace`` hands to ``Trace``.

The log holds one compile's graphs as text (joint, forward, backward: ``logs.index`` knows where).
They are read back as ``GraphModule``s with fake values (``logs.graph_code``); every input gets its
real name from dynamo's graph and its ``describe_source`` records (``L['self']._modules['h']...``
-> ``h.0...``); every op its phase (AOTAutograd's tags are not in the text: the joint graph's order
is its phases) and the module the log lets fxviz place.  Names, phases and modules are worked out
first and handed to ``roles.classify_nodes`` once, as data.  The run's own forward/backward graphs
become strategy ``"logged"``.  Under inductor the run partitioned the graph after inductor's joint
passes, which are run here too (the logged graph is kept as ``before_joint_passes``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch.fx as fx

from fxviz import _torch
from fxviz.core.errors import LogError
from fxviz.core.fx_facts import output_values
from fxviz.core.graph_facts import tangent_dependent, tangents, traced_phases
from fxviz.core.supported import TORCH_RANGE
from fxviz.sources.graphs import Capture, JointGraph
from fxviz.sources.log.cache import LogCache, piece_key
from fxviz.sources.log.guards import Guards, allgathered_note, read_guards
from fxviz.sources.log.index import Compile, Piece
from fxviz.sources.log.light.modules import place_modules
from fxviz.sources.log.names import def_names, input_names, qualname, returned_names
from fxviz.sources.log.reader import read_payload
from fxviz.sources.log.rebuild.graph_code import parse_graph
from fxviz.sources.log.rebuild.light_graph import as_light
from fxviz.sources.log.run_config import run_budget, run_config_text
from fxviz.sources.log_source import LogSource
from fxviz.sources.roles import LIFTED_STATE_ROLES, InputName, NodeInfo, classify_nodes, input_roles

__all__ = ["capture_from_log"]


def capture_from_log(c: Compile, p: Piece, notes: list[str] | None = None, cache: LogCache | None = None) -> Capture:
    """The ``Capture`` of piece ``p`` of compile ``c`` (``notes``: said in its warnings).  ``cache``: where the
    joint graph after inductor's passes is kept, so the next rebuild of the same graph starts from it."""
    builder = _torch.LogGraphBuilder(c.hints)
    backend = "inductor" if c.backend == "inductor" else "aot_eager"  # what compiled it, as fxviz replays it
    has_backward = "aot_joint_graph" in p.offsets
    kind = next(k for k in ("aot_joint_graph", "aot_inference_graph", "aot_forward_graph") if k in p.offsets)
    key = piece_key(c, p) if cache is not None and backend == "inductor" and has_backward else None
    kept = cache.text(key, "joint") if cache is not None and key is not None else None
    rebuilt = cache.load(key).get("rebuilt") if cache is not None and kept is not None else None
    with _torch.quiet_torch():
        text = kept if rebuilt is not None and kept is not None else read_payload(c.file, p.offsets[kind])
        parsed = parse_graph(text, builder)
        joint = parsed.gm
        logged = None
        if has_backward and "aot_forward_graph" in p.offsets and "aot_backward_graph" in p.offsets:
            known = {n.name: n for n in joint.graph.nodes}
            fwd = parse_graph(read_payload(c.file, p.offsets["aot_forward_graph"]), builder, known).gm
            bwd = parse_graph(read_payload(c.file, p.offsets["aot_backward_graph"]), builder, known).gm
            logged = (_share_values(fwd, joint), _share_values(bwd, joint))
    if not any(_torch.node_desc(n) is not None for n in joint.graph.nodes if n.op == "placeholder"):
        raise LogError("this log's graphs carry no AOT descriptors (# PlainAOTInput...): it was written by a torch "
                       "older than fxviz reads", f"fxviz reads logs of torch {TORCH_RANGE}")
    warnings_ = list(notes or [])
    if kind == "aot_forward_graph":  # issue 46: a piece without a joint graph (the forward alone, a cache hit)
        why = ("its forward and backward graphs, no joint graph (AOTAutograd's cache gave them)"
               if "aot_backward_graph" in p.offsets else "its forward graph alone (no joint graph, no backward: the "
               "run stopped before its backward was compiled, or another tool wrote the log)")
        warnings_.append(f"the log holds compile {c.compile_id}'s {why}: it is shown as a forward graph; what it "
                         "returns for the backward is what fxviz saved --logs lists")
    dynamo_names, user_names = _dynamo_names(c, warnings_)
    if rebuilt is not None:  # the graph after inductor's passes, as the first rebuild left it (its tags restored)
        gm, before, phases = joint, None, dict(rebuilt["phases"])
        _restore(gm, rebuilt)
    else:
        gm, before, phases = _passes(joint, backend, has_backward)
        if key is not None and cache is not None and not parsed.stand_ins:
            _keep(cache, key, gm, phases)
    if before is not None and logged is not None:
        logged = (_share_values(logged[0], gm), _share_values(logged[1], gm))
    warnings_ += parsed.notes + _torch.joint_passes_note(gm)  # issue 33: what a foreign log could not give
    names = _input_names(c, dynamo_names)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    num_fwd = len(output_values(gm)) - (len(placeholders) - len(tangents(gm)) if has_backward else 0)
    state_names = {n: q for n, (role, q) in input_roles(gm, names).items() if role in LIFTED_STATE_ROLES and q}
    grads_in = set(tangents(gm))  # the modules' walk reads inputs' phases too: a tangent is backward
    guards = read_guards(read_payload(c.file, c.guards_offset)) if c.guards_offset >= 0 else Guards()
    modules = place_modules(as_light(gm), state_names, {**{n.name: "backward" if n in grads_in else "forward"
                                                 for n in placeholders}, **phases}, guards)
    info = classify_nodes(gm, num_fwd, names, {}, {}, user_output_names=user_names, phases=phases, modules=modules)
    _mark_notes(info, gm, state_names, guards)
    graph = JointGraph(gm=gm, has_backward=has_backward, num_fwd_outputs=num_fwd,
                       static_lifetime_input_indices=list(p.static or []), joint_inputs=[], info=info,
                       placeholder_values={}, constant_values={}, index=0,
                       partitioner_caller="torch.compile",
                       partitioner_note=f"read from the log{run_config_text(c.functorch)}",
                       logged=logged,
                       inference=not has_backward, backend=backend, before_joint_passes=before,
                       compiler="inductor" if backend == "inductor" else None)
    if has_backward and logged is None:
        warnings_.append("the log has the joint graph but not the forward/backward graphs the run used: "
                         "strategy 'logged' is unavailable")
    source = LogSource(file=c.file, rank=c.rank, compile_id=c.compile_id, piece=c.pieces.index(p),
                       pieces=len(c.pieces), frame=c.frame or "compiled frame", torch_version=c.torch_version or None,
                       input_names=[i.qualname for i in names.values()], cache=cache,
                       keys=(piece_key(c, p),) if cache is not None else ())
    return Capture(graphs=[graph], source=source, route="log", params="lifted",
                   loss="loss: what the run's compiled frame returned (read from the log)",
                   graph_breaks=[c.graph_break_reason] if c.graph_break_reason else [], warnings=warnings_,
                   state=_state(c), backend=backend, torch_budget=run_budget(c.functorch),
                   log_config=dict(c.functorch))


def _mark_notes(info: dict[str, NodeInfo], gm: fx.GraphModule, state_names: dict[str, str], guards: Guards) -> None:
    """What every view says on a node, not only the warnings: FSDP2's unsharded parameters, an op this torch
    lacks."""
    for name, qual in state_names.items():
        if (note := allgathered_note(qual, guards)) is not None and name in info:
            info[name] = dataclasses.replace(info[name], note=note)
    for n in gm.graph.nodes:
        note = _torch.LogGraphBuilder.stand_in_note(n)
        if note is not None and n.name in info:
            info[n.name] = dataclasses.replace(info[n.name], note=note)


def _dynamo_names(c: Compile, warnings_: list[str]) -> tuple[list[str], dict[int, str]]:
    """dynamo's names of the frame's inputs (by position) and of what it returns, from dynamo's graph."""
    if c.dynamo_offset >= 0 and len(c.pieces) == 1:
        code = read_payload(c.file, c.dynamo_offset)
        found = def_names(code)
        if found:
            return found, returned_names(code)
        warnings_.append("dynamo's graph in the log does not parse: inputs keep their graph names")
    elif len(c.pieces) > 1:
        warnings_.append(f"compile {c.compile_id} was split into {len(c.pieces)} graphs (DDP's bucketing): "
                         "inputs keep their graph names")
    return [], {}


def _passes(joint: fx.GraphModule, backend: str, has_backward: bool
            ) -> tuple[fx.GraphModule, fx.GraphModule | None, dict[str, str]]:
    """(the graph the run partitioned, the logged joint when they differ, each op's phase): under inductor
    the run's min-cut partitioned the graph after inductor's joint passes; the log holds the one before
    them: run them (the pre-pass graph is kept, as fxviz.trace does)."""
    phases = {n.name: phase for n, phase in traced_phases(joint).items()}
    _tag(joint, phases)
    if backend != "inductor" or not has_backward:
        return joint, None, phases
    with _torch.quiet_torch():
        gm = _torch.inductor_joint_passes(joint)
    _phase_new_nodes(gm, phases)
    return gm, joint, phases


def _keep(cache: LogCache, key: str, gm: fx.GraphModule, phases: dict[str, str]) -> None:
    """Keep the graph inductor's passes made (as ``print_readable`` prints it: the log's own form), its ops'
    phases and partitioner tags: the next rebuild of this graph parses it and skips the passes (issue 46)."""
    tags = {n.name: tag for n in gm.graph.nodes if (tag := _torch.partitioner_tag(n)) is not None}
    text = gm.print_readable(print_output=False, include_stride=True, include_device=True, expanded_def=True)
    cache.keep_text(key, "joint", text)
    cache.update(key, "rebuilt", {"phases": phases, "tags": tags, "note": _torch.joint_passes_note(gm)})


def _restore(gm: fx.GraphModule, rebuilt: dict[str, Any]) -> None:
    """The partitioner tags and the passes' note a kept graph's text does not print."""
    for n in gm.graph.nodes:
        tag = rebuilt["tags"].get(n.name)
        if tag is not None:
            _torch.LogGraphBuilder.set_tag(n, tag)
    for note in rebuilt.get("note") or []:
        _torch.LogGraphBuilder.set_passes_note(gm, note)


def _tag(gm: fx.GraphModule, phases: dict[str, str]) -> None:
    """Put back the partitioner tags AOTAutograd wrote on the joint graph it traced (the log's
    text does not carry them): torch's partitioners read them to keep forward ops forward."""
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.name in phases:
            _torch.LogGraphBuilder.set_tag(n, "is_backward" if phases[n.name] == "backward" else "is_forward")


def _phase_new_nodes(gm: fx.GraphModule, phases: dict[str, str]) -> None:
    """Phase (and tag) the ops inductor's joint passes added (their replacements carry no tag): an
    op that reads a tangent or a backward op, directly or not, is backward; any other is forward.
    Then put every forward op before the first backward op, as AOTAutograd traced them (the passes
    insert replacements where the pattern was): torch's default partitioner takes every node up
    to the last forward-tagged one as the forward."""
    late = tangent_dependent(gm)
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        tag = _torch.partitioner_tag(n)  # a replacement may carry the tag of the node it replaced
        if tag is not None:
            phases[n.name] = "backward" if tag in ("is_backward", "must_be_in_backward") else "forward"
            continue
        backward = n in late or any(phases.get(a.name) == "backward" for a in n.all_input_nodes)
        phases[n.name] = "backward" if backward else "forward"
    _tag(gm, phases)
    nodes = list(gm.graph.nodes)
    first_bwd = next((n for n in nodes if n.op == "call_function" and phases.get(n.name) == "backward"), None)
    if first_bwd is None:
        return
    for n in nodes[nodes.index(first_bwd):]:
        if n.op == "call_function" and phases.get(n.name) == "forward":
            first_bwd.prepend(n)  # forward ops read only forward ops and inputs: the order stays valid
    gm.graph.lint()
    gm.recompile()


def _input_names(c: Compile, dynamo_names: list[str]) -> dict[int, InputName]:
    return {i: InputName(*name) for i, name in input_names(c, dynamo_names).items()}


def _state(c: Compile) -> list[tuple[str, Any]]:
    """The parameters the log describes, as meta tensors (shape, dtype, requires_grad; no data)."""
    import torch

    out: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for tid, src in c.sources:
        if tid not in c.parameters:
            continue
        size, dtype, requires_grad = c.parameters[tid]
        _, name = qualname(src)
        dt = getattr(torch, dtype.replace("torch.", ""), None)
        if name in seen or not isinstance(dt, torch.dtype) or not all(isinstance(s, int) for s in size):
            continue
        seen.add(name)
        t = torch.empty(size, dtype=dt, device="meta")
        out.append((name, torch.nn.Parameter(t, requires_grad=requires_grad)))
    return out


def _share_values(part: fx.GraphModule, joint: fx.GraphModule) -> fx.GraphModule:
    """Give the run's forward/backward nodes the joint node's fake value of the same name (the
    partitioner copies nodes by name), so storages, and hence saved bytes, are counted as one.
    A node the partitioner made itself may reuse a joint name (min-cut's RNG functionalization
    names its saved RNG state ``getitem_21``, a name the joint gives a layer-norm gradient): a
    value is shared only with a node of the same op on the same inputs, or, for a backward input, of the same
    dtype and shape."""
    nodes = {n.name: n for n in joint.graph.nodes}
    for n in part.graph.nodes:
        j = nodes.get(n.name)
        val = _torch.meta_val(j) if j is not None else None
        if val is None or j is None:
            continue
        same = (n.op == j.op and n.target == j.target and str(n.args) == str(j.args)) if n.op == "call_function" \
            else _same_kind(_torch.meta_val(n), val)
        if same:
            _torch.LogGraphBuilder.set_val(n, val)
    return part


def _same_kind(a: Any, b: Any) -> bool:
    """Same dtype and shape (tensors), or both not tensors: a parsed value and a joint value agree."""
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and str(list(a.shape)) == str(list(b.shape))
    return not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor)
