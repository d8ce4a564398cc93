"""A real ``torch.compile`` (inductor, CPU) training step of each advice option, applied the way a user
applies it: the option's code pasted into a script run on a fresh copy of the model (it sets torch's
config itself), the model compiled and stepped with AdamW.  Per option: whether it ran, the graphs it
compiled, its gradients against an eager step of the plain model, and what the step holds for its
backward (the bytes still allocated after the compiled forward once every output but the loss is
dropped: the profiler's ``[memory]`` events, in time order)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap
from typing import Any

__all__ = ["run_options"]

_SCRIPT = """
import copy, gc, json, sys, traceback
sys.path.insert(0, {root!r})
import torch
import torch._dynamo.config as dynamo_config
import torch._functorch.config as functorch_config
from torch._inductor.compile_fx import compile_fx
from tests.advice_models import build

CONFIGS = (dynamo_config, functorch_config)


def held(prof):
    events = sorted(prof.profiler.kineto_results.events(), key=lambda e: e.start_ns())
    now = top = 0
    for e in events:
        if e.name() == "[memory]" and str(e.device_type()).endswith("CPU"):
            now += e.nbytes()
            top = max(top, now)
    return now, top


model, kwargs = build({model!r})
reference = copy.deepcopy(model)
reference(**kwargs)["loss"].backward()
expected = {{k: p.grad for k, p in reference.named_parameters()}}
scale = max(g.abs().max().item() for g in expected.values() if g is not None)
results = []
for code in {codes!r}:
    saved = [c.get_config_copy() for c in CONFIGS]
    out = {{"ok": False}}
    try:
        applied = copy.deepcopy(model)
        exec(compile(code, "<pasted>", "exec"), {{"model": applied}})
        graphs = []

        def backend(gm, example_inputs):
            graphs.append(gm)
            return compile_fx(gm, example_inputs)

        torch._dynamo.reset()  # a fresh compile for each option: nothing reused from the previous one
        step = torch.compile(applied, backend=backend)
        adam = torch.optim.AdamW(applied.parameters(), lr=1e-3)
        step(**kwargs)["loss"].backward()
        got = dict(applied.named_parameters())
        out["grad_error"] = max(((got[k].grad - g).abs().max().item() / scale if got[k].grad is not None else 1.0)
                                for k, g in expected.items() if g is not None)
        adam.step()
        adam.zero_grad(set_to_none=True)
        loss = result = None  # the previous option's; and its objects in cycles: freed now, not in the window
        gc.collect()
        gc.disable()
        try:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
                result = step(**kwargs)
                loss = result["loss"]
                del result
        finally:
            gc.enable()
        now, top = held(prof)
        out["held"] = now - loss.untyped_storage().nbytes()
        out["forward_peak"] = top
        loss.backward()
        adam.step()
        out["graphs"] = len(graphs)
        out["ok"] = True
    except Exception as exc:
        out["error"] = f"{{type(exc).__name__}}: {{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}}"
        out["where"] = traceback.format_exc()[-1500:]
    for c, values in zip(CONFIGS, saved):  # the next option starts from torch's config as it was
        for k, v in values.items():
            if getattr(c, k) != v:
                setattr(c, k, v)
    results.append(out)
print("RESULTS " + json.dumps(results))
"""


def run_options(model: str, codes: list[str], timeout: float = 1200) -> list[dict[str, Any]]:
    """One result per code (``""``: the plain step), in order: ``ok`` (and ``error``), ``graphs``,
    ``grad_error`` (the largest gradient difference from eager's, relative to eager's largest gradient),
    ``held`` and ``forward_peak`` (bytes)."""
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    env = dict(os.environ, TORCHINDUCTOR_AUTOGRAD_CACHE="0", TORCHINDUCTOR_FX_GRAPH_CACHE="0",
               TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO="0", TORCHINDUCTOR_COMPILE_THREADS="1", PYTHONPATH=root,
               OMP_NUM_THREADS="1")
    script = textwrap.dedent(_SCRIPT.format(root=root, model=model, codes=codes))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=root)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULTS ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"the real torch.compile steps did not finish:\n{proc.stderr[-4000:]}")
    return list(json.loads(line[len("RESULTS "):]))
