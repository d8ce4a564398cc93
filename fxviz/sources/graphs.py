"""What a capture hands on: ``JointGraph`` (one joint graph and every fact about its nodes) and
``Capture`` (the graphs in execution order and how they were made), and ``graph_name`` / ``graph_of``, the
one way a graph number is shown to a person (1-based: "graph 2", "graph 2 of 3").  Every floor above
reads these types; they import no route."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from fxviz.sources.log_source import LogSource
from fxviz.sources.roles import NodeInfo


@dataclass
class JointGraph:
    """One joint graph and everything fxviz knows about its nodes.  Treat as read-only."""

    gm: fx.GraphModule
    has_backward: bool
    num_fwd_outputs: int
    static_lifetime_input_indices: list[int]
    joint_inputs: Any
    info: dict[str, NodeInfo]
    placeholder_values: dict[str, Any]  # placeholder name -> real (or meta) tensor; tangents absent
    constant_values: dict[str, torch.Tensor]  # get_attr target -> the real tensor it stands for
    index: int = 0
    partitioner_caller: str = "torch.compile"  # whose partitioner arguments were recorded
    # where the arguments came from when not traced now ("read from the log; the run's functorch config: ...")
    partitioner_note: str = ""
    # every time the compiled graph ran during capture (dynamo reuses one graph for each call its
    # guards accept): (run number across all graphs, the model state / user input each graph
    # input received, None for a tensor computed at run time).  Empty when not recorded.
    runs: list[tuple[int, list[str | None]]] = field(default_factory=list)
    compiler: str | None = None  # the ``compiler`` argument the partitioner got ("inductor" under inductor)
    backend: str = "aot_eager"  # which torch.compile backend's joint graph this is
    dynamic: bool = False  # traced with symbolic sizes
    before_joint_passes: fx.GraphModule | None = None  # inductor: the graph before its joint-graph passes
    # a graph read from a log: the forward and backward graphs the run itself used (strategy "logged")
    logged: tuple[fx.GraphModule, fx.GraphModule] | None = None
    # inductor's capture: the min-cut torch.compile ran on this graph (forward, backward, seconds, the
    # functorch config it ran under), which strategy ``min_cut`` reuses while that config holds
    captured_min_cut: tuple[fx.GraphModule, fx.GraphModule, float, bytes] | None = None
    # compiled with gradients off (``torch.no_grad()``): a forward graph only, nothing saved for a
    # backward and no gradient expected (a log's ``aot_inference_graph``)
    inference: bool = False
    # run number -> {input index: (run number, output index)}: the inputs an earlier graph run returned
    # (a value crossing a graph break, by identity); input indices are dynamo's (``PlainAOTInput(idx)``)
    run_links: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)
    # input indices whose tensors the step itself made: another graph's output, or what eager code at a
    # break computed: activations of the step, not inputs the caller holds anyway
    crossing: frozenset[int] = frozenset()
    # (run number, output index) when one of this graph's runs returns the step's loss
    loss_output: tuple[int, int] | None = None


@dataclass(frozen=True)
class ModelSource:
    """A model (or a function) traced now, with the inputs fxviz called it with: what can be run again
    (a measurement, an eager probe, advice's changed models)."""

    model: nn.Module | None
    fn: Callable | None
    example_inputs: tuple[Any, ...]
    loss_fn: Callable | None
    reduce: Callable[[Any], torch.Tensor] | None
    input_names: list[str] = field(default_factory=list)


Source = ModelSource | LogSource


@dataclass
class Capture:
    """The result of capturing: the graphs in execution order, how they were made, and their source."""

    graphs: list[JointGraph]
    source: ModelSource | LogSource
    route: str
    params: str
    loss: str
    graph_breaks: list[str]
    warnings: list[str] = field(default_factory=list)  # things a user must know to read the graph
    # Python frames dynamo skipped and ran as plain eager code (``forward (model.py:20)``): what
    # they compute is in no captured graph
    eager_frames: list[str] = field(default_factory=list)
    backend: str = "aot_eager"  # whose joint graph this is: "aot_eager" or "inductor" (torch.compile's default)
    dynamic: bool = False  # traced with symbolic sizes (torch.compile(dynamic=True))
    # functorch's config (activation-memory budget, solver) when the graph was captured: what
    # torch.compile's min-cut would have partitioned with (a budget below 1 is its knapsack)
    torch_budget: tuple[float, str] = (1.0, "dp")
    # a log: the partitioner settings of the run's functorch config its log recorded
    # (activation_memory_budget, its solver and runtime estimator, enable_activation_offloading)
    log_config: dict[str, Any] = field(default_factory=dict)
    # the loss is applied outside the graph (a loss_fn, or the model's own .loss): the graph is the
    # model's, its tangents the gradients of the loss w.r.t. the model's outputs
    loss_outside: bool = False
    # a log: the parameters its graphs name, as meta tensors with the logged shape, dtype and
    # requires_grad (what the doctor and the parameter table read when there is no model)
    state: list[tuple[str, torch.Tensor]] = field(default_factory=list)
    # why this graph is not the one torch.compile's step partitions although fxviz.trace's default would
    # be (a model on the meta device: aot_function over fake tensors): said in every view's title
    # (``title``) and, in full, in the summary; "" when the route is the one asked for
    route_note: str = ""

    # --- the source's facts, read through one door each ---------------------------------------------
    @property
    def from_log(self) -> bool:
        """A graph read from a log of a real run: no model, nothing can be run."""
        return isinstance(self.source, LogSource)

    @property
    def model(self) -> nn.Module | None:
        return self.source.model if isinstance(self.source, ModelSource) else None

    @property
    def fn(self) -> Callable | None:
        return self.source.fn if isinstance(self.source, ModelSource) else None

    @property
    def example_inputs(self) -> tuple[Any, ...]:
        return self.source.example_inputs if isinstance(self.source, ModelSource) else ()

    @property
    def loss_fn(self) -> Callable | None:
        return self.source.loss_fn if isinstance(self.source, ModelSource) else None

    @property
    def reduce(self) -> Callable[[Any], torch.Tensor] | None:
        return self.source.reduce if isinstance(self.source, ModelSource) else None

    @property
    def input_names(self) -> list[str]:
        return list(self.source.input_names)

    @property
    def origin(self) -> str | None:
        """A log's graph: which rank and compile it came from (None for a model)."""
        return self.source.origin if isinstance(self.source, LogSource) else None

    @property
    def backend_label(self) -> str:
        """Which capture the views show, in the words of every caption."""
        label = ("backend='inductor' (torch.compile's default: inductor decompositions and joint-graph passes)"
                 if self.backend == "inductor" else "backend='aot_eager' (AOTAutograd's graph, no inductor passes)")
        return label + (", dynamic shapes" if self.dynamic else "")

    def named_parameters(self) -> list[tuple[str, torch.Tensor]]:
        """The model's parameters, or (a log) the parameters the log describes."""
        return list(self.model.named_parameters()) if self.model is not None else list(self.state)

    @property
    def title(self) -> str:
        """What views call the model: its class, the traced function's name, or a log's frame."""
        if self.model is not None:
            return type(self.model).__name__ + (f" [{self.route_note}]" if self.route_note else "")
        if isinstance(self.source, LogSource):
            return self.source.title
        return getattr(self.fn, "__name__", None) or "function"


INFERENCE_NOTE = "inference only: nothing is saved for a backward"
"""The one line every view shows for a graph compiled with gradients off."""


def graph_name(index: int) -> str:
    """How fxviz names piece ``index`` (0-based, as ``draw(piece=...)`` takes it) to a person: "graph 1"
    is the first, as the piece selector, the CLI's ``--piece``, the memory table and the doctor count."""
    return f"graph {index + 1}"


def graph_of(index: int, total: int) -> str:
    """Piece ``index`` among ``total`` graphs, as every view says it: "graph 2 of 3" (piece selector,
    summary, captions, the CLI's section heads)."""
    return f"{graph_name(index)} of {total}"
