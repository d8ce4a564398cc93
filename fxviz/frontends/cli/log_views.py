"""The views of a log that need no rebuild (issue 46): ``fxviz table --logs`` and ``fxviz saved --logs`` of
the run's own partition, read from the log's text (``Run.logged``) with what earlier views kept, without
importing torch; and, where a view rebuilds after all, the line that says so on stderr and the answers kept
for the next view."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fxviz.analysis.strategy.strategies import Strategy, parse_list
from fxviz.api.logged import PARTITION_SECONDS_PER_NODE, REBUILD_SECONDS_PER_NODE
from fxviz.core.errors import FxvizError
from fxviz.frontends.cli.source import open_run, where_line
from fxviz.frontends.cli.words import cli_text, wrap
from fxviz.sources.log.light.text import Declined

__all__ = ["table_from_text", "saved_from_text", "say_partitions", "keep_table", "keep_fates", "slow_log"]


def _view(args: argparse.Namespace) -> Any:
    """The log's graph read from its text (None where the text is not enough: said on stderr)."""
    run = args.run = open_run(args.logs)
    try:
        view = run.logged(rank=args.rank, compile_id=args.graph)
    except Declined as exc:
        _declined(exc)
        return None
    args.found_rank = view.source.rank
    if getattr(args, "backend", None) is not None and args.backend != view.piece.backend:  # as open_trace says it
        raise FxvizError(f"--backend {args.backend}: the run compiled this graph with {view.piece.backend} (its log "
                         "says so), and fxviz reads it as the run did", "drop --backend with --logs")
    return view


def _declined(exc: Declined) -> None:
    if "no forward graph" not in exc.message:  # (an inference graph: nothing to say)
        print(wrap(f"fxviz: {exc.message}: rebuilding it"), file=sys.stderr)


def table_from_text(args: argparse.Namespace, print_table: Any, print_knapsack: Any) -> bool:
    """``fxviz table --logs`` from the log's text: the ``logged`` row and the rows kept by earlier views (or
    the ``--strategies`` named, when each is one of them); False when the graph must be rebuilt."""
    view = _view(args)
    if view is None:
        return False
    try:
        df = view.memory_table(parse_list(args.strategies))
    except Declined as exc:  # the graphs' text is read when first asked
        _declined(exc)
        return False
    if df is None:
        return False
    print(wrap(where_line(args.run, view.source, view.piece.backend, view.devices, args.rank)))
    df.attrs["caption"] = cli_text(df.attrs["caption"])
    print_table(df, args.exact)
    print_knapsack(args.run, view.source)
    return True


def saved_from_text(args: argparse.Namespace) -> bool:
    """``fxviz saved --logs`` of strategy ``logged`` from the log's text, with a column for each strategy
    whose fates an earlier view kept (or each ``--compare`` one, when kept); False when the graph must be
    rebuilt."""
    from fxviz.render.text.saved_view import saved_text

    if args.strategy not in (None, "logged") or args.by_module:
        return False
    view = _view(args)
    if view is None:
        return False
    compare = None if args.compare is None else [s.name for s in parse_list(args.compare) or []]
    kept = view.entry.get("fates", {})
    if compare is not None and any(c not in kept and c != "logged" for c in compare):
        return False
    try:
        df = view.saved(compare)
    except Declined as exc:
        _declined(exc)
        return False
    name = view.source.title
    if args.kind:
        shown = df[df["kind"] == args.kind]
        shown.attrs = dict(df.attrs)
        df, name = shown, f"{name} [{args.kind} rows only]"
    df.attrs["caption"] = cli_text(df.attrs["caption"])
    print(saved_text(df, name, top=args.top))
    if view.layers:  # what is said once for a stack of identical layers (issue 46)
        print(wrap(f"identical layers (same ops, shapes and source lines): {view.layers}"))
    others = [s.name for s in view.offered if s.name != "logged" and s.name not in kept]
    if others and compare is None and view.piece.joint is not None:
        cost = max(view.nodes * (REBUILD_SECONDS_PER_NODE + PARTITION_SECONDS_PER_NODE * len(others)), 1)
        print(wrap(f"what the other strategies do with each value ({', '.join(others)}) needs the joint graph rebuilt "
                   f"on fake tensors, about {cost:.0f} s here, then kept for later views: --compare "
                   + ",".join(others)))
    return True


def say_partitions(tr: Any, strategies: list[Strategy]) -> None:
    """Partition a rebuilt log graph (a trace, or a step's list of them) with each of ``strategies`` in turn,
    each said on stderr first when the graph is big enough for it to take a while (the views then read them
    from the trace's cache).  A model's trace is left to the view."""
    for one in tr if isinstance(tr, list) else [tr]:
        if not one.capture.from_log or not one.graph.has_backward:
            continue
        nodes = len(one.graph.info)
        for s in strategies:
            if s.name != "logged" and nodes * PARTITION_SECONDS_PER_NODE > 2:
                print(wrap(f"fxviz: partitioning with {s.name}, about {nodes * PARTITION_SECONDS_PER_NODE:.0f} s "
                           "..."), file=sys.stderr, flush=True)
            one.partition(s)


def slow_log(run: Any) -> bool:
    """Whether a graph of ``run`` takes more than a couple of seconds to rebuild (then views say what they do)."""
    nodes = max((r["nodes"] or 0 for r in run.rows()), default=0)
    return nodes * REBUILD_SECONDS_PER_NODE > 2


def _kept_view(args: argparse.Namespace, tr: Any) -> Any:
    """The text view of a rebuilt trace's graph, to keep its answers in (None: nothing kept)."""
    run = getattr(args, "run", None)
    if run is None or run.cache is None:
        return None
    src = tr.capture.source
    try:
        return run.logged(rank=src.rank, compile_id=src.compile_id, piece=src.piece)
    except Declined:
        return None


def keep_table(args: argparse.Namespace, tr: Any, df: Any) -> None:
    """Keep a rebuilt log graph's memory-table rows for the next view."""
    view = _kept_view(args, tr)
    if view is not None:
        view.keep_table(df)


def keep_fates(args: argparse.Namespace, tr: Any, strategies: list[Strategy]) -> None:
    """Keep what each of ``strategies`` does with every value (a rebuilt log graph's partitions)."""
    view = _kept_view(args, tr)
    if view is None:
        return
    for s in strategies:
        p = tr.partition(s)
        offloaded = [m.wraps for m in p.made.values() if m.kind == "offloaded" and m.wraps]
        view.keep_fates(s.name, p.saved, sorted(p.recomputed), offloaded, p.error)
