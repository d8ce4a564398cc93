"""One logged graph read by the light tier: its joint, forward and backward graphs parsed from the log's
text (each once, when first asked), its inputs' roles and real names, each forward op's module, and the
run's own partition's facts (``logged``).  What ``Run.logged`` hands to a view that needs no rebuild.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from fxviz.sources.log.guards import Guards, read_guards
from fxviz.sources.log.index import Compile, Piece
from fxviz.sources.log.light.layers import LayerKind, identical_layers
from fxviz.sources.log.light.logged import LoggedFacts, logged_facts, num_fwd, tangent_names, traced_phases
from fxviz.sources.log.light.modules import place_modules
from fxviz.sources.log.light.nodes import LightGraph, annotation
from fxviz.sources.log.light.text import Declined, parse_text
from fxviz.sources.log.names import def_names, input_names, placeholder_roles, returned_names
from fxviz.sources.log.reader import read_payload
from fxviz.sources.log.run_config import run_config_text
from fxviz.sources.log_source import LogSource

__all__ = ["LightPiece", "Checkpointed"]

_LIFTED = ("parameter", "buffer")


@dataclass(frozen=True)
class Checkpointed:
    """A joint op's checkpoint facts, as a rebuilt node's ``NodeInfo`` holds them (the caption counts them)."""

    checkpoint_region: int | None
    checkpoint_policy: str | None


class LightPiece:
    """Piece ``p`` of compile ``c``, read from the log's text (see the module docstring).  Raises
    ``Declined`` (when asked for a graph or fact) where the text holds what the light tier does not read."""

    def __init__(self, c: Compile, p: Piece) -> None:
        self.compile, self.piece = c, p
        if "aot_forward_graph" not in p.offsets:
            raise Declined("the log holds no forward graph of it (an inference graph, or a cache hit's)")
        if p.damaged:
            raise Declined("its text does not match the md5 torch wrote for it")
        self.source = LogSource(file=c.file, rank=c.rank, compile_id=c.compile_id, piece=c.pieces.index(p),
                                pieces=len(c.pieces), frame=c.frame or "compiled frame",
                                torch_version=c.torch_version or None)

    def _graph(self, kind: str) -> LightGraph:
        return parse_text(read_payload(self.compile.file, self.piece.offsets[kind]))

    @functools.cached_property
    def joint(self) -> LightGraph | None:
        """The joint graph (None when the log holds the forward graph alone)."""
        return self._graph("aot_joint_graph") if "aot_joint_graph" in self.piece.offsets else None

    @functools.cached_property
    def forward(self) -> LightGraph:
        g = self._graph("aot_forward_graph")
        if not any(n.desc for n in g.placeholders):
            raise Declined("its graphs carry no AOT descriptors (a torch older than 2.9 wrote it)")
        return g

    @functools.cached_property
    def backward(self) -> LightGraph | None:
        """The run's backward graph (None when it was never logged: the run stopped before it)."""
        return self._graph("aot_backward_graph") if "aot_backward_graph" in self.piece.offsets else None

    @property
    def graph(self) -> LightGraph:
        """The graph views describe: the joint, else the forward graph alone."""
        return self.joint if self.joint is not None else self.forward

    @property
    def missing(self) -> str | None:
        """What the log lacks of this graph, in words (None: joint, forward and backward are all there)."""
        if self.backward is not None and self.joint is not None:
            return None
        if self.joint is None and self.backward is not None:
            return ("the log holds no joint graph of it (AOTAutograd's cache gave its forward and backward graphs): "
                    "the row is what its forward returns for the backward; the backward's columns need the joint")
        lacks = " and ".join(w for w, g in (("joint", self.joint), ("backward", self.backward)) if g is None)
        return (f"the log holds no {lacks} graph of it (the run stopped before its backward was compiled, or another "
                "tool wrote the log): the row is what its forward returns for the backward, whose columns are empty")

    @functools.cached_property
    def _dynamo(self) -> tuple[list[str], dict[int, str]]:
        """dynamo's input names and output names, as the rebuild reads them (none for a split compile)."""
        c = self.compile
        if c.dynamo_offset < 0 or len(c.pieces) != 1:
            return [], {}
        code = read_payload(c.file, c.dynamo_offset)
        return def_names(code), returned_names(code)

    @functools.cached_property
    def roles(self) -> dict[str, tuple[str, str | None]]:
        """Joint (and forward) input name -> (role, real name), as ``roles.input_roles`` gives them."""
        names = input_names(self.compile, self._dynamo[0])
        return placeholder_roles([(n.name, n.desc) for n in self.graph.placeholders], names)

    @functools.cached_property
    def facts(self) -> LoggedFacts:
        roles = {n: r for n, (r, _) in self.roles.items()}
        return logged_facts(self.forward, self.backward, self.joint, roles, self.compile.hints)

    @functools.cached_property
    def guards(self) -> Guards:
        c = self.compile
        return read_guards(read_payload(c.file, c.guards_offset)) if c.guards_offset >= 0 else Guards()

    @functools.cached_property
    def modules(self) -> dict[str, str]:
        """Each op's module (``light.modules``, on the joint as the log printed it: a value the partitioner
        saves may be one the joint traced in its backward, a transpose of a forward value)."""
        state = {n: str(q) for n, (r, q) in self.roles.items() if r in _LIFTED and q}
        grads = tangent_names(self.graph)
        phases = {n.name: "backward" if n.name in grads else "forward" for n in self.graph.placeholders}
        phases.update(traced_phases(self.graph))
        return place_modules(self.graph, state, phases, self.guards)

    @functools.cached_property
    def layers(self) -> list[LayerKind]:
        """The model's stacks of identical layers (``light.layers``: said once for all, never extrapolated)."""
        state = {n: str(q) for n, (r, q) in self.roles.items() if r in _LIFTED and q}
        return identical_layers(self.graph, self.modules, state)

    # --- what a caption says of the graph (``analysis.memory.columns.CaptionFacts``) ---------------------
    @property
    def backend(self) -> str:
        return "inductor" if self.compile.backend == "inductor" else "aot_eager"

    @property
    def compiler(self) -> str | None:
        return "inductor" if self.backend == "inductor" else None

    partitioner_caller = "torch.compile"

    @property
    def partitioner_note(self) -> str:
        return f"read from the log{run_config_text(self.compile.functorch)}"

    @property
    def num_fwd_outputs(self) -> int:
        return num_fwd(self.forward, self.joint)

    @property
    def static_lifetime_input_indices(self) -> list[int]:
        return list(self.piece.static or [])

    @functools.cached_property
    def info(self) -> dict[str, Checkpointed]:
        return {n.name: Checkpointed(n.region, n.policy.lower() if n.policy else None) for n in self.graph.calls
                if n.region is not None or n.policy}

    @property
    def symbolic(self) -> bool:
        """Whether a size of the joint graph is symbolic (every figure is then at the log's hints)."""
        for n in self.graph:
            a = annotation(n.annotation)
            if (a is not None and a.symbolic) or (n.annotation or "").startswith("Sym("):
                return True
        return False

    @property
    def nodes(self) -> int:
        """The joint graph's nodes (the forward's, without one), as the listing counts them (inputs and ops)."""
        return len(self.graph)
