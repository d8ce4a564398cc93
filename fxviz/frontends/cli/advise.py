"""``fxviz advise``: what to change so a step fits a memory target, each option predicted by fxviz's
trace of the changed model, with the code to paste and what the step's peak holds."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from typing import Any

from fxviz.analysis.advice.target import optimizer_bytes, parse_target
from fxviz.core.errors import FxvizError, InputError, LogError
from fxviz.frontends.cli.options import SOURCE, command, opt
from fxviz.frontends.cli.source import from_log, logged_at, open_trace, where_in_run
from fxviz.frontends.cli.words import option_words, wrap
from fxviz.sources.log_source import LogSource

__all__ = ["cmd_advise", "step_trace"]

_BARE = re.compile(r"^\s*[0-9]*\.?[0-9]+\s*$")

_FORMS = ("e.g. --saved 50% (of what the plain step saves), --saved 3GiB or --peak 8GiB (binary units: B, KiB, "
          "MiB, GiB, TiB); --optimizer adam, adamw, sgd or a byte count")

_EPILOG = """examples:
  fxviz advise mini_gpt --saved 50%
  fxviz advise mini_gpt --peak 1.2MiB --optimizer adam --code
  fxviz advise my_model.py:make --saved 3GiB
  fxviz advise --logs /tmp/trace --saved 50%     (a log: its step, every graph with a backward; the budget only)
  fxviz advise --logs /tmp/trace --graph 1/0 --rank 1 --saved 50%   (one graph of the run)"""


@command("advise", "what to change (budget, checkpointing, selective policy) so the step fits a memory target",
         *SOURCE,
         opt("--saved", metavar="TARGET", help="the activations the backward may hold: 50%% (of the plain step's) or "
                                               "a size (3GiB)"),
         opt("--peak", metavar="SIZE", help="the step's peak, parameters, gradients and optimizer state included "
                                            "(8GiB)"),
         opt("--optimizer", help="optimizer state counted in the peak: adam, adamw, sgd or a byte count"),
         opt("--code", action="store_true", help="print every option's code, not only the cheapest's"),
         description="Ranked changes that bring a training step to a memory target: torch's "
                     "activation_memory_budget, torch.utils.checkpoint on named layers, a selective-checkpoint "
                     "policy; the exact optimum as the bound. A model is traced as every command traces it: "
                     "torch.compile's capture (inductor), aot_function's for --params closure and models on "
                     "the meta device.", epilog=_EPILOG)
def cmd_advise(args: argparse.Namespace) -> int:
    """Trace, advise, print the table, the cheapest option's code and the peak's anatomy."""
    is_log = from_log(args)  # a missing model first, as every command says it
    saved, peak, optimizer = _checked_target(args)
    tr = open_trace(args)
    if is_log and not any(g.has_backward for g in tr.capture.graphs):
        _refuse_inference(args.run, tr)  # one line, before any header: nothing to advise on
    step, head = step_trace(args.run, tr, args.rank) if is_log and args.graph is None else (tr, None)
    if head is not None:  # no --graph: the logged step, every graph of it with a backward
        print(wrap(f"{step.capture.title}, {head}") + "\n")
        tr = step
    elif is_log:  # one graph of the run: which one, and that the advice is of it alone
        print(wrap(where_in_run(args.run, tr, args.rank)))
        print(wrap(_one_graph(args.run, tr)) + "\n")
    print(f"{tr.capture.title}: tracing each option ...", file=sys.stderr)
    advice = tr.advise(saved=saved, peak=peak, optimizer=optimizer,
                       progress=lambda what: print(f"  {what}", file=sys.stderr))
    print(advice.text(option_words))
    shown = advice.options if args.code else [advice.cheapest] if advice.cheapest else []
    for o in shown:
        print(f"\n# {o.name}" + (f"  (config: {o.config})" if o.config else ""))
        print(o.code.rstrip())
    print("\n" + advice.plain.text("the plain step's "))
    for o in advice.options:
        if o.meets:
            print("\n" + o.peak.text(f"with {o.name}: "))
    return 0


def _checked_target(args: argparse.Namespace) -> tuple[str | None, str | None, str | int | None]:
    """(saved, peak, optimizer) as advice takes them; a bad target or optimizer said before anything is traced,
    in the command's words."""
    if (args.saved is None) == (args.peak is None):
        raise FxvizError("give one target: --saved or --peak", "e.g. --saved 50% or --peak 8GiB")
    optimizer: str | int | None = args.optimizer
    if isinstance(optimizer, str) and optimizer.isdigit():
        optimizer = int(optimizer)
    for flag, value in (("--saved", args.saved), ("--peak", args.peak)):
        if value is not None and _BARE.match(value):  # 50 is neither 50% nor 50 bytes to a person
            n = value.strip()
            two = f"{flag} {n}% (of what the plain step saves) or {flag} {n}MiB" if flag == "--saved" \
                else f"{flag} {n}GiB or {flag} {n}MiB"
            raise FxvizError(f"{flag} {n}: a number without a unit", f"write {two}")
    try:
        parse_target(args.saved, args.peak)
        optimizer_bytes(optimizer, 0)
    except InputError as exc:
        message = exc.message.replace("saved=", "--saved ").replace("peak=", "--peak ")
        raise FxvizError(message.replace("optimizer=", "--optimizer "), _FORMS) from None
    return args.saved, args.peak, optimizer


def _refuse_inference(run: Any, tr: Any) -> None:
    """A log's graph with no backward: the log has none (inference only: the words ``fxviz diff``
    uses), or other graphs of it have one, named for ``--graph``."""
    src = logged_at(tr)
    rank, compile_id = src.rank, src.compile_id
    g = run.graphs
    having = g[g["backward"].astype(bool)]
    if having.empty:
        raise LogError(f"the log has no graph with a backward ({run.holds()})",
                       "advice is of what a training step saves: log a run that calls backward (on a loss that needs "
                       "gradients, outside torch.no_grad())")
    mine = [str(c) for c in having[having["rank"] == rank]["compile_id"]]
    where = (f"graphs with a backward: --graph {', '.join(mine)}" if mine else
             f"ranks with a backward: --rank {', '.join(str(r) for r in dict.fromkeys(having['rank']))}")
    raise LogError(f"compile {compile_id} on rank {rank} has no backward (inference): it saves nothing to advise on",
                   where)


def _one_graph(run: object, tr: object) -> str:
    """What a log's advice covers: the one graph (``--graph``), not the run's whole step; the other
    graphs with a backward on its rank, by compile id, to advise in turn."""
    src = logged_at(tr)  # type: ignore[arg-type]
    rank, compile_id = src.rank, src.compile_id
    g = run.graphs  # type: ignore[attr-defined]
    others = [str(c) for c in g[(g["rank"] == rank) & g["backward"].astype(bool)]["compile_id"] if str(c) != compile_id]
    if not others:
        return (f"advice on compile {compile_id}, the only graph with a backward on rank {rank}: it covers the "
                "whole step (the tables below call it graph 1)")
    return (f"advice on compile {compile_id} of rank {rank} only (the tables below call it graph 1): its saved "
            "bytes and peak are this graph's, not the "
            f"step's. The run has {len(others)} other graph(s) with a backward there ({', '.join(others)}: graph "
            "breaks, or recompiles), which this advice does not cover; a budget set in the training script applies "
            "to every graph the step compiles. Advise each with --graph ID")


def step_trace(run: Any, tr: Any, rank: int | None = None) -> tuple[Any, str | None]:
    """A ``Trace`` of the logged step of ``tr``'s rank (``run.traces``: each frame's graphs with a
    backward, a shape-variant frame's last compile), its graphs one capture in run order as a model's
    several graphs are (a budget applies to every graph the step compiles), and the line that says which
    compiles it holds; ``(tr, None)`` when the step has one graph."""
    found = logged_at(tr).rank if rank is None else rank
    traces = run.traces(found)
    if len(traces) <= 1:
        return tr, None
    ids = [logged_at(t).compile_id for t in traces]
    head = (f"advice on the logged step of rank {found}: its {len(traces)} graphs with a backward (compiles "
            f"{', '.join(ids)}), in the order the step runs them (the tables below call them graphs 1 "
            f"{'and' if len(traces) == 2 else 'to'} {len(traces)}); --graph ID advises on one of them")
    note = run.step_note(found)
    from fxviz.sources.log.rebuild.crossing import logged_crossing  # torch: not on the CLI's help path

    # after the first graph, an input whose gradient the backward returns is a tensor the step made
    graphs = [dataclasses.replace(t.graph, index=i, crossing=logged_crossing(t.graph) if i else frozenset())
              for i, t in enumerate(traces)]
    warnings = list(dict.fromkeys(w for t in traces for w in t.capture.warnings))
    state = list({n: v for t in traces for n, v in t.capture.state}.items())
    first = traces[0].capture
    # the step's figures are kept under all its graphs' keys
    keys = tuple(k for t in traces if isinstance(t.capture.source, LogSource) for k in t.capture.source.keys)
    source = dataclasses.replace(first.source, keys=keys) if isinstance(first.source, LogSource) else first.source
    cap = dataclasses.replace(first, graphs=graphs, state=state, warnings=warnings, source=source)
    return type(tr)(cap), head + (f". {note}" if note else "")
