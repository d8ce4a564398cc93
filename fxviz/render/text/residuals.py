"""The saved table as people read it (``Trace.saved_text``): a headline, then one line per saved value
in the plain form of JAX's ``print_saved_residuals`` (``f32[16,32] output of mm from h.0.attn
(model.py:12)``), with a stack of identical layers folded into one block (``transformer.h.0-11 x12,
same pattern: 25.3 KiB of activations each``) whose lines are its first layer's.  In each block the
activations come first, then the inputs and parameters the backward reads: those are held anyway, so
no heading counts them among the activations (it says their bytes beside).

    >>> dtype_code("torch.float32"), dtype_code("torch.bfloat16")
    ('f32', 'bf16')
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from fxviz import _torch
from fxviz.analysis.advice.changes import repeated_blocks
from fxviz.analysis.memory.saved_words import ROW_ORDER
from fxviz.analysis.memory.storage import storage_owners
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.graph_facts import Storages, tensors
from fxviz.core.units import format_bytes
from fxviz.sources.graphs import JointGraph

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import torch.nn as nn

__all__ = ["dtype_code", "forward_bytes", "saved_text"]

_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64", "int32": "i32",
           "int8": "i8", "uint8": "u8", "bool": "bool", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


def dtype_code(dtype: Any) -> str:
    name = str(dtype).replace("torch.", "")
    return _DTYPES.get(name, name)


def forward_bytes(graph: JointGraph, p: Partition) -> int:
    """Bytes of every tensor the forward makes (storages counted once; parameters and inputs left
    out): what the step could save at most."""

    assert p.forward is not None
    storages = Storages(graph.gm, p.forward, p.backward)
    owners = storage_owners(graph, storages)
    made: set[int] = set()
    for n in p.forward.graph.nodes:
        if n.op != "call_function":
            continue
        made |= {storages.key(t) for t in tensors(_torch.meta_val(n))}
    return sum(storages.nbytes(k) for k in made - set(owners))


def _line(row: Any, module: str | None) -> str:
    shape = row["shape"]
    dims = "" if shape is None or (isinstance(shape, float)) else ",".join(str(s) for s in shape)
    head = "symint" if row["kind"] == "symint" else f"{dtype_code(row['dtype'])}[{dims}]"
    if row["kind"] == "parameter":  # its own name; in a folded block with the layer's index as {i}
        named = str(row["what"]) if isinstance(row.get("what"), str) else ""
        if named and module and isinstance(row["module"], str):
            named = named.replace(f"`{row['module']}.", f"`{module}.")
        what = f"from {named}" if named else f"from the parameter of {module}" if module else "from a parameter"
    elif row["kind"] == "input":
        what = f"from {row['what']}"
    else:
        what = f"output of {row['op']}" + (f" from {module}" if module else "")
    source = row.get("source")
    src = f" ({source})" if isinstance(source, str) and source else ""
    shared = row.get("shares_storage_with")
    share = f", shares storage with {shared}" if isinstance(shared, str) and shared else ""
    nbytes = format_bytes(row["bytes"]) or "0 B"
    return f"  {head:<16} {nbytes:>9}  {what}{src}{share}"


_KIND_ORDER = {k: i for i, k in enumerate(ROW_ORDER)}  # the saved table's own order: activations first


def _held_anyway(rows: list[Any]) -> str:
    """"208 KiB of parameters and 1 KiB of inputs": what ``rows`` hold that the step holds anyway ("" for none)."""
    parts = []
    for kind, word in (("parameter", "parameters"), ("input", "inputs")):
        nbytes = sum(int(r["bytes"]) for r in rows if r["kind"] == kind)
        if nbytes:
            parts.append(f"{format_bytes(nbytes)} of {word}")
    return " and ".join(parts)


def saved_text(graph: JointGraph, p: Partition, table: pd.DataFrame, model: nn.Module | None) -> str:
    """The headline, then every row of ``table`` (``analysis.saved.saved_table`` of ``p``); consecutive
    layers of the model's stack (``changes.repeated_blocks``) that save the same values fold into one."""

    blocks = repeated_blocks(model) if model is not None else None
    total = forward_bytes(graph, p)
    acts = int(table.loc[table["kind"] == "activation", "bytes"].sum())
    rows_all = [row for _name, row in table.iterrows()]
    held = _held_anyway(rows_all)
    lines = [f"saved {format_bytes(acts) or '0 B'} of activations, of the {format_bytes(total) or '0 B'} the forward "
             f"makes ({acts / total:.0%}); {len(table)} values ({p.name})" if total else
             f"saved {format_bytes(acts) or '0 B'} of activations ({p.name})"]
    if held:
        lines.append(f"the backward also reads {held}, held anyway (listed last)")
    pattern = re.compile(rf"^{re.escape(blocks[0])}\.(\d+)(\..*)?$") if blocks else None
    layers: dict[int, list[tuple[str, Any]]] = {}
    rest: list[Any] = []
    for row in sorted(rows_all, key=lambda r: _KIND_ORDER.get(r["kind"], 1)):  # stable: bytes order kept per kind
        m = pattern.match(row["module"] or "") if pattern is not None and isinstance(row["module"], str) else None
        if m is None:
            rest.append(row)
        else:
            layers.setdefault(int(m.group(1)), []).append((m.group(2) or "", row))
    runs: list[tuple[list[int], list[tuple[str, Any]]]] = []
    for i in sorted(layers):
        sig = sorted((s, r["op"], str(r["shape"]), str(r["dtype"]), int(r["bytes"])) for s, r in layers[i])
        if runs and runs[-1][0][-1] == i - 1 and sorted(
                (s, r["op"], str(r["shape"]), str(r["dtype"]), int(r["bytes"])) for s, r in runs[-1][1]) == sig:
            runs[-1][0].append(i)
        else:
            runs.append(([i], layers[i]))
    for row in rest:
        lines.append(_line(row, row["module"] if isinstance(row["module"], str) else None))
    for idx, rows in runs:
        each = sum(int(r["bytes"]) for _, r in rows if r["kind"] == "activation")
        span = f"{idx[0]}-{idx[-1]} x{len(idx)}" if len(idx) > 1 else f"{idx[0]}"
        same = ", same pattern" if len(idx) > 1 else ""
        lines.append(f"{blocks[0] if blocks else ''}.{span}{same}: {format_bytes(each) or '0 B'} of activations"
                     + (" each" if len(idx) > 1 else "") + (f" (+ {also}, held anyway)"
                                                             if (also := _held_anyway([r for _, r in rows])) else ""))
        for suffix, r in rows:
            lines.append("  " + _line(r, f"{blocks[0] if blocks else ''}.{{i}}{suffix}" if len(idx) > 1
                                      else f"{blocks[0] if blocks else ''}.{idx[0]}{suffix}"))
    return "\n".join(lines)
