"""The saved-tensor table: one row per value the backward reads from the forward, biggest first,
with its module, what it is in plain words, its storage-aware bytes and what other strategies
do with it; and the same rows summed per module.

Bytes are the memory table's by construction: the rows walk ``memory.saved_memory``'s storages
(a storage shared by several saved values counts once, on its first value's row), so the rows of
each kind add up to ``saved_activation_bytes`` / ``saved_param_bytes`` / ``saved_input_bytes``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch
import torch.fx as fx

from fxviz import _torch
from fxviz.analysis.memory.saved_words import (
    BY_MODULE_COLUMNS,
    NO_MODULE,
    ROW_ORDER,
    SAVED_COLUMNS,
    output_words,
    saved_caption,
)
from fxviz.analysis.memory.storage import saved_memory
from fxviz.analysis.strategy.choices import named
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.errors import StrategyError
from fxviz.core.graph_facts import alias_base, is_view_op
from fxviz.sources.graphs import JointGraph
from fxviz.sources.roles import NodeInfo, tensor_facts

__all__ = ["op_words", "fate", "saved_table", "by_module"]


def op_words(node: fx.Node, info: NodeInfo, names: Mapping[str, NodeInfo]) -> str:
    """A saved value in plain words: ``GELU output``, ``LayerNorm rstd``, ``a view of `addmm_1```,
    ``parameter `h.0.mlp.fc.weight```.  Outputs of multi-output ops are named from ``OP_WORDS``
    by the ``getitem`` index; views (by the op's schema) name the value they view."""
    if node.op == "placeholder":
        if isinstance(_torch.meta_val(node), torch.SymInt):
            return "a size (SymInt)"
        label = {"primal": "input", "tangent": "tangent"}.get(info.role, info.role)
        words = f"{label} `{info.qualname}`" if info.qualname else label
        return f"{words} ({info.note})" if info.note else words  # FSDP2's: "all-gathered by FSDP2 (...)"
    if node.op == "get_attr":
        return f"constant `{info.qualname or node.target}`"
    if node.op != "call_function":
        return info.short_op
    if getattr(node.target, "__name__", "") == "getitem" and len(node.args) > 1 and isinstance(node.args[0], fx.Node):
        parent, index = node.args[0], node.args[1]
        made = names.get(parent.name)
        words = output_words(made.short_op if made is not None else str(parent.target),
                              index if isinstance(index, int) else 0)
        return f"{words} ({made.note})" if made is not None and made.note else words
    if is_view_op(node.target):
        base = alias_base(node)
        if base is not None:
            base_info = names.get(base.name)
            if base_info is not None and base_info.qualname and base_info.role in ("parameter", "buffer", "constant"):
                return f"a view of {base_info.role} `{base_info.qualname}`"
            return f"a view of `{base.name}`"
    if isinstance(_torch.meta_val(node), torch.SymInt):
        return f"a size ({info.short_op})"
    words = output_words(info.short_op, 0)
    return f"{words} ({info.note})" if info.note else words


def _op_label(node: fx.Node, info: NodeInfo, names: Mapping[str, NodeInfo]) -> str:
    """``native_layer_norm[2]`` for the third output of a layer norm; the op itself otherwise."""
    if node.op == "call_function" and getattr(node.target, "__name__", "") == "getitem" and len(node.args) > 1 \
            and isinstance(node.args[0], fx.Node) and node.args[0].name in names:
        return f"{names[node.args[0].name].short_op}[{node.args[1]}]"
    return info.short_op


def owner_module(info: NodeInfo) -> str | None:
    """The module a value belongs to: the module whose forward made it, or for a parameter, buffer
    or constant the module holding it (``h.0.mlp.fc.weight`` -> ``h.0.mlp.fc``)."""
    if info.module:
        return info.module
    if info.role in ("parameter", "buffer", "constant") and info.qualname and "." in info.qualname:
        return info.qualname.rsplit(".", 1)[0]
    return None


def fate(p: Partition, name: str) -> str:
    """What partition ``p`` does with the joint value ``name`` (one of ``FATES``)."""
    if p.error is not None:
        return "failed"
    if name in p.saved:
        return "saved"
    if any(m.kind == "offloaded" and m.wraps == name for m in p.made.values()):
        return "offloaded"
    if name in p.recomputed:
        return "recomputed"
    return "not needed"


def saved_table(graph: JointGraph, p: Partition, others: Sequence[Partition] = (),
                names: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per value ``p`` saves (index: joint node name), by kind in ``ROW_ORDER`` (activations
    first, the inputs and parameters held anyway last), storages biggest first within a kind, the values
    sharing a storage right after its first one (``bytes`` 0, ``shares_storage_with`` naming it); then
    one column per strategy, named by it, with its ``fate``: ``p``'s own first, then each of ``others``.

    ``bytes`` is the storage's size as ``memory.saved_memory`` counts it, so the rows of each
    ``kind`` sum to the memory table's ``saved_activation_bytes`` / ``saved_param_bytes`` /
    ``saved_input_bytes``.  ``names``: what the user's step's strategy is (``choices.step_names``),
    said beside its name in the caption."""
    if p.error is not None:
        raise StrategyError(f"strategy {p.name!r} failed on this graph: {p.error}",
                            "pick another strategy (tr.memory_table() lists which work)")
    if p.reference or p.forward is None:
        raise StrategyError(f"strategy {p.name!r} is measured on the model's eager run and has no graphs whose "
                            "saved values could be listed",
                            f"pass a graph strategy (min_cut, default_partition, ...); {p.name!r} can be a "
                            "comparison column")
    nodes = {n.name: n for n in graph.gm.graph.nodes}
    memory = saved_memory(p, graph)
    rank = {k: i for i, k in enumerate(ROW_ORDER)}
    ordered = sorted(enumerate(memory.storages), key=lambda x: (rank.get(x[1].owner, 0), -x[1].nbytes, x[0]))
    rows: list[dict[str, Any]] = []
    for _, use in ordered:
        kind = use.owner
        for k, name in enumerate(use.names):
            nbytes, shares = (use.nbytes, None) if k == 0 else (0, use.names[0])
            rows.append(_made_row(graph, p, name, kind, nbytes, shares) if name in p.made
                        else _row(name, nodes[name], graph, kind, nbytes, shares))
    tensors = {n for use in memory.storages for n in use.names}
    for name in p.saved:
        if name not in tensors and name in nodes:  # sizes: no storage
            rows.append(_row(name, nodes[name], graph, "symint", 0, None))
    rows.sort(key=lambda r: rank.get(r["kind"], 0))  # stable: storages stay biggest first within a kind
    df = pd.DataFrame(rows, columns=["name"] + SAVED_COLUMNS).set_index("name")
    df["bytes"] = df["bytes"].astype("int64")
    joint = [p.made[n].wraps or n if n in p.made and p.made[n].kind == "offloaded" else n for n in df.index]
    for other in (p, *others):  # an offloaded copy: what each strategy does with the value it holds
        df[other.name] = [fate(other, n) for n in joint]
    df.attrs["strategy"] = p.name
    df.attrs["strategy_words"] = (names or {}).get(p.name, "")  # "what torch.compile does" for the step's
    df.attrs["caption"] = saved_caption(named(p.name, names or {}), len(df), bool((df["kind"] == "offloaded").any()),
                                        [o.name for o in others], column=p.name)
    return df


def _made_row(graph: JointGraph, p: Partition, name: str, kind: str, nbytes: int,
              shares: str | None) -> dict[str, Any]:
    """A value the partitioner made (an RNG state): described from the forward graph, under the
    module of the op it belongs to; it stands for no joint node."""
    made = p.made[name]
    assert p.forward is not None
    node = next(n for n in p.forward.graph.nodes if n.name == made.node)
    shape, dtype, _ = tensor_facts(_torch.meta_val(node))
    module = owner_module(graph.info[made.wraps]) if made.wraps in graph.info else None
    return {"name": name, "kind": kind, "module": module, "op": made.kind, "what": made.what,
            "shape": shape, "dtype": dtype, "bytes": nbytes, "shares_storage_with": shares, "source": None}


def _row(name: str, node: fx.Node, graph: JointGraph, kind: str, nbytes: int, shares: str | None) -> dict[str, Any]:
    info = graph.info[name]
    return {"name": name, "kind": kind, "module": owner_module(info), "op": _op_label(node, info, graph.info),
            "what": op_words(node, info, graph.info), "shape": info.shape, "dtype": info.dtype, "bytes": nbytes,
            "shares_storage_with": shares, "source": info.source}


def by_module(table: pd.DataFrame, module_of: Callable[[str], str | None]) -> pd.DataFrame:
    """The activation rows of a ``saved_table`` summed per module (``module_of(node name)``: the
    module to count it under, None for :data:`NO_MODULE`), biggest first: bytes, values, storages
    (values with bytes of their own) and the biggest value's name."""
    act = table[table["kind"] == "activation"]
    groups: dict[str, list[str]] = {}
    for name in act.index:
        groups.setdefault(module_of(name) or NO_MODULE, []).append(name)
    rows = []
    for module, names in groups.items():
        part = act.loc[names]
        rows.append({"module": module, "saved_activation_bytes": int(part["bytes"].sum()),
                     "saved_activations": len(names), "storages": int((part["shares_storage_with"].isna()).sum()),
                     "biggest": str(part["bytes"].idxmax())})
    out = pd.DataFrame(rows, columns=BY_MODULE_COLUMNS)
    out = out.sort_values(["saved_activation_bytes", "module"], ascending=[False, True], kind="stable")
    return out.reset_index(drop=True)
