"""A graph as plain Python objects, without torch: the nodes, their ops and inputs, and what the
log printed of each value.  A logged graph's text becomes one (``light.text``) in well under a second
where rebuilding it on fake tensors takes minutes on a real model's step (issue 46), and a rebuilt
``GraphModule`` becomes one too (``rebuild.from_log``), so the rules that read only a graph's structure,
stack traces and shapes (each op's module: ``light.modules``) are written once, for both.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fxviz.sources.log.signature import ITEMSIZE, VIEW_OPS

__all__ = ["LightOp", "LightNode", "LightGraph", "Annotation", "annotation", "GETITEM", "light_op", "is_getitem",
           "packet", "CAST_PACKETS", "Dim", "DTYPE_NAMES", "source_line"]

Dim = int | str
"""A size as the log prints it: a number, or a symbolic size (``s77``, ``2*s77``) as text."""

CAST_PACKETS = frozenset({"_to_copy", "to", "convert_element_type", "type", "_to_dtype", "long", "int", "bool"})
"""Ops that convert a value to another dtype (``graph_facts.CAST_OPS``, whose test checks both agree)."""


@dataclass(frozen=True)
class LightOp:
    """What a node calls: ``aten.mm.default`` (``qualname``), its op name without overload
    (``packet``: ``mm``), whether its output aliases its first input (a view by schema, not an in-place
    write) and whether it converts a dtype."""

    qualname: str
    packet: str
    view: bool = False
    cast: bool = False

    def __str__(self) -> str:
        return self.qualname


GETITEM = LightOp("getitem", "getitem")
"""``x[i]``: an element of a multi-output op (``operator.getitem`` in a ``GraphModule``)."""


@functools.lru_cache(maxsize=4096)
def light_op(qualname: str) -> LightOp:
    """The op of a printed call ``torch.ops.<qualname>(...)`` (``aten.view.default``), its facts from its
    name: a view when aten/prims's op of that name is one (``signature.VIEW_OPS``, checked against aten's
    schemas in the tests), an in-place op (``add_``) not."""
    parts = qualname.split(".")
    name = parts[1] if len(parts) > 1 else parts[0]
    aten = parts[0] in ("aten", "prims")
    return LightOp(qualname, name, view=aten and name in VIEW_OPS and name != "_unsafe_view",
                   cast=aten and name in CAST_PACKETS)


class LightNode:
    """One node: as an ``fx.Node`` has them, its ``name``, ``op`` (``placeholder``, ``call_function``,
    ``output``), ``target``, ``args``/``kwargs`` (nodes where the code names a value), ``users`` and
    ``all_input_nodes``; and what the text printed: its value's ``annotation`` (``f32[4, 8][8, 1]cpu``),
    the input's or output's AOT descriptor (``desc``), its ``# File:`` line as a stack ``trace``, its
    checkpoint policy and region, and its arguments as printed (``args_text``)."""

    __slots__ = (
        "all_input_nodes",
        "annotation",
        "args",
        "args_text",
        "desc",
        "index",
        "kwargs",
        "name",
        "op",
        "policy",
        "region",
        "shapes",
        "target",
        "trace",
        "users",
    )

    def __init__(self, name: str, op: str, target: LightOp | None = None, args: tuple[Any, ...] = (),
                 kwargs: dict[str, Any] | None = None, annotation: str | None = None, desc: str = "",
                 trace: str | None = None, args_text: str = "") -> None:
        self.name = name
        self.op = op
        self.target = target
        self.args = args
        self.kwargs: dict[str, Any] = kwargs or {}
        self.users: dict[LightNode, None] = {}
        self.all_input_nodes: list[LightNode] = []
        self.annotation = annotation
        self.desc = desc
        self.trace = trace
        self.args_text = args_text
        self.policy: str | None = None  # torch.utils.checkpoint's policy tag (MUST_SAVE, PREFER_RECOMPUTE...)
        self.region: int | None = None  # its ac_graph_id: which checkpoint call the op ran in
        self.index = -1  # its place in the graph
        self.shapes: tuple[tuple[Dim, ...] | None, frozenset[tuple[Dim, ...] | None]] | None = None
        """(shape, outs) where they come from a value, not an annotation (a rebuilt graph's node)"""

    def __repr__(self) -> str:
        return f"<LightNode {self.name} = {self.target or self.op}>"

    @property
    def shape(self) -> tuple[Dim, ...] | None:
        """Its tensor's sizes (None for a size, a tuple of values, or no annotation)."""
        if self.shapes is not None:
            return self.shapes[0]
        a = annotation(self.annotation)
        return a.sizes if a is not None else None

    @property
    def outs(self) -> frozenset[tuple[Dim, ...] | None]:
        """The shapes it gives: each printed element's of a multi-output op, else its own."""
        if self.shapes is not None:
            return self.shapes[1]
        if self.annotation is None and self.users:
            items = [u.shape for u in self.users if u.target is GETITEM]
            if items:
                return frozenset(items)
        return frozenset([self.shape])


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


def source_line(n: LightNode) -> str | None:
    """The innermost user line of ``n``'s stack trace (``model.py:12``), as ``graph_facts.innermost_frame``."""
    found = _FRAME.findall(n.trace or "")
    if not found:
        return None
    path, line = found[-1]
    return f"{os.path.basename(path)}:{line}"


def is_getitem(n: LightNode) -> bool:
    """An element of a multi-output op (``split[0]``)."""
    return n.target is GETITEM


def packet(n: LightNode) -> str:
    """The op's name without namespace and overload (``clone``), ``getitem``, or the node's op."""
    return n.target.packet if n.target is not None else n.op


class LightGraph:
    """A graph's nodes in order, by name, and its outputs (each with its AOT descriptor)."""

    def __init__(self, nodes: list[LightNode], outputs: list[tuple[LightNode | None, str]]) -> None:
        self.nodes = nodes
        self.outputs = outputs
        for i, n in enumerate(nodes):
            n.index = i
        self.by_name = {n.name: n for n in nodes}

    def __iter__(self) -> Iterator[LightNode]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def placeholders(self) -> list[LightNode]:
        return [n for n in self.nodes if n.op == "placeholder"]

    @property
    def calls(self) -> list[LightNode]:
        return [n for n in self.nodes if n.op == "call_function"]


_ANNOT = re.compile(r"^([a-z0-9]+)\[(.*?)\]\[(.*?)\]([a-z]+(?::\d+)?)?$")

DTYPE_NAMES: dict[str, str] = {
    "u8": "uint8", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "f16": "float16", "f32": "float32",
    "f64": "float64", "c32": "complex32", "c64": "complex64", "c128": "complex128", "b8": "bool", "bf16": "bfloat16",
    "b1x8": "bits1x8", "b2x4": "bits2x4", "b4x2": "bits4x2", "b8x1": "bits8", "b16x1": "bits16",
    "f8e5m2": "float8_e5m2", "f8e4m3fn": "float8_e4m3fn", "f8e5m2fnuz": "float8_e5m2fnuz",
    "f8e4m3fnuz": "float8_e4m3fnuz", "u16": "uint16", "u32": "uint32", "u64": "uint64", "f8e8m0fnu": "float8_e8m0fnu",
    "f4e2m1fnx2": "float4_e2m1fn_x2",
}
"""The dtype each abbreviation of a printed annotation stands for, as ``str(dtype)`` less ``torch.`` (the tests
check it against torch's own table)."""


@dataclass(frozen=True)
class Annotation:
    """A printed value (``f32[2, 16, 64][1024, 64, 1]cpu``): dtype abbreviation, sizes, strides, device."""

    dtype: str
    sizes: tuple[Dim, ...]
    strides: tuple[Dim, ...]
    device: str

    @property
    def itemsize(self) -> int | None:
        return ITEMSIZE.get(self.dtype)

    @property
    def dtype_name(self) -> str:
        """``float32`` for ``f32``: the dtype as a rebuilt graph's ``NodeInfo.dtype`` says it."""
        return DTYPE_NAMES.get(self.dtype, self.dtype)

    @property
    def symbolic(self) -> bool:
        return any(isinstance(s, str) for s in self.sizes + self.strides)


def _dims(text: str) -> tuple[Dim, ...]:
    return tuple(int(s) if s.lstrip("-").isdigit() else s for s in (x.strip() for x in text.split(",")) if s)


@functools.lru_cache(maxsize=16384)
def annotation(text: str | None) -> Annotation | None:
    """The tensor a value's annotation prints (None for a size ``Sym(s0)`` or no annotation).  Cached: a
    big graph prints the same few shapes thousands of times."""
    if not text:
        return None
    m = _ANNOT.match(text)
    if m is None:
        return None
    return Annotation(m.group(1), _dims(m.group(2)), _dims(m.group(3)), m.group(4) or "")
