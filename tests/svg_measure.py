"""What a reader sees in a laid-out fxviz SVG, measured from the SVG alone: drawn units, op nodes
outside every module box or cluster, the aspect ratio, and boxes marked as repeated patterns."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

__all__ = ["Measure", "measure"]

SVG = "{http://www.w3.org/2000/svg}"
_NUM = re.compile(r"-?\d+(?:\.\d+)?")
_OPS = ("fx-role-forward", "fx-role-backward", "fx-role-output", "fx-role-gradient")


@dataclass
class Measure:
    units: int  # drawn nodes and boxes
    loose: int  # forward/backward ops drawn as themselves outside every module cluster
    aspect: float  # width / height
    width: float
    height: float
    patterns: int  # boxes marked "pattern X ×N"
    boxes: int
    loose_names: list[str]


def _bbox(g: ET.Element) -> tuple[float, float, float, float] | None:
    for el in g.iter():
        if el.tag in (SVG + "polygon", SVG + "path"):
            nums = [float(x) for x in _NUM.findall(el.get("points") or el.get("d") or "")]
            xs, ys = nums[0::2], nums[1::2]
            if xs and ys:
                return min(xs), min(ys), max(xs), max(ys)
    return None


def measure(svg: str) -> Measure:
    root = ET.fromstring(svg)
    width = float(root.get("width", "0").removesuffix("pt"))
    height = float(root.get("height", "0").removesuffix("pt"))
    modules: list[tuple[float, float, float, float]] = []
    units = loose = patterns = boxes = 0
    ops: list[tuple[str, tuple[float, float, float, float]]] = []
    for g in root.iter(SVG + "g"):
        classes = g.get("class", "").split()
        title = g.find(SVG + "title")
        if "cluster" in classes and title is not None and (title.text or "").startswith("cluster_m"):
            box = _bbox(g)
            if box:
                modules.append(box)
        if "node" not in classes:
            continue
        units += 1
        if "fx-group" in classes:
            boxes += 1
            patterns += "pattern" in " ".join(g.itertext())
        elif any(c in classes for c in _OPS):
            box = _bbox(g)
            if box:
                ops.append((title.text or "" if title is not None else "", box))
    names = []
    for name, (x0, y0, x1, y1) in ops:
        if not any(a <= x0 and b <= y0 and x1 <= c and y1 <= d for a, b, c, d in modules):
            names.append(name)
    loose = len(names)
    return Measure(units=units, loose=loose, aspect=width / height if height else 0.0, width=width,
                   height=height, patterns=patterns, boxes=boxes, loose_names=names)
