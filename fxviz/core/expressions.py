"""Expressions read from inductor's wrapper code, evaluated without ``eval``: the code may come from a
``TORCH_TRACE`` log someone else wrote, and fxviz never runs what a file says (``tests/test_safety.py``).

- :func:`int_expression`: a size or stride (``(8*s0, 64)``, ``((s0 + 7)//8)``) from integers, the
  symbols given, arithmetic and ``max``/``min``;
- :func:`call_expression`: an extern kernel's call (``extern_kernels.mm(buf3, reinterpret_tensor(buf1,
  (64, 8), (1, 64), 0), out=buf4)``): names from the namespace given, attributes that are not dunders,
  literals, tuples, nested calls; nothing else (no subscripts, lambdas, comprehensions, operators on objects).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["UnsafeExpression", "int_expression", "call_expression"]


class UnsafeExpression(ValueError):
    """The text holds something the evaluator does not take (it is then not evaluated at all)."""


_ARITHMETIC: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod, ast.Div: operator.truediv, ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"max": max, "min": min}


def int_expression(text: str, symbols: Mapping[str, int]) -> Any:
    """The value of the arithmetic ``text`` (a number or a tuple of them) with ``symbols`` bound.

    >>> int_expression("(8*s0, (s0 + 7)//8, max(s0, 2))", {"s0": 3})
    (24, 1, 3)
    """
    def value(n: ast.AST) -> Any:
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
            return n.value
        if isinstance(n, ast.Name) and n.id in symbols:
            return symbols[n.id]
        if isinstance(n, ast.Tuple):
            return tuple(value(e) for e in n.elts)
        if isinstance(n, ast.BinOp) and type(n.op) in _ARITHMETIC:
            return _ARITHMETIC[type(n.op)](value(n.left), value(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            v = value(n.operand)
            return -v if isinstance(n.op, ast.USub) else v
        if (isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _FUNCTIONS
                and not n.keywords):
            return _FUNCTIONS[n.func.id](*(value(a) for a in n.args))
        raise UnsafeExpression(f"not a size expression: {ast.dump(n)[:80]}")

    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise UnsafeExpression(f"not an expression: {text[:80]!r}") from exc
    return value(tree.body)


def call_expression(text: str, namespace: Mapping[str, Any]) -> Callable[[], Any]:
    """A thunk that makes the call ``text`` describes, checked now: only names of ``namespace``, their
    non-dunder attributes, literals, tuples and lists, and calls of what those resolve to."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise UnsafeExpression(f"not an expression: {text[:80]!r}") from exc
    _check(tree.body, namespace)
    if not isinstance(tree.body, ast.Call):
        raise UnsafeExpression("not a call")
    return lambda: _value(tree.body, namespace)


def _check(n: ast.AST, namespace: Mapping[str, Any]) -> None:
    """Raise ``UnsafeExpression`` unless ``n`` is one of the forms :func:`call_expression` allows, all the way down."""
    if isinstance(n, ast.Name):
        if n.id not in namespace:
            raise UnsafeExpression(f"unknown name {n.id!r}")
    elif isinstance(n, ast.Attribute):
        if n.attr.startswith("__"):
            raise UnsafeExpression(f"attribute {n.attr!r}")
        _check(n.value, namespace)
    elif isinstance(n, ast.Call):
        _check_call(n, namespace)
    elif isinstance(n, (ast.Tuple, ast.List)):
        for e in n.elts:
            _check(e, namespace)
    elif isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
        _check(n.operand, namespace)
    elif not (isinstance(n, ast.Constant) and isinstance(n.value, (int, float, str, bool, type(None)))):
        raise UnsafeExpression(f"not a kernel call: {type(n).__name__}")


def _check_call(n: ast.Call, namespace: Mapping[str, Any]) -> None:
    _check(n.func, namespace)
    for a in [*n.args, *(k.value for k in n.keywords)]:
        _check(a, namespace)
    if any(k.arg is None for k in n.keywords) or any(isinstance(a, ast.Starred) for a in n.args):
        raise UnsafeExpression("unpacked arguments")


def _value(n: ast.AST, namespace: Mapping[str, Any]) -> Any:
    """What a checked expression node evaluates to, its names read from ``namespace``."""
    if isinstance(n, ast.Name):
        return namespace[n.id]
    if isinstance(n, ast.Attribute):
        return getattr(_value(n.value, namespace), n.attr)
    if isinstance(n, ast.Call):
        return _value(n.func, namespace)(*(_value(a, namespace) for a in n.args),
                                         **{str(k.arg): _value(k.value, namespace) for k in n.keywords})
    if isinstance(n, (ast.Tuple, ast.List)):
        items = [_value(e, namespace) for e in n.elts]
        return tuple(items) if isinstance(n, ast.Tuple) else items
    if isinstance(n, ast.UnaryOp):
        v = _value(n.operand, namespace)
        return -v if isinstance(n.op, ast.USub) else v
    assert isinstance(n, ast.Constant)
    return n.value
