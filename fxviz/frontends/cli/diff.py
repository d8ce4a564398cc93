"""``fxviz diff``: what one side saves for the backward that the other does not.  Each side (A, B) is a
model or one graph of a logged run; this module decides which, and opens each once."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import Blank, Do, FxvizError, ModelSpecError, spelled
from fxviz.frontends.cli.log_views import say_partitions
from fxviz.frontends.cli.options import DYNAMIC, backend, command, opt, params
from fxviz.frontends.cli.source import logged_at, open_run, trace_model
from fxviz.frontends.cli.words import option_words, wrap

__all__ = ["cmd_diff", "Sides"]

DIFF_HELP = "what one run or model saves for the backward that another does not, value by value, and why"
DIFF_EXAMPLES = """\
each side (A, then B) is a model (an example name, package.module:factory or file.py:factory) or a
TORCH_TRACE log directory (--logs-a/--logs-b DIR, or --logs DIR for both sides of one log); a side
with no model and no log of its own is A again (one model under two strategies or backends).

examples:
  fxviz diff --logs-a plain_trace/ --logs-b checkpointed_trace/   two runs' whole steps
  fxviz diff --logs trace/ --rank-a 0 --rank-b 1                   two ranks of one run
  fxviz diff --logs trace/ --graph-a 0/0 --graph-b 1/0             two compiles of one log
  fxviz diff mlp --strategy-a eager --strategy-b default            eager vs a partition
  fxviz diff mlp --backend-a aot_eager --strategy-a default --strategy-b min_cut
                                        aot_function's partition vs torch.compile's step
  fxviz diff mymodels.py:plain mymodels.py:checkpointed             two models
strategies default to each side's own default: logged for a log, what torch.compile does (min_cut)
for a model; B takes A's --strategy-a when it is another trace and has no --strategy-b.
a side with several graphs (graph breaks, or a log without --graph) is compared as a whole step: its
graphs are paired with the other side's by the parameters and modules they hold."""


def _side_options(s: str) -> list[Any]:
    S = s.upper()
    return [
        opt(f"--logs-{s}", metavar="DIR", help=f"side {S} from this TORCH_TRACE log"),
        opt(f"--rank-{s}", type=int, metavar="N", help=f"with a log: side {S}'s rank (default 0, or the first rank "
                                                       "that logged a graph with a backward)"),
        opt(f"--graph-{s}", metavar="ID", help=f"with a log: side {S}'s compile id, e.g. 0/0 (default: every graph "
                                               "with a backward, the whole step)"),
        opt(f"--strategy-{s}", metavar="S", help=f"side {S}'s strategy (default: "
            + ("A's when B is another trace, else " if s == "b" else "")
            + "logged for a log, what torch.compile does for a model)"),
        backend(f"--backend-{s}", help=f"side {S}'s capture backend"),
    ]


class Sides:
    """The two sides of a diff as the arguments name them: each side's log (its own, or ``--logs``) or
    model (the positional models fill the sides without a log, in order; B without either is A again)."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.log = {s: getattr(args, f"logs_{s}") or args.logs for s in ("a", "b")}
        self.model = self._models()
        self._cache: dict[Any, Any] = {}

    def _models(self) -> dict[str, str | None]:
        models = list(self.args.models)
        chosen = {s: None if self.log[s] else (models.pop(0) if models else None) for s in ("a", "b")}
        if models:
            raise FxvizError(f"fxviz diff got more models than sides without a log: {' '.join(models)}",
                             "give two models, or one model and one --logs-a/--logs-b, or --logs DIR alone")
        if chosen["a"] is None and not self.log["a"]:
            raise ModelSpecError("fxviz diff has nothing to compare: no model and no --logs",
                                 "e.g. fxviz diff --logs-a DIR1 --logs-b DIR2, or fxviz diff MODEL_A MODEL_B")
        if chosen["b"] is None and not self.log["b"]:
            if chosen["a"] is None:  # A is a log and B is nothing
                raise ModelSpecError("fxviz diff has no B side: --logs-a names A's log, and there is no --logs-b "
                                     "and no model", "add --logs-b DIR2 (or a model), or use --logs DIR with "
                                     "--graph-a/--graph-b or --strategy-b to compare within one log")
            chosen["b"] = chosen["a"]  # B is A again: the same model under another strategy or backend
        for s in ("a", "b"):
            if not self.log[s] and (getattr(self.args, f"rank_{s}") is not None or getattr(self.args, f"graph_{s}")):
                raise FxvizError(f"--rank-{s}/--graph-{s} choose a graph of a log, and that side has no log",
                                 f"add --logs-{s} DIR (or --logs DIR for both sides)")
        return chosen

    def label(self, s: str) -> str:
        """A side's name: the log and, for a whole step of a log with several ranks, the rank it read
        (two ranks of one log read alike otherwise); one graph's own title names its rank and compile."""
        if self.log[s] is None:
            return f"model {self.model[s]}"
        traced, run = self.trace(s), self._cache["run", self.log[s]]
        if isinstance(traced, list) and len(traced) > 1 and len(run.ranks) > 1:
            return f"log {self.log[s]}, rank {logged_at(traced[0]).rank}"
        return f"log {self.log[s]}"

    def step_note(self, s: str) -> Any:
        """``Run.step_note`` for a side that is a log's whole step (None otherwise)."""
        if self.log[s] is None or not isinstance(self.trace(s), list):
            return None
        return self._cache["run", self.log[s]].step_note(getattr(self.args, f"rank_{s}"))

    def trace(self, s: str) -> Any:
        """Side ``s``'s ``Trace``; a log is read once, and a (log, rank, graph) or (model, backend) traced once."""
        args, log = self.args, self.log[s]
        if log is not None:
            if ("run", log) not in self._cache:
                self._cache["run", log] = open_run(log)
            key: tuple[Any, ...] = ("log", log, getattr(args, f"rank_{s}"), getattr(args, f"graph_{s}"))
            if key not in self._cache:  # no graph named: the rank's whole step (every graph with a backward)
                run = self._cache["run", log]
                self._cache[key] = run.traces(key[2]) if key[3] is None else run.trace(rank=key[2], compile_id=key[3])
            return self._cache[key]
        model = self.model[s]
        assert model is not None
        chosen = getattr(args, f"backend_{s}") or args.backend
        key = ("model", model, chosen)
        if key not in self._cache:
            self._cache[key] = trace_model(model, args.params, chosen, args.dynamic)
        return self._cache[key]


def _side_words(s: str) -> Callable[[Do], str]:
    """The command's words, a log's compile chosen per side (``--graph-b 0/1``, not ``--graph``)."""
    def words(do: Do) -> str:
        if do.call == "trace" and do.args and do.args[0][0] == "compile_id" and isinstance(do.args[0][1], Blank):
            return f"--graph-{s} {do.args[0][1].cli}"
        return option_words(do)
    return words


@command("diff", DIFF_HELP, opt("models", nargs="*", metavar="MODEL", help="a model per side without a log (A first)"),
         opt("--logs", metavar="DIR", help="one TORCH_TRACE log for both sides (pick graphs with --rank-a/-b, "
                                           "--graph-a/-b)"),
         *_side_options("a"), *_side_options("b"),
         backend(help="both sides' capture backend (default: torch.compile's, inductor)"),
         params("as for the other commands"),
         DYNAMIC, description=DIFF_HELP + ".", epilog=DIFF_EXAMPLES)
def cmd_diff(args: argparse.Namespace) -> int:
    """Compare two sides: the summary (totals, the change, the top differences), then the table."""
    sides = Sides(args)
    a, b = sides.trace("a"), sides.trace("b")
    for side, named in ((a, args.strategy_a), (b, args.strategy_b or args.strategy_a)):
        if named:  # a partition of a big logged graph takes a while: said first (issue 46)
            say_partitions(side, [Strategy.parse(named)])
    from fxviz.api.diffing import diff

    d = diff(a, b, args.strategy_a, args.strategy_b, labels=(sides.label("a"), sides.label("b")))
    print(d.summary())
    for s in ("a", "b"):  # a whole step of a log with recompiles: which compile of each frame it took
        note = sides.step_note(s)
        if note:
            print(wrap(f"{s.upper()}: {spelled(note, _side_words(s))}"))
    print()
    print(d.table_text())
    return 0
