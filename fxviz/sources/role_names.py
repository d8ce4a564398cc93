"""The roles and phases of a joint graph's nodes, by name: the vocabulary every floor speaks
(ARCHITECTURE.md's), in a module that loads nothing, so a view printed without torch (a log's own memory
table, issue 46) can color and count by role.  ``sources.roles`` gives each node its role."""

from __future__ import annotations

__all__ = ["ROLES", "PHASES", "STATE_ROLES", "LIFTED_STATE_ROLES", "PARAMETER_ROLES", "CALLER_INPUT_ROLES",
           "INPUT_ROLES", "CHECKPOINT_POLICIES"]

CHECKPOINT_POLICIES: tuple[str, ...] = ("must_save", "prefer_save", "must_recompute", "prefer_recompute")
"""torch.utils.checkpoint's policies, as ``Trace.nodes["checkpoint_policy"]`` names them."""

ROLES: tuple[str, ...] = (
    "primal", "parameter", "buffer", "constant", "tangent", "forward", "backward", "output", "gradient",
)
PHASES: tuple[str, ...] = ("forward", "backward")

# --- role groups: the one definition of each (ARCHITECTURE.md's vocabulary) -------------------------
STATE_ROLES: tuple[str, ...] = ("parameter", "buffer", "constant")
"""Module state in a joint graph: lifted to an input (parameter, buffer) or baked in (constant); its
storages exist whatever the partitioner does."""
LIFTED_STATE_ROLES: tuple[str, ...] = ("parameter", "buffer")
"""Module state lifted to graph inputs."""
PARAMETER_ROLES: tuple[str, ...] = ("parameter", "constant")
"""The roles a model parameter takes: lifted to an input, or captured as a constant (a closure)."""
CALLER_INPUT_ROLES: tuple[str, ...] = ("primal", "parameter", "buffer")
"""Graph inputs the caller hands over: the user's inputs and the lifted module state."""
INPUT_ROLES: tuple[str, ...] = ("primal", "parameter", "buffer", "constant", "tangent")
"""Values that exist before the graph runs: every input, and constants."""
