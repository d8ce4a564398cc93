"""Opening what a command reads: a model traced, or a logged run (``--logs``) and one graph of it.

One way to open a log (``open_run``, with the one pre-check that says a missing path before torch loads)
and one check that a command got a model or a log, not both and not neither (``from_log``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from fxviz.api.run import load_logs
from fxviz.core.errors import FxvizError, ModelSpecError
from fxviz.frontends.cli.specs import load_loss, load_spec, parse_spec
from fxviz.frontends.cli.words import wrap
from fxviz.sources.log.reader import log_files
from fxviz.sources.log_source import LogSource

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["open_run", "from_log", "open_trace", "trace_model", "where_in_run", "where_line", "other_compiles",
           "stem", "refuse_measure_log", "logged_at"]


def open_run(path: str, on_compile: Callable[[Any], None] | None = None) -> Any:
    """The ``Run`` of a ``TORCH_TRACE`` directory or file; a missing path is said before torch loads.  Its views
    keep what they work out for the next view of the log (``Run.cache``), and a rebuild that takes a while
    is said on stderr first."""
    log_files(path)
    run = load_logs(path, on_compile=on_compile, cache=True)
    run.progress = _say
    return run


def _say(text: str) -> None:
    print(wrap(f"fxviz: {text}"), file=sys.stderr, flush=True)


def from_log(args: argparse.Namespace) -> bool:
    """True when the command reads ``--logs``; a model and a log, or neither, is an error.  A model
    spec is parsed here, once (``args.spec``): an unknown example name is said before torch loads."""
    if args.logs:
        if args.model:
            raise FxvizError(f"give a model ({args.model}) or --logs, not both", "drop one of them")
        return True
    if not args.model:
        raise ModelSpecError("no model and no --logs",
                             "name a model (e.g. mini_gpt) or pass --logs DIR (see 'fxviz COMMAND --help')")
    args.spec = parse_spec(args.model)
    return False


def open_trace(args: argparse.Namespace) -> Any:
    """The command's ``Trace``: one graph of ``--logs`` (``args.run`` keeps the whole run, for the
    commands that say where the graph sits in it), or the model traced."""
    if not from_log(args):
        return trace_model(args.model, args.params, args.backend, args.dynamic, args.spec, args.loss)
    if args.loss:
        raise FxvizError("--loss applies to a model's outputs; a log holds the graphs its run compiled, loss and all",
                         "drop --loss with --logs")
    run = args.run = open_run(args.logs)
    tr = run.trace(rank=args.rank, compile_id=args.graph)
    args.found_rank = logged_at(tr).rank  # with no --rank: the rank the graph was found on
    if args.backend is not None and args.backend != tr.graph.backend:
        raise FxvizError(f"--backend {args.backend}: the run compiled this graph with {tr.graph.backend} (its log "
                         "says so), and fxviz reads it as the run did", "drop --backend with --logs")
    return tr


def trace_model(model: str, params: str, backend: str | None, dynamic: bool, spec: Any = None,
                loss: str | None = None) -> Any:
    """``fxviz.trace`` of a model spec (parsed already, or parsed here) with the positional and keyword
    inputs its factory returned, and ``--loss`` as ``loss_fn`` (default: the model's own ``.loss``
    when it returns one, as in Python)."""
    loaded = load_spec(spec or parse_spec(model))
    loss_fn = load_loss(loss, loaded) if loss else None
    from fxviz.api.tracing import trace

    return trace(loaded.model, *loaded.args, params=params, backend=backend, dynamic=dynamic, loss_fn=loss_fn,
                 inputs=loaded.kwargs)


def where_in_run(run: Any, tr: Any, rank: int | None = None) -> str:
    """One line: which graph of the run this is, and what else the run holds (a log trace is one
    graph of many: never picked silently); ``rank``: the one asked for (None: none was)."""
    from fxviz.core.graph_facts import input_devices

    return where_line(run, logged_at(tr), tr.graph.backend, input_devices(tr.graph.gm), rank)


def where_line(run: Any, src: LogSource, backend: str, devices: list[str], rank: int | None = None) -> str:
    """:func:`where_in_run` of the graph ``src`` names (compiled by ``backend``, inputs on ``devices``), from
    the run's index alone: a log's own table says it without rebuilding the graph."""
    found = src.rank
    rest = other_compiles(run, src)
    eager = run.eager_frames(found)
    on = [d for d in devices if d != "cpu"]  # a run's device, when not this CPU
    line = f"{src.title}, {src.origin} ({', '.join([backend, *on])}): 1 of {len(rest) + 1} compile(s) on rank {found}"
    if rank is None and len(run.ranks) > 1:
        which = "rank 0's" if found == 0 else "rank 0 has no such graph; the first rank that has it"
        line += f" (no --rank: {which})"
    if eager:
        line += f"; {len(eager)} frame(s) ran as plain Python, outside every graph: " + "; ".join(
            e.split("): ")[0] + ")" for e in eager)
    line += "; 'fxviz logs DIR' lists the whole run and its totals, --graph ID picks another graph"
    if rest:  # named, so --graph has something to pick
        line += f" ({', '.join(rest[:6])}{', ...' if len(rest) > 6 else ''})"
    return line


def logged_at(tr: Trace) -> LogSource:
    """Where a log's graph lies (its ``Capture.source``): a view of a log names it without asking the run."""
    source = tr.capture.source
    if not tr.capture.from_log:
        raise FxvizError("this trace was made from a model, not read from a log", "pass --logs DIR")
    return cast("LogSource", source)


def other_compiles(run: Any, src: Any) -> list[str]:
    """The compile ids of the run on the rank of ``src`` (a log's graph: its ``LogSource``, or a trace of it)
    other than its own, in the log's order."""
    if not isinstance(src, LogSource):
        src = logged_at(src)
    found, compile_id = src.rank, src.compile_id
    ids = dict.fromkeys(str(r["compile_id"]) for r in run.rows() if r["rank"] == found)
    return [c for c in ids if c != compile_id]


def stem(args: argparse.Namespace) -> str:
    """The default output file name: the model's, or ``run_rankN`` for a log (``run`` for a whole run's
    report with no --rank)."""
    if not args.logs:
        return str(args.spec.stem)
    rank = args.rank if args.rank is not None else getattr(args, "found_rank", None)
    return "run" if rank is None else f"run_rank{rank}"


def refuse_measure_log() -> None:
    """``--measure`` with ``--logs``: a log holds the graphs of a run, not a model to run."""
    raise FxvizError("--measure runs the model's compiled training step, and a log of a run has no model to run",
                     "measure the model itself (fxviz table MODEL --backend inductor --measure); the log's own "
                     "forward and backward graphs are what its run saved (strategy logged)")
