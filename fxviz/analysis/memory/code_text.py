"""Inductor's wrapper code read as text: its ``call`` body, the inputs it unpacks, the layout of every
buffer and input it names, what it returns.

The text is what ``GraphLowering.codegen()`` returns for a model's graph (``_torch.lowering``) and what
a ``TORCH_TRACE`` log's ``inductor_output_code`` record holds, so both routes read it here.  Sizes
are evaluated at the example sizes: ``get_args()`` gives every input's shape, stride and dtype (a
SymInt input as a plain int), and a dynamic graph's ``s0 = primals_1`` lines bind the symbols.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property

from fxviz.core.expressions import int_expression

__all__ = ["Layout", "CodeText", "ITEMSIZE", "split_top_level", "item_path"]

ITEMSIZE: dict[str, int] = {
    "float32": 4, "float": 4, "float64": 8, "double": 8, "float16": 2, "half": 2, "bfloat16": 2, "int64": 8,
    "long": 8, "int32": 4, "int": 4, "int16": 2, "int8": 1, "uint8": 1, "bool": 1, "complex64": 8,
    "complex128": 16, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
}
"""Bytes per element by dtype name (``torch.`` dropped), as the code spells them."""

_ALLOC = re.compile(r"^(\w+) = (?:torch\.)?empty_strided(?:_\w+)?\((\(.*?\)), (\(.*?\)), (?:device=\S+, )?"
                    r"(?:dtype=)?(torch\.\w+)")
_REUSE = re.compile(r"^(\w+) = (\w+); del (\w+)\s+# reuse")
_REINTERPRET = re.compile(r"^(\w+) = reinterpret_tensor\((\w+), (\(.*?\)), (\(.*?\)), ([^)]*)\)(?:; del (\w+))?"
                          r"(?:\s+#.*)?$")
_ITEM = re.compile(r"^(\w+) = (\w+)((?:\[\d+\])+)\s*$")
"""``buf3 = buf2[0]``, and nested (``buf26 = buf24[1][0]``: a higher-order op's outputs, such as
``run_and_save_rng_state``'s ``(rng state, (the op's outputs...))``); group 3 is the index path."""


_RNG_STATE_OP = "run_and_save_rng_state"
"""The higher-order op that returns ``(the generator's state, (the op's outputs...))``."""


def item_path(text: str) -> tuple[int, ...]:
    """``"[1][0]"`` -> ``(1, 0)``."""
    return tuple(int(k) for k in re.findall(r"\d+", text))
_ALIAS = re.compile(r"^(\w+) = (\w+)\s*$")
_DEL = re.compile(r"^del ([\w, ]+)$")
_CALL = re.compile(r"^(\w+) = ([\w.]+)\(")
_OUT_CALL = re.compile(r"^(extern_kernels\.\w+|torch\.ops\.[\w.]+|aten\.[\w.]+)\((.*)\)$")
_ASSERT = re.compile(r"^assert_size_stride\((\w+), (\(.*?\)), (\(.*?\))")
_INPUTS = re.compile(r"^([\w, ]+?),? = args$")
_RAND = re.compile(r"(?m)^\s*(\w+) = rand_strided\((\(.*?\)), (\(.*?\)), device=\S+, dtype=(torch\.\w+)\)")
_INT_ARG = re.compile(r"(?m)^\s*(\w+) = (-?\d+)\s*$")
_SYMBOL = re.compile(r"^([a-z]+\d+) = (\w+)$")
_EXTERN_PREFIXES = ("extern_kernels.", "torch.ops.", "aten.")


@dataclass(frozen=True)
class Layout:
    """A tensor's shape, strides and dtype (``torch.float32``) as the code writes them."""

    size: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str

    @property
    def itemsize(self) -> int:
        return ITEMSIZE.get(self.dtype.replace("torch.", ""), 4)

    @property
    def nbytes(self) -> int:
        """Bytes of the storage this layout spans from offset 0."""
        if any(s == 0 for s in self.size):
            return 0
        return (1 + sum((s - 1) * st for s, st in zip(self.size, self.stride))) * self.itemsize


def split_top_level(expr: str) -> list[str]:
    """``a, f(b, c), None`` -> its top-level items (a tuple's parentheses dropped).

    >>> split_top_level("(buf1, reinterpret_tensor(buf2, (4, 4), (4, 1), 0), None, )")
    ['buf1', 'reinterpret_tensor(buf2, (4, 4), (4, 1), 0)', 'None']
    """
    expr = expr.strip()
    if expr.startswith("(") and expr.endswith(")"):
        expr = expr[1:-1]
    out, depth, cur = [], 0, ""
    for ch in expr + ",":
        if ch == "," and depth == 0:
            if cur.strip():
                out.append(cur.strip())
            cur = ""
            continue
        depth += ch in "([{"
        depth -= ch in ")]}"
        cur += ch
    return out


class CodeText:
    """One wrapper module's text, read once."""

    def __init__(self, code: str) -> None:
        self.code = code

    @cached_property
    def body(self) -> list[str]:
        """The ``call`` function's lines, stripped (comments and blank lines kept as they are)."""
        lines = self.code.splitlines()
        start = next((i for i, line in enumerate(lines) if re.match(r"\s*def call\((self, )?args\):", line)), None)
        if start is None:
            return []
        indent = len(lines[start]) - len(lines[start].lstrip())
        body = []
        for line in lines[start + 1:]:
            if line.strip() and (len(line) - len(line.lstrip())) <= indent:
                break
            body.append(line.strip())
        return body

    @cached_property
    def inputs(self) -> list[str]:
        """The names ``call`` unpacks its arguments into, in order."""
        for line in self.body:
            m = _INPUTS.match(line)
            if m:
                return [x.strip() for x in m.group(1).split(",") if x.strip()]
        return []

    @cached_property
    def _get_args(self) -> str:
        at = self.code.find("def get_args")
        return self.code[at:] if at >= 0 else ""

    @cached_property
    def int_inputs(self) -> dict[str, int]:
        """Inputs ``get_args()`` gives as plain ints (SymInts), with their example values."""
        return {m.group(1): int(m.group(2)) for m in _INT_ARG.finditer(self._get_args)}

    @cached_property
    def symbols(self) -> dict[str, int]:
        """Every SymInt the body names, at its example value (``s0 = primals_1`` binds ``s0``)."""
        env = dict(self.int_inputs)
        for line in self.body:
            m = _SYMBOL.match(line)
            if m and m.group(2) in env:
                env[m.group(1)] = env[m.group(2)]
        return env

    def ints(self, text: str) -> tuple[int, ...]:
        """A size or stride tuple's text at the example sizes (``(8*s0, 64)``)."""
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = int_expression(text, self.symbols)
        return tuple(int(v) for v in (value if isinstance(value, tuple) else (value,)))

    @cached_property
    def input_layouts(self) -> dict[str, Layout]:
        """Every tensor input's layout, from ``get_args()``."""
        return {m.group(1): Layout(self.ints(m.group(2)), self.ints(m.group(3)), m.group(4))
                for m in _RAND.finditer(self._get_args)}

    @cached_property
    def layouts(self) -> dict[str, Layout]:
        """The layout of every name the body gives one: inputs, allocations, reuses, reinterpreted
        views, and extern outputs through their ``assert_size_stride`` (whose dtype the code does not
        state: the call's first argument of known layout gives it)."""
        out = dict(self.input_layouts)
        arguments: dict[str, str] = {}  # an extern output -> the text of the call that made it
        for line in self.body:
            if (m := _ALLOC.match(line)):
                out[m.group(1)] = Layout(self.ints(m.group(2)), self.ints(m.group(3)), m.group(4))
            elif (m := _REUSE.match(line)) and m.group(2) in out:
                out[m.group(1)] = out[m.group(2)]
            elif (m := _REINTERPRET.match(line)) and m.group(2) in out:
                out[m.group(1)] = Layout(self.ints(m.group(3)), self.ints(m.group(4)), out[m.group(2)].dtype)
            elif (m := _ITEM.match(line)):
                call = arguments.get(m.group(2), "")
                if item_path(m.group(3)) == (0,) and call.startswith(_RNG_STATE_OP):
                    call = "torch.uint8"  # the generator's state: bytes, whatever the op computes in
                arguments[m.group(1)] = call
            elif (m := _ALIAS.match(line)) and m.group(2) in out:
                out[m.group(1)] = out[m.group(2)]
            elif (m := _CALL.match(line)):
                arguments[m.group(1)] = (_RNG_STATE_OP if m.group(2).endswith(_RNG_STATE_OP) else "") \
                    + line.split("(", 1)[1]
            elif (m := _ASSERT.match(line)) and m.group(1) not in out:
                given = arguments.get(m.group(1), "")
                dtype = "torch.uint8" if given == "torch.uint8" else next(
                    (out[t].dtype for t in re.findall(r"\b([A-Za-z_]\w*)\b", given) if t in out), "torch.float32")
                out[m.group(1)] = Layout(self.ints(m.group(2)), self.ints(m.group(3)), dtype)
        return out

    def asserted(self, start: int, name: str) -> Layout | None:
        """The layout ``assert_size_stride`` gives ``name`` after line ``start`` (an extern call's output)."""
        for line in self.body[start + 1:start + 400]:
            m = _ASSERT.match(line)
            if m and m.group(1) == name:
                return self.layouts.get(name)
        return None

    def items_of(self, start: int, name: str) -> list[tuple[tuple[int, ...], str]]:
        """``buf3 = buf2[0]`` (or ``buf2[1][0]``) lines after ``start`` that take apart the tuple ``name``:
        (index path, name) in path order; at the top level one per index up to the highest taken (an index
        never taken gets ``name[k]``)."""
        found: dict[tuple[int, ...], str] = {}
        for line in self.body[start + 1:start + 200]:
            m = _ITEM.match(line)
            if m and m.group(2) == name:
                found.setdefault(item_path(m.group(3)), m.group(1))
        if not found:
            return []
        tops = {path[0] for path in found}
        for k in range(max(tops) + 1):
            if k not in tops:
                found[(k,)] = f"{name}[{k}]"
        return sorted(found.items())

    @cached_property
    def device(self) -> str:
        """The device the code's inputs are on (``get_args``), ``cpu`` when it does not say."""
        m = re.search(r"device='(\w+)", self._get_args)
        return m.group(1) if m else "cpu"

    @property
    def granule(self) -> int:
        """What the device's allocator rounds a block up to: CUDA's caching allocator 512 B (its
        ``kMinBlockSize``: ``torch.cuda.max_memory_allocated`` counts the rounded blocks), CPU 1."""
        return 512 if self.device == "cuda" else 1

    @cached_property
    def returned(self) -> list[str]:
        """The expressions ``call`` returns, in order."""
        for line in self.body:
            if line.startswith("return "):
                return split_top_level(line[len("return "):])
        return []

    def extern_call(self, line: str) -> str | None:
        """The call expression of an extern kernel line (``extern_kernels.mm(..., out=buf2)`` or the
        right side of ``buf3 = torch.ops.aten.x(...)``), None for any other line."""
        m = _CALL.match(line)
        if m and m.group(2).startswith(_EXTERN_PREFIXES):
            return line.split("=", 1)[1].strip()
        if _OUT_CALL.match(line):
            return line
        return None


# the line shapes the simulator steps through, shared with it
ALLOC, REUSE, REINTERPRET, ITEM, ALIAS, DEL, CALL, SYMBOL = _ALLOC, _REUSE, _REINTERPRET, _ITEM, _ALIAS, _DEL, _CALL, \
    _SYMBOL
