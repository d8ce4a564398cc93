"""A partition's forward or backward graph (or the joint graph) as readable Python.

Placeholders and outputs carry real names: ``features_0_weight`` for a parameter,
``grad_features_0_weight`` for its gradient, ``tangent_loss`` for the incoming gradient of the
loss, ``loss`` for the loss.  Every other node keeps its joint-graph name, so the saved values a
forward graph returns are the backward graph's inputs under the same names, and every name can
be looked up in ``Trace.nodes``.  The code is the graph's own FX code generation: it runs.
"""

from __future__ import annotations

import builtins
import keyword
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx

from fxviz import _torch
from fxviz.analysis.strategy.partition import Partition, made_name
from fxviz.core.errors import Do, InputError, Say
from fxviz.core.fx_facts import output_node, output_values
from fxviz.sources.graphs import INFERENCE_NOTE, JointGraph
from fxviz.sources.roles import CALLER_INPUT_ROLES, NodeInfo

__all__ = ["GraphCode", "CodeValue", "graph_code", "python_name", "real_names", "PARTS"]

PARTS = ("forward", "backward", "joint")
_RESERVED = {"self", "torch", "inf", "nan", "device", "fx_pytree", "pytree", "None", "True", "False"}


@dataclass(frozen=True)
class CodeValue:
    """One input or output of the generated function."""

    name: str | None  # the Python name (None for an output that is None)
    joint: str | None  # the joint-graph node it stands for
    role: str  # parameter, buffer, primal, tangent, saved, output, gradient, ...


@dataclass
class GraphCode:
    """Readable, runnable Python of one graph.  ``str()`` shows a header comment plus the code."""

    part: str
    strategy: str | None
    header: str
    src: str
    inputs: list[CodeValue]
    outputs: list[CodeValue]
    module: fx.GraphModule = field(repr=False)

    def __str__(self) -> str:
        return self.header + self.src.strip("\n") + "\n"

    def __repr__(self) -> str:
        return str(self)

    def compile(self) -> Callable[..., Any]:
        """Execute the source text shown (not the GraphModule) and return the function, with
        ``self`` bound to a module holding the graph's constants."""
        code = self.module.graph.python_code(root_module="self")
        namespace: dict[str, Any] = dict(code.globals)
        exec(compile(self.src, f"<fxviz {self.part} graph>", "exec"), namespace)
        fn = namespace["forward"]
        module = self.module

        def run(*args: Any) -> Any:
            return fn(module, *args)

        return run


def python_name(text: str) -> str:
    """``features.0.weight`` -> ``features_0_weight``; never a keyword, builtin or code global."""
    name = re.sub(r"[^0-9A-Za-z_]+", "_", text).strip("_") or "value"
    if name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name) or name in _RESERVED or hasattr(builtins, name):
        name += "_"
    return name


def _output_names(graph: JointGraph) -> dict[int, str]:
    """User output index -> real name, from the forward outputs' node info."""
    args = output_values(graph.gm)
    descs = _torch.output_descs(output_node(graph.gm))
    names: dict[int, str] = {}
    for j, a in enumerate(args[: graph.num_fwd_outputs]):
        kind = _torch.describe_output(descs[j]) if j < len(descs) else None
        qual = graph.info[a.name].qualname if isinstance(a, fx.Node) and a.name in graph.info else None
        if kind is not None and kind.kind == "user" and kind.index is not None and qual:
            names[kind.index] = qual
    return names


def _wanted_name(n: fx.Node, info: NodeInfo, user_outputs: dict[int, str], tangent_i: int) -> tuple[str, str] | None:
    """(Python name, role) a node asks for by its role (``real_names`` makes them unique)."""
    if info.role == "tangent":
        desc = _torch.node_desc(n)
        kind = _torch.describe_input(desc) if desc is not None else None
        of = _torch.describe_output(kind.tangent_of) if kind is not None and kind.tangent_of is not None else None
        base = user_outputs.get(of.index) if of is not None and of.kind == "user" and of.index is not None else None
        return "tangent_" + python_name(base or f"output_{tangent_i}"), "tangent"
    if not info.qualname:
        return None
    if info.role in CALLER_INPUT_ROLES or info.role == "constant":
        return python_name(info.qualname), info.role
    if info.role == "output" and n.op != "output":
        qual = info.qualname
        if qual.endswith("(updated in place)"):
            return "new_" + python_name(qual.replace("(updated in place)", "")), "output"
        return python_name(qual), "output"
    if info.role == "gradient":
        return "grad_" + python_name(info.qualname), "gradient"
    return None


def real_names(graph: JointGraph) -> dict[str, tuple[str, str]]:
    """Joint node name -> (Python name, role) for every node that gets a real name; unique, and
    never equal to another joint node's name."""
    joint_names = {n.name for n in graph.gm.graph.nodes}
    user_outputs = _output_names(graph)
    wanted: dict[str, tuple[str, str]] = {}
    tangent_i = 0
    for n in graph.gm.graph.nodes:
        info = graph.info.get(n.name)
        want = None if info is None else _wanted_name(n, info, user_outputs, tangent_i)
        if want is None:
            continue
        wanted[n.name] = want
        tangent_i += want[1] == "tangent"
    result: dict[str, tuple[str, str]] = {}
    taken: set[str] = set()
    for joint, (name, role) in wanted.items():
        candidate, k = name, 1
        while candidate in taken or (candidate in joint_names and candidate != joint):
            candidate, k = f"{name}_{k}", k + 1
        taken.add(candidate)
        result[joint] = (candidate, role)
    return result


def _rebuild(gm: fx.GraphModule, to_joint: dict[str, str], names: dict[str, tuple[str, str]],
             saved: set[str], made_saved: bool = False) -> tuple[fx.GraphModule, list[CodeValue], list[CodeValue]]:
    new = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    inputs: list[CodeValue] = []
    outputs: list[CodeValue] = []

    def role_of(joint: str, default: str) -> str:
        if joint in saved:
            return "saved"
        return names[joint][1] if joint in names else default

    def output_value(a: Any) -> CodeValue:
        if not isinstance(a, fx.Node):
            return CodeValue(None, None, "none")
        j = to_joint.get(a.name)  # a node the partitioner made (an RNG state) has no joint node
        made = made_saved and j is None and made_name(a.name) in saved
        return CodeValue(env[a].name, j, "saved" if made else role_of(j, "output") if j else "output")

    taken = {v[0] for v in names.values()}
    for n in gm.graph.nodes:
        joint = to_joint.get(n.name)
        want = names[joint][0] if joint is not None and joint in names else n.name
        while joint is None and want in taken:  # a name no joint value is printed under
            want = f"{want}_"
        if n.op == "placeholder":
            env[n] = new.placeholder(want)
            inputs.append(CodeValue(env[n].name, joint, role_of(joint, "input") if joint else "input"))
        elif n.op == "output":
            out_args = n.args[0]
            new.output(fx.map_arg(out_args, lambda a: env[a]))
            outputs += [output_value(a) for a in (out_args if isinstance(out_args, (tuple, list)) else [out_args])]
        else:
            args = fx.map_arg(n.args, lambda a: env[a])
            kwargs = fx.map_arg(n.kwargs, lambda a: env[a])
            env[n] = new.create_node(n.op, n.target, args, kwargs, name=want)
    rebuilt = fx.GraphModule(gm, new)
    return rebuilt, inputs, outputs


def graph_code(graph: JointGraph, part: str, partition: Partition | None, title: str = "") -> GraphCode:
    """Python of ``part`` (``forward``/``backward`` of ``partition``, or ``joint``)."""
    if part not in PARTS:
        raise InputError(f"part={part!r} is not one of {PARTS}",
                         "use 'forward' or 'backward' (of a partition) or 'joint'")
    names = real_names(graph)
    saved: set[str] = set()
    strategy = None
    gm: fx.GraphModule | None
    if part == "joint" or (graph.inference and part == "forward"):
        gm = graph.gm
        to_joint = {n.name: n.name for n in gm.graph.nodes}
        what = (f"forward graph ({INFERENCE_NOTE})" if graph.inference
                else "joint forward+backward graph (as the partitioner receives it)")
    else:
        if partition is None or not partition.ok:
            why = partition.error if partition is not None else "no partition"
            raise InputError(f"there is no {part} graph to show: {why}",
                             Say("check ", Do("graph.has_backward", attr=True), ", or pick another strategy"))
        gm = partition.forward if part == "forward" else partition.backward
        if gm is None:
            raise InputError(f"the partition has no {part} graph", "pick another strategy")
        to_joint = partition.fw_to_joint if part == "forward" else partition.bw_to_joint
        saved = set(partition.saved)
        strategy = partition.name
        what = f"{part} graph of partition {partition.label!r}"
    rebuilt, inputs, outputs = _rebuild(gm, to_joint, names, saved, made_saved=part == "forward")
    src = rebuilt.code
    header = _header(what, title, inputs, outputs)
    return GraphCode(part=part, strategy=strategy, header=header, src=src, inputs=inputs, outputs=outputs,
                     module=rebuilt)


def _header(what: str, title: str, inputs: list[CodeValue], outputs: list[CodeValue]) -> str:
    def summary(values: list[CodeValue]) -> str:
        groups: dict[str, list[str]] = {}
        for v in values:
            groups.setdefault(v.role, []).append(v.name or "None")
        parts = []
        for role, ns in groups.items():
            shown = ", ".join(ns[:6]) + (f", ... ({len(ns)} in all)" if len(ns) > 6 else "")
            parts.append(f"{role}: {shown}")
        return "; ".join(parts)

    lines = [f"# {what}" + (f" -- {title}" if title else ""),
             f"# inputs  -> {summary(inputs)}",
             f"# returns -> {summary(outputs)}"]
    wrapped = []
    for line in lines:
        while len(line) > 110:
            cut = line.rfind(", ", 0, 110)
            cut = cut if cut > 20 else 110
            wrapped.append(line[: cut + 1])
            line = "#     " + line[cut + 1:].lstrip()
        wrapped.append(line)
    return "\n".join(wrapped) + "\n"
