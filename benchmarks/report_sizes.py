"""The HTML report's size on three models (issue 15's targets): fxviz's AlexNet <= 1 MB, ResNet-18 in
train mode <= 3 MB, the 12-layer width-768 GPT <= 3 MB.  Writes benchmarks/REPORT_SIZES.md.

ResNet-18 is transformers' ``ResNetForImageClassification`` with ResNet-18's config (basic blocks,
depths 2-2-2-2): this machine's package index has only CUDA builds of torchvision for torch 2.13
(they fail to import on the CPU torch), so tests/real_models.py on the scene branch builds it the
same way.  Usage: ``python -m benchmarks.report_sizes [--out benchmarks/REPORT_SIZES.md]``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch

import fxviz
from benchmarks.ladder import LADDER, build_model

__all__ = ["MODELS", "TARGETS_MB", "measure", "main"]


def _alexnet() -> tuple[Any, tuple[Any, ...]]:
    return build_model(LADDER["alexnet"])


def _resnet18() -> tuple[Any, tuple[Any, ...]]:
    from transformers import ResNetConfig, ResNetForImageClassification

    torch.manual_seed(0)
    cfg = ResNetConfig(layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512],
                       embedding_size=64, num_labels=10)
    return ResNetForImageClassification(cfg).train(), (torch.randn(2, 3, 64, 64),)


def _gpt12() -> tuple[Any, tuple[Any, ...]]:
    return build_model(LADDER["gpt12"])


MODELS: dict[str, tuple[str, Callable[[], tuple[Any, tuple[Any, ...]]]]] = {
    "alexnet": ("fxviz's AlexNet (examples.alexnet(), 1x3x224x224)", _alexnet),
    "resnet18-train": ("ResNet-18 in train mode (transformers config, 2x3x64x64)", _resnet18),
    "gpt12": ("GPT, 12 layers, width 768 (examples.mini_gpt, 1x128 tokens)", _gpt12),
}
TARGETS_MB = {"alexnet": 1.0, "resnet18-train": 3.0, "gpt12": 3.0}


def measure(name: str) -> dict[str, Any]:
    """Trace, write the report, and break its size down: the JSON's drawings, the fallback's
    drawing, the rest."""
    model, inputs = MODELS[name][1]()
    t0 = time.perf_counter()
    tr = fxviz.trace(model, *inputs)
    traced = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        path = fxviz.report(tr, pathlib.Path(tmp) / f"{name}.html")
        seconds = time.perf_counter() - t0
        text = path.read_text(encoding="utf-8")
    size = len(text.encode("utf-8"))
    start = text.index('id="fxviz-data">') + len('id="fxviz-data">')
    raw = text[start:text.index("</script>", start)]
    try:
        from fxviz.render.page.embed import unpack_json
    except ImportError:  # a version of fxviz from before the packed data (for the "before" column)
        unpack_json = json.loads
    data = unpack_json(raw)
    # the drawings: view payloads by key (an fxviz from before the one view schema: "svgs")
    shown = [d["svg"] for d in data["drawings"].values()] if "drawings" in data else list(data["svgs"].values())
    svgs = sum(len(s.encode("utf-8")) for s in shown)
    fallback = re.search(r'<div id="fxviz-fallback">.*?</div>\s*</main>', text, re.S)
    return {"model": name, "nodes": len(tr.graph.info), "bytes": size, "mb": round(size / 1e6, 2),
            "drawings": sum(1 for s in shown if s) + (1 if data.get("drawing_in_fallback", data.get("svg_in_fallback"))
                                                      else 0),
            "json_svg_mb": round(svgs / 1e6, 2), "packed_mb": round(len(raw) / 1e6, 2),
            "fallback_mb": round(len(fallback.group(0)) / 1e6, 2) if fallback else 0,
            "target_mb": TARGETS_MB[name], "met": size / 1e6 <= TARGETS_MB[name],
            "trace_s": round(traced, 1), "report_s": round(seconds, 1)}


def _markdown(rows: list[dict[str, Any]], before: dict[str, str]) -> str:
    lines = [
        "# HTML report sizes",
        "",
        "Measured by `python -m benchmarks.report_sizes` (issue 15's targets).  The report embeds one",
        "joint layout (its markup doubles as the script-free fallback); every strategy and every compare",
        "pair is an overlay the page draws from data; forward and backward are one drawing per",
        "partitioning strategy (their graphs differ).  The data (drawings, node records, table) is gzipped",
        "and base64-encoded in the page (the browser unpacks it with DecompressionStream).  Before: one SVG",
        "per view, strategy and compare pair, as plain JSON.  'their SVG, unpacked': the drawings in the",
        "data before packing; 'fallback': the joint layout's markup, shown as is without JavaScript.",
        "",
        "| model | joint nodes | before | now | target | drawings | their SVG, unpacked | packed data | fallback "
        "| report s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        met = "**met**" if r["met"] else "**missed**"
        lines.append(f"| {MODELS[r['model']][0]} | {r['nodes']} | {before.get(r['model'], '-')} | {r['mb']} MB | "
                     f"<= {r['target_mb']:g} MB: {met} | {r['drawings']} | {r['json_svg_mb']} MB | "
                     f"{r['packed_mb']} MB | "
                     f"{r['fallback_mb']} MB | {r['report_s']} |")
    return "\n".join(lines) + "\n"


# before this change: this script run on main at 6144881 (one SVG per view, strategy and compare
# pair, plain JSON), 2026-12-01; issue 15 measured AlexNet 5.1 MB and torchvision's ResNet-18 23.8 MB
BEFORE = {"alexnet": "5.09 MB (18 drawings)", "resnet18-train": "25.68 MB (18 drawings)",
          "gpt12": "6.94 MB (18 drawings)"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(pathlib.Path(__file__).with_name("REPORT_SIZES.md")))
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args(argv)
    rows = []
    for name in args.models.split(","):
        r = measure(name)
        print(json.dumps(r), file=sys.stderr)
        rows.append(r)
    pathlib.Path(args.out).write_text(_markdown(rows, BEFORE), encoding="utf-8")
    print(_markdown(rows, BEFORE))
    return 0 if all(r["met"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
