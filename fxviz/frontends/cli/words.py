"""The command's words: actions spelled as options and commands, text fitted to 100 columns, and every
error and warning as one line on stderr.

Lower floors say what to do as data (``fxviz.core.errors.Do`` inside a ``Say``); this module spells each action
as this command takes it (``Do("draw", (("depth", 2),))`` is ``--depth 2``), so no message is rewritten by
matching its text.  An action the command line cannot take is named as Python, and says so.
"""

from __future__ import annotations

import sys
import textwrap
from typing import Any

from fxviz.core.errors import Blank, Do, FxvizError, Span, spelled

__all__ = ["WIDTH", "COMMAND_FOR", "option_words", "cli_text", "wrap", "fitted", "error_line", "show_warning"]

WIDTH = 100
"""Every line the CLI prints fits this many columns."""

COMMAND_FOR: dict[str, str] = {
    "graphs": "'fxviz logs DIR'",
    "doctor": "'fxviz doctor'",
    "graph.has_backward": "'fxviz nodes'",
    "partition": "'fxviz table'",
    "memory_table": "'fxviz table'",
    "check_gradients": "fxviz.trace(model, x).check_gradients() in Python",  # a model run: no command does it
}
"""The command that does what a Python call does, by the call's name."""

OPTION_CALLS = ("draw", "trace", "memory_table")
"""Calls whose arguments are options of the command at hand (``fxviz draw``; ``--piece`` of a trace; a log's
own table asks for ``--strategies``)."""


def option_words(do: Do) -> str:
    """``do`` as this command takes it: a command (``'fxviz doctor'``) or options (``--group none``)."""
    if do.call in COMMAND_FOR and not (do.args and do.call in OPTION_CALLS):
        return COMMAND_FOR[do.call]
    if do.call in OPTION_CALLS:
        return " ".join(_option(name, value) for name, value in do.args)
    return f"{do.python()} in Python"


def _option(name: str | None, value: Any) -> str:
    # draw's one positional: the view; a run's compile_id= is the log commands' --graph
    flag = "--view" if name is None else "--graph" if name == "compile_id" else "--" + name.replace("_", "-")
    if value is True:
        return flag
    if isinstance(value, Blank):
        return f"{flag} {value.cli}"
    if name == "piece":  # --piece counts from 1, as the 'graph N of M' labels do
        return f"{flag} {value.lo + 1}..{value.hi + 1}" if isinstance(value, Span) else f"{flag} {value + 1}"
    return f"{flag} {value}"


def cli_text(text: object) -> str:
    """Text (a ``Say`` or plain) in the command's words."""
    return spelled(text, option_words)


def wrap(text: str, indent: str = "    ") -> str:
    """One line of prose wrapped to ``WIDTH``, continuation lines under ``indent``."""
    return textwrap.fill(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


def fitted(text: str) -> str:
    """Prose for a terminal: each line longer than ``WIDTH`` wrapped under its own indentation."""
    out = []
    for line in text.splitlines():
        lead = line[:len(line) - len(line.lstrip())]
        out.append(line if len(line) <= WIDTH else wrap(line, lead + "    "))
    return "\n".join(out)


def error_line(exc: FxvizError) -> str:
    """An fxviz error as one line, its hint in the command's words."""
    message, hint = exc.spelled(option_words)
    return f"fxviz: error: {message} (hint: {hint})"


def show_warning(message: Warning | str, category: type[Warning], *_args: Any, **_kwargs: Any) -> None:
    """fxviz's warnings as one ``fxviz: warning: ...`` line (no file and line of fxviz's code)."""
    text = message.args[0] if isinstance(message, Warning) and len(message.args) == 1 else message
    print(wrap(f"fxviz: warning: {cli_text(text)}"), file=sys.stderr)
