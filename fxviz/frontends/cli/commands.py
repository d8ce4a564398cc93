"""The commands that print what a trace holds: ``nodes``, ``table``, ``saved``, ``doctor``, ``code``, ``demo``.

Each imports torch (through fxviz's analysis) only when it runs, so ``fxviz --help`` stays torch-free.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from fxviz.analysis.strategy.strategies import Strategy, parse_list
from fxviz.core.errors import FxvizError
from fxviz.core.units import format_bytes
from fxviz.frontends.cli.log_views import keep_fates, keep_table, saved_from_text, say_partitions, table_from_text
from fxviz.frontends.cli.options import MEASURE, SOURCE, STRATEGIES, command, opt, strategy
from fxviz.frontends.cli.source import from_log, logged_at, open_trace, refuse_measure_log, where_in_run
from fxviz.frontends.cli.words import WIDTH, cli_text, fitted, wrap
from fxviz.sources.log.layout import read_logged_layout

__all__ = ["cmd_nodes", "cmd_table", "cmd_saved", "cmd_doctor", "cmd_code", "cmd_demo", "doctor_text"]


def _in_cli_words(df: Any) -> Any:
    """A table whose caption says what to do in this command's words (the table itself is not copied)."""
    caption = df.attrs.get("caption")
    if caption is None:
        return df
    out = df.copy(deep=False)
    out.attrs = {**df.attrs, "caption": cli_text(caption)}
    return out


def doctor_text(report: Any) -> str:
    """The doctor's report as the terminal shows it, each finding's message and fix in this command's words."""
    d = report.diagnosis
    findings = [replace(f, message=cli_text(f.message), fix=cli_text(f.fix)) for f in d.findings]
    return str(type(report)(replace(d, findings=findings)))


def _measure(tr: Any, args: argparse.Namespace) -> Any:
    """``--measure``: the real step, measured (``Trace.measure()``); None without the flag."""
    if not getattr(args, "measure", False):
        return None
    if tr.capture.from_log:
        print(wrap(_logged_layout(tr, args.run)))
        return None
    print(wrap(f"measuring: torch.compile(backend={tr.capture.backend!r}) of a copy of the model, one training "
               "step with saved-tensor hooks ..."), flush=True)
    return tr.measure()


def _logged_layout(tr: Any, run: Any) -> str:
    """``--measure --logs``: no model to run; what the log's inductor forward (post-grad graph and
    output code) says of copies it returns for the backward, or a refusal where the log has neither."""

    src = logged_at(tr)
    found = read_logged_layout(src.file, src.compile_id, src.piece)
    if found is None:
        refuse_measure_log()
    assert found is not None
    names = {c.value: tr.graph.info[c.value].qualname for c in found.copies if c.value in tr.graph.info}
    return ("--measure: a log has no model, so no step is run; what the log's post-grad graph and output code "
            f"tell instead: {found.text(names)}.")


def _measured_text(measured: Any) -> str:
    from fxviz.render.text.measured_view import measured_text

    return cli_text(measured_text(measured, WIDTH))


@command("table", "the memory table: saved bytes, recompute cost and peaks per strategy", *SOURCE, STRATEGIES,
         opt("--exact", action="store_true", help="exact integers instead of KiB/MiB/GiB"), MEASURE)
def cmd_table(args: argparse.Namespace) -> int:
    """The memory table: what each strategy saves (storage-aware bytes), recomputes and peaks at
    (--measure: beside what the real compiled step keeps).  A log's own partition (and what earlier views of
    the log kept) is read from its text, without torch; another strategy rebuilds the graph."""
    if from_log(args) and not args.measure and table_from_text(args, _print_table, _print_knapsack):
        return 0
    tr = open_trace(args)  # argument errors first, before torch loads
    measured = _measure(tr, args)
    strategies = parse_list(args.strategies)
    if measured is not None and strategies is not None and measured.strategy not in [s.name for s in strategies]:
        strategies.append(Strategy.parse(measured.strategy))  # the twin needs its row
    if getattr(args, "run", None) is not None:
        print(wrap(where_in_run(args.run, tr, args.rank)))
    for piece in tr.pieces:
        _print_piece_table(args, piece, strategies, measured if len(tr.pieces) == 1 else None, len(tr.pieces))
    if getattr(args, "run", None) is not None:
        _print_knapsack(args.run, logged_at(tr))
    if len(tr.pieces) > 1:
        whole = tr.memory_table(strategies, scope="step", measured=measured)
        totals = whole[whole["piece"] == "total"].drop(columns=["piece", "runs"]).reset_index(drop=True)
        totals.attrs = dict(whole.attrs)
        print(f"== whole model: {len(tr.pieces)} graphs, each counted as often as it ran")
        _print_table(totals, args.exact)
    if measured is not None:
        print()
        print(_measured_text(measured))
    return 0


def _print_piece_table(args: argparse.Namespace, piece: Any, strategies: list[Strategy] | None, measured: Any,
                       pieces: int) -> None:
    """One graph's memory table (of ``pieces``; a log's partitions said as they run and kept for the next view),
    or why a forward-only graph has none."""
    from fxviz.core.graph_facts import joint_node_count
    from fxviz.sources.graphs import INFERENCE_NOTE, graph_of

    if pieces > 1:
        print(f"== {graph_of(piece.graph.index, pieces)}")
    if piece.graph.inference:  # a forward graph only: no strategy has anything to partition
        print(wrap(f"{piece.capture.title}: forward graph of {joint_node_count(piece.graph.info.values())} nodes; "
                   f"{INFERENCE_NOTE}"))
        return
    if args.logs:
        say_partitions(piece, list(strategies or piece.offered))
    df = piece.memory_table(strategies, scope="graph", measured=measured)
    _print_table(df, args.exact)
    if args.logs:
        keep_table(args, piece, df)


def _print_knapsack(run: Any, src: Any) -> None:
    """The run's own knapsack under the table, when its log holds one (``Run.knapsack``; ``src``: the
    graph's ``LogSource``)."""
    rank, compile_id, piece = src.rank, src.compile_id, src.piece
    df = run.knapsack(rank, compile_id, piece)
    if df is None:
        return
    from fxviz.render.text.table import fitted_text

    print()
    print(wrap(df.attrs["caption"], indent=""))  # a paragraph, not an item with a hanging indent
    shown = df.round({"budget_share": 3}).assign(
        bytes=df["bytes"].map(lambda b: format_bytes(int(b)) if b == b and b is not None else ""),
        runtime=df["runtime"].map(lambda r: f"{r:g}" if r == r and r is not None else ""))
    print(fitted_text(shown, WIDTH))


def _print_table(df: Any, exact: bool) -> None:
    """A memory table: in KiB/MiB/GiB with its caption, or (``--exact``) every integer as it is."""
    if exact:
        import pandas as pd

        with pd.option_context("display.width", 250, "display.max_columns", None):
            print(pd.DataFrame(df).drop(columns=["error", "measured_reason"], errors="ignore").to_string(index=False))
        for r in df.index[df["measured_reason"].notna()] if "measured_reason" in df else []:
            print(wrap(f"measured - estimated ({df.loc[r, 'strategy']}): {df.loc[r, 'measured_difference_bytes']} "
                       f"B; {df.loc[r, 'measured_reason']}"))
        return
    from fxviz.render.text.table import memory_table_text

    print(memory_table_text(_in_cli_words(df)))


@command("saved", "what the backward reads from the forward, biggest first, per value or per module", *SOURCE,
         strategy("partition strategy"),
         opt("--by-module", action="store_true", help="saved activation bytes per module instead"),
         opt("--depth", type=int, help="with --by-module: the level of the model's structure (default: the "
                                       "level the drawing collapses to)"),
         opt("--top", type=int, default=20, help="rows to show, biggest first (default 20; 0: all)"),
         opt("--kind", choices=["activation", "parameter", "input", "symint"],
             help="only the values of this kind (e.g. activation: leave out the resident parameters)"),
         opt("--compare", help="comma-separated strategies whose fate of each value is shown beside it (default: the "
                               "offered ones; with --logs, those an earlier view of the log computed)"), MEASURE)
def cmd_saved(args: argparse.Namespace) -> int:
    """What the backward reads from the forward, biggest first: each value's kind, module, op in
    plain words, tensor and storage-aware bytes, and what the other strategies do with it
    (--by-module: saved activation bytes per module; --measure: what the real step holds of each)."""
    if args.top < 0:  # argument errors before anything is traced
        raise FxvizError(f"--top must be 0 (all rows) or more, not {args.top}", "pass --top 10")
    if args.measure and args.by_module:
        raise FxvizError("--measure marks each saved value, and --by-module sums them per module",
                         "drop one: fxviz saved MODEL --measure")
    if from_log(args) and not args.measure and saved_from_text(args):
        return 0
    tr = open_trace(args)
    measured = _measure(tr, args)
    # the marks say what the step holds of the partition it used: that partition, unless one is named
    chosen = args.strategy or (measured.strategy if measured is not None else None)
    from fxviz.analysis.graph.pieces import piece_facts
    from fxviz.render.text.saved_view import by_module_text
    from fxviz.sources.graphs import graph_name

    facts = piece_facts(tr.capture)
    for piece in tr.pieces:
        title = tr.capture.title
        name = title if len(tr.pieces) == 1 else f"{title}, {graph_name(piece.graph.index)} of {len(tr.pieces)}"
        runs = len(facts.runs_of(piece.graph.index))
        name += f" (ran {runs} times: one such set per run)" if runs > 1 else ""
        if not piece.graph.has_backward:
            print(f"{name}: no backward graph: nothing is saved")
            continue
        if args.by_module:
            print(by_module_text(piece.saved(args.strategy, compare=[]).by_module(args.depth), name))
        else:
            print(_saved_values_text(args, piece, name, chosen, measured))
        if len(tr.pieces) > 1:
            print()
    if measured is not None:
        print()
        print(_measured_text(measured))
    return 0


def _saved_values_text(args: argparse.Namespace, piece: Any, name: str, chosen: str | None, measured: Any) -> str:
    """One graph's saved table (``--compare`` fates beside it, ``--kind`` rows only); a log's partitions said as
    they run and their fates kept for the next view."""
    from fxviz.render.text.saved_view import saved_text

    compare = parse_list(args.compare)
    if args.logs and compare:
        say_partitions(piece, compare)
    df = piece.saved(chosen, compare=compare, measured=measured)
    if args.logs:
        keep_fates(args, piece, [s for s in compare or piece.offered if s.name != df.attrs["strategy"]])
    if args.kind:
        kept = df[df["kind"] == args.kind]
        kept.attrs = dict(df.attrs)
        df, name = kept, f"{name} [{args.kind} rows only]"
    return saved_text(_in_cli_words(df), name, top=args.top)


@command("doctor", "why parameters get no gradient (exit 1 when one that requires grad gets none)", *SOURCE,
         strategy("the partition whose backward graph is checked for dropped gradients"), MEASURE)
def cmd_doctor(args: argparse.Namespace) -> int:
    """Why parameters get no gradient: exit status 0 when healthy, 1 when a parameter that
    requires grad gets none (--measure: also what the real step keeps beyond the partition)."""
    tr = open_trace(args)
    report = tr.doctor(strategy=args.strategy, measured=_measure(tr, args))
    if args.logs:  # one compile of the run is checked: which, and the others to check with --graph
        print(wrap(where_in_run(args.run, tr, args.rank)))
    print(fitted(doctor_text(report)))
    return 0 if report.healthy else 1


@command("code", "a partition's forward or backward graph as Python with real names", *SOURCE,
         opt("--part", choices=["forward", "backward", "joint"],
             help="which graph to print (default: backward; forward for an inference-only graph)"),
         strategy("partition strategy"))
def cmd_code(args: argparse.Namespace) -> int:
    """Print a partition's forward or backward graph (or the joint graph) as runnable Python."""
    tr = open_trace(args)
    from fxviz.sources.graphs import graph_of

    for piece in tr.pieces:
        if len(tr.pieces) > 1:
            print(f"# ===== {graph_of(piece.graph.index, len(tr.pieces))}")
        # an inference-only graph has no backward: its forward graph is what there is to print
        part = args.part or ("forward" if piece.graph.inference else "backward")
        print(piece.code(part, strategy=args.strategy))
    return 0


@command("nodes", "role counts and the parameter table of the joint graph", *SOURCE)
def cmd_nodes(args: argparse.Namespace) -> int:
    """Role counts and the parameter table of a model's joint graph."""
    tr = open_trace(args)
    if args.logs:  # one compile of the run: which, and the others to show with --graph
        print(wrap(where_in_run(args.run, tr, args.rank)))
    print(fitted(cli_text(tr.summary())))
    print()
    params = tr.parameters()
    if len(params):
        from fxviz.render.text.table import fitted_text

        print(fitted_text(params, WIDTH, drop=("dtype", "graph_role")))
    for piece in tr.pieces[1:]:
        print()
        print(fitted(cli_text(piece.summary())))
    return 0


@command("demo", "the founding story on the built-in AlexNet: parameters lifted vs captured as constants")
def cmd_demo(args: argparse.Namespace) -> int:
    """The founding story on the built-in AlexNet: parameters lifted vs captured as constants."""
    from fxviz.api.tracing import trace
    from fxviz.examples import alexnet

    model, inputs = alexnet()
    print("== AlexNet, parameters lifted to graph inputs (what torch.compile does)")
    good = trace(model, *inputs)
    print(cli_text(good.summary()))
    checked = good.check_gradients()
    print(f"  check_gradients: {int(checked['ok'].sum())}/{len(checked)} parameters match eager autograd "
          f"(max |diff| {checked['max_abs_diff'].max():.3g})")
    print()
    print("== AlexNet, parameters captured as constants (aot_function on a closure: the original story)")
    bad = trace(model, *inputs, params="closure")
    print(cli_text(bad.summary()))
    checked = bad.check_gradients()
    print(f"  check_gradients: {int(checked['has_gradient'].sum())}/{len(checked)} parameters get a gradient")
    print()
    print("== the doctor on the closure trace")
    print(doctor_text(bad.doctor()))
    return 0

