"""The data of a drawing before any DOT is written: ``Item`` (one drawn node), ``Group`` (one box),
``Scene`` (items, edges, boxes, captions), and the one short tensor format ``format_tensor``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the annotations only: a saved table's text is printed without torch (issue 46)
    from fxviz.sources.roles import NodeInfo

RECOMPUTED_SUFFIX = "~recomputed"

_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int64": "i64",
           "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool",
           "complex64": "c64", "complex128": "c128", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}


# --- formatting ----------------------------------------------------------------------------------
def format_tensor(info: NodeInfo) -> str:
    """``f32[8, 64]`` (torch's own short form), or ``''`` when the value is not one tensor."""
    return format_shape(info.shape, info.dtype)


def format_shape(shape: tuple[int, ...] | None, dtype: str | None) -> str:
    """``format_tensor`` of a bare shape and dtype name (``''`` when either is missing)."""
    if shape is None or dtype is None:
        return ""
    return f"{_DTYPES.get(dtype, dtype)}[{', '.join(str(s) for s in shape)}]"


# --- the scene --------------------------------------------------------------------------------------
@dataclass
class Item:
    """One drawn graph node."""

    id: str  # DOT name = SVG <title>: the joint name (plus RECOMPUTED_SUFFIX for a backward copy)
    joint: str
    info: NodeInfo
    side: str  # "forward" | "backward": which half of the picture it sits in
    saved: bool = False
    recomputed: bool = False
    removed: bool = False
    cmp_saved: str | None = None  # "A-only" | "B-only" | "both"
    cmp_recomputed: str | None = None
    cmp_removed: str | None = None
    highlighted: bool | None = None  # None when nothing is highlighted
    users: list[str] = field(default_factory=list)
    detail: str = ""  # shown after the op name: which element a getitem takes
    # a saved value that adds no bytes: the saved value whose storage it shares ("parameter" /
    # "input" for a view of one), so that the badges add up to the memory table
    alias_of: str | None = None
    # a saved value's kind as the memory table counts it (activation / parameter / input) and the
    # bytes it adds there (its storage's on the storage's first saved value, else 0)
    saved_kind: str | None = None
    saved_bytes: int = 0
    # saved as a copy on another device by torch's activation offloading: that device
    offloaded_to: str | None = None
    # drawn only as a producer or user of a node two strategies treat differently (the
    # differences-only compare): faded, smaller, said so in its tooltip
    context: bool = False


@dataclass
class Group:
    """One collapsed module box."""

    id: str
    path: str
    side: str
    members: list[Item]
    pattern: str | None = None
    repeats: int = 1
    parent: tuple[str, ...] = ()  # the module cluster the box is drawn in
    kind: str = "module"  # "module" | "function" (ops of one source function) | "bookkeeping"
    key: str | None = None  # what ``draw(expand=[...])`` takes to open this box

    def record(self) -> dict[str, object]:
        """The box as plain data for a front-end: its id (the SVG title), what opens it, its label
        and kind, its side and its members by joint name (each once, in graph order)."""
        members = list(dict.fromkeys(m.joint for m in self.members))
        return {"id": self.id, "key": self.key, "label": self.path, "kind": self.kind, "side": self.side,
                "members": members, "pattern": self.pattern, "repeats": self.repeats}


@dataclass
class Scene:
    """What to draw, before any DOT is written."""

    items: dict[str, Item]
    edges: list[tuple[str, str]]  # (producer id, consumer id), in graph order
    view: str
    title: str
    caption: list[str] = field(default_factory=list)
    two_sides: bool = False  # forward and backward clusters, backward drawn bottom-up
    compare_names: tuple[str, str] | None = None
    group_depth: int | None = None
    grouped: bool = False
    groups: dict[str, Group] = field(default_factory=dict)
    unit_of: dict[str, str] = field(default_factory=dict)  # item id -> drawn unit id
    place: dict[str, tuple[str, ...]] = field(default_factory=dict)  # item id -> module cluster path
    unframed: set[tuple[str, ...]] = field(default_factory=set)  # containers: no cluster frame of their own
    compact: bool = False  # two-line labels, tighter ranks: the differences-only drawing fits one screen
    # the halves of a two-sided picture: side -> (label, background); default forward and backward
    # (a diff of two graphs draws its sides "A" and "B")
    side_styles: dict[str, tuple[str, str]] | None = None
