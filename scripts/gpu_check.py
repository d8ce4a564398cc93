"""``scripts/gpu_check.sh``'s checks: on a CUDA device, for each model, one real ``torch.compile`` training step
measured by ``Trace.measure()`` (``torch.cuda.max_memory_allocated`` per phase, above ``memory_allocated()``
before the step; the caching allocator counts blocks rounded up to 512 B, and fxviz's simulation rounds the
same) beside the peaks ``Trace.memory_table(scope="step")`` predicts from inductor's CUDA code, and what the
step holds for its backward.  Then a real CUDA step's TORCH_TRACE log (kept in OUT/cuda_log) read back:
its ``logged`` row's peaks against the same step measured here.  Exit 1 on a miss over 5%, 2 without CUDA.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
import time
import traceback
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # tests.step_models

import fxviz
from tests.step_models import BreakNet

CLOSE = 0.05
DEVICE = "cuda"



def _to(value: Any) -> Any:
    return value.to(DEVICE) if isinstance(value, torch.Tensor) else value


def models() -> dict[str, tuple[nn.Module, tuple[Any, ...], dict[str, Any]]]:
    torch.manual_seed(0)
    out: dict[str, tuple[nn.Module, tuple[Any, ...], dict[str, Any]]] = {}
    model, inputs = fxviz.examples.mini_gpt(n_layer=4, n_embd=256, n_head=4, vocab=512, block_size=128, seq=128,
                                            batch=4)
    out["mini_gpt"] = (model, inputs, {})
    model, inputs = fxviz.examples.alexnet(batch=8)
    out["alexnet"] = (model, inputs, {})
    out["break"] = (BreakNet(d=256), (torch.randn(8, 64, 256),), {})
    try:
        from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    except ImportError:
        return out
    ids = torch.randint(0, 1024, (4, 128), generator=torch.Generator().manual_seed(1))
    llama = LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=256, intermediate_size=512,
                                         num_attention_heads=4, num_key_value_heads=4, vocab_size=1024,
                                         max_position_embeddings=256))
    out["hf_llama"] = (llama, (), {"input_ids": ids, "labels": ids})
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=1024, n_positions=256))
    out["hf_gpt2"] = (gpt2, (), {"input_ids": ids, "labels": ids})
    return out


def check(name: str, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    start = time.perf_counter()
    model = model.to(DEVICE)
    tr = fxviz.trace(model, *[_to(a) for a in args], **{k: _to(v) for k, v in kwargs.items()})
    m = tr.measure()
    df = tr.memory_table(scope="step", measured=m)
    row = df[(df["piece"] == "total") & (df["strategy"] == tr.default_strategy.name)].iloc[0]
    record: dict[str, Any] = {"check": name, "graphs": len(tr.pieces), "peak_method": m.peak_method}
    ok = True
    for phase in ("forward", "backward"):
        predicted = int(row[f"{phase}_peak_bytes"]) - int(row["resident_bytes"])
        real = getattr(m, f"{phase}_peak_bytes")
        record[f"{phase}_predicted"], record[f"{phase}_measured"] = predicted, real
        record[f"{phase}_ratio"] = predicted / real if real else None
        ok &= real is not None and abs(predicted - real) <= CLOSE * real
    held = int(row["saved_activation_bytes"]) + int(row["layout_copy_bytes"] or 0) + int(
        0 if row["eager_held_bytes"] is None or row["eager_held_bytes"] != row["eager_held_bytes"]
        else row["eager_held_bytes"])
    record.update(saved_predicted=held, saved_measured=m.saved_bytes,
                  unfused_forward=int(row["unfused_forward_peak_bytes"]) - int(row["resident_bytes"]),
                  unfused_backward=int(row["unfused_backward_peak_bytes"]) - int(row["resident_bytes"]))
    ok &= abs(held - m.saved_bytes) <= CLOSE * max(m.saved_bytes, 1)
    record.update(ok=bool(ok), seconds=round(time.perf_counter() - start, 1))
    return record


LOG_SCRIPT = """
import os, torch, fxviz
model, (idx, tgt) = fxviz.examples.mini_gpt(n_layer=2, n_embd=128, n_head=4, vocab=256, block_size=64, seq=64,
                                            batch=4, dropout=0.0, device="cuda")
torch.compile(model)(idx, tgt).backward()
"""


def check_log(out: pathlib.Path) -> dict[str, Any]:
    """A real CUDA step's TORCH_TRACE log (kept in OUT/cuda_log): the logged row's peaks, from its output code."""
    log = out / "cuda_log"
    env = dict(os.environ, TORCH_TRACE=str(log))
    subprocess.run([sys.executable, "-c", textwrap.dedent(LOG_SCRIPT)], env=env, check=True, timeout=900)
    row = fxviz.load_logs(log).trace().memory_table().set_index("strategy").loc["logged"]
    model, (idx, tgt) = fxviz.examples.mini_gpt(n_layer=2, n_embd=128, n_head=4, vocab=256, block_size=64, seq=64,
                                                batch=4, dropout=0.0, device="cuda")
    tr = fxviz.trace(model, idx, tgt)
    m = tr.measure()
    record: dict[str, Any] = {"check": "cuda_log (logged row)", "log": str(log)}
    ok = True
    for phase in ("forward", "backward"):
        predicted = int(row[f"{phase}_peak_bytes"]) - int(row["resident_bytes"])
        real = getattr(m, f"{phase}_peak_bytes")
        record[f"{phase}_predicted"], record[f"{phase}_measured"] = predicted, real
        ok &= real is not None and abs(predicted - real) <= CLOSE * real
    record["ok"] = bool(ok)
    return record


def main(out: pathlib.Path) -> int:
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here: nothing checked", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    records = [{"check": "device", "name": torch.cuda.get_device_name(), "torch": torch.__version__,
                "fxviz": getattr(fxviz, "__version__", "?"), "ok": True}]
    work = [(name, lambda spec=spec, name=name: check(name, *spec)) for name, spec in models().items()]
    work.append(("cuda_log", lambda: check_log(out)))
    with open(out / "gpu_check.jsonl", "w") as f:
        f.write(json.dumps(records[0]) + "\n")
        for name, run in work:
            try:
                record = run()
            except Exception as exc:
                record = {"check": name, "ok": False, "error": f"{type(exc).__name__}: {exc}",
                          "traceback": traceback.format_exc()[-3000:]}
            records.append(record)
            f.write(json.dumps(record) + "\n")
            f.flush()
            print(json.dumps({k: v for k, v in record.items() if k != "traceback"}), flush=True)
    lines = ["| check | forward predicted / measured | backward predicted / measured | saved predicted / measured "
             "| ok |", "|---|---:|---:|---:|---|"]
    for r in records[1:]:
        lines.append(f"| {r['check']} | {r.get('forward_predicted', '-')} / {r.get('forward_measured', '-')} | "
                     f"{r.get('backward_predicted', '-')} / {r.get('backward_measured', '-')} | "
                     f"{r.get('saved_predicted', '-')} / {r.get('saved_measured', '-')} | "
                     f"{'yes' if r['ok'] else 'NO: ' + r.get('error', 'over 5%')} |")
    head = f"{records[0]['name']}, torch {records[0]['torch']}\n\n"
    (out / "gpu_check.md").write_text(head + "\n".join(lines) + "\n")
    return 0 if all(r["ok"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main(pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "gpu-check-out"))))
