"""The module of every op of a logged joint graph, as a model trace (dynamo's ``nn_module_stack``) gives
it: the innermost module whose ``forward`` ran the op, a ``torch.nn`` leaf module (``Linear``,
``LayerNorm``) included.

A log records no module stack; it records, before each run of ops, the user's source line
(``# File: model.py:25 in forward, code: x = x + self.attn(self.ln(x))``): the innermost frame of
*user* code, so a leaf module's ops carry its caller's line, and a user module's ops their own lines.
From that and the parameters each op reads:

1. an op that reads a parameter (or a view or cast of one) is in the module that owns it; a leaf
   module's own reshapes (the view before ``addmm`` of a ``Linear``, the one after), the outputs of
   a multi-output op (layer norm's mean, rstd) and the ops it was decomposed into (``var_mean``,
   ``rsqrt``... before its weight's ``mul``) are in that module too, and so are the ops between two of
   its own on a line that calls it (``nn.MultiheadAttention``'s views and attention);
2. each source block (the run of ops under one ``# File:`` line) runs in a *frame*: the module whose
   ``forward`` holds that line.  A line that calls child modules (``self.fc(x)``) runs in their parent;
   a line that reads a module's own parameter (``self.weight * x``) runs in that module.  A line that
   reads no parameter runs in the frame it returns to (the same line seen before, with only deeper
   frames between: ``x + self.attn(...)`` after attention), else in the frame of the nearest line of
   the same function that has one (before it, or after it when that one reads its own parameter),
   else (a helper function, ``eager_attention_forward``) in its caller's, the frame around it;
3. every other forward op is in its block's frame (the root frame: no module, as in a model trace);
4. a backward op is in the module of the forward op it differentiates: the one op of its own source
   line whose inputs and outputs explain the forward values it reads (an op before a view); an op
   that reads none, the forward op of its line whose shapes it inverts (``expand`` for a ``sum``),
   else the backward op it reads from (or, failing that, its source block); autograd's sums of
   a gradient (a value used twice) in none, as torch leaves them.

dynamo's guards, when the log has them (``logs.guards``), add what parameters cannot show: the child
modules that own none (``self.act_fn(self.gate_proj(x))``: the ops fed only by ``gate_proj``'s output
are ``act_fn``'s) and the names of a tied weight (an op reads it as the module its line calls).
"""

from __future__ import annotations

import bisect
import re
from typing import Any

from fxviz.sources.log.guards import Guards
from fxviz.sources.log.light.children import called_children, is_detach, own_forwards, sequential_children, where
from fxviz.sources.log.light.nodes import Dim, LightGraph, LightNode, is_getitem, packet

__all__ = ["place_modules", "common_module"]

ROOT = ""


def common_module(paths: list[str]) -> str | None:
    """The longest module path every one of ``paths`` lies in (``blocks.0.fc``, ``blocks.0.proj``
    -> ``blocks.0``; the root ``""`` with anything -> None); None for none."""
    if not paths:
        return None
    parts = [p.split(".") if p else [] for p in paths]
    common: list[str] = []
    for items in zip(*parts):
        if len(set(items)) != 1:
            break
        common.append(items[0])
    return ".".join(common) or None


def _parent(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ROOT


_CONTAINERS = ("ModuleList", "ModuleDict", "Sequential")


def _caller(path: str, containers: set[str]) -> str:
    """The module whose line calls module ``path``: its parent, or above a container (a line calls a
    ``Sequential``, whose children run from torch's ``container.py``)."""
    up = _parent(path)
    while up and up in containers:
        up = _parent(up)
    return up


def _inside(path: str | None, frame: str) -> bool:
    return frame == ROOT or (path is not None and (path == frame or path.startswith(frame + ".")))


def _blocks(gm: LightGraph, phases: dict[str, str], phase: str) -> list[list[LightNode]]:
    """Runs of consecutive ops of ``phase`` under one source line (torch prints ``# File:`` once per run)."""
    out: list[list[LightNode]] = []
    key: Any = object()
    for n in gm:
        if n.op != "call_function" or phases.get(n.name) != phase:
            continue
        k = n.trace
        if not out or k != key:
            out.append([])
            key = k
        out[-1].append(n)
    return out


def place_modules(gm: LightGraph, state_names: dict[str, str], phases: dict[str, str],
                  guards: Guards | None = None) -> dict[str, str]:
    """Node name -> module path for every op the log lets fxviz place (see the module's docstring);
    ``state_names``: placeholder name -> the parameter's or buffer's qualified name; ``guards``: the
    frame's modules and tied weights as dynamo guarded them (``logs.guards``)."""
    guards = guards or Guards()
    owner = {n: q.rsplit(".", 1)[0] for n, q in state_names.items() if "." in q}
    attr = {n: q.rsplit(".", 1)[1] for n, q in state_names.items() if "." in q}
    tied = {n: guards.tied[q] for n, q in state_names.items() if len(guards.tied.get(q, [])) > 1}
    module, reads = _parameter_ops(gm, phases, owner, tied)
    forward = _blocks(gm, phases, "forward")
    # modules that run no line of their own: a line calling a Sequential runs in the Sequential's parent
    containers = {p for p, c in guards.modules.items()
                  if c.startswith('torch.nn.modules.container.') and c.rsplit('.', 1)[-1] in _CONTAINERS}
    frames = _frames(forward, module, reads, attr, owner, tied, containers)
    holders = {q.rsplit(".", k)[0] for q in state_names.values() for k in range(1, q.count(".") + 1)}
    empty = {p for p in guards.modules if p and p not in holders}  # the modules that own no parameter or buffer
    if empty:  # the children without parameters, before the rules below hand their ops to a neighbour
        own_forwards(forward, frames, module, empty)
        sequential_children(forward, module, guards, empty)
        for ops, frame in zip(forward, frames):
            if frame is not None:
                called_children(ops, frame, module, empty, guards)
    for ops in forward:
        _decomposed(ops, module, phases)
        _between(ops, module, phases)
    for ops, frame in zip(forward, frames):
        for n in ops:
            if n.name not in module and frame is not None and frame != ROOT:
                module[n.name] = frame
    for ops in forward:  # autograd's copy of a saved output is in its op's module
        for n in ops:
            if is_detach(n) and len(n.all_input_nodes) == 1:
                src = n.all_input_nodes[0].name
                (module.__setitem__(n.name, module[src]) if src in module else module.pop(n.name, None))
    _backward(gm, phases, module, owner)
    return module


def _pick(p: str, n: LightNode, owner: dict[str, str], tied: dict[str, list[str]]) -> str:
    """The module of parameter placeholder ``p`` that op ``n`` reads it as: for a tied weight
    (``emb.weight`` is ``head.weight``), the one of its names whose module ``n``'s line calls."""
    names = tied.get(p)
    if names:
        w = where(n)
        code = w[3] if w is not None else ""
        for q in names:
            m = q.rsplit(".", 1)[0]
            if "." in q and _called(m, code) == m:
                return m
    return owner[p]


def _parameter_ops(gm: LightGraph, phases: dict[str, str], owner: dict[str, str], tied: dict[str, list[str]]
                   ) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Step 1: the ops in a parameter's module (``reads``: op -> the parameter placeholders it reads)."""
    module: dict[str, str] = {}
    reads: dict[str, list[str]] = {}
    owner = dict(owner)
    ops = [n for n in gm if n.op == "call_function" and phases.get(n.name) == "forward"]
    for n in ops:
        if is_getitem(n) and isinstance(n.args[0], LightNode) and n.args[0].name in module:
            module[n.name] = module[n.args[0].name]  # an element of a multi-output op (layer norm's rstd)
            continue
        mine = [a for a in n.all_input_nodes if a.name in owner]
        if not mine:
            continue
        if (n.target is not None and (n.target.view or n.target.cast)) and len(mine) == len(n.all_input_nodes):
            owner[n.name] = _pick(mine[0].name, n, owner, tied)  # a transposed weight, an autocast copy
            reads[n.name] = [r for a in mine for r in reads.get(a.name, [a.name])]
        module[n.name] = _pick(mine[0].name, n, owner, tied)
        reads.setdefault(n.name, [r for a in mine for r in reads.get(a.name, [a.name])])
    computes = {n for n in module if n not in owner}  # ops that compute with a parameter (not its views)
    for n in ops:  # a leaf module's reshapes around its op, on the same line (a copy is no Linear's)
        if n.name in module or not _reshapes(n) or str(n.target) == "aten.clone.default":
            continue
        users = [u for u in n.users if phases.get(u.name) == "forward"]  # the backward reads it too
        src = n.args[0] if n.args and isinstance(n.args[0], LightNode) else None
        same = [u for u in users if u.name in computes and u.trace == n.trace]
        if len(users) == 1 and same:
            module[n.name] = module[same[0].name]
        elif src is not None and src.name in computes and src.trace == n.trace:
            module[n.name] = module[src.name]
    return module, reads


_REDUCTIONS = frozenset({"var_mean", "mean", "var", "sum", "amax", "std"})


def _decomposed(ops: list[LightNode], module: dict[str, str], phases: dict[str, str]) -> None:
    """A leaf module's op decomposed into several (a layer norm as ``var_mean``, ``rsqrt``, ``sub``,
    ``mul`` before its weight's ``mul``): the ops of the source block whose every forward user is in
    one module M (or among them), when they hold a reduction (a normalisation's statistics); not a
    view or an op that reads another module's output (``y.transpose(1, 2)`` before ``proj`` and
    ``gelu`` between ``fc`` and ``out`` run in their caller)."""
    inside = set(ops)
    pending: dict[str, str] = {}
    for n in reversed(ops):
        if n.name in module or _is_view(n):
            continue
        users = [u for u in n.users if phases.get(u.name) == "forward"]
        mods = {module.get(u.name) or pending.get(u.name) for u in users}
        if not users or len(mods) != 1 or None in mods or not all(u in inside for u in users):
            continue
        (m,) = mods
        if all(a not in inside or (module.get(a.name) or pending.get(a.name, m)) == m for a in n.all_input_nodes):
            pending[n.name] = str(m)
    for m in set(pending.values()):
        group = [n for n in ops if pending.get(n.name) == m]
        if any(packet(n) in _REDUCTIONS for n in group):
            module.update({n.name: m for n in group})


def _between(ops: list[LightNode], module: dict[str, str], phases: dict[str, str]) -> None:
    """An op between two ops of one child module the line calls (``self.attn(h, h, h)``: the views and
    the attention between ``nn.MultiheadAttention``'s input and output projections) is in that child."""
    w = where(ops[0])
    code = w[3] if w is not None else ""
    inside = set(ops)
    came: dict[str, str | None] = {}
    for n in ops:  # the modules an op's values come from on this line
        src = [module.get(a.name) or came.get(a.name) for a in n.all_input_nodes if a in inside]
        came[n.name] = common_module([m for m in src if m]) if any(src) else None
    goes: dict[str, str | None] = {}
    for n in reversed(ops):  # ... and go to
        dst = [module.get(u.name) or goes.get(u.name) for u in n.users
               if u in inside and phases.get(u.name) == "forward"]
        goes[n.name] = common_module([m for m in dst if m]) if any(dst) else None
    for n in ops:
        a, b = came[n.name], goes[n.name]
        if n.name in module or a is None or b is None:
            continue
        child = common_module([a, b])
        if child and _called(child, code) == child:
            module[n.name] = child
    if _NAMED_VIEWS.search(code):
        return  # the line reshapes values itself (``y.transpose(1, 2)``): its views are the caller's
    for n in ops:  # a called module's own reshapes of what it takes and returns (batch_first's transposes)
        base = n.args[0] if n.args and isinstance(n.args[0], LightNode) else None
        if n.name in module:
            continue
        if is_getitem(n) and base is not None and base.name in module:
            module[n.name] = module[base.name]
        elif _reshapes(n):
            near = (module.get(base.name) if base is not None else None, goes[n.name], came[n.name])
            child = next((c for c in near if c and _called(c, code)), None)
            if child is not None:
                module[n.name] = str(_called(child, code))


_NAMED_VIEWS = re.compile(r"\.(transpose|view|reshape|permute|contiguous|flatten|unflatten|unsqueeze|squeeze|t|mT|"
                          r"split|chunk|unbind|expand|narrow|select|view_as|expand_as|movedim|swapaxes)\(")


def _is_view(n: LightNode) -> bool:
    """An op whose output aliases its input (by schema: not an in-place write)."""
    return n.target is not None and n.target.view


def _reshapes(n: LightNode) -> bool:
    """A view, or a copy that only lays a value out (``clone``, ``_unsafe_view``, ``detach``)."""
    return _is_view(n) or packet(n) in ("clone", "_unsafe_view", "detach", "alias")


def _called(path: str, code: str) -> str | None:
    """The module of ``path`` (or an ancestor) the line calls by name (``self.attn(``), if any."""
    parts = path.split(".")
    for k in range(len(parts), 0, -1):
        if re.search(rf"\bself\.{re.escape(parts[k - 1])}\s*\(", code):
            return ".".join(parts[:k])
    return None


def _frames(blocks: list[list[LightNode]], module: dict[str, str], reads: dict[str, list[str]],
            attr: dict[str, str], owner: dict[str, str], tied: dict[str, list[str]],
            containers: set[str]) -> list[str | None]:
    """Step 2: the frame (module path, ``""`` for the root) of each forward source block, None when unknown."""
    at = [where(ops[0]) for ops in blocks]
    frames: list[str | None] = []
    own: list[bool] = []  # the frame came from a parameter the line reads as its own (``self.weight``)
    for ops, w in zip(blocks, at):
        code = w[3] if w is not None else ""
        found, mine = [], False
        for n in ops:
            for p in reads.get(n.name, []):
                o = _pick(p, n, owner, tied)
                if re.search(rf"\bself\.{re.escape(attr[p])}\b(?!\s*\()", code):
                    found.append(o)
                    mine = True
                else:
                    found.append(_caller(o, containers))
        frames.append((common_module(found) or ROOT) if found else None)
        own.append(mine)
    evidence = list(frames)  # the frames the lines' parameters show
    place = {n: i for i, ops in enumerate(blocks) for n in ops}
    by_function: dict[tuple[str, str], list[int]] = {}
    for j, x in enumerate(at):
        if x is not None and evidence[j] is not None:
            by_function.setdefault((x[0], x[2]), []).append(j)
    for i, w in enumerate(at):
        if frames[i] is None and w is not None:
            frames[i] = _frame_of(i, w, at, frames, evidence, own, by_function)
            if frames[i]:
                frames[i] = _returned(i, blocks, frames, module, place, containers)
    return frames


def _returned(i: int, blocks: list[list[LightNode]], frames: list[str | None], module: dict[str, str],
              place: dict[LightNode, int], containers: set[str]) -> str | None:
    """The frame of block ``i`` (a line that reads no parameter, given the frame of a line of the same
    file and function name), or its parent's when the module had returned: the module ``F`` ran just
    before, and the line reads a value ``F`` never took that a sibling of ``F`` took before ``F`` started
    (a Llama decoder layer's ``residual + hidden_states`` after ``self_attn``: the residual is what its
    ``input_layernorm`` read; the line's function name, ``forward``, is the same in both classes)."""
    f = str(frames[i])
    parent = _caller(f, containers) if f else None
    if parent is None or i == 0 or not _inside(frames[i - 1], f):
        return f

    def mod(n: LightNode) -> str | None:
        return module.get(n.name) or (frames[place[n]] if n in place else None)

    began = i  # where the run of blocks inside F before this one starts
    while began > 0 and (frames[began - 1] is None or _inside(frames[began - 1], f)):
        began -= 1
    while began < i and frames[began] is None:
        began += 1
    mine = set(blocks[i])
    for n in blocks[i]:
        for v in n.all_input_nodes:
            if v in mine or v not in place or place[v] >= began or _inside(mod(v), f):
                continue
            readers = [u for u in v.users if u in place and u not in mine]
            if any(_inside(mod(u), f) for u in readers):
                continue
            if any(place[u] < began and _inside(mod(u), parent) and not _inside(mod(u), f) for u in readers):
                return parent
    return f


def _frame_of(i: int, w: tuple[str, int, str, str], at: list[Any], frames: list[str | None],
              evidence: list[str | None], own: list[bool], by_function: dict[tuple[str, str], list[int]]) -> str | None:
    """A line that reads no parameter: the frame it returns to, else its function's nearest frame."""
    for j in range(i - 1, -1, -1):  # the same line before, with only deeper frames between
        f = frames[j]
        if at[j] is not None and at[j][:2] == w[:2] and f is not None:
            if all(frames[k] is None or _inside(frames[k], f) for k in range(j + 1, i)):
                return f
            break
    same = by_function.get((w[0], w[2]), [])  # the blocks of that file and function that show a frame
    k = bisect.bisect_left(same, i)
    before = same[k - 1] if k > 0 else None
    after = next((j for j in same[k:k + 2] if j > i), None)
    if after is not None and before is not None and evidence[after] == evidence[before]:
        return evidence[after]
    if after is not None and own[after] and w[1] < at[after][1] <= w[1] + 10:
        return evidence[after]  # a line just before the one that reads the module's own parameter
    if before is not None:
        return evidence[before]
    # a helper function no line of which reads a parameter (``eager_attention_forward``): the frame of
    # its caller, the module it runs between
    # (the nearest blocks with a frame, found by walking out from i: a list of every known block per helper
    # block was quadratic in the layers, 1.6 s of a 64-layer log's placement, issue 46)
    prev = next((j for j in range(i - 1, -1, -1) if frames[j] is not None), None)
    nxt = next((j for j in range(i + 1, len(frames)) if frames[j] is not None), None)
    if prev is not None and (nxt is None or frames[nxt] == frames[prev] or _inside(frames[nxt], str(frames[prev]))):
        return frames[prev]
    return None


def _backward(gm: LightGraph, phases: dict[str, str], module: dict[str, str], owner: dict[str, str]) -> None:
    """Step 4: each backward op in the module of the forward op it differentiates."""
    by_trace: dict[str | None, list[LightNode]] = {}
    for n in gm:
        if n.op == "call_function" and phases.get(n.name) == "forward":
            by_trace.setdefault(n.trace, []).append(n)
    line_of = {f: (trace, i) for trace, line_ops in by_trace.items() for i, f in enumerate(line_ops)}
    by_outs: dict[str | None, dict[tuple[Dim, ...] | None, list[LightNode]]] = {}  # per line, lazily
    inverses: dict[tuple[str | None, frozenset[tuple[Dim, ...] | None], tuple[Dim, ...] | None], tuple[str, ...]] = {}
    sums = _accumulations(gm, phases)  # autograd's sums of a gradient: no module, as in a model trace
    root = set(sums)
    for ops in _blocks(gm, phases, "backward"):
        pending: dict[LightNode, tuple[str, ...]] = {}
        for n in ops:
            if n.name in root:
                continue
            trace = n.trace
            target = _differentiated(n, phases, owner, trace, line_of)
            if target is not None:
                (module.__setitem__(n.name, module[target.name]) if target.name in module else root.add(n.name))
            elif trace in by_trace:
                if trace not in by_outs:
                    by_outs[trace] = _by_outs(by_trace[trace])
                ins = frozenset(_shape(a) for a in n.all_input_nodes if phases.get(a.name) == "backward")
                key = (trace, ins, _shape(n))  # each block's derivative on a line asks the same: answered once
                if key not in inverses:
                    inverses[key] = tuple(sorted(_inverse_of(ins, _shape(n), by_outs[trace], module)))
                if inverses[key]:
                    pending[n] = inverses[key]  # sorted, shared by every block's op asking the same
        _resolve(pending, module, root)
        _follow_neighbours(ops, module, root, sums)
    _line_frames(gm, phases, module, root)


def _follow_neighbours(ops: list[LightNode], module: dict[str, str], root: set[str], sums: set[str]) -> None:
    """The backward ops of one source line that read no forward value (a gradient's reshape, its matmul
    with a transposed weight): the deepest module among the ops they read or feed on the line, the
    deepest first (a matmul between a gradient and ``fc``'s weight is ``fc``'s, not its block's);
    autograd's sums of gradients (``sums``) are no evidence: they have no module whatever they add."""
    inside = {n for n in ops if n.name not in sums}
    while True:
        best: tuple[int, LightNode, str | None] | None = None
        for n in ops:
            if n.name in module or n.name in root:
                continue
            near = [x for x in (*n.all_input_nodes, *n.users) if x in inside and (x.name in module or x.name in root)]
            for x in near:
                m = module.get(x.name)
                depth = -1 if m is None else m.count(".")
                if x in n.all_input_nodes and _regrouped(n):
                    depth = 1 << 20  # a view that only adds or drops size-1 dims is its input's
                if best is None or depth > best[0]:
                    best = (depth, n, m)
        if best is None:
            return
        _, n, m = best
        (module.__setitem__(n.name, m) if m is not None else root.add(n.name))


def _line_frames(gm: LightGraph, phases: dict[str, str], module: dict[str, str], root: set[str]) -> None:
    """The backward ops still unplaced (reshapes of a gradient between views): the frame of their
    source line's forward ops; where the line ran in several frames (one per block), the one the
    backward op placed last before it lies in or holds."""
    frames: dict[str | None, set[str]] = {}
    for n in gm:
        if n.op == "call_function" and phases.get(n.name) == "forward":
            frames.setdefault(n.trace, set()).add(module.get(n.name, ROOT))
    last: str | None = None
    for n in gm:
        if n.op != "call_function" or phases.get(n.name) != "backward":
            continue
        if n.name in module or n.name in root:
            last = module.get(n.name, last)
            continue
        cands = sorted(frames.get(n.trace, set()))
        fit = [c for c in cands if last is not None and (_inside(last, c) or _inside(c, last))]
        pick = cands[0] if len(cands) == 1 else fit[-1] if fit else None
        if pick is not None and pick != ROOT:
            module[n.name] = pick


def _accumulations(gm: LightGraph, phases: dict[str, str]) -> set[str]:
    """The ``add`` ops autograd makes to sum the gradients of a value used twice (a residual's
    input, ``q + rotate_half(q)``): both operands are gradients (they depend on a tangent).  torch
    gives them no module (their stack trace is "Gradient addition node due to multiple use of
    tensor", which the printed log shortens to the line of the use), and a model trace none."""
    grads: set[LightNode] = set()
    out: set[str] = set()
    for n in gm:
        if n.op == "placeholder":
            if phases.get(n.name) == "backward":
                grads.add(n)
            continue
        if n.op != "call_function" or not any(a in grads for a in n.all_input_nodes):
            continue
        grads.add(n)
        args = [a for a in n.args if isinstance(a, LightNode)]
        if (phases.get(n.name) == "backward" and str(n.target) == "aten.add.Tensor" and not n.kwargs
                and len(args) == 2 and all(a in grads for a in args)
                and _shape(args[0]) == _shape(args[1]) == _shape(n)):
            out.add(n.name)
    return out


def _shape(n: LightNode) -> tuple[Dim, ...] | None:
    """A node's shape as a key: ints, and a symbolic size (a dynamic recompile's ``s0``) by its expression."""
    return n.shape


def _behind(a: LightNode, phases: dict[str, str]) -> LightNode:
    """The value a backward view, detach or cast chain starts from (a transposed weight the backward
    makes again, ``detach`` of the forward's ``tanh``): the forward value a derivative reads."""
    while (a.op == "call_function" and phases.get(a.name) == "backward" and len(a.all_input_nodes) == 1
           and (_reshapes(a) or (a.target is not None and a.target.cast))):
        a = a.all_input_nodes[0]
    return a


def _by_outs(line_ops: list[LightNode]) -> dict[tuple[Dim, ...] | None, list[LightNode]]:
    """A line's forward ops by each shape they give, in line order (so a lookup is not a scan of
    every block's ops on that line: a 300-layer stack's line runs 300 times)."""
    out: dict[tuple[Dim, ...] | None, list[LightNode]] = {}
    for f in line_ops:
        for shape in _outs(f):
            out.setdefault(shape, []).append(f)
    return out


def _inverse_of(ins: frozenset[tuple[Dim, ...] | None], gives: tuple[Dim, ...] | None,
                by_outs: dict[tuple[Dim, ...] | None, list[LightNode]], module: dict[str, str]) -> set[str]:
    """A derivative that reads no forward value (a view of a gradient, ``expand`` for a ``sum``,
    ``cat`` for a ``split``, ``tanh_backward`` of a detached output), reading gradients of shapes
    ``ins`` and giving one of shape ``gives``: the modules of the forward ops of its line
    (``by_outs``: :func:`_by_outs`) that take what it gives and give what it takes; one per block
    where the line ran in several."""
    if not ins or None in ins or gives is None:
        return set()
    line = by_outs.get(next(iter(ins)), [])
    exact = {module.get(f.name, ROOT) for f in line
             if ins <= _outs(f) and any(_shape(a) == gives for a in f.all_input_nodes)}
    # else a broadcast operand's gradient summed with keepdim ([1, 8, 16] for an [8, 16] operand)
    return exact or {module.get(f.name, ROOT) for f in line
                     if ins <= _outs(f) and any(_squeezed(_shape(a)) == _squeezed(gives) for a in f.all_input_nodes)}


def _squeezed(shape: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    """A shape without its size-1 dims: a broadcast's gradient summed with ``keepdim`` ([1, 8, 16])
    is the gradient of the [8, 16] operand."""
    return None if shape is None else tuple(d for d in shape if d != 1)


def _regrouped(n: LightNode) -> bool:
    """A reshape of a sum that only drops or adds size-1 dims (``view`` of a broadcast operand's
    gradient summed to [1, 8, 16] as [8, 16])."""
    return (_reshapes(n) and len(n.all_input_nodes) == 1 and _shape(n) is not None
            and str(n.all_input_nodes[0].target).startswith("aten.sum.")
            and _squeezed(_shape(n)) == _squeezed(_shape(n.all_input_nodes[0])))


def _outs(f: LightNode) -> frozenset[tuple[Dim, ...] | None]:
    """The shapes an op gives (each output of a ``split``)."""
    return f.outs


def _resolve(pending: dict[LightNode, tuple[str, ...]], module: dict[str, str], root: set[str]) -> None:
    """Each op of ``pending`` in its one candidate module, or, among several (one per block), in the
    one nearest the module of an op it reads or feeds (placed first, then the ones this places)."""
    def related(placed: list[str], cands: tuple[str, ...]) -> set[str]:
        """The candidates (sorted) a placed neighbour lies in or that lie in one: found by bisection,
        not by comparing each of a 300-layer line's candidates with each neighbour."""
        out: set[str] = set()
        for m in placed:
            out.update(a for a in _ancestors(m) if _has(cands, a))
            if m == ROOT:
                return set(cands)
            k = bisect.bisect_left(cands, m + ".")
            while k < len(cands) and cands[k].startswith(m + "."):
                out.add(cands[k])
                k += 1
        return out

    def near(n: LightNode, cands: tuple[str, ...]) -> str | None:
        placed = [module.get(x.name, ROOT) for x in (*n.all_input_nodes, *n.users)
                  if x.name in module or x.name in root]
        # a candidate unrelated to every placed neighbour is a coincidence of shapes (a weight's
        # gradient transposed to the shape of another module's weight): not this op's
        fit = sorted(related(placed, cands)) if placed else list(cands)
        if len(fit) == 1 and len(cands) == 1:
            return fit[0]
        best = sorted(((max((_shared(c, m) for m in placed), default=0), c in placed, c) for c in fit), reverse=True)
        return best[0][2] if best and best[0][0] > 0 and (len(best) == 1 or best[1][:2] < best[0][:2]) else None

    while pending:
        done = {n: m for n, cands in pending.items() if (m := near(n, cands)) is not None}
        if not done:
            return
        for n, m in done.items():
            (module.__setitem__(n.name, m) if m != ROOT else root.add(n.name))
            del pending[n]


def _has(items: tuple[str, ...], x: str) -> bool:
    """``x`` in the sorted tuple ``items``."""
    k = bisect.bisect_left(items, x)
    return k < len(items) and items[k] == x


def _ancestors(path: str) -> list[str]:
    """``path`` and every module it lies in, the root included (``a.b`` -> ``a.b``, ``a``, ``""``)."""
    parts = path.split(".") if path else []
    return [".".join(parts[:k]) for k in range(len(parts), -1, -1)]


def _shared(a: str, b: str) -> int:
    """How many leading names two module paths share."""
    k = 0
    for x, y in zip(a.split("."), b.split(".")):
        if x != y or not x:
            break
        k += 1
    return k


def _differentiated(n: LightNode, phases: dict[str, str], owner: dict[str, str], trace: str | None,
                    line_of: dict[LightNode, tuple[str | None, int]]) -> LightNode | None:
    """The forward op of ``n``'s source line (``trace``; ``line_of``: each forward op's line and place
    on it) whose inputs and outputs hold the most of the forward values ``n`` reads, seen through
    the backward's own views of them (on a tie, an op before a view, then the op that reads them);
    None when it reads none.  Only ops that touch one of those values can hold any: those, not the
    whole line, are scored, in line order."""
    read = [_behind(a, phases) for a in n.all_input_nodes]
    values = {a for a in read if phases.get(a.name) == "forward" or a.name in owner
              or (a.op == "placeholder" and phases.get(a.name) != "backward")}
    if not values:
        return None
    touching = set(values) | {v.args[0] for v in values if is_getitem(v)
                              and isinstance(v.args[0], LightNode)} | {u for v in values for u in v.users}
    line_ops = sorted((f for f in touching if line_of.get(f, (None, -1))[0] == trace and f in line_of),
                      key=lambda f: line_of[f][1])
    best, score = None, (0, False, 0)
    for f in line_ops:
        outs = {f} | {u for u in f.users if is_getitem(u)}
        held = len(values & (outs | set(f.all_input_nodes)))
        # on a tie, an op before a view, then the op that reads the value (``grad * b`` differentiates
        # the ``a * b`` that reads ``b``, not the SiLU that made it)
        key = (held, not _is_view(f), len(values & set(f.all_input_nodes)))
        if held and key > score:
            best, score = f, key
    return best
