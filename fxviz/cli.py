"""The ``fxviz`` command: the same facts as the notebook, in a terminal.

Every error is one line on stderr and a non-zero exit; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from .analysis.strategies import OFFERED, forms_text, parse_list
from .errors import FxvizError, ModelSpecError
from .example_names import NAMES as EXAMPLE_NAMES
from .logs.reader import log_files
from .render.limits import NODE_LIMIT, REPORT_BUDGET

# every strategy form and the default list, from the one registry (fxviz/analysis/strategies.py)
STRATEGY_FORMS = forms_text()
DEFAULT_STRATEGIES = ",".join(s.name for s in OFFERED) + " (from --logs: logged first, no eager)"

__all__ = ["main", "load_model_spec"]


def load_model_spec(spec: str) -> tuple[Any, tuple[Any, ...]]:
    """``alexnet`` (built-in), ``package.module:factory`` or ``path/to/file.py:factory``.

    The factory is called with no arguments and returns ``(model, example_inputs)``.
    """
    if ":" not in spec:
        if spec in EXAMPLE_NAMES:
            from .examples import get_example

            return get_example(spec)
        raise ModelSpecError(f"unknown model {spec!r}: not a built-in example ({', '.join(EXAMPLE_NAMES)}) "
                             "and not of the form package.module:factory")
    where, _, attr = spec.rpartition(":")
    try:
        if where.endswith(".py"):
            if not os.path.exists(where):
                raise ModelSpecError(f"model file {where!r} does not exist")
            mod_spec = importlib.util.spec_from_file_location("fxviz_user_model", where)
            assert mod_spec is not None and mod_spec.loader is not None
            module = importlib.util.module_from_spec(mod_spec)
            # registered as Python's import recipe does: dynamo looks a frame's module up by name
            # when it compiles the code after a graph break (ModuleNotFoundError otherwise)
            sys.modules[mod_spec.name] = module
            mod_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ModelSpecError:
        raise
    except Exception as exc:
        raise ModelSpecError(f"cannot import {where!r} for model spec {spec!r}: {type(exc).__name__}: {exc}") from exc
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ModelSpecError(f"{where!r} has no callable {attr!r}")
    try:
        result = factory()
    except Exception as exc:
        raise ModelSpecError(f"{spec} raised {type(exc).__name__}: {exc}",
                             "the factory must run with no arguments") from exc
    if not (isinstance(result, tuple) and len(result) == 2):
        raise ModelSpecError(f"{spec} returned {type(result).__name__}, not (model, example_inputs)",
                             "make the factory return (model, example_inputs)")
    model, inputs = result
    return model, tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _trace(args: argparse.Namespace) -> Any:
    if getattr(args, "logs", None):
        if args.model:
            raise FxvizError(f"give a model ({args.model}) or --logs, not both", "drop one of them")
        log_files(args.logs)  # a missing path is said before torch loads
        from .logs import load_logs

        return load_logs(args.logs).trace(rank=args.rank, compile_id=args.graph)
    if not args.model:
        raise ModelSpecError("no model and no --logs",
                             "name a model (e.g. mini_gpt) or pass --logs DIR (see 'fxviz COMMAND --help')")
    model, inputs = load_model_spec(args.model)
    from .trace import trace

    return trace(model, *inputs, params=args.params, backend=args.backend, dynamic=args.dynamic)


def _stem(args: argparse.Namespace) -> str:
    """The default output file name: the model's, or ``run`` for a log."""
    if getattr(args, "logs", None):
        return f"run_rank{args.rank}"
    return args.model.rpartition(":")[2].replace(".py", "")


def cmd_logs(args: argparse.Namespace) -> int:
    """The graphs of a logged run (TORCH_TRACE=dir): one row per compiled graph and rank, printed as
    each compile is read."""
    log_files(args.dir)  # a missing path is said before torch loads
    from .logs.run import graph_rows, load_logs

    table = _StreamedTable(sys.stdout)
    print(f"{args.dir}: the compiles as they are read")
    run = load_logs(args.dir, on_compile=lambda c: table.rows(graph_rows(c)))
    print(repr(run))
    if run.skipped:
        print("skipped record kinds: " + ", ".join(f"{k} ({n})" for k, n in sorted(run.skipped.items())))
    return 0


class _StreamedTable:
    """The rows of ``Run.graphs`` printed one at a time under a fixed header: numbers right-aligned
    under their names, long text cut to 60 characters (what the pandas table showed)."""

    WIDTHS: ClassVar[dict[str, int]] = {"rank": 4, "compile_id": 10, "piece": 5, "attempt": 7, "frame": 20,
                                        "source": 44, "joint": 5, "forward": 7, "backward": 8, "inference": 9,
                                        "nodes": 6, "saved": 6}
    TEXT: ClassVar[tuple[str, ...]] = ("recompile_reason", "graph_break_reason")

    def __init__(self, out: Any) -> None:
        self.out = out
        self.shown: dict[tuple[Any, ...], dict[str, Any]] = {}  # (rank, compile id, piece) -> the row printed
        self.header = False
        self.noted = False

    @staticmethod
    def _cut(value: Any, width: int, tail: bool = False) -> str:
        text = "None" if value is None else str(value)
        if len(text) <= width:
            return text
        return "…" + text[-(width - 1):] if tail else text[:width - 1] + "…"

    def rows(self, rows: list[dict[str, Any]]) -> None:
        """Print the rows not printed yet; a row that changed since it was printed (a record of its
        compile came after the compile's metrics) again, under a note."""
        if not self.header:
            cells = [name.rjust(w) for name, w in self.WIDTHS.items()] + list(self.TEXT)
            print(" ".join(cells), file=self.out)
            self.header = True
        for row in rows:
            key = (row["rank"], row["compile_id"], row["piece"])
            before = self.shown.get(key)
            if before == row:
                continue
            if before is not None and not self.noted:
                print("rows completed by records after their compile's metrics:", file=self.out)
                self.noted = True
            self.shown[key] = row
            cells = [self._cut(row[name], w, tail=name == "source").rjust(w) for name, w in self.WIDTHS.items()]
            cells += [self._cut(row[name], 60) for name in self.TEXT]
            print(" ".join(cells), file=self.out, flush=True)


def cmd_nodes(args: argparse.Namespace) -> int:
    """Role counts and the parameter table of a model's joint graph."""
    tr = _trace(args)
    import pandas as pd

    print(tr.summary())
    print()
    params = tr.parameters()
    if len(params):
        with pd.option_context("display.max_rows", None, "display.width", 200, "display.max_colwidth", 60):
            print(params.to_string(index=False))
    for piece in tr.pieces[1:]:
        print()
        print(piece.summary())
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The founding story on the built-in AlexNet: parameters lifted vs captured as constants."""
    from .examples import alexnet
    from .trace import trace

    model, inputs = alexnet()
    print("== AlexNet, parameters lifted to graph inputs (what torch.compile does)")
    good = trace(model, *inputs)
    print(good.summary())
    checked = good.check_gradients()
    print(f"  check_gradients: {int(checked['ok'].sum())}/{len(checked)} parameters match eager autograd "
          f"(max |diff| {checked['max_abs_diff'].max():.3g})")
    print()
    print("== AlexNet, parameters captured as constants (aot_function on a closure: the original story)")
    bad = trace(model, *inputs, params="closure")
    print(bad.summary())
    checked = bad.check_gradients()
    print(f"  check_gradients: {int(checked['has_gradient'].sum())}/{len(checked)} parameters get a gradient")
    print()
    print("== the doctor on the closure trace")
    print(bad.doctor())
    return 0


def cmd_draw(args: argparse.Namespace) -> int:
    """Draw the joint graph (or one side of a partition) to an SVG, PNG or DOT file."""
    tr = _trace(args)
    stem = _stem(args)
    if args.piece == "overview":
        drawing = tr.overview(strategy=args.strategy or "default")
        path = drawing.save(args.output or f"{stem}_overview.svg")
        print(f"{path}: {drawing!r}"[:300])
        return 0
    piece = _piece_number(args.piece, len(tr.pieces))
    drawing = tr.draw(args.view, strategy=args.strategy, compare=args.compare, group=args.group,
                      depth=args.depth, highlight=args.highlight or None, piece=piece, expand=args.expand,
                      timeout=args.timeout, differences=args.differences)
    view = "differences" if args.differences else args.view
    out = args.output or f"{stem}_{view}" + (f"_graph{piece + 1}" if piece else "") + ".svg"
    path = drawing.save(out)
    print(f"{path}: {drawing!r}"[:300])
    return 0


def _piece_number(text: str | None, pieces: int) -> int:
    """``--piece N`` (1-based, as the 'graph N of M' labels count) -> the 0-based ``piece=``."""
    from .errors import InputError

    if text is None:
        return 0
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= pieces:
        raise InputError(f"--piece {text} is not a graph of this model, which has {pieces}",
                         f"pass --piece 1 to {pieces}, or --piece overview for all of them as boxes")
    return n - 1


def _draw_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--piece", help="after graph breaks: which graph to draw, 1 to N as the 'graph N of M' "
                                   "labels count (default 1), or 'overview' for every graph as one box in "
                                   "execution order")
    p.add_argument("-o", "--output", help="file to write: .svg, .png, .dot or .pdf (default MODEL_VIEW.svg)")
    p.add_argument("--view", choices=["joint", "forward", "backward", "compare"], default="joint",
                   help="the joint graph, or the forward/backward graph of --strategy, or the joint graph "
                        "compared (needs --compare)")
    p.add_argument("--strategy", help=f"mark what this strategy saves/recomputes ({STRATEGY_FORMS})")
    p.add_argument("--compare", help="a second strategy: mark what each saves that the other does not")
    p.add_argument("--differences", action="store_true",
                   help="with --compare: draw only the nodes the two strategies treat differently, with "
                        "their producers and users as context (never in boxes)")
    p.add_argument("--group", choices=["module", "none"], help="cluster by module path (module) or never "
                                                              "collapse (none); default: collapse big graphs")
    p.add_argument("--depth", type=int, help="with module grouping: modules at this depth become one box")
    p.add_argument("--highlight", action="append", help="emphasise nodes matching a name, op or module "
                                                        "(repeatable)")
    p.add_argument("--expand", action="append", help="open a box to show its inside: a module path or a box's "
                                                     "name as the drawing shows it (repeatable)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds graphviz may take (default 120)")


def cmd_doctor(args: argparse.Namespace) -> int:
    """Why parameters get no gradient: exit status 0 when healthy, 1 when a parameter that
    requires grad gets none."""
    tr = _trace(args)
    report = tr.doctor(strategy=args.strategy)
    print(report)
    return 0 if report.healthy else 1


def _doctor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategy", default="default",
                   help="the partition whose backward graph is checked for dropped gradients (default)")


def cmd_code(args: argparse.Namespace) -> int:
    """Print a partition's forward or backward graph (or the joint graph) as runnable Python."""
    tr = _trace(args)
    from .capture import graph_name

    for piece in tr.pieces:
        if len(tr.pieces) > 1:
            print(f"# ===== {graph_name(piece.index)} of {len(tr.pieces)}")
        print(piece.code(args.part, strategy=args.strategy))
    return 0


def _code_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--part", choices=["forward", "backward", "joint"], default="backward",
                   help="which graph to print (default: backward)")
    p.add_argument("--strategy", default="default", help=f"partition strategy ({STRATEGY_FORMS}); default: default")


def cmd_table(args: argparse.Namespace) -> int:
    """The memory table: what each strategy saves (storage-aware bytes), recomputes and peaks at."""
    tr = _trace(args)  # argument errors first, before torch loads
    import pandas as pd

    from .capture import graph_name
    from .render.table import memory_table_text

    strategies = parse_list(args.strategies)
    for piece in tr.pieces:
        if len(tr.pieces) > 1:
            print(f"== {graph_name(piece.index)} of {len(tr.pieces)}")
        df = piece.memory_table(strategies)
        if args.exact:
            with pd.option_context("display.width", 250, "display.max_columns", None):
                print(pd.DataFrame(df).drop(columns=["error"]).to_string(index=False))
        else:
            print(memory_table_text(df))
    if len(tr.pieces) > 1:
        whole = tr.memory_table_by_piece(strategies)
        totals = whole[whole["piece"] == "total"].drop(columns=["piece", "runs"]).reset_index(drop=True)
        totals.attrs = dict(whole.attrs)
        print(f"== whole model: {len(tr.pieces)} graphs, each counted as often as it ran")
        if args.exact:
            with pd.option_context("display.width", 250, "display.max_columns", None):
                print(pd.DataFrame(totals).drop(columns=["error"]).to_string(index=False))
        else:
            print(memory_table_text(totals))
    return 0


def _table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategies", help=f"comma-separated strategies (default: {DEFAULT_STRATEGIES}); "
                                        f"forms: {STRATEGY_FORMS}")
    p.add_argument("--exact", action="store_true", help="exact integers instead of KiB/MiB/GiB")


def cmd_report(args: argparse.Namespace) -> int:
    """Write the self-contained HTML report: graph views per strategy, details, search, memory
    table, doctor's findings; one file that loads nothing from the network."""
    say = (lambda m: print(f"  {m}", file=sys.stderr)) if args.verbose else None
    if args.logs:  # every graph of the run, with a rank and a graph selector, opening on --rank/--graph
        if args.model:
            raise FxvizError(f"give a model ({args.model}) or --logs, not both", "drop one of them")
        log_files(args.logs)  # a missing path is said before torch loads
        from .html_report import report
        from .logs import load_logs

        run = load_logs(args.logs)
        out = args.output or f"{_stem(args)}.html"
        path = report(run, out, rank=args.rank, compile_id=args.graph, strategies=parse_list(args.strategies),
                      group=args.group, depth=args.depth, progress=say, budget=args.budget or None)
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB")
        return 0
    tr = _trace(args)
    from .html_report import report

    strategies = parse_list(args.strategies) or list(tr.offered)
    out = args.output or f"{_stem(args)}.html"
    path = report(tr, out, strategies=strategies, group=args.group, depth=args.depth, progress=say,
                  budget=args.budget or None)
    note = f" ({len(tr.pieces)} graphs: every piece and a whole-model overview)" if len(tr.pieces) > 1 else ""
    print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB{note}")
    return 0


def _report_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", help="the HTML file to write (default MODEL.html)")
    p.add_argument("--strategies", help=f"comma-separated strategies (default: {DEFAULT_STRATEGIES}); "
                                        f"forms: {STRATEGY_FORMS}")
    p.add_argument("--group", choices=["module", "none"], help="cluster by module path (module) or draw every "
                                                               f"node (none); default: modules collapse above "
                                                               f"{NODE_LIMIT} nodes")
    p.add_argument("--depth", type=int, help="with module grouping: modules at this depth become one box")
    p.add_argument("--budget", type=float, default=REPORT_BUDGET,
                   help=f"seconds to spend partitioning and drawing beyond the first strategy and the opening view; "
                        f"what is left out says how to get it (default {REPORT_BUDGET:g}; 0: everything)")
    p.add_argument("-v", "--verbose", action="store_true", help="say what is being computed")


COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str]] = {
    "report": (cmd_report, "a self-contained HTML report: graph views, details, search, memory table, doctor"),
    "table": (cmd_table, "the memory table: saved bytes, recompute cost and peaks per strategy"),
    "doctor": (cmd_doctor, "why parameters get no gradient (exit 1 when one that requires grad gets none)"),
    "code": (cmd_code, "a partition's forward or backward graph as Python with real names"),
    "draw": (cmd_draw, "draw the joint graph or a partition to SVG/PNG/DOT (needs graphviz's dot)"),
    "nodes": (cmd_nodes, "role counts and the parameter table of the joint graph"),
}


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus the error; fxviz's promise is one line on stderr."""

    def error(self, message: str) -> Any:
        print(f"{self.prog}: error: {' '.join(message.split())} (hint: run '{self.prog} --help')", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="fxviz", description="See what AOTAutograd does to your model.")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help=cmd_demo.__doc__, description=cmd_demo.__doc__)
    demo.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
    demo.set_defaults(func=cmd_demo)
    logs = sub.add_parser("logs", help=cmd_logs.__doc__, description=cmd_logs.__doc__)
    logs.add_argument("dir", help="the directory TORCH_TRACE=dir wrote (one file per rank), or one file")
    logs.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
    logs.set_defaults(func=cmd_logs)
    for name, (func, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("model", nargs="?", help=f"built-in example ({', '.join(EXAMPLE_NAMES)}) or "
                                                "package.module:factory or file.py:factory")
        p.add_argument("--logs", metavar="DIR", help="read the graph from a TORCH_TRACE log of a real run instead "
                                                     "of a model (a directory of per-rank files, or one file)")
        p.add_argument("--rank", type=int, default=0, help="with --logs: the rank (default 0)")
        p.add_argument("--graph", metavar="ID", help="with --logs: the compile id, e.g. 0/0 (default: the first "
                                                      "graph with a backward); 'fxviz logs DIR' lists them")
        p.add_argument("--params", choices=["lifted", "closure"], default="lifted",
                       help="parameters as graph inputs (lifted) or captured as constants (closure)")
        p.add_argument("--backend", choices=["aot_eager", "inductor"], default="aot_eager",
                       help="whose joint graph: AOTAutograd's as traced (aot_eager) or the one torch.compile's "
                            "default backend partitions (inductor)")
        p.add_argument("--dynamic", action="store_true", help="trace with symbolic sizes (torch.compile(dynamic=True))")
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
        _EXTRA_ARGS.get(name, lambda _p: None)(p)
        p.set_defaults(func=func)
    return parser


_EXTRA_ARGS: dict[str, Callable[[argparse.ArgumentParser], None]] = {}
_EXTRA_ARGS["doctor"] = _doctor_args
_EXTRA_ARGS["code"] = _code_args
_EXTRA_ARGS["draw"] = _draw_args
_EXTRA_ARGS["table"] = _table_args
_EXTRA_ARGS["report"] = _report_args


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except FxvizError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"fxviz: error: {exc.message} (hint: {exc.hint})", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fxviz: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug in fxviz or torch: still one line unless --debug
        if args.debug:
            traceback.print_exc()
        print(f"fxviz: internal error: {type(exc).__name__}: {' '.join(str(exc).split())[:400]} "
              "(rerun with --debug for the traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
