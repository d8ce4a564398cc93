"""The ladder of models the benchmark climbs, smallest first.

To add a rung, add one ``Spec`` to ``LADDER`` (and its name to ``DEFAULT_MODELS`` if the full run
should climb it); ``--models NAME`` reaches it either way.  Nothing else names a rung, except the
targets in ``report.py`` that are about one model (``REPORT_MODEL``, ``META_MODEL``).
"""

from __future__ import annotations

import dataclasses
import importlib
import pathlib
import sys
from typing import Any

__all__ = ["DEFAULT_MODELS", "LADDER", "QUICK", "ROOT", "WARMUP", "Spec", "build_model"]

ROOT = pathlib.Path(__file__).resolve().parent.parent
GPT2_SMALL = {"n_embd": 768, "n_head": 12, "vocab": 50257, "block_size": 1024, "batch": 1, "seq": 128}


@dataclasses.dataclass(frozen=True)
class Spec:
    """One rung of the ladder: an ``fxviz.examples`` factory and its arguments."""

    name: str
    factory: str
    kwargs: dict[str, Any]
    meta: bool = False  # built on the meta device, traced with the token ids only (no targets)
    views: bool = True  # drawings, explorer and report (not for the billion-parameter meta row)
    note: str = ""


LADDER: dict[str, Spec] = {s.name: s for s in [
    Spec("mlp", "mlp", {}, note="examples.mlp() defaults: 32-64-64-10, batch 8"),
    Spec("alexnet", "alexnet", {}, note="torchvision layout, 1x3x224x224, dropout active"),
    Spec("resnet8", "resnet_block", {"blocks": 8, "channels": 64, "size": 32, "batch": 2},
         note="8 BasicBlocks, 64 channels, 2x64x32x32, BatchNorm training"),
    Spec("gpt-tiny", "mini_gpt",
         {"n_layer": 2, "n_embd": 32, "n_head": 4, "vocab": 64, "block_size": 32, "seq": 16},
         note="the test suite's mini_gpt"),
    Spec("gpt2", "mini_gpt", {"n_layer": 2, **GPT2_SMALL}, note="2 layers, width 768, 1x128 tokens"),
    Spec("gpt6", "mini_gpt", {"n_layer": 6, **GPT2_SMALL}, note="6 layers, width 768, 1x128 tokens"),
    Spec("gpt12", "mini_gpt", {"n_layer": 12, **GPT2_SMALL}, note="GPT-2 small: 12 layers, width 768"),
    Spec("gpt62-narrow", "mini_gpt",
         {"n_layer": 62, "n_embd": 64, "n_head": 4, "vocab": 256, "block_size": 64, "batch": 1, "seq": 32},
         note="62 layers, width 64, 1x32 tokens: a joint graph of 10,284 nodes"),
    Spec("gpt66", "mini_gpt", {"n_layer": 66, **GPT2_SMALL},
         note="66 layers, width 768, 1x128 tokens: GPT-2's width at ~10,900 joint nodes (issue 36)"),
    Spec("gpt-1b-meta", "mini_gpt",
         {"n_layer": 20, "n_embd": 2048, "n_head": 16, "vocab": 50257, "block_size": 1024,
          "batch": 1, "seq": 128, "device": "meta"},
         meta=True, views=False, note="1.1e9 parameters on the meta device, token ids only"),
]}
DEFAULT_MODELS = ["mlp", "alexnet", "resnet8", "gpt2", "gpt6", "gpt12", "gpt62-narrow", "gpt-1b-meta"]
QUICK = ["mlp", "gpt-tiny"]
WARMUP = "mlp"  # both sides run their path once on this before measuring anything


def _load_examples() -> Any:
    """``fxviz.examples``: the torch-alone worker must not load fxviz's analysis (its import cost
    belongs to fxviz's side).  Since issue 26 ``import fxviz`` loads nothing but ``fxviz.core.errors``, and
    ``fxviz.examples`` only torch and ``fxviz.core.example_names``."""
    sys.path.insert(0, str(ROOT))
    return importlib.import_module("fxviz.examples")


def build_model(spec: Spec) -> tuple[Any, tuple[Any, ...]]:
    """The model and example inputs of one rung, fresh."""
    model, inputs = getattr(_load_examples(), spec.factory)(**spec.kwargs)
    if spec.meta:
        inputs = inputs[:1]  # cross_entropy on meta drops the grad_fn: trace the logits instead
    return model, tuple(inputs)
