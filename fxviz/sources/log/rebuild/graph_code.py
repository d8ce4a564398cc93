"""Rebuild an ``fx.GraphModule`` from the ``print_readable`` text a log holds.

torch logs each graph as the Python ``GraphModule.print_readable(include_stride=True,
include_device=True, expanded_def=True)`` prints: one line per node, annotated with its value
(``f32[16, 8][8, 1]cpu``, ``Sym(s77)``), placeholders and outputs with their AOT descriptors
(``# PlainAOTInput(idx=0)``), and ``# File: path:line in fn, code: ...`` comments before each
group of nodes from one source line.

The text is parsed with ``ast`` and never executed: an op is found by walking attribute names
under ``torch.ops`` (or ``operator`` for ``x[0]`` and arithmetic on sizes), a descriptor by a small
evaluator that only calls the descriptor classes with literal arguments.  Every node gets a fake
value: the op run on its inputs' fake values (so views share their base's storage, as in a
traced graph), or, when that fails or disagrees with the annotation, a fake tensor made from the
annotation itself (shape, stride, dtype, device; symbolic sizes stay symbolic).

A log from elsewhere (``foreign``): an op this torch lacks becomes a stand-in named as in the log
with the logged values; a log without descriptors (torch < 2.9) gets them from torch's input names;
a higher-order op's subgraphs (nested classes) become submodules and its dict arguments are read.
The device is only a label: a CUDA run's graph is rebuilt on fake ``cuda`` tensors on any machine.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket

from fxviz import _torch
from fxviz.core.errors import LogError
from fxviz.sources.log.rebuild.foreign import STAND_IN_NOTE, descriptors_from_names, is_stand_in, stand_in

__all__ = ["ParsedGraph", "parse_graph", "parse_annotation", "parse_def_names"]

_ANNOT = re.compile(r"^([a-z0-9]+)\[(.*?)\]\[(.*?)\]([a-z]+(?::\d+)?)$")
_FILE = re.compile(r"^#\s*File:\s*(.+?):(\d+) in (\S+), code: (.*)$")
# the summary line torch prints before each run of nodes that share it (``torch/fx/graph.py``,
# ``append_stacktrace_summary``): ``#[ Annotation: {...}][ ac_graph_id: 3 - PREFER_RECOMPUTE |
# recompute: MUST_SAVE | ac_graph_id: 3] (File: ... | No stacktrace found for following nodes)``
_SUMMARY = re.compile(r"^#(?:\s*Annotation:\s*\{.*?\})?(?:\s*ac_graph_id:\s*(\d+)(?:\s*-\s*([A-Z_]+))?"
                      r"|\s*recompute:\s*([A-Z_]+))?\s*(File:.*|No stacktrace found.*)$")
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod, ast.Div: operator.truediv, ast.Pow: operator.pow}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge}
_TORCH_NAMES = frozenset({
    "float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool", "complex64",
    "complex128", "float8_e4m3fn", "float8_e5m2", "contiguous_format", "channels_last", "channels_last_3d",
    "preserve_format", "strided", "sparse_coo", "sym_float", "sym_int", "sym_max", "sym_min", "sym_not", "sym_sum",
})
_SIZE_FUNCTIONS = frozenset({"getitem", "add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "neg", "eq", "ne",
                             "lt", "le", "gt", "ge", "and_", "or_", "floor", "ceil", "trunc", "sqrt"})
_NAMES: dict[str, Any] = {"inf": math.inf, "nan": math.nan, "None": None, "True": True, "False": False}


@dataclass
class ParsedGraph:
    """A graph rebuilt from a log, with what its text said beyond the nodes."""

    gm: fx.GraphModule
    annotations: dict[str, str] = field(default_factory=dict)  # node name -> the logged annotation
    mismatches: list[str] = field(default_factory=list)  # nodes whose fake value came from the annotation
    ops: int = 0
    descriptors_from_names: bool = False  # a torch < 2.9 log: descriptors made from torch's input names
    stand_ins: list[str] = field(default_factory=list)  # ops this torch lacks, by their logged name (once per node)

    @property
    def notes(self) -> list[str]:
        """What a reader of this graph must know (the caller adds them to the capture's warnings)."""
        out = []
        for name in dict.fromkeys(self.stand_ins):
            out.append(f"{name}: {STAND_IN_NOTE} (a stand-in with the logged outputs; a strategy that runs the op "
                       "says it cannot)")
        if self.descriptors_from_names:
            out.append("the log carries no AOT descriptors (torch < 2.9): inputs and outputs are placed by torch's "
                       "names (primals_N, tangents_N) and the joint graph's output order")
        return out


def parse_annotation(text: str, builder: _torch.LogGraphBuilder) -> Any:
    """``f32[16, 8][8, 1]cpu`` -> a fake tensor; ``Sym(s77)`` -> a SymInt; else None."""
    text = text.strip()
    if text.startswith("Sym(") and text.endswith(")"):
        try:
            return builder.symint(text[4:-1])
        except Exception:
            return None
    m = _ANNOT.match(text)
    if m is None:
        return None
    dtype = builder.dtype(m.group(1))
    if dtype is None:
        return None
    sizes = [s for s in m.group(2).split(",") if s.strip()]
    strides = [s for s in m.group(3).split(",") if s.strip()]
    try:
        return builder.tensor(sizes, strides, dtype, m.group(4))
    except Exception:
        return None


_Plain = tuple[str, tuple[int, ...], tuple[int, ...], str]
_PLAIN: dict[str, _Plain | None] = {}


def _plain(text: str) -> _Plain | None:
    """``f32[16, 8][8, 1]cpu`` -> ("f32", (16, 8), (8, 1), "cpu") when every size and stride is a
    number (None for a symbolic size, a ``Sym(...)`` or anything else); read once per distinct text."""
    if text in _PLAIN:
        return _PLAIN[text]
    out: _Plain | None = None
    m = _ANNOT.match(text.strip())
    if m is not None:
        try:
            out = (m.group(1), tuple(int(x) for x in m.group(2).split(",") if x.strip()),
                   tuple(int(x) for x in m.group(3).split(",") if x.strip()), m.group(4))
        except ValueError:
            out = None
    if len(_PLAIN) < 100_000:
        _PLAIN[text] = out
    return out


def _plain_value(text: str | None, builder: _torch.LogGraphBuilder) -> Any:
    """:func:`parse_annotation` of a constant-size tensor annotation, made cheaply (None otherwise)."""
    plain = _plain(text) if text else None
    dtype = builder.dtype(plain[0]) if plain is not None else None
    if plain is None or dtype is None:
        return None
    return builder.plain_tensor(plain[1], plain[2], dtype, plain[3])


def _agrees_plain(val: Any, plain: _Plain, builder: _torch.LogGraphBuilder) -> bool:
    """:func:`_agrees` with a constant-size annotation, without making its fake tensor."""
    if not isinstance(val, torch.Tensor) or val.dtype != builder.dtype(plain[0]):
        return False
    try:
        if tuple(int(s) for s in val.shape) != plain[1]:
            return False
        return val.numel() <= 1 or tuple(int(s) for s in val.stride()) == plain[2]
    except Exception:  # a symbolic size where the log printed a number
        return False


def parse_def_names(code: str) -> list[str]:
    """The placeholder names of a graph's ``def forward(self, a: "...", b: "..."):`` line(s)."""
    tree = _parse(code)
    fn = _forward(tree)
    return [a.arg for a in fn.args.args[1:]]


_CLASS_LINE = re.compile(r"^class <lambda>\(", re.M)


def _parse(code: str) -> ast.Module:
    # an inference graph is printed as ``class <lambda>(torch.nn.Module):`` (the compiled function's
    # name): not Python, and the class name is never read, so it becomes a name that parses
    code = _CLASS_LINE.sub("class _lambda(", code, count=1)
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise LogError(f"a logged graph's code does not parse (line {exc.lineno}): the log is truncated or corrupt",
                       "re-run with TORCH_TRACE and let the process finish writing") from exc


def _forward(tree: ast.Module) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "forward":
            return node
    raise LogError("a logged graph has no forward method: not a print_readable graph",
                   "fxviz reads TORCH_TRACE logs of torch >= 2.9")


def _comment(line: str) -> str | None:
    """The trailing ``# ...`` of a code line (outside string literals)."""
    in_str: str | None = None
    for i, ch in enumerate(line):
        if in_str:
            if ch == in_str:
                in_str = None
        elif ch in "\"'":
            in_str = ch
        elif ch == "#":
            return line[i + 1:].strip()
    return None


_SIMPLE_DESC = re.compile(r"^(\w+)\((\w+)=(?:(-?\d+)|(\w+)\((\w+)=(-?\d+)\))\)$")
_DESCRIPTORS: dict[str, Any] = {}


def _descriptor(text: str | None) -> Any:
    """``PlainAOTInput(idx=0)`` -> the descriptor object; literals only, nothing executed.  The
    descriptors are frozen dataclasses: one object per distinct text serves every graph."""
    if not text or text == "None":
        return None
    if text not in _DESCRIPTORS:
        if len(_DESCRIPTORS) > 100_000:
            _DESCRIPTORS.clear()
        _DESCRIPTORS[text] = _simple_descriptor(text) or _read_descriptor(text)
    return _DESCRIPTORS[text]


def _simple_descriptor(text: str) -> Any:
    """The common shapes, ``PlainAOTInput(idx=3)`` and ``GradAOTOutput(grad_of=PlainAOTInput(idx=3))``,
    read by one regular expression (a 50k-node graph has thousands); None for any other."""
    m = _SIMPLE_DESC.match(text)
    if m is None:
        return None
    cls, key, number, inner, inner_key, inner_number = m.groups()
    outer = _torch.DESCRIPTOR_CLASSES.get(cls)
    if outer is None:
        return None
    try:
        if number is not None:
            return outer(**{key: int(number)})
        inner_cls = _torch.DESCRIPTOR_CLASSES.get(inner)
        return None if inner_cls is None else outer(**{key: inner_cls(**{inner_key: int(inner_number)})})
    except Exception:
        return None


def _read_descriptor(text: str) -> Any:
    try:
        expr = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None

    def build(e: ast.AST) -> Any:
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name):
            cls = _torch.DESCRIPTOR_CLASSES.get(e.func.id)
            if cls is None:
                raise ValueError(e.func.id)
            return cls(*[build(a) for a in e.args], **{k.arg: build(k.value) for k in e.keywords if k.arg})
        return ast.literal_eval(e)

    try:
        return build(expr)
    except Exception:
        return None


def _stack_trace(m: re.Match[str]) -> str:
    """The ``# File:`` comment in the format torch records (``File "x.py", line 3, in f``)."""
    return f'  File "{m.group(1)}", line {m.group(2)}, in {m.group(3)}\n    {m.group(4)}\n'


class _Builder:
    def __init__(self, lines: list[str], builder: _torch.LogGraphBuilder,
                 known: dict[str, fx.Node] | None = None) -> None:
        self.lines = lines
        self.b = builder
        self.known = known or {}  # the joint graph's nodes, whose values a forward/backward graph shares
        self.graph = fx.Graph()
        self.env: dict[str, fx.Node] = {}
        self.attrs: dict[str, torch.Tensor] = {}
        self.parsed = ParsedGraph(gm=None)  # type: ignore[arg-type]
        self.trace: str | None = None
        self.checkpoint: tuple[str | None, int | None] = (None, None)  # (policy name, ac_graph_id)
        self.subgraphs: dict[str, fx.GraphModule] = {}  # nested classes: higher-order ops' subgraphs
        self.subgraph_nodes: dict[fx.Node, fx.GraphModule] = {}
        self.comment_upto = 0

    # comments between statements: track the current ``# File:`` block
    def advance(self, lineno: int) -> None:
        for i in range(self.comment_upto, min(lineno - 1, len(self.lines))):
            summary = _SUMMARY.match(self.lines[i].strip())
            if summary is None:
                continue
            region, policy, alone, rest = summary.groups()
            self.checkpoint = (policy or alone, int(region) if region is not None else None)
            m = _FILE.match("# " + rest)
            self.trace = _stack_trace(m) if m else None
        self.comment_upto = max(self.comment_upto, lineno - 1)

    def line(self, lineno: int) -> str:
        return self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""

    def placeholder(self, name: str, annotation: str | None, lineno: int) -> None:
        node = self.graph.placeholder(name)
        self.env[name] = node
        if annotation:
            self.parsed.annotations[name] = annotation
            val = _plain_value(annotation, self.b)
            _torch.LogGraphBuilder.set_val(node, val if val is not None else parse_annotation(annotation, self.b))
        desc = _descriptor(_comment(self.line(lineno)))
        if desc is not None:
            _torch.LogGraphBuilder.set_desc(node, desc)

    def value(self, e: ast.AST) -> Any:
        if isinstance(e, ast.Name):
            if e.id in self.env:
                return self.env[e.id]
            if e.id in _NAMES:
                return _NAMES[e.id]
            raise LogError(f"a logged graph uses {e.id!r} before defining it", "the log is corrupt")
        if isinstance(e, ast.Constant):
            return e.value
        if isinstance(e, (ast.List, ast.Tuple)):
            items = [self.value(x) for x in e.elts]
            return items if isinstance(e, ast.List) else tuple(items)
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            v = self.value(e.operand)
            if isinstance(v, fx.Node):
                return self.call(operator.neg, (v,), {}, None)
            return -v
        if isinstance(e, ast.Attribute):
            return self.dotted(e)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "device":
            kw = {k.arg: self.value(k.value) for k in e.keywords}
            index = kw.get("index")
            return torch.device(str(kw.get("type", "cpu")), int(index)) if index is not None else \
                torch.device(str(kw.get("type", "cpu")))
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "slice":
            return slice(*[self.value(a) for a in e.args])
        if isinstance(e, ast.Dict) and all(isinstance(k, ast.Constant) for k in e.keys):
            # a higher-order op's structured argument (flex attention's kernel options)
            return {k.value: self.value(v) for k, v in zip(e.keys, e.values)}  # type: ignore[union-attr]
        raise LogError(f"fxviz cannot read this argument in a logged graph: {ast.unparse(e)[:80]}",
                       "report it to fxviz with the log line")

    def dotted(self, e: ast.AST) -> Any:
        parts: list[str] = []
        while isinstance(e, ast.Attribute):
            parts.append(e.attr)
            e = e.value
        if not isinstance(e, ast.Name):
            raise LogError("a logged graph calls something fxviz cannot name", "the log is corrupt")
        parts.append(e.id)
        parts.reverse()
        roots = {"torch": torch, "operator": operator, "math": math}
        allowed = (parts[0] == "torch" and len(parts) > 1 and (parts[1] == "ops" or parts[1] in _TORCH_NAMES)) or (
            len(parts) == 2 and parts[0] in ("operator", "math") and parts[1] in _SIZE_FUNCTIONS)
        if any(p.startswith("__") for p in parts):
            allowed = False  # dunders: never (aten's own names have at most one leading underscore)
        if not allowed:  # a log is data: nothing else it names is ever looked up, let alone called
            raise LogError(f"a logged graph calls {'.'.join(parts)}, which fxviz does not resolve",
                           "only torch.ops.* and size arithmetic are rebuilt")
        obj: Any = roots[parts[0]]
        for p in parts[1:]:
            try:
                obj = getattr(obj, p)
            except (AttributeError, RuntimeError) as exc:
                if parts[1:2] == ["ops"] and len(parts) >= 4:  # torch.ops.<namespace>.<op>.<overload>
                    return stand_in(".".join(parts[2:]))
                raise LogError(f"this torch has no {'.'.join(parts)} (the log was written by another torch build "
                               "or uses a custom op that is not loaded)",
                               "import the library that defines the op before reading the log") from exc
        if parts[1:2] == ["ops"] and callable(obj) and not isinstance(
                obj, (OpOverload, OpOverloadPacket, HigherOrderOperator)):
            raise LogError(f"{'.'.join(parts)} in a logged graph is not a torch operator", "the log is corrupt")
        return obj

    def call(self, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any], name: str | None,
             annotation: str | None = None) -> fx.Node:
        # torch's own names: the forward, backward and joint graphs agree on them
        node = self.graph.create_node("call_function", target, args, kwargs, name=name)
        if name:
            self.env[name] = node
        if self.trace:
            _torch.LogGraphBuilder.set_stack_trace(node, self.trace)
        if self.checkpoint != (None, None):  # a torch.utils.checkpoint region, as the run tagged it
            _torch.LogGraphBuilder.set_checkpoint(node, *self.checkpoint)
        if is_stand_in(target):
            _torch.LogGraphBuilder.set_stand_in(node, STAND_IN_NOTE)
            self.parsed.stand_ins.append(str(target.__name__))
        self.parsed.ops += 1
        if annotation:
            self.parsed.annotations[node.name] = annotation
        j = self.known.get(node.name)
        if j is not None and j.op == "call_function" and j.target == target and str(j.args) == str(node.args) \
                and str(j.kwargs) == str(node.kwargs):
            val = _torch.meta_val(j)  # the joint's node: its value is the one the graphs share
            plain = _plain(annotation) if annotation else None
            # a partitioner-made node reusing a joint name must not take that node's value: the
            # log's annotation, where it states the value in full, has to agree
            if val is not None and (plain is None or _agrees_plain(val, plain, self.b)):
                _torch.LogGraphBuilder.set_val(node, val)
                return node
        plain = _plain(annotation) if annotation else None
        if plain is not None and _torch.LogGraphBuilder.returns_new_tensor(target):
            # a fresh tensor the log states in full: running the op would only say the same again
            val = _plain_value(annotation, self.b)
            if val is not None:
                _torch.LogGraphBuilder.set_val(node, val)
                return node
        val = None
        try:
            fa = fx.node.map_arg(args, lambda n: self.subgraph_nodes.get(n, _torch.meta_val(n)))
            fk = fx.node.map_arg(kwargs, lambda n: self.subgraph_nodes.get(n, _torch.meta_val(n)))
            val = self.b.run_op(target, fa, fk)
        except Exception:
            val = None
        if plain is not None and self.b.dtype(plain[0]) is not None:
            if not _agrees_plain(val, plain, self.b):
                if val is not None:
                    self.parsed.mismatches.append(node.name)
                val = _plain_value(annotation, self.b)
        elif annotation:
            expected = parse_annotation(annotation, self.b)
            if expected is not None and not _agrees(val, expected):
                if val is not None:
                    self.parsed.mismatches.append(node.name)
                val = expected
        _torch.LogGraphBuilder.set_val(node, val)
        return node

    def statement(self, st: ast.stmt) -> None:
        self.advance(st.lineno)
        if isinstance(st, ast.AnnAssign) and st.value is None and isinstance(st.target, ast.Name):
            ann = st.annotation.value if isinstance(st.annotation, ast.Constant) else None
            self.placeholder(st.target.id, ann if isinstance(ann, str) else None, st.lineno)
            return
        if isinstance(st, ast.Assign) and isinstance(st.value, ast.Constant) and st.value.value is None:
            return  # ``a = b = None``: freeing, not a node
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Tuple):
            return  # ``primals_1, ... = fx_pytree.tree_flatten_spec(...)``
        if isinstance(st, ast.Return):
            self.output(st)
            return
        if isinstance(st, (ast.AnnAssign, ast.Assign)):
            target = st.target if isinstance(st, ast.AnnAssign) else st.targets[0]
            ann = (st.annotation.value if isinstance(st, ast.AnnAssign) and isinstance(st.annotation, ast.Constant)
                   else None)
            assert isinstance(target, ast.Name)
            self.assign(target.id, st.value, ann)  # type: ignore[arg-type]
            return
        if isinstance(st, ast.Expr):
            return  # docstrings
        raise LogError(f"fxviz cannot read this line of a logged graph: {ast.unparse(st)[:80]}",
                       "report it to fxviz with the log line")

    def assign(self, name: str, e: ast.expr, ann: str | None) -> None:
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
            node = self.graph.create_node("get_attr", e.attr, name=name)
            self.env[name] = node
            if e.attr in self.subgraphs:  # a higher-order op's subgraph (a nested class of the log's code)
                self.subgraph_nodes[node] = self.subgraphs[e.attr]
                return
            fake = parse_annotation(ann, self.b) if ann else None
            if isinstance(fake, torch.Tensor):
                self.attrs[e.attr] = torch.empty_strided(tuple(_torch_int(s) for s in fake.shape),
                                                         tuple(_torch_int(s) for s in fake.stride()),
                                                         dtype=fake.dtype, device="meta")
            _torch.LogGraphBuilder.set_val(node, fake)
            return
        if isinstance(e, ast.Call):
            target = self.dotted(e.func)
            args = tuple(self.value(a) for a in e.args)
            kwargs = {k.arg: self.value(k.value) for k in e.keywords if k.arg}
            self.call(target, args, kwargs, name, ann)
            return
        if isinstance(e, ast.Subscript):
            self.call(operator.getitem, (self.value(e.value), self.value(e.slice)), {}, name, ann)
            return
        if isinstance(e, ast.BinOp) and type(e.op) in _BINOPS:
            self.call(_BINOPS[type(e.op)], (self.value(e.left), self.value(e.right)), {}, name, ann)
            return
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and type(e.ops[0]) in _CMPOPS:
            self.call(_CMPOPS[type(e.ops[0])], (self.value(e.left), self.value(e.comparators[0])), {}, name, ann)
            return
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
            self.call(operator.neg, (self.value(e.operand),), {}, name, ann)
            return
        if isinstance(e, ast.Name) and e.id in self.env:  # dynamo graphs: ``l_x_ = L_x_``
            self.env[name] = self.env[e.id]
            return
        raise LogError(f"fxviz cannot read this node of a logged graph: {name} = {ast.unparse(e)[:80]}",
                       "report it to fxviz with the log line")

    def output(self, st: ast.Return) -> None:
        e = st.value
        # joint: ``return pytree.tree_unflatten([...], self._out_spec)``; fw/bw: ``return (...)``
        if isinstance(e, ast.Call) and e.args:
            e = e.args[0]
        elts = list(e.elts) if isinstance(e, (ast.List, ast.Tuple)) else [e] if e is not None else []
        values = [self.value(x) for x in elts]
        descs = [_descriptor(_comment(self.line(x.lineno))) for x in elts]
        single = e is not None and not isinstance(e, (ast.List, ast.Tuple))  # a subgraph's ``return add``
        node = self.graph.output(values[0] if single else tuple(values) if isinstance(e, ast.Tuple) else values)
        if any(d is not None for d in descs):
            _torch.LogGraphBuilder.set_desc(node, descs)


def _fill_tuples(graph: fx.Graph) -> None:
    """An op returning several values has no annotation of its own (torch prints one per ``getitem``):
    where it could not be run here (a stand-in, a higher-order op this torch cannot replay), its value
    is the tuple of its elements' logged values."""
    for n in graph.nodes:
        if n.op != "call_function" or _torch.meta_val(n) is not None or not n.users:
            continue
        items = {u.args[1]: _torch.meta_val(u) for u in n.users if u.target is operator.getitem
                 and isinstance(u.args[1], int)}
        if items and len(items) == len(n.users):
            _torch.LogGraphBuilder.set_val(n, tuple(items.get(i) for i in range(max(items) + 1)))


def _torch_int(s: Any) -> int:
    try:
        return int(s)
    except Exception:
        return 1


def _agrees(val: Any, expected: Any) -> bool:
    if isinstance(expected, torch.Tensor):
        if not isinstance(val, torch.Tensor):
            return False
        return (val.dtype == expected.dtype and str(list(val.shape)) == str(list(expected.shape))
                and (val.numel() <= 1 or str(list(val.stride())) == str(list(expected.stride()))))
    return val is not None


def parse_graph(code: str, builder: _torch.LogGraphBuilder, known: dict[str, fx.Node] | None = None) -> ParsedGraph:
    """The ``GraphModule`` a logged ``print_readable`` text describes (see the module docstring).
    Nested classes (the subgraphs of higher-order ops: flex attention's score and mask functions,
    ``invoke_subgraph``'s body) become submodules of the same names, parsed the same way.
    ``known``: the joint graph's nodes by name, when this is the run's forward or backward graph: an
    op the partitioner copied from the joint (same name, op and inputs) takes the joint's value
    instead of being run again (the capture shares them anyway, so storages count once)."""
    tree = _parse(code)
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef)), None)
    fn = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None) if cls else None
    return _parse_function(fn or _forward(tree), cls, code.splitlines(), builder, known=known)


def _parse_function(fn: ast.FunctionDef, cls: ast.ClassDef | None, lines: list[str],
                    builder: _torch.LogGraphBuilder, nested: bool = False,
                    known: dict[str, fx.Node] | None = None) -> ParsedGraph:
    b = _Builder(lines, builder, None if nested else known)
    for sub in (c for c in (cls.body if cls else []) if isinstance(c, ast.ClassDef)):
        sub_fn = next((n for n in sub.body if isinstance(n, ast.FunctionDef) and n.name == "forward"), None)
        if sub_fn is not None:
            parsed = _parse_function(sub_fn, sub, lines, builder, nested=True)
            b.subgraphs[sub.name] = parsed.gm
            b.parsed.stand_ins += parsed.stand_ins
    args = fn.args.args[1:]
    expanded = [a.arg for a in args] in (["primals", "tangents"], ["primals"], ["args"])
    if not expanded:  # fw/bw/dynamo graphs: the placeholders are the def's arguments
        for a in args:
            ann = a.annotation.value if isinstance(a.annotation, ast.Constant) else None
            b.placeholder(a.arg, ann if isinstance(ann, str) else None, a.lineno)
    for st in fn.body:
        b.statement(st)
    if not any(n.op == "output" for n in b.graph.nodes):
        raise LogError("a logged graph has no return: the log is truncated or corrupt",
                       "re-run with TORCH_TRACE and let the process finish writing")
    if not nested:  # a subgraph's inputs are its higher-order op's, never AOT inputs
        b.parsed.descriptors_from_names = descriptors_from_names(b.graph, joint=expanded and len(args) == 2)
    _fill_tuples(b.graph)
    root = torch.nn.Module()
    for k, v in b.attrs.items():
        root.register_buffer(k, v)
    for k, gm in b.subgraphs.items():
        root.add_module(k, gm)
    b.parsed.gm = _torch.LogGraphBuilder.graph_module(root, b.graph)
    return b.parsed
