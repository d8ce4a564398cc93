"""fxviz's exceptions: every error a user can cause says what went wrong and how to fix it.

Each class carries a default ``hint``; raising code may override it.  ``str(err)`` is one line
(the message), and ``err.hint`` is the fix, so the CLI can print both on one line each.

A message that tells the user what to *do* holds the action as data, not as text: a ``Say`` is text with
``Do`` parts (``Do("draw", (("group", "module"), ("depth", 2)))``).  It is a ``str`` spelled for Python
(``tr.draw(group='module', depth=2)``), so every caller reads it as text; a front end with other words spells
the same parts its own way (the CLI: ``--group module --depth 2``) with ``Say.spell``.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Do",
    "Blank",
    "Span",
    "Say",
    "spelled",
    "close_matches",
    "did_you_mean",
    "FxvizError",
    "InputError",
    "TraceError",
    "NoFloatingOutputError",
    "StrategyError",
    "RenderError",
    "ModelSpecError",
    "LogError",
    "OutputError",
    "FxvizWarning",
]


@dataclass(frozen=True)
class Blank:
    """A value the user fills in, as each front end writes it: ``Blank("k", "K")`` is ``depth=k`` in
    Python and ``--depth K`` on the command line."""

    python: str
    cli: str


@dataclass(frozen=True)
class Span:
    """A range of 0-based indices, ``lo..hi`` inclusive (``piece=0..2``); a front end that counts from 1
    writes it shifted (``--piece 1..3``)."""

    lo: int
    hi: int


@dataclass(frozen=True)
class Do:
    """An action a message asks for: ``call`` on ``on`` (``tr``, ``run``, or nothing) with ``args``
    (``(name, value)`` pairs; name ``None``: positional), then ``then`` (``.error``).  ``attr``: a property,
    read without a call.  ``python()`` spells it as the Python API takes it."""

    call: str
    args: tuple[tuple[str | None, Any], ...] = ()
    on: str = "tr"
    attr: bool = False
    then: str = ""

    def python(self) -> str:
        head = f"{self.on}.{self.call}" if self.on else self.call
        if self.attr:
            return head + self.then
        args = ", ".join(_python_value(v) if k is None else f"{k}={_python_value(v)}" for k, v in self.args)
        return f"{head}({args}){self.then}"


def _python_value(value: Any) -> str:
    if isinstance(value, Blank):
        return value.python
    if isinstance(value, Span):
        return f"{value.lo}..{value.hi}"
    return repr(value)


class Say(str):
    """Text with actions as data: ``Say("see ", Do("doctor"), " for why")``.  As a ``str`` it is the Python
    spelling (``see tr.doctor() for why``); ``spell(words)`` writes each ``Do`` with ``words`` instead.
    ``+`` and ``join`` keep the parts (an f-string does not: build a ``Say`` from its parts)."""

    parts: tuple[str | Do, ...]

    def __new__(cls, *parts: str | Do) -> Say:
        flat: list[str | Do] = []
        for part in parts:
            if isinstance(part, Say):
                flat.extend(part.parts)
            elif isinstance(part, (str, Do)):
                flat.append(part)
            else:
                raise TypeError(f"a Say holds text and Do parts, not {type(part).__name__}")
        self = super().__new__(cls, "".join(p.python() if isinstance(p, Do) else str(p) for p in flat))
        self.parts = tuple(flat)
        return self

    def spell(self, words: Callable[[Do], str]) -> str:
        """The text with every action written by ``words`` (a front end's spelling of a ``Do``)."""
        return "".join(words(p) if isinstance(p, Do) else str(p) for p in self.parts)

    def __add__(self, other: str) -> Say:
        return Say(self, other)

    def __radd__(self, other: str) -> Say:
        return Say(other, self)

    def join(self, items: Iterable[str]) -> Say:
        parts: list[str | Do] = []
        for k, item in enumerate(items):
            parts.extend([self, item] if k else [item])
        return Say(*parts)

    def __reduce__(self) -> tuple[Any, ...]:  # copies (pandas' attrs are deep-copied) keep the parts
        return (Say, self.parts)


def spelled(text: object, words: Callable[[Do], str]) -> str:
    """``text`` as a front end writes it: a ``Say`` or a ``Do`` spelled with ``words``, anything else as ``str``."""
    if isinstance(text, Do):
        return words(text)
    return text.spell(words) if isinstance(text, Say) else str(text)


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """The names of ``choices`` a person most likely meant by ``word`` (a typo, a missing letter,
    another case or separator), best first; none when nothing is close."""
    options = list(dict.fromkeys(choices))
    by_key = {c.lower().replace("-", "_"): c for c in options}
    found = difflib.get_close_matches(word.lower().replace("-", "_"), list(by_key), n=n, cutoff=0.6)
    return [by_key[f] for f in found]


def did_you_mean(word: str, choices: Iterable[str], quote: Callable[[str], str] = repr) -> str:
    """``"did you mean 'input_ids'? "`` (``quote`` writes each name) for the close matches of ``word``
    among ``choices``; ``""`` when none is close.  The start of a hint, before what else to do."""
    found = close_matches(word, choices)
    if not found:
        return ""
    return f"did you mean {' or '.join(quote(f) for f in found[:2])}? "


def _one_line(text: str) -> str:
    return " ".join(text.split())


class FxvizError(Exception):
    """Base class of every error fxviz raises on purpose.  ``message`` and ``hint`` may be a ``Say``:
    ``str(err)`` spells its actions for Python, ``err.spelled(words)`` for another front end."""

    hint: str = "see the fxviz README"

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.said: tuple[str, str | None] = (message, hint)
        message = _one_line(str(message))  # always one line
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = _one_line(str(hint))

    def spelled(self, words: Callable[[Do], str]) -> tuple[str, str]:
        """(message, hint) with their actions written by ``words``, one line each."""
        message, hint = self.said
        if hint is None or _one_line(str(hint)) != self.hint:  # the class's hint, or one set after raising
            hint = self.hint
        return _one_line(spelled(message, words)), _one_line(spelled(hint, words))

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})"


class InputError(FxvizError):
    """The example inputs (or arguments) do not fit the model or the call."""

    hint = "pass example inputs the model accepts: fxviz.trace(model, x) with x shaped as in model(x)"


class TraceError(FxvizError):
    """torch could not trace the model into a joint forward+backward graph."""

    hint = "check that model(*inputs) runs eagerly; try capture_route='dynamo' for data-dependent Python"


class NoFloatingOutputError(FxvizError):
    """The model produced nothing differentiable to build a loss from."""

    hint = "return a floating-point tensor, or pass loss_fn=... that maps the outputs to a scalar"


class StrategyError(FxvizError):
    """An unknown or failing partition strategy."""

    hint = (
        "use 'min_cut', 'default_partition', 'budget:B[:dp|greedy|ilp]' with 0<=B<=1, 'eager', "
        "'recompute_all', 'optimal:B' (a fraction or a size such as 64MiB), 'logged' (a trace read from a log), "
        "or a callable with a torch partitioner's signature"
    )


class RenderError(FxvizError):
    """Drawing failed: graphviz missing, or a layout that would take too long."""

    hint = "install graphviz (apt-get install graphviz, or conda install -c conda-forge graphviz)"


class ModelSpecError(FxvizError):
    """A CLI model spec that names no model."""

    hint = ("use a built-in example (alexnet, mlp, resnet_block, mini_gpt, pointwise_chain), "
            "'package.module:factory' or 'path/to/file.py:factory', where factory() returns (model, inputs)")


class LogError(FxvizError):
    """A log of a real run that fxviz cannot read: missing, truncated, corrupt, without AOT graphs."""

    hint = "point fxviz at the directory TORCH_TRACE=dir wrote (or one file in it) of a torch.compile training run"


class OutputError(FxvizError, OSError):
    """A file fxviz was asked to write cannot be written there (an ``OSError`` too, so code that
    catches those still does)."""

    hint = "pass a path in an existing directory you can write to"


class FxvizWarning(UserWarning):
    """Something the user must know to read a result correctly (e.g. an empty backward)."""
