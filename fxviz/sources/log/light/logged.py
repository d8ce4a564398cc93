"""What the run itself saved, recomputed and peaked at (strategy ``logged``), from its printed forward,
backward and joint graphs: no torch, no fake tensors, no rebuild.

Every number is the one ``analysis.memory.table.memory_row`` gives on the rebuilt graphs (the tests hold
the two side by side on logs of real runs): saved tensors, sizes and storages (``light.storages``); bytes
by owner (a storage a parameter, buffer or user input holds is theirs, every other one an activation);
the forward's ops that the backward runs again (``recomputed``); their FLOPs and bytes moved; each
graph's ops and peak (the same liveness walk); torch's own ``numel * itemsize`` estimate.

A backward op is a recomputation when it is a forward op of the joint graph: the joint's node of its
name, running the same op, traced before the first op that reads a tangent (AOTAutograd traces the
forward, then the backward).  An op the joint lacks (inductor's joint passes made it; the log holds the
joint from before them) is a forward op when neither it nor what it reads depends on a tangent.

It declines (``Declined``) what the text does not determine, and the caller rebuilds instead: activation
offloading, RNG states a partitioner saves, ops outside aten and prims, a saved value the forward does
not make.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fxviz.sources.log.light.flops import node_flops
from fxviz.sources.log.light.nodes import GETITEM, LightGraph, LightNode, annotation
from fxviz.sources.log.light.storages import Key, LogStorages, live_bytes
from fxviz.sources.log.light.text import Declined
from fxviz.sources.log.signature import OFFLOAD_PREFIX, is_tangent, size_at

__all__ = ["SavedValue", "LoggedFacts", "logged_facts", "traced_phases", "tangent_names", "RANDOM_OPS",
           "draws_random", "num_fwd"]

RANDOM_OPS = frozenset({
    "_cudnn_attention_backward", "_cudnn_attention_forward", "_cudnn_init_dropout_state", "_cudnn_rnn",
    "_efficient_attention_forward", "_fill_mem_eff_dropout_mask_", "_flash_attention_forward",
    "_flash_attention_forward_no_dropout_inplace", "_fused_dropout", "_fused_sdp_choice", "_lstm_mps",
    "_nested_tensor_softmax_with_shape", "_sample_dirichlet", "_scaled_dot_product_attention_math",
    "_scaled_dot_product_attention_math_for_mps", "_scaled_dot_product_cudnn_attention",
    "_scaled_dot_product_cudnn_attention_backward", "_scaled_dot_product_efficient_attention",
    "_scaled_dot_product_efficient_attention_backward", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_fused_attention_overrideable",
    "_standard_gamma", "_triton_scaled_dot_attention", "alpha_dropout", "alpha_dropout_", "bernoulli", "bernoulli_",
    "binomial", "cauchy", "cauchy_", "dropout", "dropout_", "exponential", "exponential_", "feature_alpha_dropout",
    "feature_alpha_dropout_", "feature_dropout", "feature_dropout_", "geometric", "geometric_", "gru",
    "inductor_rand_eager_offset", "inductor_rand_eager_offsets", "inductor_seed", "inductor_seeds", "log_normal",
    "log_normal_", "lstm", "miopen_rnn", "multinomial", "native_dropout", "normal", "normal_", "normal_functional",
    "poisson", "rand", "rand_like", "randint", "randint_like", "randn", "randn_like", "random", "random_",
    "randperm", "rnn_relu", "rnn_tanh", "rrelu", "rrelu_", "rrelu_with_noise", "rrelu_with_noise_",
    "rrelu_with_noise_functional", "scaled_dot_product_attention", "uniform", "uniform_",
})
"""aten and prims ops torch tags ``nondeterministic_seeded``, inductor's seed prims included (the tests check the
list against every schema torch registers)."""

_DRAWN = {  # op -> (its drop probability's position, name, default), (its train flag's position or -1)
    "aten.native_dropout.default": (1, "p", None, 2), "aten.dropout.default": (1, "p", None, 2),
    "aten._fused_dropout.default": (1, "p", None, -1),
    "aten._scaled_dot_product_flash_attention_for_cpu.default": (3, "dropout_p", 0.0, -1),
    "aten._scaled_dot_product_flash_attention.default": (3, "dropout_p", 0.0, -1),
    "aten._scaled_dot_product_efficient_attention.default": (5, "dropout_p", 0.0, -1),
    "aten._scaled_dot_product_cudnn_attention.default": (5, "dropout_p", 0.0, -1),
    "aten._scaled_dot_product_fused_attention_overrideable.default": (4, "dropout_p", 0.0, -1),
}
"""Where a seeded op's drop probability is: a tag is not a draw (``graph_facts.draws_random``'s rule)."""


def draws_random(n: LightNode) -> bool:
    """Whether running ``n`` draws random numbers: a seeded op whose drop probability is not a literal 0
    and that is not told ``train=False`` (``graph_facts.draws_random`` on a rebuilt node)."""
    if n.target is None or n.target.packet not in RANDOM_OPS:
        return False
    where = _DRAWN.get(n.target.qualname)
    if where is None:
        return True
    pos, name, default, train_pos = where

    def arg(i: int, key: str, fallback: Any) -> Any:
        return n.args[i] if 0 <= i < len(n.args) else n.kwargs.get(key, fallback)

    if train_pos >= 0 and arg(train_pos, "train", True) is False:
        return False
    p = arg(pos, name, default)
    return p != 0 if isinstance(p, (int, float)) and not isinstance(p, bool) else True


@dataclass(frozen=True)
class SavedValue:
    """One value the backward reads, in the saved table's order: its joint name, kind (``activation``,
    ``parameter``, ``input``, ``symint``), the bytes of its storage (0 after the first value of a storage)
    and the value whose storage it shares."""

    name: str
    kind: str
    nbytes: int
    shares_storage_with: str | None = None


@dataclass
class LoggedFacts:
    """The ``logged`` strategy's memory-table row (``row``: the table's integer columns) and saved values."""

    row: dict[str, int | None]
    saved: list[SavedValue]
    recomputed: list[str] = field(default_factory=list)  # joint names, in the backward's order
    symbolic: bool = False  # a size was symbolic: evaluated at the log's hints


def tangent_names(g: LightGraph) -> set[str]:
    return {n.name for n in g.placeholders if is_tangent(n.name, n.desc)}


def traced_phases(joint: LightGraph) -> dict[str, str]:
    """``graph_facts.traced_phases`` on the joint's text: the ops from the first that reads a tangent
    (directly or through ops that do) on are ``backward``, the ops before it ``forward``."""
    seen = tangent_names(joint)
    phases: dict[str, str] = {}
    backward = False
    for n in joint.calls:
        reads = any(a.name in seen for a in n.all_input_nodes)
        backward = backward or reads
        if reads:
            seen.add(n.name)
        phases[n.name] = "backward" if backward else "forward"
    return phases


def _check(fw: LightGraph, bw: LightGraph | None) -> None:
    """Decline what the text does not determine (see the module docstring)."""
    for g in (fw, bw):
        for n in g.calls if g is not None else ():
            t = n.target
            assert t is not None
            namespace = t.qualname.split(".")[0]
            if t.packet in ("device_put", "run_and_save_rng_state", "run_with_rng_state") \
                    or n.name.startswith(OFFLOAD_PREFIX):
                raise Declined(f"{n.name} ({t.packet}): activation offloading or RNG states")
            if namespace not in ("aten", "prims", "sym", "getitem"):
                raise Declined(f"{n.name} calls {t.qualname}, outside aten: its aliasing is not in the text")


def _owners(fw: LightGraph, storages: LogStorages, roles: Mapping[str, str]) -> dict[Key, str]:
    """Storages the forward's inputs hold: ``parameter`` (parameters, buffers) or ``input`` (the rest but
    tangents), as ``analysis.memory.storage.storage_owners`` says of the joint's."""
    owners: dict[Key, str] = {}
    for n in fw.placeholders:
        role = roles.get(n.name, "primal")
        if role == "tangent" or annotation(n.annotation) is None:
            continue
        owners.setdefault(storages.key("fw", n.name), "parameter" if role in ("parameter", "buffer", "constant")
                          else "input")
    return owners


def _recomputed(bw: LightGraph, joint: LightGraph, phases: Mapping[str, str]) -> list[tuple[LightNode, str]]:
    """The backward's ops that compute a forward value again, each with the joint value it computes (its
    own name for an op the joint lacks; see the module docstring)."""
    late = tangent_names(bw)
    constants: dict[tuple[str, str], str] = {}
    for c in joint.calls:
        if not c.all_input_nodes:
            constants.setdefault((str(c.target), "".join(c.args_text.split())), c.name)
    out = []
    for n in bw.calls:
        j: LightNode | None = joint.by_name.get(n.name)
        if j is None or j.op != "call_function" or str(j.target) != str(n.target):
            j = None
            if not n.all_input_nodes:  # a constant the passes renamed (``full_97`` -> ``full_default_69``)
                twin = constants.get((str(n.target), "".join(n.args_text.split())))
                j = joint.by_name[twin] if twin is not None else None
        forward = (phases.get(j.name) == "forward") if j is not None else not any(
            a.name in late for a in n.all_input_nodes)
        if forward:
            out.append((n, j.name if j is not None else n.name))
        else:
            late.add(n.name)
    return out


def _items(graphs: tuple[LightGraph, ...]) -> dict[str, dict[int, str]]:
    """Every multi-output op's printed elements by index, over ``graphs`` (a tuple's storages are all its
    elements': one graph may print fewer than another)."""
    items: dict[str, dict[int, str]] = {}
    for g in graphs:
        for n in g.calls:
            if n.target is GETITEM and isinstance(n.args[0], LightNode) and isinstance(n.args[1], int) \
                    and n.annotation is not None:
                items.setdefault(n.args[0].name, {}).setdefault(n.args[1], n.annotation)
    return items


def _traffic(n: LightNode, storages: LogStorages, hints: Mapping[str, int]) -> int:
    """Bytes an op reads and writes (``graph_facts.node_traffic``): ``numel * itemsize`` of its tensor
    inputs and outputs; 0 for a view (by schema) or a node that is no aten op (``getitem``, size arithmetic)."""
    t = n.target
    if t is None or t.view or t is GETITEM or not t.qualname.startswith(("aten.", "prims.")):
        return 0
    total = sum(_numel_bytes(a, hints) for a in n.all_input_nodes)
    if annotation(n.annotation) is not None:
        return total + _numel_bytes(n, hints)
    items = storages.items.get(n.name, {})
    return total + sum(_annotation_bytes(a, hints) for a in items.values())


def _annotation_bytes(text: str | None, hints: Mapping[str, int]) -> int:
    ann = annotation(text)
    if ann is None or ann.itemsize is None:
        return 0
    count = 1
    for d in ann.sizes:
        count *= max(d if isinstance(d, int) else size_at(d, hints), 0)
    return count * ann.itemsize


def _numel_bytes(n: LightNode, hints: Mapping[str, int]) -> int:
    if annotation(n.annotation) is not None:
        return _annotation_bytes(n.annotation, hints)
    return 0


def _saved(fw: LightGraph, num_fwd: int, storages: LogStorages, owners: Mapping[Key, str],
           hints: Mapping[str, int]) -> tuple[list[SavedValue], dict[str, int]]:
    """The saved values in the saved table's order, and the row's saved columns."""
    outputs = [n for n, _ in fw.outputs[num_fwd:] if n is not None]
    groups: dict[Key, list[str]] = {}
    symints: list[str] = []
    estimate = 0
    for n in outputs:
        if annotation(n.annotation) is None:
            symints.append(n.name)
            continue
        estimate += _annotation_bytes(n.annotation, hints)
        groups.setdefault(storages.key("fw", n.name), []).append(n.name)
    uses = [(k, storages.nbytes(k), owners.get(k, "activation"), names) for k, names in groups.items()]
    rows: list[SavedValue] = []
    for _, (_, nbytes, owner, names) in sorted(enumerate(uses), key=lambda x: (-x[1][1], x[0])):
        rows += [SavedValue(name, owner, nbytes if i == 0 else 0, None if i == 0 else names[0])
                 for i, name in enumerate(names)]
    seen = {r.name for r in rows}
    rows += [SavedValue(name, "symint", 0) for name in dict.fromkeys(symints) if name not in seen]
    by_owner = {o: sum(b for _, b, ow, _ in uses if ow == o) for o in ("activation", "parameter", "input")}
    columns = {"saved_tensors": len(outputs) - len(symints), "saved_symints": len(symints),
               "saved_storages": len(uses), "saved_activation_bytes": by_owner["activation"],
               "saved_param_bytes": by_owner["parameter"], "saved_input_bytes": by_owner["input"],
               "offloaded_bytes": 0, "torch_estimate_bytes": estimate}
    return rows, columns


def num_fwd(fw: LightGraph, joint: LightGraph | None) -> int:
    """The forward's own outputs (the rest it returns for the backward): as the joint counts them, else (no
    joint logged) the outputs before the first its descriptor calls saved for the backward."""
    if joint is not None:
        return len(joint.outputs) - len([n for n in joint.placeholders if not is_tangent(n.name, n.desc)])
    return next((i for i, (_, desc) in enumerate(fw.outputs) if "SavedForBackwards" in desc), len(fw.outputs))


_BACKWARD_COLUMNS = ("recomputed_ops", "recomputed_random_ops", "recompute_flops", "recompute_bytes",
                     "backward_graph_ops", "backward_peak_bytes")
"""The columns only the backward graph gives (empty when the log holds none)."""


def logged_facts(fw: LightGraph, bw: LightGraph | None, joint: LightGraph | None, roles: Mapping[str, str],
                 hints: Mapping[str, int]) -> LoggedFacts:
    """The run's own partition's memory-table row and saved values (see the module docstring).  ``roles``:
    each forward input's role (``parameter``, ``buffer``, ``primal``...: ``names.placeholder_roles``).  With
    no backward graph logged (the run stopped before it was compiled), what the forward returns for it: the
    backward's columns are None."""
    _check(fw, bw)
    graphs = tuple(g for g in (fw, bw, joint) if g is not None)
    storages = LogStorages(fw, bw, hints, _items(graphs))
    owners = _owners(fw, storages, roles)
    resident = {k: storages.nbytes(k) for k in owners}
    saved, columns = _saved(fw, num_fwd(fw, joint), storages, owners, hints)
    forward_curve = live_bytes(fw, "fw", storages, resident, inputs_live_throughout=True)
    row: dict[str, Any] = dict(columns, forward_graph_ops=sum(1 for n in fw.calls if n.target is not GETITEM),
                               forward_flops=sum(node_flops(n, hints) for n in fw.calls),
                               forward_peak_bytes=max(forward_curve, default=0) + sum(resident.values()),
                               resident_bytes=sum(resident.values()))
    symbolic = any(a is not None and a.symbolic for a in (annotation(n.annotation) for g in graphs for n in g))
    if bw is None or joint is None:
        row.update(dict.fromkeys(_BACKWARD_COLUMNS))
        return LoggedFacts(row, saved, [], symbolic)
    again = _recomputed(bw, joint, traced_phases(joint))
    recomputed = [n for n, _ in again]
    backward_curve = live_bytes(bw, "bw", storages, resident, inputs_live_throughout=False)
    row.update(
        recomputed_ops=len({j for _, j in again}),
        recomputed_random_ops=len({j for n, j in again if draws_random(n) and n.users}),
        recompute_flops=sum(node_flops(n, hints) for n in recomputed),
        recompute_bytes=sum(_traffic(n, storages, hints) for n in recomputed),
        backward_graph_ops=sum(1 for n in bw.calls if n.target is not GETITEM),
        backward_peak_bytes=max(backward_curve, default=0) + sum(resident.values()),
    )
    return LoggedFacts(row, saved, list(dict.fromkeys(j for _, j in again)), symbolic)
