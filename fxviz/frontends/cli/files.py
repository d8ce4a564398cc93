"""The commands that write a file: ``draw`` (SVG/PNG/DOT/PDF) and ``report`` (one self-contained HTML file)."""

from __future__ import annotations

import argparse
import os
import sys

from fxviz.analysis.strategy.strategies import parse_list
from fxviz.core.atomic import check_writable
from fxviz.core.errors import FxvizError, InputError
from fxviz.frontends.cli.log_views import slow_log
from fxviz.frontends.cli.options import DEPTH, GROUP, MEASURE, SOURCE, STRATEGIES, command, opt, output, strategy
from fxviz.frontends.cli.source import from_log, open_run, open_trace, other_compiles, stem
from fxviz.frontends.cli.words import wrap
from fxviz.render.graph.limits import REPORT_BUDGET
from fxviz.render.graph.spec import VIEWS

__all__ = ["cmd_draw", "cmd_report", "piece_number"]



@command("draw", "draw the joint graph or a partition to SVG/PNG/DOT (needs graphviz's dot)", *SOURCE,
         opt("--piece", help="after graph breaks: which graph to draw, 1 to N as the 'graph N of M' labels count "
                             "(default 1), or 'overview' for every graph as one box in execution order"),
         output("file to write: .svg, .png, .dot or .pdf (default MODEL_VIEW.svg)"),
         opt("--view", choices=VIEWS, default="joint",
             help="the joint graph, or the forward/backward graph of --strategy, or the joint graph compared "
                  "(needs --compare), or the flow network min-cut cuts, or every graph as one box (overview)"),
         strategy("mark what this strategy saves/recomputes"),
         opt("--compare", help="a second strategy: mark what each saves that the other does not"),
         opt("--differences", action="store_true",
             help="with --compare: draw only the nodes the two strategies treat differently, with their "
                  "producers and users as context (never in boxes)"),
         GROUP, DEPTH,
         opt("--highlight", action="append", help="emphasise nodes matching a name, op or module (repeatable)"),
         opt("--expand", action="append", help="open a box to show its inside: a module path or a box's name as "
                                               "the drawing shows it (repeatable)"),
         opt("--timeout", type=float, default=120.0, help="seconds graphviz may take (default 120)"))
def cmd_draw(args: argparse.Namespace) -> int:
    """Draw the joint graph (or one side of a partition) to an SVG, PNG or DOT file."""
    if args.output:
        check_writable(args.output)
    tr = open_trace(args)
    name = stem(args)
    if args.piece == "overview" or args.view == "overview":
        drawing = tr.draw("overview", args.strategy)
        path = drawing.save(args.output or f"{name}_overview.svg")
        print(wrap(f"{path}: {drawing!r}"))
        return 0
    log = (tr.capture.origin, other_compiles(args.run, tr)) if args.logs else None
    piece = piece_number(args.piece, len(tr.pieces), log)
    drawing = tr.draw(args.view, strategy=args.strategy, compare=args.compare, group=args.group,
                      depth=args.depth, highlight=args.highlight or None, piece=piece, expand=args.expand,
                      timeout=args.timeout, differences=args.differences)
    view = "differences" if args.differences else args.view
    path = drawing.save(args.output or f"{name}_{view}" + (f"_graph{piece + 1}" if piece else "") + ".svg")
    print(wrap(f"{path}: {drawing!r}"))
    return 0


def piece_number(text: str | None, pieces: int, log: tuple[str, list[str]] | None = None) -> int:
    """``--piece N`` (1-based, as the 'graph N of M' labels count) -> the 0-based ``piece=``;
    ``log``: a log's compile and the run's other compile ids (a log's trace holds that compile's
    graphs; the others are ``--graph``'s)."""
    if text is None:
        return 0
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= pieces and log is not None:
        origin, others = log
        many = "1 graph" if pieces == 1 else f"{pieces} graphs"
        hint = (f"draw another compile with --graph ID (the run's others here: {', '.join(others[:6])}"
                + (", ..." if len(others) > 6 else "") + ")" if others else "the log has no other compile here")
        raise InputError(f"--piece {text} is not a graph of {origin}, which has {many}", hint)
    if not 1 <= n <= pieces:
        raise InputError(f"--piece {text} is not a graph of this model, which has {pieces}",
                         f"pass --piece 1 to {pieces}, or --piece overview for all of them as boxes")
    return n - 1


def _left_out_only(message: str) -> None:
    """The report's progress without --verbose: only what its budget left out (and how to include it)."""
    if message.startswith("left out by the report's budget"):
        print(f"fxviz: report: {message}", file=sys.stderr, flush=True)


@command("report", "a self-contained HTML report: graph views, details, search, memory table, doctor", *SOURCE,
         output("the HTML file to write (default MODEL.html)"), STRATEGIES, GROUP, DEPTH,
         opt("--budget", type=float, default=REPORT_BUDGET,
             help=f"seconds to spend partitioning and drawing beyond the first strategy and the opening view, as "
                  f"estimated from the graph's size (not the clock: the same input gives the same report); what "
                  f"is left out says how to get it (default {REPORT_BUDGET:g}; 0: everything)"),
         opt("-v", "--verbose", action="store_true", help="say what is being computed"), MEASURE)
def cmd_report(args: argparse.Namespace) -> int:
    """Write the self-contained HTML report: graph views per strategy, details, search, memory
    table, doctor's findings; one file that loads nothing from the network."""
    say = (lambda m: print(f"  {m}", file=sys.stderr)) if args.verbose else _left_out_only
    out = args.output
    if out:
        check_writable(out)
    if from_log(args):  # every graph of the run, with a rank and a graph selector, opening on --rank/--graph
        if args.measure:  # the report of a log has no place for the layout text table/saved/doctor print
            raise FxvizError("--measure runs the model's compiled training step, and a log of a run has no model "
                             "to run; what its inductor forward returns for the backward is printed by fxviz table "
                             "--logs DIR --measure",
                             "drop --measure here, or run fxviz table --logs DIR --graph ID --measure")
        run = open_run(args.logs)
        if say is _left_out_only and slow_log(run):  # a big log's report takes a while: what it computes is said
            say = (lambda m: print(f"fxviz: report: {m}", file=sys.stderr, flush=True))  # noqa: E731
        from fxviz.frontends.report.page import report

        path = report(run, out or f"{stem(args)}.html", rank=args.rank, compile_id=args.graph,
                      strategies=parse_list(args.strategies), group=args.group, depth=args.depth, progress=say,
                      budget=args.budget or None)
        print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB")
        return 0
    tr = open_trace(args)
    from fxviz.frontends.report.page import report

    strategies = parse_list(args.strategies) or list(tr.offered)
    path = report(tr, out or f"{stem(args)}.html", strategies=strategies, group=args.group, depth=args.depth,
                  progress=say, budget=args.budget or None, measure=args.measure)
    note = f" ({len(tr.pieces)} graphs: every piece and a whole-model overview)" if len(tr.pieces) > 1 else ""
    print(f"{path}: {os.path.getsize(path) / 1e6:.1f} MB{note}")
    return 0
