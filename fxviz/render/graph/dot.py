"""Scene -> ``graphviz.Digraph``: HTML-like labels (every model-provided string goes through
``html.escape``; never ``shape=record``, whose ``{ | < >`` syntax broke torch's drawer), tooltips,
module clusters and boxes, the legend and the caption.

Every drawn node's DOT name, hence its SVG ``<title>``, is its joint-graph node name (see
``scene.RECOMPUTED_SUFFIX`` for backward copies of recomputed ops), so the report and the widget
can find it.  Every SVG edge title is ``producer->consumer``.  The joint view puts forward and
backward in two clusters and writes the backward's edges reversed (``dir=back``), so the backward
reads bottom-up beside the forward it differentiates and saved values cross sideways: besides
reading well, this layout is many times faster for ``dot`` than one top-down DAG
(docs/rendering-timings.md).
"""

from __future__ import annotations

import html
import re
import textwrap
from collections import Counter

import graphviz

from fxviz.core.units import format_bytes
from fxviz.render import theme
from fxviz.render.graph.scene import OPENED_FUNCTION, RECOMPUTED_SUFFIX, Group, Item, Scene, format_tensor, module_path
from fxviz.sources.roles import INPUT_ROLES, ROLES

# format_* and RECOMPUTED_SUFFIX are re-exported: the report formats sizes the same way
__all__ = ["LAYOUT_ATTRS", "to_digraph", "RECOMPUTED_SUFFIX", "format_tensor"]

# Bounded network-simplex and crossing-minimisation iterations: the measured difference between
# minutes and seconds on a few hundred nodes (docs/rendering-timings.md).
LAYOUT_ATTRS: dict[str, str] = {"nslimit": "2", "nslimit1": "2", "mclimit": "0.5"}


def _e(text: object) -> str:
    """Escape model-provided text for an HTML-like label; newlines become visible '⏎'."""
    return html.escape(str(text)).replace("\r\n", "\n").replace("\n", " ⏎ ")


def _esc_string(text: str) -> graphviz.quoting.NoHtml:
    """Plain text for an escString attribute (tooltip): backslashes kept literal, newlines as
    graphviz's ``\\n``; never treated as an HTML-like string even if it looks like ``<...>``."""
    text = text.replace("\\", "\\\\").replace("\r\n", "\n").replace("\n", "\\n")
    return graphviz.nohtml(text)


# --- DOT -----------------------------------------------------------------------------------------
def _title_line(it: Item) -> str:
    i = it.info
    if i.role == "gradient":
        return f"grad {i.qualname}" if i.qualname else f"grad ({i.short_op})"
    if i.op in ("placeholder", "get_attr"):
        if i.role == "tangent":
            return "tangent"
        return i.qualname or i.name
    if i.role == "output" and i.qualname:
        return f"{i.qualname} = {i.short_op}"
    return f"{i.short_op} {it.detail}" if it.detail else i.short_op


def _badges(it: Item, scene: Scene) -> list[tuple[str, str]]:
    """(ink color, text) of each overlay mark on an item, in a fixed order."""
    out: list[tuple[str, str]] = []
    if it.saved and it.alias_of in ("parameter", "input"):
        article = "an" if it.alias_of == "input" else "a"
        out.append((theme.STATUS["saved"].ink, f"saved: a view of {article} {it.alias_of} (0 B new)"))
    elif it.saved and it.alias_of:
        out.append((theme.STATUS["saved"].ink, f"saved: alias of {it.alias_of} (0 B new)"))
    elif it.saved and it.offloaded_to is not None:  # activation offloading: a copy on another device
        out.append((theme.STATUS["saved"].ink, f"offloaded to {it.offloaded_to} {format_bytes(it.saved_bytes)}"))
    elif it.saved and it.saved_kind in ("parameter", "input"):  # no copy: already resident
        size = format_bytes(it.info.bytes) if it.info.bytes is not None else ""
        out.append((theme.STATUS["saved"].ink, f"saved {it.saved_kind} {size} (resident)".replace("  ", " ")))
    elif it.saved:
        size = format_bytes(it.info.bytes) if it.info.bytes is not None else ""
        what = "saved input" if it.info.role in INPUT_ROLES else "saved"  # no copy: already resident
        out.append((theme.STATUS["saved"].ink, f"{what} {size}".strip()))
    if it.recomputed:
        out.append((theme.STATUS["recomputed"].ink, "recomputed"))
    if it.removed:
        out.append((theme.STATUS["removed"].ink, "removed"))
    if _checkpointed(it):
        out.append((theme.CHECKPOINT.ink, _checkpoint_text(it)))
    if it.info.note:  # a log's op this torch lacks: its shapes are the log's
        out.append((theme.SEVERITY_INK["warning"], it.info.note))
    if scene.compare_names is not None:
        a, b = scene.compare_names
        who = {"A-only": f"{a} only", "B-only": f"{b} only", "both": "both"}
        if it.cmp_saved:
            out.append((theme.COMPARE[it.cmp_saved].ink,
                        f"saved: {who[it.cmp_saved]} {format_bytes(it.info.bytes)}"))
        if it.cmp_recomputed:
            out.append((theme.COMPARE[it.cmp_recomputed].ink, f"recomputed: {who[it.cmp_recomputed]}"))
        if it.cmp_removed in ("A-only", "B-only"):
            out.append((theme.COMPARE[it.cmp_removed].ink, f"removed: {who[it.cmp_removed]}"))
    return out


def _checkpointed(it: Item) -> bool:
    return it.info.checkpoint_policy is not None or it.info.checkpoint_region is not None


def _checkpoint_text(it: Item) -> str:
    region = it.info.checkpoint_region
    return f"ckpt {region if region is not None else '?'}: {it.info.checkpoint_policy or 'no policy'}"


_VERB = {"saved": ("saves", "save"), "recomputed": ("recomputes", "recompute"), "removed": ("removes", "remove")}


def _compact_marks(it: Item) -> list[tuple[str, str]]:
    """(ink, text) of the compare marks in few words: ``A saves 32 KiB``, ``B recomputes``."""
    out = []
    for what, mark in (("saved", it.cmp_saved), ("recomputed", it.cmp_recomputed), ("removed", it.cmp_removed)):
        if mark is None or (what == "removed" and mark == "both"):
            continue
        who = {"A-only": "A", "B-only": "B", "both": "both"}[mark]
        verb = _VERB[what][1 if mark == "both" else 0]
        size = f" {format_bytes(it.info.bytes)}" if what == "saved" and it.info.bytes else ""
        out.append((theme.COMPARE[mark].ink, f"{who} {verb}{size}"))
    return out


def _compact_label(it: Item, first: str) -> str:
    """Two lines: the op in bold with the node's name; what A and B do to it, in their colors
    (the dtype and shape stay in the tooltip)."""
    name = f'  <FONT POINT-SIZE="9" COLOR="#333333">{_e(it.joint)}</FONT>' \
        if it.joint != first and not first.startswith(it.joint) else ""
    rows = [f"<TR><TD><B>{_e(first)}</B>{name}</TD></TR>"]
    marks = _compact_marks(it)
    if marks:
        cells = ' <FONT POINT-SIZE="9" COLOR="#666666">·</FONT> '.join(
            f'<FONT POINT-SIZE="9" COLOR="{color}"><B>{_e(text)}</B></FONT>' for color, text in marks)
        rows.append(f'<TR><TD BGCOLOR="#FFFFFF">{cells}</TD></TR>')
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">' + "".join(rows) + "</TABLE>>"


def _label(it: Item, scene: Scene) -> str:
    """Op (or real name) in bold; node name, dtype and shape; then one white badge per mark."""
    i = it.info
    first = _title_line(it)
    bits = []
    if it.joint != first and not first.startswith(it.joint):
        bits.append(it.joint)
    tensor = format_tensor(i)
    if tensor:
        bits.append(tensor)
    rows = [f"<TR><TD><B>{_e(first)}</B></TD></TR>"]
    if it.context:  # a neighbor shown for context: its op and name only, in small grey type
        rows = [f'<TR><TD><FONT POINT-SIZE="9" COLOR="#666666">{_e(first)}</FONT></TD></TR>']
        if it.joint != first and not first.startswith(it.joint):
            rows.append(f'<TR><TD><FONT POINT-SIZE="8" COLOR="#777777">{_e(it.joint)}</FONT></TD></TR>')
        return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">' + "".join(rows) + "</TABLE>>"
    if scene.compact:
        return _compact_label(it, first)
    if bits:
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="#333333">{_e("  ".join(bits))}</FONT></TD></TR>')
    for color, text in _badges(it, scene):
        rows.append(f'<TR><TD BGCOLOR="#FFFFFF"><FONT POINT-SIZE="9" COLOR="{color}"><B>{_e(text)}</B>'
                    "</FONT></TD></TR>")
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0">' + "".join(rows) + "</TABLE>>"


def _tooltip(it: Item, scene: Scene) -> str:
    i = it.info
    lines = ["context: a producer or user of a node the two strategies treat differently (treated alike itself)"] \
        if it.context else []
    lines += [f"{it.joint}: {i.target}" if i.op == "call_function" else f"{it.joint} ({i.op})",
             f"role: {theme.ROLE_LABELS.get(i.role, i.role)}"
             + (f" ({i.qualname})" if i.qualname else "") + f", {i.phase} phase"]
    if i.shape is not None:
        lines.append(f"value: {format_tensor(i)} ({format_bytes(i.bytes)})")
    elif i.bytes:
        lines.append(f"value: a tuple of tensors ({format_bytes(i.bytes)})")
    if i.symbolic_shape:
        lines.append(f"symbolic size: {i.symbolic_shape} (bytes at the example sizes)")
    lines.append(f"module: {i.module}" if i.module else "module: (none recorded)")
    if i.source:
        lines.append(f"source: {i.source}" + (f"  {i.source_code}" if i.source_code else ""))
    if it.users:
        shown = ", ".join(it.users[:8]) + (f", ... ({len(it.users)} in all)" if len(it.users) > 8 else "")
        lines.append(f"users: {shown}")
    for _, text in _badges(it, scene):
        lines.append(text)
    return "\n".join(lines)


def _node_attrs(it: Item, scene: Scene) -> dict[str, object]:
    i = it.info
    fill = theme.ROLE_COLORS.get(i.role, "#FFFFFF")
    style = ["filled"] if i.role in INPUT_ROLES else ["filled", "rounded"]
    attrs: dict[str, object] = {"color": "#333333", "penwidth": "1"}
    classes = ["fx-node", f"fx-role-{i.role}"]
    border = None
    if it.saved:
        border, classes = theme.STATUS["saved"].color, classes + ["fx-saved"]
        attrs["penwidth"] = "3"
        if it.offloaded_to is not None:  # saved as a copy off the device: the saved border, dashed
            style.append("dashed")
            classes.append("fx-offloaded")
    if scene.compare_names is not None and (it.cmp_saved or it.cmp_recomputed):
        border = theme.COMPARE[it.cmp_saved or it.cmp_recomputed].color  # type: ignore[index]
        attrs["penwidth"] = "3"
        classes.append(f"fx-saved-{it.cmp_saved}" if it.cmp_saved else f"fx-recomputed-{it.cmp_recomputed}")
    elif scene.compare_names is not None and it.cmp_removed in ("A-only", "B-only"):
        border = theme.COMPARE[it.cmp_removed].color
        attrs["penwidth"] = "3"
        style.append("dashed")
        classes.append(f"fx-removed-{it.cmp_removed}")
    if it.recomputed or it.cmp_recomputed:
        attrs["peripheries"] = "2"
        classes.append("fx-recomputed")
        if border is None:
            border = theme.STATUS["recomputed"].color
            attrs["penwidth"] = "2"
    if _checkpointed(it):
        classes.append("fx-checkpoint")
    if it.removed:
        fill = theme.faded(fill)
        style.append("dashed")
        classes.append("fx-removed")
        attrs["fontcolor"] = "#777777"
        if border is None:
            border = theme.STATUS["removed"].color
    if it.highlighted is not None:
        if it.highlighted:
            classes.append("fx-highlight")
            attrs["penwidth"] = "4" if attrs["penwidth"] == "1" else attrs["penwidth"]
            border = border or theme.HIGHLIGHT
        elif not it.removed:
            fill = theme.faded(fill)
            attrs["fontcolor"] = "#888888"
            classes.append("fx-dimmed")
    if it.context:
        fill, border = theme.faded(fill), "#AAAAAA"
        attrs.update(penwidth="1", fontcolor="#666666", fontsize="9", height="0.2", margin="0.05,0.02")
        attrs.pop("peripheries", None)
        classes.append("fx-context")
    if border:
        attrs["color"] = border
    attrs.update({"fillcolor": fill, "style": ",".join(style), "class": " ".join(classes),
                  "tooltip": _esc_string(_tooltip(it, scene)), "label": _label(it, scene)})
    return attrs


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _group_label(g: Group, scene: Scene) -> str:
    counts = Counter(m.info.role for m in g.members)
    total = sum(counts.values())
    bar = "".join(f'<TD BGCOLOR="{theme.ROLE_COLORS[r]}" WIDTH="{max(3, round(90 * counts[r] / total))}" '
                  f'HEIGHT="7"></TD>' for r in ROLES if counts.get(r))
    recomputed = sum(1 for m in g.members if m.recomputed or m.cmp_recomputed)
    head = {"module": "", "function": "ops of ", "bookkeeping": ""}[g.kind]
    rows = [f"<TR><TD><B>{head}{_e(g.path)}</B></TD></TR>",
            f'<TR><TD><FONT POINT-SIZE="9">{_plural(total, "node")}: '
            + _e(", ".join(_plural(c, theme.ROLE_LABELS[r]) for r, c in counts.most_common(3)))
            + "</FONT></TD></TR>",
            f'<TR><TD><TABLE BORDER="0" CELLSPACING="0" CELLPADDING="0"><TR>{bar}</TR></TABLE></TD></TR>']
    for text in _saved_lines(g):
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="{theme.STATUS["saved"].ink}"><B>{_e(text)}</B>'
                    "</FONT></TD></TR>")
    if recomputed:
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="{theme.STATUS["recomputed"].ink}"><B>'
                    f"recomputed {recomputed}</B></FONT></TD></TR>")
    removed = sum(1 for m in g.members if m.removed)
    if removed:
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="{theme.STATUS["removed"].ink}"><B>'
                    f"removed {removed}</B></FONT></TD></TR>")
    if g.pattern:
        rows.append(f'<TR><TD><FONT POINT-SIZE="9" COLOR="#444444"><I>pattern {g.pattern} '
                    f"×{g.repeats} (same ops and shapes)</I></FONT></TD></TR>")
    return '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="1" CELLPADDING="1">' + "".join(rows) + "</TABLE>>"


def _saved_lines(g: Group) -> list[str]:
    """A box's saved badge: its saved activations (count, and the bytes they add to the memory
    table's ``saved_activation_bytes``) apart from the parameters and inputs it saves, which are
    resident anyway (a Linear saving its transposed weight is no activation).  A compare marks
    what either strategy saves (nominal bytes, as the node badges)."""
    acts = [m for m in g.members if m.saved and m.saved_kind in (None, "activation")]
    held: dict[str, int] = {}
    for m in g.members:
        if m.saved and m.saved_kind in ("parameter", "input"):
            held[m.saved_kind] = held.get(m.saved_kind, 0) + 1
    lines = []
    if acts:
        lines.append(f"saved {_plural(len(acts), 'activation')}: {format_bytes(sum(m.saved_bytes for m in acts))}")
    if held:
        lines.append("saved " + ", ".join(_plural(n, k) for k, n in sorted(held.items())) + " (resident)")
    moved = [m for m in g.members if m.saved and m.saved_kind == "offloaded"]
    if moved:  # activation offloading's copies: off the device, not among its activations
        lines.append(f"offloaded {len(moved)}: {format_bytes(sum(m.saved_bytes for m in moved))}")
    compared = [m for m in g.members if m.cmp_saved and not m.saved]
    if compared:
        lines.append(f"saved {len(compared)}: {format_bytes(sum(m.info.bytes or 0 for m in compared))}")
    return lines


def _group_tooltip(g: Group) -> str:
    counts = Counter(m.info.role for m in g.members)
    what = {"module": f"module {g.path}", "function": f"ops of no module, from {g.path}",
            "bookkeeping": "values that only update buffers in place (running statistics, counters)"}[g.kind]
    lines = [f"{what} ({g.side}): {_plural(len(g.members), 'node')}",
             ", ".join(_plural(c, theme.ROLE_LABELS[r]) for r, c in counts.most_common())]
    lines += _saved_lines(g)
    saved = [m.joint for m in g.members if m.saved or m.cmp_saved]
    if saved:
        lines.append("saved values: " + ", ".join(saved[:10]) + (" ..." if len(saved) > 10 else ""))
    if g.pattern:
        lines.append(f"pattern {g.pattern}: {g.repeats} modules with the same ops and shapes")
    lines.append("nodes: " + ", ".join(m.id for m in g.members[:20]) + (" ..." if len(g.members) > 20 else ""))
    return "\n".join(lines)


CAPTION_CHARS = 110  # a caption line longer than this wraps: drawings stay narrow enough for a projector


def _text_width(text: str, size: float, bold: bool = False) -> int:
    """A lower bound for the cell's width in points: dot's own estimate of Helvetica text falls short of
    what browsers render (Liberation Sans / Arial) by up to 15%, and the SVG then clips the line's end
    (02's caption).  0.45 em a character (0.5 bold) covers both."""
    return int(len(text) * size * (0.5 if bold else 0.45)) + 4


def _legend_and_caption(scene: Scene) -> str:
    items = scene.items.values()  # each fact gathered in one pass over the items (50,000 in a deep model)
    present = {it.info.role for it in items}
    roles = [r for r in ROLES if r in present]
    statuses = [s for s, there in (("saved", any(it.saved for it in items)),
                                   ("recomputed", any(it.recomputed for it in items)),
                                   ("removed", any(it.removed for it in items))) if there]
    if any(it.offloaded_to is not None for it in items):
        statuses.insert(1, "offloaded")
    shown = {m for it in items for m in (it.cmp_saved, it.cmp_recomputed,
                                         None if it.cmp_removed == "both" else it.cmp_removed)}
    marks = [m for m in ("A-only", "B-only", "both") if m in shown]
    rows = [f'<TR><TD ALIGN="LEFT" WIDTH="{_text_width(scene.title, 16, bold=True)}"><FONT POINT-SIZE="16">'
            f'<B>{_e(scene.title)}</B></FONT></TD></TR>'] if scene.title else []  # graphviz rejects an empty <B></B>
    rows.append(theme.legend_dot(roles, statuses, scene.compare_names, marks,
                                 checkpoint=any(_checkpointed(it) for it in scene.items.values())))
    for line in scene.caption:
        for part in textwrap.wrap(line, CAPTION_CHARS, subsequent_indent="    ") or [line]:
            rows.append(f'<TR><TD ALIGN="LEFT" WIDTH="{_text_width(part, 11)}"><FONT POINT-SIZE="11">{_e(part)}'
                        "</FONT></TD></TR>")
    return '<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="2">' + "".join(rows) + "</TABLE>>"


_SIDE_STYLE = {"forward": ("forward", "#F1F6FC"), "backward": ("backward (drawn bottom-up)", "#FDF3EE")}


def to_digraph(scene: Scene, name: str = "fxviz") -> graphviz.Digraph:
    """Write the scene as a ``graphviz.Digraph``."""
    g = graphviz.Digraph(name=name)
    g.attr("graph", rankdir="TB", newrank="true", nodesep="0.12" if scene.compact else "0.18",
           ranksep="0.2" if scene.compact else "0.28", fontname=theme.FONT,
           labelloc="t", labeljust="l", outputorder="edgesfirst", tooltip=" ", **LAYOUT_ATTRS)
    g.attr("node", shape="box", fontname=theme.FONT, fontsize="11", margin="0.08,0.03", height="0.3")
    g.attr("edge", color=theme.EDGE_COLOR, fontname=theme.FONT, arrowsize="0.6", penwidth="0.8", tooltip=" ")
    g.attr(label=_legend_and_caption(scene))

    unit_of = scene.unit_of or {i: i for i in scene.items}
    # the cluster tree: (side, module path tuple) -> members
    tree: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    side_of_unit: dict[str, str] = {}
    for it in scene.items.values():
        unit = unit_of[it.id]
        if unit in side_of_unit:
            continue
        side = it.side if scene.two_sides else ""
        side_of_unit[unit] = it.side
        if unit in scene.groups:
            path = scene.groups[unit].parent
        elif scene.grouped:
            path = scene.place.get(it.id) or tuple(module_path(it.info))
        else:
            path = ()
        tree.setdefault((side, path), []).append(unit)

    counter = iter(range(1, 10 ** 9))

    def emit_units(sub: graphviz.Digraph, units: list[str]) -> None:
        for u in units:
            if u in scene.groups:
                grp = scene.groups[u]
                saved = any(m.saved or m.cmp_saved for m in grp.members)
                sub.node(u, label=_group_label(grp, scene), shape="box", style="filled,rounded",
                         fillcolor="#FFFFFF", color=theme.STATUS["saved"].color if saved else "#333333",
                         penwidth="2" if saved else "1", tooltip=_esc_string(_group_tooltip(grp)),
                         **{"class": "fx-group"})
            else:
                sub.node(u, **_node_attrs(scene.items[u], scene))

    def emit_tree(parent: graphviz.Digraph, side: str, prefix: tuple[str, ...]) -> None:
        emit_units(parent, tree.get((side, prefix), []))
        children = sorted({p[len(prefix)] for (s, p) in tree if s == side and len(p) > len(prefix)
                           and p[:len(prefix)] == prefix}, key=_natural)
        for child in children:
            path = prefix + (child,)
            if path in scene.unframed:
                emit_tree(parent, side, path)
                continue
            opened_function = child.startswith(OPENED_FUNCTION)  # an opened function box's frame
            name = child if opened_function else ".".join(path)
            with parent.subgraph(name=f"cluster_m{next(counter)}") as c:
                c.attr(label=f"<{_e(name)}>", style="rounded,dashed", color="#888888",
                       fontsize="10", fontcolor="#444444", labeljust="l", penwidth="1",
                       tooltip=_esc_string(f"{name} (an opened function box: ops of no module)" if opened_function
                                           else f"module {name}"))
                emit_tree(c, side, path)

    if scene.two_sides:
        for side, (text, bg) in (scene.side_styles or _SIDE_STYLE).items():
            with g.subgraph(name=f"cluster_{side}") as c:
                tip = f"the {side} pass" if scene.side_styles is None else text
                c.attr(label=f"<<B>{_e(text)}</B>>", style="filled,rounded", fillcolor=bg, color="#BBBBBB",
                       fontsize="14", labeljust="l", tooltip=_esc_string(tip))
                emit_tree(c, side, ())
    else:
        emit_tree(g, "", ())

    _emit_edges(g, scene, unit_of, side_of_unit)
    if scene.compact:
        _stack_components(g, scene)
    return g


def _stack_components(g: graphviz.Digraph, scene: Scene) -> None:
    """Lay many small pieces out as a grid, not a strip: ``dot`` puts unconnected pieces side by
    side (a 2-layer GPT's differences: 12 pieces, each weight's transpose with its users, drew
    5175 px wide).  An invisible edge from the last forward node of piece i to the first of piece
    i + k stacks them in k columns (k about the square root of their count)."""
    parent = {i: i for i in scene.items}

    def find(i: str) -> str:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in scene.edges:
        parent[find(a)] = find(b)
    pieces: dict[str, list[str]] = {}
    for i, it in scene.items.items():  # graph order
        if it.side == "forward":
            pieces.setdefault(find(i), []).append(i)
    order = list(pieces.values())
    if len(order) < 4:
        return
    k = max(2, round(len(order) ** 0.5))
    for x, y in zip(order, order[k:]):
        g.edge(x[-1], y[0], style="invis", weight="0")


def _natural(s: str) -> tuple:
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s))


def _emit_edges(g: graphviz.Digraph, scene: Scene, unit_of: dict[str, str], side_of: dict[str, str]) -> None:
    """One DOT edge per pair of drawn units (counted when several graph edges merge).  Edges inside
    the backward half of a two-sided picture are written reversed with ``dir=back`` so the
    backward reads bottom-up next to the forward it differentiates; their SVG titles are put back
    to ``producer->consumer`` by ``drawing.fix_edge_titles``."""
    merged: dict[tuple[str, str], list[tuple[Item, Item]]] = {}
    for a, b in scene.edges:
        ua, ub = unit_of[a], unit_of[b]
        if ua == ub:
            continue
        merged.setdefault((ua, ub), []).append((scene.items[a], scene.items[b]))
    for k, ((ua, ub), pairs) in enumerate(merged.items()):
        attrs: dict[str, str] = {"id": f"fxe{k}"}
        if all(p.info.role not in INPUT_ROLES for p, _ in pairs):
            attrs["weight"] = "3"  # keep the data-flow spine straight; inputs join it from the side
        classes = ["fx-edge"]
        src_saved = [p for p, c in pairs if (p.saved and (c.side == "backward" or scene.view == "backward"))]
        cmp = [p.cmp_saved for p, c in pairs if p.cmp_saved and c.side == "backward"]
        if src_saved:
            attrs.update(color=theme.STATUS["saved"].color, penwidth="2.6", arrowsize="0.8")
            classes.append("fx-saved")
            if all(p.offloaded_to is not None for p in src_saved):  # reaches the backward through the host
                attrs["style"] = "dashed"
                classes.append("fx-offloaded")
        elif cmp:
            status = "both" if "both" in cmp else cmp[0]
            attrs.update(color=theme.COMPARE[status].color, penwidth="2.6", arrowsize="0.8")
            classes.append(f"fx-saved-{status}")
        elif any(p.recomputed and c.side == "backward" and p.side == "forward" for p, c in pairs):
            # the joint view: this value reaches the backward by being computed again, not saved
            attrs.update(color=theme.STATUS["recomputed"].color, penwidth="1.6")
            classes.append("fx-recomputed")
        if all(p.removed or c.removed for p, c in pairs):  # a bundle is dead only if every edge is
            attrs.update(style="dashed", color=theme.STATUS["removed"].color)
        if len(pairs) > 1:
            attrs["label"] = f"×{len(pairs)}"
            attrs["fontsize"] = "9"
        tip = ", ".join(f"{p.id} → {c.id}" for p, c in pairs[:6]) + (" ..." if len(pairs) > 6 else "")
        attrs["tooltip"] = _esc_string(tip)
        reverse = scene.two_sides and side_of.get(ua) == "backward" and side_of.get(ub) == "backward"
        if reverse:
            attrs["dir"] = "back"
            classes.append("fx-reversed")
        attrs["class"] = " ".join(classes)
        if reverse:
            g.edge(ub, ua, **attrs)
        else:
            g.edge(ua, ub, **attrs)
