"""Saved bytes from the printed graphs alone: no torch, no fake tensors, no rebuild.

torch prints every value of a logged graph with its shape, stride, dtype and device
(``view: "f32[16, 16][16, 1]cpu" = torch.ops.aten.view.default(getitem, [16, 16])``).  The
backward graph's inputs that are not tangents are what the run saved; each lives in a storage,
and the forward graph's own lines say which storage: a view op (by its aten schema, a list
checked against torch in the tests) shares its input's, any other op makes a storage of the
size its annotation gives.  A value whose storage is a forward input's is a parameter or an
input, never an activation.  This is the count ``Trace.memory_table`` makes on the rebuilt graph
(unique storages), read in one pass while the log streams (``fxviz logs`` on a big log).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["VIEW_OPS", "ITEMSIZE", "GraphText", "SavedBytes", "saved_bytes", "storage_bytes"]

VIEW_OPS = frozenset({
    "_autocast_to_full_precision", "_autocast_to_reduced_precision", "_conj", "_fw_primal", "_grad_sum_to_size",
    "_indices", "_make_dual", "_ncf_unsqueeze", "_ncf_view", "_neg_view", "_nested_get_values",
    "_nested_view_from_buffer", "_nested_view_from_jagged", "_reshape_alias", "_sparse_broadcast_to",
    "_test_autograd_multiple_dispatch_view", "_unpack_dual", "_values", "adjoint", "alias", "as_strided", "as_tensor",
    "broadcast_to", "ccol_indices", "chunk", "coalesce", "col_indices", "conj", "contiguous", "cpu", "crow_indices",
    "cuda", "detach", "diagonal", "dsplit", "expand", "expand_as", "flatten", "hsplit", "imag", "indices",
    "lift_fresh", "linalg_diagonal", "mH", "mT", "matrix_H", "moveaxis", "movedim", "narrow", "numpy_T", "permute",
    "pin_memory", "positive", "ravel", "real", "reshape", "reshape_as", "resolve_conj", "resolve_neg",
    "row_indices", "select", "slice", "slice_inverse", "split", "split_with_sizes", "squeeze", "swapaxes",
    "swapdims", "t", "tensor_split", "to", "transpose", "unbind", "unflatten", "unfold", "unsqueeze", "values",
    "view", "view_as", "view_as_complex", "view_as_real", "vsplit",
    "_unsafe_view",  # no alias in its schema, but it is a view of its input's storage (as in torch's fakes)
})
"""aten ops whose output lives in their first argument's storage (their schema's ``Tensor(a)``);
in-place ops (``add_``) write into it, and count alike."""

ITEMSIZE: dict[str, int] = {
    "b8": 1, "u8": 1, "i8": 1, "i16": 2, "i32": 4, "i64": 8, "u16": 2, "u32": 4, "u64": 8, "bf16": 2, "f16": 2,
    "f32": 4, "f64": 8, "c32": 4, "c64": 8, "c128": 16, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3fnuz": 1,
    "f8e5m2fnuz": 1, "f8e8m0fnu": 1, "f4e2m1fnx2": 1, "b1x8": 1, "b2x4": 1, "b4x2": 1, "b8x1": 1, "b16x1": 2,
}
"""Bytes per element of the dtype abbreviations torch prints in a graph's annotations (``f32``, ``bf16``)."""

_PLACEHOLDER = re.compile(r'^\s+(\w+): "([^"]*)",?\s*(?:#\s*(.*))?$')
_ASSIGN = re.compile(r'^\s+(\w+)(?:: "([^"]*)")? = (.*)$')
_OP = re.compile(r"^torch\.ops\.(\w+)\.(\w+)(?:\.\w+)?\(\s*(\w+)?")
_ITEM = re.compile(r"^(\w+)\[(\d+)\]")
_ANNOT = re.compile(r"^([a-z0-9_]+)\[(.*?)\]\[(.*?)\]")


@dataclass
class GraphText:
    """What one printed graph says about its values, gathered a line at a time: each input's
    annotation (and whether it is a tangent), and each op's annotation and the value whose
    storage it shares (None: a storage of its own)."""

    inputs: dict[str, str] = field(default_factory=dict)  # name -> annotation
    tangents: set[str] = field(default_factory=set)
    values: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)  # name -> (annotation, base)
    views: set[str] = field(default_factory=set)  # multi-output view ops (``split``): their items are views
    opaque: set[str] = field(default_factory=set)  # made by ops outside aten/prims: aliasing unknown here

    def line(self, line: str) -> None:
        m = _PLACEHOLDER.match(line)
        if m:
            self.inputs[m.group(1)] = m.group(2)
            if (m.group(3) and "TangentAOTInput" in m.group(3)) or m.group(1).startswith("tangents_"):
                self.tangents.add(m.group(1))
            return
        m = _ASSIGN.match(line)
        if m is None:
            return
        name, annot, rhs = m.group(1), m.group(2), m.group(3)
        base: str | None = None
        op = _OP.match(rhs)
        item = _ITEM.match(rhs)
        if op is not None:
            ns, packet, first = op.group(1), op.group(2), op.group(3)
            if ns not in ("aten", "prims"):
                self.opaque.add(name)
            elif (packet in VIEW_OPS or (packet.endswith("_") and not packet.startswith("__"))) and first:
                base = first
                if annot is None:
                    self.views.add(name)
        elif item is not None and item.group(1) in self.views:
            base = self.values.get(item.group(1), (None, None))[1]
        self.values[name] = (annot, base)

    def root(self, name: str) -> str:
        """The value whose storage ``name`` lives in (itself when it made its own)."""
        seen = set()
        while name in self.values and self.values[name][1] is not None and name not in seen:
            seen.add(name)
            name = self.values[name][1]  # type: ignore[assignment]
        return name

    def annotation(self, name: str) -> str | None:
        return self.inputs.get(name) or self.values.get(name, (None, None))[0]


def storage_bytes(annotation: str | None, hints: Mapping[str, int]) -> int | None:
    """The bytes a fresh storage with this annotation's sizes and strides takes (torch's
    ``compute_required_storage_length``); None for a size (``Sym(s0)``) or a size expression
    the log gives no value for."""
    if annotation is None:
        return None
    m = _ANNOT.match(annotation)
    if m is None or m.group(1) not in ITEMSIZE:
        return None
    try:
        sizes = [_value(s, hints) for s in _split(m.group(2))]
        strides = [_value(s, hints) for s in _split(m.group(3))]
    except ValueError:
        return None
    if any(s == 0 for s in sizes):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(sizes, strides))) * ITEMSIZE[m.group(1)]


def _split(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Pow: operator.pow,
}


def _value(expr: str, hints: Mapping[str, int]) -> int:
    """A printed size (``16``, ``s77``, ``2*s77 + 1``, ``Max(1, s0)``) at the run's values."""
    if expr.lstrip("-").isdigit():
        return int(expr)

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in hints:
            return int(hints[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return int(_BINOPS[type(node.op)](ev(node.left), ev(node.right)))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("Max", "Min"):
            args = [ev(a) for a in node.args]
            return max(args) if node.func.id == "Max" else min(args)
        raise ValueError(expr)

    try:
        return ev(ast.parse(expr, mode="eval").body)
    except (SyntaxError, RecursionError) as exc:
        raise ValueError(expr) from exc


@dataclass(frozen=True)
class SavedBytes:
    """What a compile's backward reads from its forward, counted by storage."""

    activation_bytes: int  # storages the forward made (what a partitioner decides)
    resident_bytes: int  # storages of the forward's inputs (parameters, buffers, the user's inputs)
    tensors: int
    symints: int
    storages: int
    unknown: tuple[str, ...] = ()  # saved values whose size the log gives no value for (not counted)
    approximate: tuple[str, ...] = ()  # saved values whose storage the forward graph does not determine

    @property
    def exact(self) -> bool:
        return not self.unknown and not self.approximate


def saved_bytes(forward: GraphText | None, backward: GraphText, hints: Mapping[str, int]) -> SavedBytes:
    """The backward's non-tangent inputs, each counted once per storage: a storage the forward
    made counts as an activation at the size of the value that made it; one of a forward input
    is resident.  Without the forward graph (or past an op outside aten) a value counts as its own
    storage, and the figure says so (``approximate``)."""
    storages: dict[str, tuple[int, bool]] = {}  # root -> (bytes, resident)
    tensors = symints = 0
    unknown: list[str] = []
    approx: list[str] = []
    for name, annot in backward.inputs.items():
        if name in backward.tangents:
            continue
        if annot.startswith("Sym(") or _ANNOT.match(annot) is None:
            symints += 1
            continue
        tensors += 1
        if forward is None or (name not in forward.values and name not in forward.inputs):
            root, root_annot, resident = name, annot, False
            approx.append(name)
        else:
            root = forward.root(name)
            root_annot = forward.annotation(root) or annot
            resident = root in forward.inputs
            if root in forward.opaque:
                approx.append(name)
        nbytes = storage_bytes(root_annot, hints)
        if nbytes is None:
            unknown.append(name)
            continue
        old = storages.get(root)
        storages[root] = (max(nbytes, old[0]) if old else nbytes, resident)
    return SavedBytes(activation_bytes=sum(b for b, r in storages.values() if not r),
                      resident_bytes=sum(b for b, r in storages.values() if r), tensors=tensors, symints=symints,
                      storages=len(storages), unknown=tuple(unknown), approximate=tuple(approx))
