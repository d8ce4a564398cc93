"""The built-in examples' names (``fxviz.examples.EXAMPLES`` is built from them): a module without
torch, so the CLI can tell an unknown model name at once (issue 26)."""

from __future__ import annotations

__all__ = ["NAMES"]

NAMES: tuple[str, ...] = ("alexnet", "mlp", "resnet_block", "mini_gpt", "pointwise_chain")
"""The names the CLI's ``MODEL`` argument takes; ``fxviz.examples`` has one factory of each name."""
