"""Which storage each value of a run's forward and backward graphs lives in, its size, and the bytes live
while each graph runs: what ``analysis.memory.storage`` reads off fake tensors, read off the printed graphs.

A view (an aten op whose output aliases its first input: ``signature.VIEW_OPS``, ``_unsafe_view`` included
as torch's fakes share its storage) and an in-place op live in their first argument's storage; an element
of a view op's tuple (``split``) in its base's; every other value makes a storage of the size its
annotation gives (torch's required storage length).  A backward input is the forward's value of the same
name (the partitioner hands it over).  Sizes are the run's: a symbolic size at the log's hints.
"""

from __future__ import annotations

from collections.abc import Container, Mapping

from fxviz.sources.log.light.nodes import GETITEM, LightGraph, LightNode, annotation
from fxviz.sources.log.signature import VIEW_OPS, storage_bytes

__all__ = ["Key", "LogStorages", "aliases", "live_bytes"]

Key = tuple[str, str]
"""A storage: (graph, the name of the value that made it); an element torch never printed: (graph, "op[i]")."""


def aliases(n: LightNode) -> bool:
    """Whether ``n``'s output lives in its first argument's storage (a view, ``_unsafe_view``, an in-place op)."""
    t = n.target
    if t is None or t is GETITEM:
        return False
    namespace = t.qualname.split(".")[0]
    inplace = t.packet.endswith("_") and not t.packet.startswith("__")
    return namespace in ("aten", "prims") and (t.packet in VIEW_OPS or inplace)


class LogStorages:
    """Storages of a forward graph (``"fw"``) and its backward (``"bw"``): ``key(side, name)`` and
    ``nbytes(key)``.  ``items``: the elements of each multi-output op by index (``op -> {i: annotation}``,
    from every graph that prints them): a tuple's storages are all its elements', printed or not."""

    def __init__(self, forward: LightGraph, backward: LightGraph | None, hints: Mapping[str, int],
                 items: Mapping[str, Mapping[int, str]] | None = None) -> None:
        self.hints = hints
        self.items = items or {}
        self._root: dict[Key, Key] = {}
        self._size: dict[Key, int] = {}
        for side, g in (("fw", forward), ("bw", backward)):
            for n in g or ():
                self._add(side, n, forward)

    def _add(self, side: str, n: LightNode, forward: LightGraph) -> None:
        key = (side, n.name)
        base: LightNode | None = None
        if n.op == "placeholder":
            if side == "bw" and n.name in forward.by_name:  # a saved value: the forward's
                self._root[key] = self.key("fw", n.name)
                return
        elif n.target is GETITEM:
            parent = n.args[0] if n.args and isinstance(n.args[0], LightNode) else None
            if parent is not None and aliases(parent) and parent.args and isinstance(parent.args[0], LightNode):
                base = parent.args[0]
        elif aliases(n) and n.args and isinstance(n.args[0], LightNode):
            base = n.args[0]
        if base is not None and (side, base.name) in self._root:
            self._root[key] = self.key(side, base.name)
            return
        self._root[key] = key
        a = annotation(n.annotation)
        self._size[key] = (storage_bytes(n.annotation, self.hints) or 0) if a is not None else 0

    def key(self, side: str, name: str) -> Key:
        """The storage ``name``'s value lives in (its own key for a value never seen)."""
        k = (side, name)
        r = self._root.get(k, k)
        while self._root.get(r, r) != r:
            r = self._root[r]
        if r != k:
            self._root[k] = r
        return r

    def nbytes(self, key: Key) -> int:
        return self._size.get(key, 0)

    def tensors(self, side: str, n: LightNode, graph: LightGraph) -> list[Key]:
        """The storages of ``n``'s value: its own, or each element's of a multi-output op (its elements
        in ``graph``, and those no graph here printed, which get a storage of their own)."""
        if annotation(n.annotation) is not None:
            return [self.key(side, n.name)]
        if n.annotation is not None or n.op != "call_function":
            return []  # a size
        shown = {u.args[1]: u for u in n.users if u.target is GETITEM and len(u.args) > 1}
        keys = [self.key(side, u.name) for u in shown.values() if annotation(u.annotation) is not None]
        for i, annot in self.items.get(n.name, {}).items():
            if i not in shown and annotation(annot) is not None:
                k = (side, f"{n.name}[{i}]")
                if k not in self._size:
                    self._root[k] = k if not aliases(n) else self.key(side, n.args[0].name)
                    self._size[k] = 0 if aliases(n) else storage_bytes(annot, self.hints) or 0
                keys.append(self.key(*k))
        return keys


def live_bytes(graph: LightGraph, side: str, storages: LogStorages, left_out: Container[Key], *,
               inputs_live_throughout: bool) -> list[int]:
    """Bytes live while each node of ``graph`` runs (its output node last), as
    ``analysis.memory.storage.live_bytes`` walks a ``GraphModule``: a storage lives from the node that
    makes it to the last user of any value in it; graph outputs to the end; inputs throughout when
    ``inputs_live_throughout`` (a forward's); ``left_out`` storages (parameters, inputs) not counted."""
    nodes = graph.nodes
    end = len(nodes) + 1  # the output node
    span: dict[Key, list[int]] = {}
    for i, n in enumerate(nodes):
        use = max((u.index for u in n.users), default=i)
        if n.op == "placeholder" and inputs_live_throughout:
            use = end
        for k in storages.tensors(side, n, graph):
            if k in left_out:
                continue
            s = span.setdefault(k, [i, i])
            s[1] = max(s[1], use)
    for out, _ in graph.outputs:
        for k in storages.tensors(side, out, graph) if out is not None else ():
            if k in span:
                span[k][1] = end
    delta = [0] * (end + 2)
    for k, (first, last) in span.items():
        delta[first] += storages.nbytes(k)
        delta[last + 1] -= storages.nbytes(k)
    curve, live = [], 0
    for d in delta[:end]:
        live += d
        curve.append(live)
    return curve

