"""fxviz's default peaks and saved bytes against the real compiled step, model by model (issue 44).

For each model: ``fxviz.trace`` (inductor), the step's memory table (the ``total`` row where the model has
several graphs), and ``Trace.measure()`` (the real ``torch.compile`` step under the profiler, its
allocation events in time order).  Printed per model: forward and backward peak above the state before
the step (predicted = the row's peak minus ``resident_bytes``), what the step holds for its backward
(saved activations + layout copies + eager code's, against the bytes allocated after the forward), and
the unfused walk's peaks for comparison.  One JSON line per model; results in ``RESULTS.md``.

    python -m benchmarks.peaks_vs_real [alexnet mini_gpt gpt2 llama qwen3_ckpt]
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch


def _models() -> dict[str, Any]:
    import fxviz

    def alexnet() -> Any:
        model, inputs = fxviz.examples.alexnet()
        return model, inputs, {}

    def mini_gpt() -> Any:
        model, inputs = fxviz.examples.mini_gpt()
        return model, inputs, {}

    def gpt2() -> Any:
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        cfg = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=256, n_positions=64)
        ids = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
        return GPT2LMHeadModel(cfg), (), {"input_ids": ids, "labels": ids}

    def llama() -> Any:
        from transformers import LlamaConfig, LlamaForCausalLM

        torch.manual_seed(0)
        cfg = LlamaConfig(num_hidden_layers=2, hidden_size=128, intermediate_size=256, num_attention_heads=4,
                          num_key_value_heads=4, vocab_size=256, max_position_embeddings=64)
        ids = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
        return LlamaForCausalLM(cfg), (), {"input_ids": ids, "labels": ids}

    return {"alexnet": alexnet, "mini_gpt": mini_gpt, "gpt2": gpt2, "llama": llama}


def one(name: str) -> dict[str, Any]:
    import pandas as pd

    import fxviz

    model, args, kwargs = _models()[name]()
    tr = fxviz.trace(model, *args, **kwargs)
    m = tr.measure()
    df = tr.memory_table(scope="step", measured=m)
    rows = df[(df["piece"] == "total") & (df["strategy"] == tr.default_strategy.name)]
    r = rows.iloc[0]

    def n(c: str) -> int:
        v = r.get(c)
        return 0 if v is None or pd.isna(v) else int(v)

    resident = n("resident_bytes")
    held = n("saved_activation_bytes") + n("layout_copy_bytes") + n("eager_held_bytes")
    out = {"model": name, "graphs": len(tr.capture.graphs),
           "forward_peak": n("forward_peak_bytes") - resident, "real_forward_peak": m.forward_peak_bytes,
           "backward_peak": n("backward_peak_bytes") - resident, "real_backward_peak": m.backward_peak_bytes,
           "held_for_backward": held, "real_held_after_forward": m.after_forward_bytes,
           "unfused_forward_peak": n("unfused_forward_peak_bytes") - resident,
           "unfused_backward_peak": n("unfused_backward_peak_bytes") - resident}
    for k in ("forward_peak", "backward_peak"):
        real = out[f"real_{k}"]
        out[f"{k}_error"] = round((out[k] - real) / real, 4) if real else None
    real = out["real_held_after_forward"]
    out["held_error"] = round((held - real) / real, 4) if real else None
    return out


if __name__ == "__main__":
    for name in sys.argv[1:] or list(_models()):
        print(json.dumps(one(name)), flush=True)
