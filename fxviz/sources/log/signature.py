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
import functools
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["VIEW_OPS", "ITEMSIZE", "GraphText", "SavedBytes", "saved_bytes", "storage_bytes", "placeholders",
           "ASSIGNS", "is_tangent", "size_at"]

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
"""A graph's input line (``primals_1: "f32[4][1]cpu",  # ParamAOTInput(...)``): name, annotation, comment."""
_PLACEHOLDER_END = re.compile(rb'"(?=,?[^\S\n]*(?:#|\n|\Z))')
"""Where an input line's annotation can close (``",  #`` or ``"`` at the line's end): a literal first byte,
which ``re`` scans for in C; only the lines it finds are read as Python strings."""
ASSIGNS = re.compile(rb'\n\t[^\S\n]+(\w+)(?:(: ")([^"\n]*)")? = '
                     rb'(?:torch\.ops\.(\w+)\.(\w+)(?:\.\w+)?\([^\S\n]*(\w+)?|(\w+)\[\d+\])?')
"""A graph's value lines (``view: "f32[4]" = torch.ops.aten.view.default(x, [4])``): name, annotation, and
an op's namespace, name and first argument (its storage may be that argument's) or the value a ``getitem``
reads (``split[0]``).  Searched in ``b"\n" + raw`` (``raw``: the payload as the log holds it, each line led
by a tab), so each line is found by the newline before it, a literal ``re`` scans for in C."""
_Line = tuple[bytes, bytes, bytes, bytes, bytes, bytes, bytes]
"""``ASSIGNS``' groups: name, ``: "`` when annotated (b"" when not), annotation, op namespace, op name, first
argument, the value a getitem reads (b"" where absent)."""
_ANNOT = re.compile(r"^([a-z0-9_]+)\[(.*?)\]\[(.*?)\]")


def is_tangent(name: str, note: str) -> bool:
    """A backward input that is a tangent: by its descriptor, or (torch < 2.9 prints none) by the
    name torch gives it (``tangents_1``)."""
    return "TangentAOTInput" in note or name.startswith("tangents_")


def placeholders(lines: bytes) -> list[tuple[str, str, str]]:
    """A graph's input lines (name, annotation, comment or ""), in order, from ``b"\n" + raw``: one per
    line, as print_readable writes a graph's own inputs (a nested subgraph's stay on its one ``def`` line,
    not counted: the count ``Trace.summary`` makes)."""
    out = []
    last = -1
    for m in _PLACEHOLDER_END.finditer(lines):
        start = lines.rfind(b"\n", 0, m.start()) + 1
        if start == last:
            continue
        last = start
        end = lines.find(b"\n", m.start())
        line = lines[start + 1:end if end >= 0 else len(lines)].decode("utf-8", "replace")  # without its tab
        ph = _PLACEHOLDER.match(line)
        if ph is not None:
            out.append((ph.group(1), ph.group(2), ph.group(3) or ""))
    return out


_Fact = tuple[str | None, str | None, bool, bool]
"""What a value's line says: its annotation, the value whose storage it shares (None: its own), whether it
is a multi-output view (``split``: its items are views), whether an op outside aten/prims made it."""


class GraphText:
    """What one printed graph says about its values: each input's annotation (and whether it is a
    tangent), and for each value its annotation and the value whose storage it shares.

    Made from the payload in a few ``re`` passes (C speed: a big log holds millions of graph lines);
    a value's line is read only when a saved value's storage leads to it.  A graph that assigns a name
    twice (nested graph modules) is read line by line in order, as it is printed."""

    def __init__(self, lines: bytes, inputs: list[tuple[str, str, str]] | None = None) -> None:
        """``lines``: ``b"\n" + raw`` (the payload as the log holds it); ``inputs``: its ``placeholders``
        when the caller has them."""
        found = placeholders(lines) if inputs is None else inputs
        self.inputs: dict[str, str] = {name: annot for name, annot, _ in found}  # name -> annotation
        self.tangents: set[str] = {name for name, _, note in found if is_tangent(name, note)}
        self._lines = lines
        self._assigned: dict[bytes, _Line] | None = None  # name -> its line (the last, if twice)
        self._facts: dict[str, _Fact] = {}
        self._storages: dict[str, tuple[str, str | None, bool]] = {}

    def _assignments(self) -> dict[bytes, _Line]:
        if self._assigned is None:
            found = ASSIGNS.findall(self._lines)
            self._assigned = {line[0]: line for line in found}
            if len(self._assigned) != len(found):  # a name assigned twice: each line as it comes
                self._read_in_order(found)
        return self._assigned

    def _read_in_order(self, found: list[_Line]) -> None:
        """Every value line, in order, as a line-by-line reading sees them: a name assigned twice takes
        its last line's annotation and storage, and is a view or opaque if any of its lines made it so."""
        for line in found:
            name = line[0].decode()
            old = self._facts.get(name)
            annot, base, view, opaque = self._parse(line, self._facts.get)
            self._facts[name] = (annot, base, view or bool(old and old[2]), opaque or bool(old and old[3]))

    def _fact(self, name: str) -> _Fact | None:
        fact = self._facts.get(name)
        if fact is None:
            if self._assigned is None:
                self._assignments()  # a name assigned twice: every line read now, in order
                fact = self._facts.get(name)
                if fact is not None:
                    return fact
            line = self._assigned.get(name.encode())  # type: ignore[union-attr]
            if line is None:
                return None
            fact = self._facts[name] = self._parse(line, self._fact)
        return fact

    @staticmethod
    def _parse(line: _Line, prior: Callable[[str], _Fact | None]) -> _Fact:
        """A value's line (``ASSIGNS``' groups); ``prior(name)``: what an earlier line said of ``name``."""
        _, annotated, raw_annot, ns, raw_packet, first, item = line
        annot = raw_annot.decode("utf-8", "replace") if annotated else None
        if ns:
            if ns not in (b"aten", b"prims"):
                return annot, None, False, True
            packet = raw_packet.decode()
            if (packet in VIEW_OPS or (packet.endswith("_") and not packet.startswith("__"))) and first:
                return annot, first.decode(), annot is None, False
            return annot, None, False, False
        of = prior(item.decode()) if item else None
        return annot, of[1] if of is not None and of[2] else None, False, False

    def defines(self, name: str) -> bool:
        """Whether an op of the graph makes ``name``."""
        return name.encode() in self._assignments()

    def opaque(self, name: str) -> bool:
        """Whether an op outside aten/prims made ``name``: its aliasing is unknown here."""
        fact = self._fact(name)
        return fact is not None and fact[3]

    def root(self, name: str) -> str:
        """The value whose storage ``name`` lives in (itself when it made its own)."""
        seen = set()
        while True:
            fact = self._fact(name)
            if fact is None or fact[1] is None or name in seen:
                return name
            seen.add(name)
            name = fact[1]

    def annotation(self, name: str) -> str | None:
        fact = self._fact(name)
        return self.inputs.get(name) or (fact[0] if fact is not None else None)

    def storage(self, name: str) -> tuple[str, str | None, bool]:
        """(``root(name)``, its annotation, whether an op outside aten/prims made it), once per name."""
        got = self._storages.get(name)
        if got is None:
            root = self.root(name)
            fact = self._fact(root)
            got = self._storages[name] = (root, self.inputs.get(root) or (fact[0] if fact is not None else None),
                                          fact is not None and fact[3])
        return got


def storage_bytes(annotation: str | None, hints: Mapping[str, int]) -> int | None:
    """The bytes a fresh storage with this annotation's sizes and strides takes (torch's
    ``compute_required_storage_length``); None for a size (``Sym(s0)``) or a size expression
    the log gives no value for."""
    if annotation is None:
        return None
    fixed, nbytes = _fixed_bytes(annotation)
    if fixed:
        return nbytes
    m = _ANNOT.match(annotation)
    assert m is not None  # _fixed_bytes read it
    try:
        sizes = [_value(s, hints) for s in _split(m.group(2))]
        strides = [_value(s, hints) for s in _split(m.group(3))]
    except ValueError:
        return None
    return _bytes(m.group(1), sizes, strides)


@functools.lru_cache(maxsize=16384)
def _fixed_bytes(annotation: str) -> tuple[bool, int | None]:
    """(True, ``storage_bytes``) of an annotation of plain numbers or of none a storage has; (False, None) for
    one with a size symbol, which the run's hints decide.  Cached: a big log prints the same few shapes
    thousands of times."""
    m = _ANNOT.match(annotation)
    if m is None or m.group(1) not in ITEMSIZE:
        return True, None
    sizes, strides = _split(m.group(2)), _split(m.group(3))
    if not all(s.lstrip("-").isdigit() for s in sizes + strides):
        return False, None
    try:
        return True, _bytes(m.group(1), [int(s) for s in sizes], [int(s) for s in strides])
    except ValueError:  # a digit int() does not read ("²"), as _value
        return True, None


def _bytes(dtype: str, sizes: list[int], strides: list[int]) -> int:
    if any(s == 0 for s in sizes):
        return 0
    return (1 + sum((s - 1) * st for s, st in zip(sizes, strides))) * ITEMSIZE[dtype]


def _split(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Pow: operator.pow,
}


def size_at(expr: str, hints: Mapping[str, int]) -> int:
    """A printed size (``16``, ``s77``, ``2*s77 + 1``, ``Max(1, s0)``) at the run's values; ``ValueError``
    when the log gives no value for it."""
    return _value(expr, hints)


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


OFFLOAD_PREFIX = "cpu_offload_"
"""The name torch's activation offloading gives the copy of a value it offloads (the forward's output)."""


@dataclass(frozen=True)
class SavedBytes:
    """What a compile's backward reads from its forward, counted by storage."""

    activation_bytes: int  # storages the forward made (what a partitioner decides)
    resident_bytes: int  # storages of the forward's inputs (parameters, buffers, the user's inputs)
    tensors: int
    symints: int
    storages: int
    unknown: tuple[str, ...] = ()  # saved values whose size the log gives no value for (not counted)
    offloaded_bytes: int = 0  # activation offloading's copies (``cpu_offload_*``): off the device, not activations
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
    tensors = symints = offloaded = 0
    unknown: list[str] = []
    approx: list[str] = []
    for name, annot in backward.inputs.items():
        if name in backward.tangents:
            continue
        if annot.startswith("Sym(") or _ANNOT.match(annot) is None:
            symints += 1
            continue
        tensors += 1
        if forward is None or (not forward.defines(name) and name not in forward.inputs):
            root, root_annot, resident = name, annot, False
            approx.append(name)
        else:
            root, its_annot, opaque = forward.storage(name)
            root_annot = its_annot or annot
            resident = root in forward.inputs
            if opaque:
                approx.append(name)
        nbytes = storage_bytes(root_annot, hints)
        if nbytes is None:
            unknown.append(name)
            continue
        if name.startswith(OFFLOAD_PREFIX):  # torch's activation offloading's copy (the memory table's split)
            offloaded += nbytes
            continue
        old = storages.get(root)
        storages[root] = (max(nbytes, old[0]) if old else nbytes, resident)
    return SavedBytes(activation_bytes=sum(b for b, r in storages.values() if not r),
                      resident_bytes=sum(b for b, r in storages.values() if r), tensors=tensors, symints=symints,
                      storages=len(storages), unknown=tuple(unknown), approximate=tuple(approx),
                      offloaded_bytes=offloaded)
