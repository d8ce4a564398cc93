"""Make docs/hf_llama_joint.png: the default drawing of a 2-layer Hugging Face Llama built from its
config (random weights, nothing downloaded), min-cut's saved values marked.

    python scripts/draw_hf_llama.py            # needs transformers (dev extras) and graphviz's dot
"""

from __future__ import annotations

import pathlib

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import fxviz

OUT = pathlib.Path(__file__).resolve().parent.parent / "docs" / "hf_llama_joint.png"


def main() -> None:
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      attn_implementation="eager", use_cache=False)
    tr = fxviz.trace(LlamaForCausalLM(cfg), torch.randint(0, 128, (1, 16)))
    drawing = tr.draw(strategy="min_cut")
    drawing.save(OUT, dpi=60)
    print(f"{OUT}: {drawing.nodes} units drawn for {len(tr.graph.info)} nodes")


if __name__ == "__main__":
    main()
