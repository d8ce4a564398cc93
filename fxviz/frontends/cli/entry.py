"""The parser built from the registered commands, and ``main``: every error one line on stderr and a
non-zero exit (2: the user's, 3: fxviz's or torch's own); ``--debug`` shows the traceback."""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence
from typing import Any

from fxviz.core.errors import FxvizError, FxvizWarning
from fxviz.frontends.cli import advise, commands, diff, files, logs_table  # noqa: F401  (each registers its commands, in this order)
from fxviz.frontends.cli.options import COMMANDS, DEBUG_HELP
from fxviz.frontends.cli.words import error_line, show_warning

__all__ = ["main", "parser"]

class _OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; fxviz's promise is one line on stderr."""

    def error(self, message: str) -> Any:
        print(f"{self.prog}: error: {' '.join(message.split())} (hint: run '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


def parser() -> argparse.ArgumentParser:
    top = _OneLineParser(prog="fxviz", description="See what AOTAutograd does to your model.")
    top.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = top.add_subparsers(dest="command", required=True)
    for c in COMMANDS.values():  # in the order the modules above register them
        p = sub.add_parser(c.name, help=c.help, description=c.description, epilog=c.epilog,
                           formatter_class=argparse.RawDescriptionHelpFormatter if c.epilog else argparse.HelpFormatter)
        for option in c.options:
            option.add(p)
        # SUPPRESS: given before the command, --debug is not reset by the command's own default
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
        p.set_defaults(func=c.run)
    return top


_VALUE_OPTIONS = ("--saved", "--peak")
"""Options whose value a user may write with a leading minus (``--saved -5%``): argparse would take
it for an option and say "expected one argument"; glued as ``--saved=-5%``, the value reaches the
check that says what is wrong with it."""


def _glue_dash_values(argv: Sequence[str]) -> list[str]:
    out: list[str] = []
    it = iter(argv)
    for token in it:
        if token in _VALUE_OPTIONS:
            value = next(it, None)
            if value is not None and len(value) > 1 and value[0] == "-" and (value[1].isdigit() or value[1] == "."):
                out.append(f"{token}={value}")
                continue
            out.append(token)
            if value is not None:
                out.append(value)
            continue
        out.append(token)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(_glue_dash_values(sys.argv[1:] if argv is None else argv))
    try:
        with warnings.catch_warnings():
            warnings.showwarning = show_warning
            warnings.simplefilter("always", FxvizWarning)  # the command's own words, one line each
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # a closed pipe shows here, in the handler below, not at the interpreter's exit
            return code
    except FxvizError as exc:
        if args.debug:
            traceback.print_exc()
        print(error_line(exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fxviz: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (``fxviz logs DIR | head``): not an error of fxviz's; as Python's docs
        # advise, stdout is pointed at devnull so the interpreter's own flush at exit stays quiet
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a command a closed pipe ended
    except Exception as exc:  # a bug in fxviz or torch: still one line unless --debug
        if args.debug:
            traceback.print_exc()
        print(f"fxviz: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:400]} "
              "(rerun with --debug for the traceback)", file=sys.stderr)
        return 3
