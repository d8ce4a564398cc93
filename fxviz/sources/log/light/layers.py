"""A model's stack of identical layers, recognised in a logged joint graph's text (issue 46): each layer (a
numbered child of a container, ``model.layers.7``) as the sequence of its ops, each op by its name, printed
value, source line, literal arguments and inputs (a value of the layer by its place in it, the layer's own
parameter by its name inside the layer, a value from outside by its shape and dtype), hashed.  Layers whose hashes
agree compute the same thing on the same shapes.

What may be said once for all of them: what a layer is made of, its ops' modules and shapes.  What may not:
anything a global solver decides (torch's knapsack under a memory budget does not treat identical layers
alike; benchmarks/RESULTS.md, issue 46), so no partition is extrapolated from one layer.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

from fxviz.sources.log.light.nodes import LightGraph, LightNode

__all__ = ["LayerKind", "identical_layers", "layers_text"]

_NUMBERED = re.compile(r"^(.*?)\.(\d+)(?:\.|$)")
_NAMES = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class LayerKind:
    """Layers of one container (``model.layers``) that compute alike: their numbers, and each one's ops."""

    container: str
    layers: tuple[int, ...]
    ops: int


def _layer(module: str | None, containers: set[str]) -> tuple[str, int] | None:
    """``model.layers.7.self_attn.q_proj`` -> (``model.layers``, 7)."""
    m = _NUMBERED.match(module or "")
    return (m.group(1), int(m.group(2))) if m and m.group(1) in containers else None


def identical_layers(graph: LightGraph, modules: Mapping[str, str], state: Mapping[str, str]) -> list[LayerKind]:
    """The layers of every container of ``graph`` grouped by what they compute (``modules``: each op's module;
    ``state``: each parameter input's qualified name), containers with several layers only."""
    paths = set(modules.values()) | {q.rsplit(".", 1)[0] for q in state.values() if "." in q}
    containers = {m.group(1) for p in paths if (m := _NUMBERED.match(p))}
    owner: dict[str, tuple[str, int]] = {}
    for name, qual in state.items():
        found = _layer(qual, containers)
        if found is not None:
            owner[name] = found
    ops: dict[tuple[str, int], list[LightNode]] = {}
    for n in graph.calls:
        found = _layer(modules.get(n.name), containers)
        if found is not None:
            owner[n.name] = found
            ops.setdefault(found, []).append(n)
    digests: dict[tuple[str, int], str] = {layer: _digest(layer, nodes, owner, state) for layer, nodes in ops.items()}
    groups: dict[tuple[str, str], list[int]] = {}
    for (container, k), digest in sorted(digests.items()):
        groups.setdefault((container, digest), []).append(k)
    counts: dict[str, int] = {}
    for container, _ in groups:
        counts[container] = counts.get(container, 0) + 1
    return [LayerKind(container, tuple(ks), len(ops[container, ks[0]])) for (container, _), ks in groups.items()
            if sum(len(g) for (c, _), g in groups.items() if c == container) > 1]


def _digest(layer: tuple[str, int], nodes: list[LightNode], owner: Mapping[str, tuple[str, int]],
            state: Mapping[str, str]) -> str:
    prefix = f"{layer[0]}.{layer[1]}"
    local = {n.name: i for i, n in enumerate(nodes)}
    h = hashlib.sha1()
    for n in nodes:
        refs = []
        for a in n.all_input_nodes:
            if a.name in local:
                refs.append(f"L{local[a.name]}")
            elif owner.get(a.name) == layer and a.name in state:
                refs.append("P" + state[a.name][len(prefix):])
            else:  # a value from outside the layer (its input, a shared rotary table): its shape and dtype
                refs.append(f"X:{a.annotation}")
        line = (n.trace or "").strip().splitlines()[0] if n.trace else ""
        h.update(f"{n.target}|{n.annotation}|{line}|{','.join(refs)}|{_NAMES.sub('_', n.args_text)}\n".encode())
    return h.hexdigest()


def layers_text(kinds: list[LayerKind]) -> str | None:
    """One sentence on the stacks of layers (None without one): ``model.layers: 16 layers, all alike (212 ops
    each)``, or ``blocks: 4 layers of 2 kinds: 0-2 (9 ops each); 3 (9 ops)``."""
    by_container: dict[str, list[LayerKind]] = {}
    for k in kinds:
        by_container.setdefault(k.container, []).append(k)
    parts = []
    for container, group in by_container.items():
        total = sum(len(k.layers) for k in group)
        if len(group) == 1:
            parts.append(f"{container}: {total} layers, all alike ({group[0].ops} ops each)")
            continue
        spans = "; ".join(f"{_spans(k.layers)} ({k.ops} ops{' each' if len(k.layers) > 1 else ''})"
                          for k in sorted(group, key=lambda k: k.layers[0]))
        parts.append(f"{container}: {total} layers of {len(group)} kinds: {spans}")
    return "; ".join(parts) if parts else None


def _spans(ks: tuple[int, ...]) -> str:
    """``0, 2-5, 7`` for (0, 2, 3, 4, 5, 7)."""
    runs: list[str] = []
    start = prev = ks[0]
    for k in [*ks[1:], None]:
        if k is not None and k == prev + 1:
            prev = k
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if k is not None:
            start = prev = k
    return ", ".join(runs)
