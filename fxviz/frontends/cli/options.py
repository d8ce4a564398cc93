"""One way to register a command: ``@command(name, help, *options)`` on the function that runs it; the
options every command shares are defined here once (their choices and help written one time).

Torch-free: ``fxviz --help`` builds every parser from this module and the command modules' decorators.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fxviz.analysis.strategy.strategies import OFFERED, forms_text
from fxviz.frontends.cli.specs import SPEC_FORMS
from fxviz.render.graph.limits import NODE_LIMIT

__all__ = ["Option", "opt", "Command", "COMMANDS", "command", "SOURCE", "strategy", "STRATEGIES", "GROUP",
           "DEPTH", "output", "BACKENDS", "PARAMS", "backend", "params", "DYNAMIC", "DEBUG_HELP", "MEASURE"]

STRATEGY_FORMS = forms_text()
"""Every strategy form, from the one registry (fxviz/analysis/strategy/strategies.py)."""
STEP_DEFAULT = ("what torch.compile does (min_cut; its knapsack budget:B when torch's activation_memory_budget "
                "is below 1; default_partition for aot_function's routes: --params closure, models on the meta device)")
"""What every view shows when no strategy is named (``analysis.choices.step_strategy``), in words."""
DEFAULT_STRATEGIES = (STEP_DEFAULT + " first, then " + ",".join(s.name for s in OFFERED if s.name != "min_cut")
                      + " (from --logs: logged, read from the log's text, and the strategies an earlier view of the "
                        "log kept; naming another rebuilds the graph)")
BACKENDS = ("aot_eager", "inductor")
PARAMS = ("lifted", "closure")
DEBUG_HELP = "show full tracebacks"


@dataclass(frozen=True)
class Option:
    """One ``add_argument`` call, kept as data so commands can share it."""

    flags: tuple[str, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def add(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(*self.flags, **self.kwargs)


def opt(*flags: str, **kwargs: Any) -> Option:
    return Option(flags, kwargs)


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, the function that runs it (returns the exit status), help and options."""

    name: str
    run: Callable[[argparse.Namespace], int]
    help: str
    options: tuple[Option, ...]
    description: str
    epilog: str | None = None


COMMANDS: dict[str, Command] = {}
"""Every command, in the order ``fxviz --help`` lists them (filled by ``@command`` as modules load)."""


def command(name: str, help: str, *options: Option, description: str | None = None, epilog: str | None = None
            ) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register the decorated function as ``fxviz NAME`` with ``options`` (``--debug`` is added to all)."""

    def register(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = Command(name, run, help, options, description or help, epilog)
        return run

    return register


def backend(flag: str = "--backend", help: str | None = None, **kwargs: Any) -> Option:
    return opt(flag, choices=BACKENDS, help=help or (
        "whose joint graph: the one torch.compile's default backend partitions (inductor, the default) or "
        "AOTAutograd's as traced (aot_eager); with --logs: the run's own"), **kwargs)


def params(help: str = "parameters as graph inputs (lifted) or captured as constants (closure)") -> Option:
    return opt("--params", choices=PARAMS, default="lifted", help=help)


DYNAMIC = opt("--dynamic", action="store_true", help="trace with symbolic sizes (torch.compile(dynamic=True))")

SOURCE = (
    opt("model", nargs="?", help=SPEC_FORMS),
    opt("--logs", metavar="DIR", help="read the graph from a TORCH_TRACE log of a real run instead of a model "
                                      "(a directory of per-rank files, or one file)"),
    opt("--rank", type=int, help="with --logs: the rank (default: rank 0, or the first rank that has the graph, "
                                 "said so)"),
    opt("--graph", metavar="ID", help="with --logs: the compile id, e.g. 0/0 (default: the first graph with a "
                                      "backward); 'fxviz logs DIR' lists them"),
    params(),
    backend(),
    DYNAMIC,
    opt("--loss", metavar="FN", help="the loss: a function of the model's output returning a scalar, applied outside "
                                     "the compiled model as in a training step (NAME beside the factory, "
                                     "package.module:NAME or file.py:NAME); default: the model's own .loss when it "
                                     "returns one (a Hugging Face model called with labels=), else the sum of its "
                                     "floating outputs"),
)
"""Where a command's graph comes from: a model (with its loss), or one graph of a logged run."""


def strategy(purpose: str) -> Option:
    """``--strategy``: ``purpose`` and the one sentence on forms and defaults."""
    return opt("--strategy", help=f"{purpose} ({STRATEGY_FORMS}); default: {STEP_DEFAULT}, or logged (what "
                                  "the run saved) with --logs")


STRATEGIES = opt("--strategies", help=f"comma-separated strategies (default: {DEFAULT_STRATEGIES}); forms: "
                                      f"{STRATEGY_FORMS}")
GROUP = opt("--group", choices=["module", "none"], help="cluster by module path (module) or draw every node "
                                                        f"(none); default: modules collapse above {NODE_LIMIT} nodes")
DEPTH = opt("--depth", type=int, help="with module grouping: modules at this depth become one box")


def output(what: str) -> Option:
    return opt("-o", "--output", help=what)

MEASURE = opt("--measure", action="store_true", help="also run the real torch.compile step (a copy of the model, "
                                                    "--backend's compiler) and show what it keeps for the backward "
                                                    "beside the estimate, storage by storage (it compiles: slower)")
