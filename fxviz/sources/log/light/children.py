"""The ops of a logged graph's child modules that own no parameter (an activation, a dropout), which
the parameters an op reads cannot place (issue 33; ``light.modules`` places the rest).

dynamo's guards name those children, their class and, for a ``Sequential``, their order
(``logs.guards``); the log's source line says where a user's line calls one (``self.drop(...)``).
Their ops are then found by dataflow, the children's calls being evaluated in order:

- a call ``self.child(arg)`` on a line: the ops fed only by what ``arg`` gives (the ops of a child
  with parameters named as ``arg``, else the one value the run starts from), the shortest such run at
  the end of what the line computes when ``arg`` is an expression (``self.drop(a + b)``: after the
  ``add``; ``self.attn_dropout(F.softmax(att))``: after the softmax, whose ops the log cannot tell
  from a dropout's when the dropout makes several);
- a ``Sequential``'s children, all run from one line of torch's ``container.py`` that the log does
  not show: those between two children with parameters, or after the last one, take the ops fed only
  by the one before them (several in a row: each the shortest run at the end of what is left);
- a parameterless child whose ``forward`` is user code (``transformers``' ``SiLUActivation``): its
  own source line.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from fxviz.sources.log.guards import Guards
from fxviz.sources.log.light.nodes import LightNode, is_getitem, packet

__all__ = ["where", "is_detach", "own_forwards", "called_children", "sequential_children"]

_TRACE = re.compile(r'File "([^"]*)", line (\d+), in (\S+)\n\s*(.*)', re.S)
_CONTAINERS = ("torch.nn.modules.container.Sequential",)


def where(n: LightNode) -> tuple[str, int, str, str] | None:
    """(file, line, function, code) of an op's ``# File:`` line."""
    m = _TRACE.search(n.trace or "")
    return (m.group(1), int(m.group(2)), m.group(3), m.group(4).strip()) if m else None


def _join(frame: str, name: str) -> str:
    return f"{frame}.{name}" if frame else name


def _parse(code: str) -> ast.AST | None:
    try:
        return ast.parse(code.removeprefix("return ").strip())
    except SyntaxError:
        return None


def self_call(node: Any) -> str | None:
    """``name`` of a call ``self.name(...)``, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id == "self":
        return node.func.attr
    return None


def hands_on(parent: Any, call: Any) -> bool:
    """What a call returns goes to a ``self.module(...)`` call, an operator with another operand that
    is no constant, or the line's result (never to a function: ``F.gelu(self.act(...))`` cannot be
    split from the child's own ops)."""
    if parent is None or isinstance(parent, (ast.Expr, ast.Assign, ast.Return, ast.Module)):
        return True
    if isinstance(parent, ast.Call):
        return self_call(parent) is not None
    if isinstance(parent, ast.BinOp):
        other = parent.right if parent.left is call else parent.left
        return not isinstance(other, ast.Constant)
    return False


def is_detach(n: LightNode) -> bool:
    """A ``detach`` autograd makes of an op's output to save it: its op's, never the start of a run."""
    return packet(n) == "detach"


def _chain(ops: list[LightNode], start: set[LightNode], module: dict[str, str]) -> list[LightNode]:
    """The unplaced ops of ``ops`` fed only by ``start`` and each other (constants aside)."""
    inside = set(ops)
    chain: list[LightNode] = []
    held = set(start)
    for n in ops:
        if n.name in module or n in start or is_detach(n):
            continue
        ins = [a for a in n.all_input_nodes if a in inside]
        if ins and len(ins) == len(n.all_input_nodes) and all(a in held for a in ins):
            chain.append(n)
            held.add(n)
    return chain


def _tail(ops: list[LightNode]) -> list[LightNode] | None:
    """The shortest run at the end of ``ops`` (in order) fed by one value and itself: a call's ops
    after its argument's (a multi-output op's elements go with it; ``detach`` stays with its op)."""
    run = [n for n in ops if not is_detach(n)]
    for k in range(len(run) - 1, -1, -1):
        if is_getitem(run[k]):
            continue  # an element starts no run: it is its op's
        tail = set(run[k:])
        outside = {a for n in run[k:] for a in n.all_input_nodes if a not in tail}
        if len(outside) == 1 and not any(_is_element_of(n, outside) for n in run[k:]):
            return run[k:]
    return None


def _identity(path: str, guards: Guards) -> bool:
    """A child that returns its input's values (a ``Dropout`` guarded with ``p == 0.0``, an
    ``Identity``): its one op, where the graph keeps it, is a ``clone``; inductor's joint passes drop it."""
    cls = guards.modules.get(path, "")
    return cls.endswith(".Identity") or (cls.startswith("torch.nn.modules.dropout.")
                                         and guards.attrs.get(f"{path}.p") in ("0.0", "0"))


def _fit(path: str, run: list[LightNode], guards: Guards) -> list[LightNode]:
    """``run`` when child ``path`` can have made it (an identity child: only its ``clone``)."""
    if _identity(path, guards):
        return run if len(run) == 1 and str(run[0].target) == "aten.clone.default" else []
    return run


def _is_element_of(n: LightNode, values: set[LightNode]) -> bool:
    return is_getitem(n) and isinstance(n.args[0], LightNode) and n.args[0] in values


def called_children(ops: list[LightNode], frame: str, module: dict[str, str], empty: set[str], guards: Guards) -> None:
    """The ops of each parameterless child a source block's line calls (``self.act(self.fc(h))``,
    ``self.drop(a + b)``), where what the call returns goes to a module, an operator or the line's
    result (see :func:`hands_on`)."""
    w = where(ops[0])
    tree = _parse(w[3]) if w is not None else None
    if tree is None:
        return
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for call in ast.walk(tree):
        name = self_call(call)
        if name is None or _join(frame, name) not in empty or len(call.args) != 1 or call.keywords:  # type: ignore[attr-defined]
            continue
        parent = parents.get(call)
        if not hands_on(parent, call):
            continue
        arg = call.args[0]  # type: ignore[attr-defined]
        src = self_call(arg)
        if src is not None:
            start = {n for n in ops if module.get(n.name) == _join(frame, src)}
            run = _chain(ops, start, module) if start else []
        else:
            if not isinstance(parent, (ast.Expr, ast.Assign, ast.Return, ast.Module)) and parent is not None:
                continue  # its ops end the line only when the call is the line's result
            if any(isinstance(x, ast.Call) and self_call(x) is not None and _join(frame, str(self_call(x))) in empty
                   for x in ast.walk(arg)):
                continue  # another parameterless child inside the argument: no one run to split
            run = _tail([n for n in ops if n.name not in module]) or []
            made = {a for n in run for a in n.all_input_nodes if a not in run}
            if not isinstance(arg, (ast.Name, ast.Attribute, ast.Subscript)) and not made <= set(ops):
                run = []  # the argument computes on this line: its result is one of the line's ops
        run = _fit(_join(frame, name), run, guards)
        module.update({n.name: _join(frame, name) for n in run})
        module.update({n.name: _join(frame, name) for r in run for n in r.users
                       if is_getitem(n) and n in ops and n.name not in module})


def sequential_children(blocks: list[list[LightNode]], module: dict[str, str], guards: Guards,
                        empty: set[str]) -> None:
    """The ops of a ``Sequential``'s parameterless children (``nn.Sequential(Linear, GELU, Linear)``'s
    GELU), in the order dynamo's guards list them: the ops fed only by the child before them (a
    child with parameters), up to the next child's; children in a row share that run, each the
    shortest run at the end of what the ones before leave.  A parameterless first child is left to
    the line (nothing in the log says where the ``Sequential``'s input ends)."""
    if not any(cls in _CONTAINERS for cls in guards.modules.values()):
        return
    holding: dict[str, set[int]] = {}  # module -> the blocks with an op in it (a 300-layer stack: 600 gaps)
    for b, ops in enumerate(blocks):
        for n in ops:
            m = module.get(n.name)
            while m:
                holding.setdefault(m, set()).add(b)
                m = m.rsplit(".", 1)[0] if "." in m else ""
    for seq, cls in guards.modules.items():
        if cls not in _CONTAINERS:
            continue
        kids = [p for p in guards.modules if p.rsplit(".", 1)[0] == seq and p != seq and "." in p] if seq else \
            [p for p in guards.modules if p and "." not in p]
        i = 0
        while i < len(kids):
            if kids[i] not in empty or i == 0:
                i += 1
                continue
            j = i
            while j < len(kids) and kids[j] in empty:
                j += 1
            _gap([blocks[b] for b in sorted(holding.get(kids[i - 1], ()))], module, kids[i - 1], kids[i:j],
                 kids[j] if j < len(kids) else None, seq, guards)
            i = j


def _gap(blocks: list[list[LightNode]], module: dict[str, str], before: str, gap: list[str], after: str | None,
         seq: str, guards: Guards) -> None:
    """Place ``gap`` (parameterless children in a row) between child ``before`` and ``after`` (None:
    the ``Sequential``'s end)."""
    def within(n: LightNode, path: str) -> bool:
        m = module.get(n.name)
        return m is not None and (m == path or m.startswith(path + "."))

    for ops in blocks:
        start = {n for n in ops if within(n, before)}
        if not start:
            continue
        run = _chain(ops, start, module)
        if after is not None:
            nxt = {n for n in ops if within(n, after)}
            # every op of the run feeds the run or the next child (or nothing in the forward)
            if not nxt or any(u not in nxt and u not in run and u in ops and not is_detach(u)
                              for n in run for u in n.users):
                continue
        elif run and not _ends_call(run, seq):
            continue
        parts = _split_run(run, gap, guards)
        if parts is None:
            continue
        for path, part in zip(gap, parts):
            module.update({n.name: path for n in part})


def _split_run(run: list[LightNode], gap: list[str], guards: Guards) -> list[list[LightNode]] | None:
    """``run`` cut into one part per child of ``gap``, in order, each cut from its end (None: it does not cut
    so)."""
    parts: list[list[LightNode]] = []
    rest = list(run)
    for path in gap[1:][::-1]:
        t = _fit(path, rest[-1:], guards) if _identity(path, guards) else _tail(rest)
        if t is None or len(t) == len(rest):
            break
        parts.insert(0, t)
        rest = rest[:len(rest) - len(t)]
    if len(parts) != len(gap) - 1 or not _fit(gap[0], rest, guards):
        return None
    return [rest, *parts]


def _ends_call(run: list[LightNode], seq: str) -> bool:
    """The run ends the ``Sequential``: its line calls it (or a ``Sequential`` around it) and hands what
    it returns to a module, an operator or the line's result (:func:`hands_on`)."""
    w = where(run[0])
    tree = _parse(w[3]) if w is not None else None
    if tree is None:
        return False
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    names = set(seq.split("."))
    calls = [c for c in ast.walk(tree) if self_call(c) in names]
    return len(calls) == 1 and hands_on(parents.get(calls[0]), calls[0])


def own_forwards(blocks: list[list[LightNode]], frames: list[str | None], module: dict[str, str],
                 empty: set[str]) -> None:
    """A parameterless module whose ``forward`` is user code (``transformers``' ``SiLUActivation``):
    its line is a ``forward`` of another file or function than the line around it, which calls one
    such child of its frame (``self.act_fn(``): that block's frame is the child."""
    at = [where(ops[0]) for ops in blocks]
    for i, (ops, w) in enumerate(zip(blocks, at)):
        if w is None or w[2] != "forward" or any(n.name in module for n in ops):
            continue
        for j in (i - 1, i + 1):
            other = at[j] if 0 <= j < len(blocks) else None
            if other is None or frames[j] is None or (other[0], other[2]) == (w[0], w[2]):
                continue
            f = frames[j] or ""
            called = {c for c in re.findall(r"\bself\.(\w+)\s*\(", other[3]) if _join(f, c) in empty}
            if len(called) == 1:
                (c,) = called
                frames[i] = _join(f, c)
                break
