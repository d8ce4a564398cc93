"""A logged graph's ``print_readable`` text as a :class:`LightGraph`, in one pass over its lines, without
torch.

torch prints one node per line (``mm: "f32[32, 64][64, 1]cpu" = torch.ops.aten.mm.default(view_1, permute)``),
each input with its AOT descriptor (``primals_1: "f32[64][1]cpu",  # PlainAOTInput(idx=0)``), each output
with its own (``relu,  # SavedForBackwardsAOTOutput(idx=2)``), and a ``# File: path:line in fn, code: ...``
comment before each run of nodes from one source line.  That is all the light tier needs.

What it does not read, it declines (:class:`Declined`, with the reason) and the caller rebuilds the graph
instead (``rebuild.graph_code``): a higher-order op's subgraphs (nested classes), a constant or
submodule read with ``self.``, a line it does not recognise.
"""

from __future__ import annotations

import re
from typing import Any

from fxviz.core.errors import Do, LogError, Say
from fxviz.sources.log.light.nodes import GETITEM, LightGraph, LightNode, LightOp, light_op

__all__ = ["Declined", "parse_text", "stack_trace"]


class Declined(LogError):
    """The text holds something the light tier does not read (the message says what): the graph needs
    the rebuild (``Run.trace``)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the log's text of this graph is not enough: {why}",
                         Say("rebuild it: ", Do("trace", on="run")))


_PLACEHOLDER = re.compile(r'^(\w+): "([^"]*)",?\s*(?:#\s*(.*))?$')
_ASSIGN = re.compile(r'^(\w+)(?:: "([^"]*)")? = (.*)$')
_CALL = re.compile(r"^torch\.ops\.((\w+)\.(\w+)\.(\w+))\((.*)\)$")
_ITEM = re.compile(r"^(\w+)\[(\d+)\]$")
_OUTPUT = re.compile(r"^(\w+),\s*(?:#\s*(.*))?$")
_NAMES = re.compile(r"[A-Za-z_]\w*")
_KWARG = re.compile(r"^(\w+) = (.*)$", re.S)
_NUMBER = re.compile(r"^-?\d+$")
_FLOAT = re.compile(r"^-?(?:\d+\.\d*(?:e[-+]?\d+)?|\d+e[-+]?\d+|inf|nan)$")
_FILE = re.compile(r"^#\s*File:\s*(.+?):(\d+) in (\S+), code: (.*)$")
# the summary line torch prints before each run of nodes that share it (``rebuild.graph_code``'s, which
# sets the same facts on a rebuilt node): ``#[ ac_graph_id: 3 - PREFER_RECOMPUTE | recompute: MUST_SAVE]
# (File: ... | No stacktrace found for following nodes)``
_SUMMARY = re.compile(r"^#(?:\s*Annotation:\s*\{.*?\})?(?:\s*ac_graph_id:\s*(\d+)(?:\s*-\s*([A-Z_]+))?"
                      r"|\s*recompute:\s*([A-Z_]+))?\s*(File:.*|No stacktrace found.*)$")
_LITERALS: dict[str, Any] = {"None": None, "True": True, "False": False}
_BODY = " " * 8


_OPERATORS = {"*": "mul", "+": "add", "-": "sub", "//": "floordiv", "/": "truediv", "%": "mod", "**": "pow",
              "==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_BINARY = re.compile(r"^\S+ (\*\*|//|==|!=|<=|>=|[*+\-/%<>]) \S+$")


def _arithmetic(rhs: str) -> str:
    """The ``operator`` function a line of size arithmetic calls (``2 * s`` -> ``mul``; ``-s`` -> ``neg``),
    as a rebuilt graph names it; the called function's name otherwise (``torch.sym_max(...)``)."""
    m = _BINARY.match(rhs)
    if m is not None:
        return _OPERATORS[m.group(1)]
    if rhs.startswith("-"):
        return "neg"
    return rhs.split("(")[0].rsplit(".", 1)[-1] or "sym"


def stack_trace(path: str, line: str, fn: str, code: str) -> str:
    """A ``# File:`` comment as the stack trace torch records (``File "x.py", line 3, in f``): the form
    ``rebuild.graph_code`` gives a rebuilt node, so both read alike."""
    return f'  File "{path}", line {line}, in {fn}\n    {code}\n'


def _split(text: str) -> list[str]:
    """``text``'s top-level comma-separated items (brackets, parentheses and strings kept whole)."""
    if not any(c in text for c in "[('\""):
        return [t.strip() for t in text.split(",") if t.strip()]
    items, depth, quote, start = [], 0, "", 0
    for i, c in enumerate(text):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "[(":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [t for t in items if t]


class _Reader:
    """One graph's lines, read in order."""

    def __init__(self) -> None:
        self.nodes: list[LightNode] = []
        self.env: dict[str, LightNode] = {}
        self.outputs: list[tuple[LightNode | None, str]] = []
        self.trace: str | None = None
        self.policy: str | None = None
        self.region: int | None = None

    def value(self, tok: str, inputs: list[LightNode]) -> Any:
        node = self.env.get(tok)
        if node is not None:
            if node not in inputs:
                inputs.append(node)
            return node
        if tok[:1] in "[(" and tok[-1:] in "])":
            items = [self.value(t, inputs) for t in _split(tok[1:-1])]
            return items if tok[0] == "[" else tuple(items)
        if _NUMBER.match(tok):
            return int(tok)
        if _FLOAT.match(tok):
            return float(tok)
        return _LITERALS.get(tok, tok)

    def add(self, node: LightNode, inputs: list[LightNode]) -> None:
        node.all_input_nodes = inputs
        for a in inputs:
            a.users[node] = None
        if node.op == "call_function":
            node.trace, node.policy, node.region = self.trace, self.policy, self.region
        self.nodes.append(node)
        self.env[node.name] = node

    def comment(self, text: str) -> None:
        summary = _SUMMARY.match(text)
        if summary is None:
            return
        region, policy, alone, rest = summary.groups()
        self.policy, self.region = policy or alone, int(region) if region is not None else None
        m = _FILE.match("# " + rest)
        self.trace = stack_trace(*m.groups()) if m else None

    def placeholder(self, name: str, annot: str, desc: str | None) -> None:
        self.add(LightNode(name, "placeholder", annotation=annot, desc=desc or ""), [])

    def assign(self, name: str, annot: str | None, rhs: str) -> None:
        rhs = rhs.split(";  ", 1)[0]
        if rhs == "None":
            return
        call = _CALL.match(rhs)
        inputs: list[LightNode] = []
        if call is not None:
            qualname, _ns, _op, _overload, text = call.groups()
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            for tok in _split(text):
                kw = _KWARG.match(tok)
                if kw is not None:
                    kwargs[kw.group(1)] = self.value(kw.group(2).strip(), inputs)
                else:
                    args.append(self.value(tok, inputs))
            node = LightNode(name, "call_function", light_op(qualname), tuple(args), kwargs, annot, args_text=text)
        elif (item := _ITEM.match(rhs)) is not None and item.group(1) in self.env:
            base = self.env[item.group(1)]
            node = LightNode(name, "call_function", GETITEM, (base, int(item.group(2))), annotation=annot,
                             args_text=rhs)
            inputs.append(base)
        elif rhs.startswith("self."):
            raise Declined(f"{name} reads {rhs.split('(')[0]}: a constant or a subgraph")
        elif rhs in self.env:  # ``l_x_ = L_x_``: another name for a value
            self.env[name] = self.env[rhs]
            return
        else:  # size arithmetic (``2 * sym_size_int``): an op on sizes, its inputs the names it reads
            for tok in dict.fromkeys(_NAMES.findall(re.sub(r"'[^']*'", "", rhs))):
                if tok in self.env:
                    inputs.append(self.env[tok])
            op = _arithmetic(rhs)
            node = LightNode(name, "call_function", LightOp(f"sym.{op}", op), tuple(inputs), annotation=annot,
                             args_text=rhs)
        self.add(node, inputs)

    def output(self, line: str) -> None:
        m = _OUTPUT.match(line)
        if m is None:
            return
        value, desc = m.group(1), m.group(2) or ""
        if value == "None":
            self.outputs.append((None, desc))
            return
        node = self.env.get(value)
        if node is None:
            raise Declined(f"the graph returns {value}, which it never made")
        self.outputs.append((node, desc))

    def inline_return(self, rest: str) -> None:
        """``return (a, b)`` / ``return a`` on one line (a graph printed without descriptors)."""
        inner = rest.strip()
        if inner[:1] in "([" and inner[-1:] in ")]":
            inner = inner[1:-1]
        for tok in _split(inner):
            self.output(tok + ",")


def parse_text(payload: str) -> LightGraph:
    """The graph ``payload`` prints (a joint, forward, backward or inference graph); raises
    :class:`Declined` for what the light tier does not read (see the module docstring)."""
    r = _Reader()
    state = "top"  # top -> def -> body -> return
    for line in payload.split("\n"):
        if not line.strip():
            continue
        if state == "return":
            text = line.strip()
            if text.startswith((")", "]")):
                state = "done"
                continue
            r.output(text)
            continue
        if line.startswith("    class "):
            raise Declined("it holds subgraphs (a higher-order op's nested classes)")
        if state == "top":
            if line.startswith("    def forward("):
                state = "def"
                args = line[len("    def forward("):]
                if args.rstrip().endswith("):"):  # a one-line signature
                    for tok in _split(args.rstrip()[:-2])[1:]:
                        m = _PLACEHOLDER.match(tok.strip() + ",")
                        if m is not None:
                            r.placeholder(m.group(1), m.group(2), m.group(3))
                    state = "body"
            continue
        if not line.startswith(_BODY):
            if state == "def" and line.strip().startswith("):"):
                state = "body"
            continue
        text = line[8:]
        if state == "def":
            m = _PLACEHOLDER.match(text)
            if m is not None:
                r.placeholder(m.group(1), m.group(2), m.group(3))
            continue  # ``self,``; a joint's ``primals,`` / ``tangents,``
        if text.startswith("#"):
            r.comment(text)
            continue
        if text.startswith("return"):
            rest = text[len("return"):].strip()
            if rest.startswith("pytree.tree_unflatten([") or rest in ("(", "["):
                state = "return"
            else:
                r.inline_return(rest)
                state = "done"
            continue
        m = _ASSIGN.match(text)
        if m is not None:
            name, annot, rhs = m.groups()
            if rhs.startswith("fx_pytree.tree_flatten_spec"):
                continue
            r.assign(name, annot, rhs)
            continue
        p = _PLACEHOLDER.match(text)
        if p is not None:  # a joint graph's inputs are statements: ``primals_1: "f32[4][1]cpu"  # PlainAOTInput``
            r.placeholder(p.group(1), p.group(2), p.group(3))
            continue
        if "= fx_pytree.tree_flatten_spec" in text:
            continue
        raise Declined(f"a line it does not read: {text[:80]}")
    if state not in ("return", "done"):
        raise Declined("the graph has no return: the log is truncated")
    return LightGraph(r.nodes, r.outputs)
