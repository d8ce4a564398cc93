"""The ``fxviz`` command: the same facts as the notebook, in a terminal.

Every error is one line on stderr and a non-zero exit; ``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from .analysis.strategies import OFFERED, forms_text, parse_list
from .errors import FxvizError, FxvizWarning, ModelSpecError
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

        run = load_logs(args.logs)
        args.run = run  # the whole run, for the commands that say where this graph sits in it
        tr = run.trace(rank=args.rank, compile_id=args.graph)
        if args.backend is not None and args.backend != tr.graph.backend:
            raise FxvizError(f"--backend {args.backend}: the run compiled this graph with {tr.graph.backend} (its log "
                             "says so), and fxviz reads it as the run did", "drop --backend with --logs")
        return tr
    if not args.model:
        raise ModelSpecError("no model and no --logs",
                             "name a model (e.g. mini_gpt) or pass --logs DIR (see 'fxviz COMMAND --help')")
    model, inputs = load_model_spec(args.model)
    from .facade import trace

    return trace(model, *inputs, params=args.params, backend=args.backend or "aot_eager", dynamic=args.dynamic)


def _where_in_run(run: Any, tr: Any, rank: int) -> str:
    """One line: which graph of the run this is, and what else the run holds (a log trace is one
    graph of many: never picked silently)."""
    others = len(run.graphs[run.graphs["rank"] == rank])
    eager = run.eager_frames(rank)
    line = f"{tr.capture.origin} ({tr.graph.backend}): 1 of {others} compile(s) on rank {rank}"
    if eager:
        line += f"; {len(eager)} frame(s) ran as plain Python, outside every graph: " + "; ".join(
            e.split("): ")[0] + ")" for e in eager)
    return line + "; 'fxviz logs DIR' lists the whole run and its totals, --graph ID picks another graph"


def _stem(args: argparse.Namespace) -> str:
    """The default output file name: the model's, or ``run`` for a log."""
    if getattr(args, "logs", None):
        return f"run_rank{args.rank}"
    return args.model.rpartition(":")[2].replace(".py", "")


def cmd_logs(args: argparse.Namespace) -> int:
    """The graphs of a logged run (TORCH_TRACE=dir): one row per compiled graph and rank, printed as
    each compile is read; then the whole run (graphs, frames that ran as plain Python, totals)."""
    log_files(args.dir)  # a missing path is said before torch loads
    from .logs.run import graph_rows, load_logs

    table = _StreamedTable(sys.stdout, args.dir)
    run = load_logs(args.dir, on_compile=lambda c: table.rows(graph_rows(c)))
    table.notes()
    print()
    print("\n".join(_wrap(line) for line in run.summary().splitlines()))
    if run.skipped:
        print(_wrap("skipped record kinds: " + ", ".join(f"{k} ({n})" for k, n in sorted(run.skipped.items()))))
    print(_wrap("read one graph: fxviz table|draw|doctor|report --logs DIR --graph ID [--rank N]"))
    return 0


WIDTH = 100
"""Every line the CLI prints fits this many columns."""


def _fitted(text: str) -> str:
    """Prose for a terminal: each line longer than ``WIDTH`` wrapped under its own indentation."""
    out = []
    for line in text.splitlines():
        lead = line[:len(line) - len(line.lstrip())]
        out.append(line if len(line) <= WIDTH else _wrap(line, lead + "    "))
    return "\n".join(out)


def _wrap(text: str, indent: str = "    ") -> str:
    import textwrap

    return textwrap.fill(text, WIDTH, subsequent_indent=indent, break_on_hyphens=False)


class _StreamedTable:
    """The rows of ``Run.graphs`` printed one at a time under a fixed header, in 100 columns: numbers
    right-aligned under their names, long text cut; graph-break and recompile reasons as numbered
    notes after the table.  A row completed by a record after its compile's metrics is printed again."""

    WIDTHS: ClassVar[dict[str, int]] = {"rank": 4, "graph": 8, "frame": 24, "line": 18, "backend": 9,
                                        "aot graph": 9, "nodes": 6, "saved": 5, "notes": 6}

    def __init__(self, out: Any, where: str) -> None:
        self.out, self.where = out, where
        self.shown: dict[tuple[Any, ...], dict[str, Any]] = {}  # (rank, compile id, piece) -> the row printed
        self.reasons: dict[tuple[str, str], int] = {}  # (compile id, what) -> note number
        self.header = False
        self.noted = False

    @staticmethod
    def _cut(value: Any, width: int, tail: bool = False) -> str:
        text = "" if value is None or value != value else str(value)  # None and NaN: empty
        if len(text) <= width:
            return text
        return "…" + text[-(width - 1):] if tail else text[:width - 1] + "…"

    def _cells(self, r: dict[str, Any]) -> dict[str, Any]:
        mark = ""
        for what in ("graph_break_reason", "recompile_reason"):
            if r[what]:
                number = self.reasons.setdefault((f"{r['compile_id']}", what), len(self.reasons) + 1)
                mark += f"[{number}]"
        kind = "joint" if r["joint"] else "inference" if r["inference"] else "eager"
        return {"rank": r["rank"], "graph": r["compile_id"] + (f".{r['piece']}" if r["piece"] else ""),
                "frame": r["frame"] or "?", "line": str(r["source"] or "?").rsplit("/", 1)[-1],
                "backend": r["backend"], "aot graph": kind, "nodes": r["nodes"], "saved": r["saved"], "notes": mark}

    def rows(self, rows: list[dict[str, Any]]) -> None:
        """Print the rows not printed yet (the header before the first), and a row that changed since."""
        if not self.header:
            print(f"{self.where}: the compiles as they are read", file=self.out)
            print(" ".join(name.rjust(w) for name, w in self.WIDTHS.items()), file=self.out)
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
            cells = self._cells(row)
            print(" ".join(self._cut(cells[name], w, tail=name == "line").rjust(w) for name, w in self.WIDTHS.items()),
                  file=self.out, flush=True)

    def notes(self) -> None:
        """The reasons the rows' note marks point to, numbered, wrapped to 100 columns."""
        for (compile_id, what), number in self.reasons.items():
            reason = next((r[what] for r in self.shown.values() if r["compile_id"] == compile_id and r[what]), "")
            label = what.replace("_reason", "").replace("_", " ")
            print(_wrap(f"[{number}] {compile_id} {label}: {reason}"), file=self.out)


def cmd_nodes(args: argparse.Namespace) -> int:
    """Role counts and the parameter table of a model's joint graph."""
    tr = _trace(args)
    print(_fitted(cli_words(tr.summary())))
    print()
    params = tr.parameters()
    if len(params):
        from .render.table import fitted_text

        print(fitted_text(params, WIDTH, drop=("dtype", "graph_role")))
    for piece in tr.pieces[1:]:
        print()
        print(_fitted(cli_words(piece.summary())))
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """The founding story on the built-in AlexNet: parameters lifted vs captured as constants."""
    from .examples import alexnet
    from .facade import trace

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
        drawing = tr.overview(strategy=args.strategy)
        path = drawing.save(args.output or f"{stem}_overview.svg")
        print(_wrap(f"{path}: {drawing!r}"))
        return 0
    piece = _piece_number(args.piece, len(tr.pieces))
    drawing = tr.draw(args.view, strategy=args.strategy, compare=args.compare, group=args.group,
                      depth=args.depth, highlight=args.highlight or None, piece=piece, expand=args.expand,
                      timeout=args.timeout, differences=args.differences)
    view = "differences" if args.differences else args.view
    out = args.output or f"{stem}_{view}" + (f"_graph{piece + 1}" if piece else "") + ".svg"
    path = drawing.save(out)
    print(_wrap(f"{path}: {drawing!r}"))
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
    p.add_argument("--view", choices=["joint", "forward", "backward", "compare", "flow"], default="joint",
                   help="the joint graph, or the forward/backward graph of --strategy, or the joint graph "
                        "compared (needs --compare), or the flow network min-cut cuts")
    p.add_argument("--strategy", help=f"mark what this strategy saves/recomputes ({STRATEGY_FORMS}); with "
                                      "--logs: logged (what the run saved) unless named")
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
    print(_fitted(cli_words(str(report))))
    return 0 if report.healthy else 1


def _doctor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategy", help="the partition whose backward graph is checked for dropped gradients "
                                      "(default: default; with --logs: logged, what the run saved)")


def cmd_code(args: argparse.Namespace) -> int:
    """Print a partition's forward or backward graph (or the joint graph) as runnable Python."""
    tr = _trace(args)
    from .capture import graph_of

    for piece in tr.pieces:
        if len(tr.pieces) > 1:
            print(f"# ===== {graph_of(piece.index, len(tr.pieces))}")
        # an inference-only graph has no backward: its forward graph is what there is to print
        part = args.part or ("forward" if piece.graph.inference else "backward")
        print(piece.code(part, strategy=args.strategy))
    return 0


def _code_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--part", choices=["forward", "backward", "joint"],
                   help="which graph to print (default: backward; forward for an inference-only graph)")
    p.add_argument("--strategy", help=f"partition strategy ({STRATEGY_FORMS}); default: default; with --logs: "
                                      "logged (what the run saved)")


def cmd_table(args: argparse.Namespace) -> int:
    """The memory table: what each strategy saves (storage-aware bytes), recomputes and peaks at."""
    tr = _trace(args)  # argument errors first, before torch loads
    import pandas as pd

    from .capture import INFERENCE_NOTE, graph_of
    from .graph_facts import joint_node_count
    from .render.table import memory_table_text

    strategies = parse_list(args.strategies)
    if getattr(args, "run", None) is not None:
        print(_wrap(_where_in_run(args.run, tr, args.rank)))
    for piece in tr.pieces:
        if len(tr.pieces) > 1:
            print(f"== {graph_of(piece.index, len(tr.pieces))}")
        if piece.graph.inference:  # a forward graph only: no strategy has anything to partition
            print(f"{piece.title}: forward graph of {joint_node_count(piece.graph.info.values())} nodes; "
                  f"{INFERENCE_NOTE}")
            continue
        df = piece.memory_table(strategies)
        if args.exact:
            with pd.option_context("display.width", 250, "display.max_columns", None):
                print(pd.DataFrame(df).drop(columns=["error"]).to_string(index=False))
        else:
            print(cli_words(memory_table_text(df)))
    if len(tr.pieces) > 1:
        whole = tr.memory_table_by_piece(strategies)
        totals = whole[whole["piece"] == "total"].drop(columns=["piece", "runs"]).reset_index(drop=True)
        totals.attrs = dict(whole.attrs)
        print(f"== whole model: {len(tr.pieces)} graphs, each counted as often as it ran")
        if args.exact:
            with pd.option_context("display.width", 250, "display.max_columns", None):
                print(pd.DataFrame(totals).drop(columns=["error"]).to_string(index=False))
        else:
            print(cli_words(memory_table_text(totals)))
    return 0


def _table_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategies", help=f"comma-separated strategies (default: {DEFAULT_STRATEGIES}); "
                                        f"forms: {STRATEGY_FORMS}")
    p.add_argument("--exact", action="store_true", help="exact integers instead of KiB/MiB/GiB")


def cmd_saved(args: argparse.Namespace) -> int:
    """What the backward reads from the forward, biggest first: each value's kind, module, op in
    plain words, tensor and storage-aware bytes, and what the other strategies do with it
    (--by-module: saved activation bytes per module)."""
    from .analysis.pieces import piece_facts
    from .capture import graph_name
    from .render.saved_view import by_module_text, saved_text

    tr = _trace(args)
    if args.top < 0:
        raise FxvizError(f"--top must be 0 (all rows) or more, not {args.top}", "pass --top 10")
    title = tr.title
    facts = piece_facts(tr.capture)
    for piece in tr.pieces:
        name = title if len(tr.pieces) == 1 else f"{title}, {graph_name(piece.index)} of {len(tr.pieces)}"
        runs = len(facts.runs_of(piece.index))
        name += f" (ran {runs} times: one such set per run)" if runs > 1 else ""
        if not piece.has_backward:
            print(f"{name}: no backward graph: nothing is saved")
            continue
        if args.by_module:
            print(by_module_text(piece.memory_by_module(args.strategy, depth=args.depth), name))
        else:
            df = piece.saved(args.strategy)
            if args.kind:
                kept = df[df["kind"] == args.kind]
                kept.attrs = dict(df.attrs)
                df, name = kept, f"{name} [{args.kind} rows only]"
            print(saved_text(df, name, top=args.top))
        if len(tr.pieces) > 1:
            print()
    return 0


def _saved_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--strategy", help=f"partition strategy ({STRATEGY_FORMS}); default: default "
                                      "(logged for --logs)")
    p.add_argument("--by-module", action="store_true", help="saved activation bytes per module instead")
    p.add_argument("--depth", type=int, help="with --by-module: the level of the model's structure "
                                             "(default: the level the drawing collapses to)")
    p.add_argument("--top", type=int, default=20, help="rows to show, biggest first (default 20; 0: all)")
    p.add_argument("--kind", choices=["activation", "parameter", "input", "symint"],
                   help="only the values of this kind (e.g. activation: leave out the resident parameters)")


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
    "saved": (cmd_saved, "what the backward reads from the forward, biggest first, per value or per module"),
}


DIFF_HELP = "what one run or model saves for the backward that another does not, value by value, and why"
DIFF_EXAMPLES = """\
each side (A, then B) is a model (an example name, package.module:factory or file.py:factory) or a
TORCH_TRACE log directory (--logs-a/--logs-b DIR, or --logs DIR for both sides of one log); a side
with no model and no log of its own is A again (one model under two strategies or backends).

examples:
  fxviz diff --logs-a plain_trace/ --logs-b checkpointed_trace/   two runs' logs
  fxviz diff --logs trace/ --rank-a 0 --rank-b 1                   two ranks of one run
  fxviz diff --logs trace/ --graph-a 0/0 --graph-b 1/0             two compiles of one log
  fxviz diff mlp --strategy-a eager --strategy-b default            eager vs a partition
  fxviz diff mlp --backend-b inductor --strategy-a min_cut          aot_eager vs inductor
  fxviz diff mymodels.py:plain mymodels.py:checkpointed             two models
strategies default to each side's own default: logged for a log, default for a model."""


def _diff_side(args: argparse.Namespace, side: str, model: str | None, cache: dict[Any, Any]) -> Any:
    """One side's Trace: its log (``--logs-X`` or ``--logs``) or its model; traced once per key."""
    from .facade import trace
    from .logs import load_logs

    log = getattr(args, f"logs_{side}") or args.logs
    if log is not None:
        key: tuple[Any, ...] = ("log", log, getattr(args, f"rank_{side}"), getattr(args, f"graph_{side}"))
        if ("run", log) not in cache:
            cache["run", log] = load_logs(log)
        if key not in cache:
            cache[key] = cache["run", log].trace(rank=key[2], compile_id=key[3])
        return cache[key]
    assert model is not None
    backend = getattr(args, f"backend_{side}") or args.backend
    key = ("model", model, backend)
    if key not in cache:
        m, inputs = load_model_spec(model)
        cache[key] = trace(m, *inputs, params=args.params, backend=backend, dynamic=args.dynamic)
    return cache[key]


def _diff_models(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """Which model each side traces: positional models fill the sides without a log, in order."""
    models = list(args.models)
    logged = {s: bool(getattr(args, f"logs_{s}") or args.logs) for s in ("a", "b")}
    chosen: dict[str, str | None] = {}
    for s in ("a", "b"):
        chosen[s] = None if logged[s] else (models.pop(0) if models else None)
    if models:
        raise FxvizError(f"fxviz diff got more models than sides without a log: {' '.join(models)}",
                         "give two models, or one model and one --logs-a/--logs-b, or --logs DIR alone")
    if chosen["a"] is None and not logged["a"]:
        raise ModelSpecError("fxviz diff has nothing to compare: no model and no --logs",
                             "e.g. fxviz diff --logs-a DIR1 --logs-b DIR2, or fxviz diff MODEL_A MODEL_B")
    if chosen["b"] is None and not logged["b"]:
        if chosen["a"] is None:  # A is a log and B is nothing
            raise ModelSpecError("fxviz diff has no B side: --logs-a names A's log, and there is no --logs-b and "
                                 "no model", "add --logs-b DIR2 (or a model), or use --logs DIR with --graph-a/"
                                 "--graph-b or --strategy-b to compare within one log")
        chosen["b"] = chosen["a"]  # B is A again: the same model under another strategy or backend
    return chosen["a"], chosen["b"]


def _diff_label(args: argparse.Namespace, side: str, model: str | None) -> str:
    log = getattr(args, f"logs_{side}") or args.logs
    return f"log {log}" if log is not None else f"model {model}"


def cmd_diff(args: argparse.Namespace) -> int:
    """Compare two sides: the summary (totals, the change, the top differences), then the table."""
    from .diffing import diff

    model_a, model_b = _diff_models(args)
    stray = [s for s in ("a", "b") if not (args.logs or getattr(args, f"logs_{s}"))
             and (getattr(args, f"rank_{s}") or getattr(args, f"graph_{s}"))]
    if stray:
        raise FxvizError(f"--rank-{stray[0]}/--graph-{stray[0]} choose a graph of a log, and that side has no log",
                         f"add --logs-{stray[0]} DIR (or --logs DIR for both sides)")
    cache: dict[Any, Any] = {}
    a = _diff_side(args, "a", model_a, cache)
    b = _diff_side(args, "b", model_b, cache)
    labels = (_diff_label(args, "a", model_a), _diff_label(args, "b", model_b))
    d = diff(a, b, args.strategy_a, args.strategy_b, labels=labels)
    print(d.summary())
    print()
    print(d.table_text())
    return 0


def _add_diff(sub: Any) -> None:
    p = sub.add_parser("diff", help=DIFF_HELP, description=DIFF_HELP + ".", epilog=DIFF_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", metavar="MODEL", help="a model per side without a log (A first)")
    p.add_argument("--logs", metavar="DIR", help="one TORCH_TRACE log for both sides (pick graphs with "
                                                 "--rank-a/-b, --graph-a/-b)")
    for s in ("a", "b"):
        S = s.upper()
        p.add_argument(f"--logs-{s}", metavar="DIR", help=f"side {S} from this TORCH_TRACE log")
        p.add_argument(f"--rank-{s}", type=int, default=0, metavar="N", help=f"with a log: side {S}'s rank (default 0)")
        p.add_argument(f"--graph-{s}", metavar="ID", help=f"with a log: side {S}'s compile id, e.g. 0/0 "
                                                           "(default: the first with a backward)")
        p.add_argument(f"--strategy-{s}", metavar="S", help=f"side {S}'s strategy (default: "
                       + ("A's when B is another trace, else " if s == "b" else "")
                       + "logged for a log, default for a model)")
        p.add_argument(f"--backend-{s}", choices=["aot_eager", "inductor"], help=f"side {S}'s capture backend")
    p.add_argument("--backend", choices=["aot_eager", "inductor"], default="aot_eager",
                   help="both sides' capture backend (default aot_eager)")
    p.add_argument("--params", choices=["lifted", "closure"], default="lifted", help="as for the other commands")
    p.add_argument("--dynamic", action="store_true", help="trace models with symbolic sizes")
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show full tracebacks")
    p.set_defaults(func=cmd_diff)


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
    _add_diff(sub)
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
        p.add_argument("--backend", choices=["aot_eager", "inductor"],
                       help="whose joint graph: AOTAutograd's as traced (aot_eager, the default) or the one "
                            "torch.compile's default backend partitions (inductor); with --logs: the run's own")
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
_EXTRA_ARGS["saved"] = _saved_args


# the Python spellings fxviz's messages use, in the words of this command (a hint names what to type)
_CLI_WORDS = (
    (re.compile(r"\b(?:tr\.)?draw\(group='module', depth=(\d+)\)"), r"--group module --depth \1"),
    (re.compile(r"\b(?:tr\.)?draw\(expand=[^)]*\)"), "--expand MODULE"),
    (re.compile(r"\b(?:tr\.)?draw\(depth=k\)"), "--depth K"),
    (re.compile(r"\b(?:tr\.)?draw\(group='none'\)"), "--group none"),
    (re.compile(r"\bhighlight=\.\.\."), "--highlight NAME"),
    (re.compile(r"\b(?:see |from )?run\.graphs\b"), "'fxviz logs DIR'"),
    (re.compile(r"\buse piece=0\.\.(\d+)"), lambda m: f"use --piece 1..{int(m.group(1)) + 1}"),
    (re.compile(r"\btr\.doctor\(\)"), "'fxviz doctor'"),
    (re.compile(r"\btr\.has_backward\b"), "'fxviz nodes'"),
    (re.compile(r"\btr\.partition\(\.\.\.\)\.error"), "'fxviz table'"),
    (re.compile(r"\btr\.check_gradients\(\)"), "fxviz.trace(model, x).check_gradients() in Python"),
)


def cli_words(text: str) -> str:
    """A message with its Python spellings (``tr.draw(expand=...)``, ``run.graphs``) replaced by
    the options that do the same here (``--expand MODULE``, ``fxviz logs DIR``)."""
    for pattern, words in _CLI_WORDS:
        text = pattern.sub(words, text)
    return text


def _show_warning(message: Warning | str, category: type[Warning], *_args: Any, **_kwargs: Any) -> None:
    """fxviz's warnings as one ``fxviz: warning: ...`` line (no file and line of fxviz's code)."""
    print(_wrap(f"fxviz: warning: {cli_words(str(message))}"), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            warnings.simplefilter("always", FxvizWarning)  # the command's own words, one line each
            return int(args.func(args) or 0)
    except FxvizError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"fxviz: error: {cli_words(exc.message)} (hint: {cli_words(exc.hint)})", file=sys.stderr)
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
