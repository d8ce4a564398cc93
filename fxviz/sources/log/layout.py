"""What a log tells of the copies ``Trace.measure()`` finds in a real step, without a model to run:
inductor's forward output code beside its post-grad graph.

The post-grad graph (the ``inductor_post_grad_graph`` artifact) still returns a parameter or an input
it saves as itself (``primals_1``); inductor's output code (``inductor_output_code``) for the same
forward returns, at that place, a buffer of its own (``buf0 = empty_strided_cpu((8, 3, 3, 3),
(27, 1, 9, 3), torch.float32)``): a copy in another layout (channels-last with layout
optimisation), new memory the backward holds that no partition counts.  Read place by place from the
two ``return`` lines; a buffer is a copy when its shape is the placeholder's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from fxviz.core.units import format_bytes
from fxviz.sources.log.reader import ReadStats, Record, read_records

__all__ = ["LayoutCopy", "LoggedLayout", "layout_copies", "read_logged_layout"]

_ITEMSIZE = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2, "float64": 8, "double": 8,
             "int64": 8, "long": 8, "int32": 4, "int": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1,
             "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "complex64": 8,
             "complex128": 16}
_SHORT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64", "i64": "int64",
          "i32": "int32", "i16": "int16", "i8": "int8", "u8": "uint8", "b8": "bool"}
_SIGNATURE_ARG = re.compile(r"(\w+): \"(\w+)\[([^\]]*)\]\[([^\]]*)\]")
_BUFFER = re.compile(r"^\s*(buf\d+) = empty_strided\w*\(\(([^)]*)\), \(([^)]*)\),.*?torch\.(\w+)")
_NAME = re.compile(r"^\w+$")


@dataclass(frozen=True)
class LayoutCopy:
    """One saved value the post-grad graph returns as a graph input and the output code as a copy."""

    value: str  # the post-grad graph's name: primals_1
    buffer: str  # the output code's: buf0
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str
    bytes: int
    layout: str


@dataclass
class LoggedLayout:
    """The copies one logged inductor forward returns for its backward (``copies``), and what was read."""

    copies: list[LayoutCopy] = field(default_factory=list)
    outputs: int = 0  # the forward's outputs compared, place by place
    returned: tuple[int, int] | None = None  # (graph, code) outputs when they differ in number: not compared

    @property
    def copy_bytes(self) -> int:
        return sum(c.bytes for c in self.copies)

    def text(self, names: Mapping[str, str | None] | None = None) -> str:
        """One paragraph: what the log's graphs tell (``names``: a graph input's real name, by value)."""
        names = names or {}
        if self.returned is not None:
            graph, code = self.returned
            return (f"the log's post-grad graph returns {graph} values and its output code {code}: fxviz cannot pair "
                    "them place by place, so whether inductor returns copies of parameters or inputs is not known")
        if not self.copies:
            return (f"the log's post-grad graph and output code agree on all {self.outputs} forward outputs: inductor "
                    "returns no copy of a parameter or an input for the backward")
        each = ", ".join(f"{c.value}" + (f" `{names[c.value]}`" if names.get(c.value) else "")
                         + f" ({c.dtype}{list(c.shape)}, {c.layout}, {format_bytes(c.bytes)})" for c in self.copies)
        return (f"inductor's output code returns {len(self.copies)} copies where its post-grad graph returns the "
                f"graph inputs themselves: {each}; {format_bytes(self.copy_bytes)} the backward holds that the "
                "logged partition does not count (it saves those inputs as themselves)")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def _layout(shape: tuple[int, ...], stride: tuple[int, ...]) -> str:
    def contiguous(order: list[int]) -> tuple[int, ...]:
        out = [0] * len(shape)
        step = 1
        for d in reversed(order):
            out[d] = step
            step *= max(shape[d], 1)
        return tuple(out)

    if stride == contiguous(list(range(len(shape)))):
        return "contiguous"
    if len(shape) == 4 and stride == contiguous([0, 2, 3, 1]):
        return "channels_last"
    if len(shape) == 5 and stride == contiguous([0, 2, 3, 4, 1]):
        return "channels_last_3d"
    return f"strides {stride}"


def _returned(code: str) -> list[str]:
    """The top-level entries of the last ``return (...)`` line."""
    line = next((ln.strip() for ln in reversed(code.splitlines()) if ln.strip().startswith("return (")), "")
    body = line[len("return ("):].rstrip(")").rstrip().rstrip(",")
    out, depth, cur = [], 0, ""
    for ch in body:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def layout_copies(post_grad: str, output_code: str) -> LoggedLayout:
    """The copies the output code returns where the post-grad graph returns a graph input itself."""
    signature = next((ln for ln in post_grad.splitlines() if "def forward(" in ln), "")
    inputs = {m.group(1): (_ints(m.group(3)), _SHORT.get(m.group(2), m.group(2)))
              for m in _SIGNATURE_ARG.finditer(signature)}
    call = output_code[output_code.find("def call("):]
    buffers = {m.group(1): (_ints(m.group(2)), _ints(m.group(3)), m.group(4))
               for m in map(_BUFFER.match, call.splitlines()) if m}
    graph_out, code_out = _returned(post_grad), _returned(call)
    result = LoggedLayout(outputs=min(len(graph_out), len(code_out)))
    if len(graph_out) != len(code_out):
        result.returned = (len(graph_out), len(code_out))
        return result
    for value, entry in zip(graph_out, code_out):
        if value not in inputs or entry == value or not _NAME.match(entry) or entry not in buffers:
            continue
        shape, stride, dtype = buffers[entry]
        if shape != inputs[value][0]:
            continue
        span = 1 + sum((n - 1) * s for n, s in zip(shape, stride)) if all(shape) else 0
        itemsize = _ITEMSIZE.get(dtype)
        if itemsize is None:  # a dtype this table lacks (float8, complex): no guessed size
            continue
        result.copies.append(LayoutCopy(value, entry, shape, stride, dtype, span * itemsize, _layout(shape, stride)))
    return result


def read_logged_layout(path: str, compile_id: str, piece: int = 0) -> LoggedLayout | None:
    """The layout copies of compile ``compile_id`` (``"0/0"``) in the log file ``path``: its forward's
    post-grad graph and output code (the ones whose inputs hold no tangent; with several pieces, a
    DDP-split graph, the ``piece``-th of each); None where the log holds no such pair (another
    backend, a cache hit that logged no output code)."""
    frame, _, number = compile_id.lstrip("!").rpartition("/")
    if not frame.isdigit() or not number.isdigit():
        return None
    key = (int(frame), int(number))
    graphs: list[str] = []
    codes: list[str] = []

    def keep(r: Record) -> bool:
        return r.artifact_name == "inductor_post_grad_graph" or r.kind == "inductor_output_code"

    with open(path, "rb") as f:
        for r in read_records(f, ReadStats(), keep=keep):
            if r.payload is None or r.compile_key[:2] != key:
                continue
            (graphs if r.kind == "artifact" else codes).append(r.payload)
    forwards = [g for g in graphs if "tangents_" not in next(
        (ln for ln in g.splitlines() if "def forward(" in ln), "tangents_")]
    calls = [c for c in codes if "def call(" in c and "tangents_" not in c[c.find("def call("):].split("= args", 1)[0]]
    if piece >= min(len(forwards), len(calls)):
        return None
    return layout_copies(forwards[piece], calls[piece])
