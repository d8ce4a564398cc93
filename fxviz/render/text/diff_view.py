"""A diff of two partitions as text for a terminal or a notebook: the summary (one screen, 100
columns) and the table, each line cut to the width.  Reads ``analysis.diff``'s frames; derives
nothing."""

from __future__ import annotations

import textwrap

import pandas as pd

from fxviz.analysis.diff.match import RULES, Matching
from fxviz.analysis.diff.step_pairs import ACROSS_GRAPHS
from fxviz.analysis.diff.values import NO_MODULE, Side
from fxviz.core.units import format_bytes, plural
from fxviz.render.graph import dot
from fxviz.render.graph.drawing import DEFAULT_TIMEOUT, Drawing
from fxviz.render.graph.scene import Item, Scene

__all__ = ["WIDTH", "diff_summary", "step_diff_summary", "diff_table_text", "diff_scene", "draw_diff"]

WIDTH = 100
_TOP = 10  # differences listed in the summary
_MODULES = 8  # modules listed in the summary
_SHORT = {"name": "name", "module+op+position": "place", "op+shape": "op+shape", "unmatched": "none",
          ACROSS_GRAPHS: "other graph"}
_LEGEND = ("match: name = same name, or the same parameter or input; place = module+op+position; op+shape; "
           "none = unmatched")
_LEGEND_STEP = "other graph = module, op and shape, in a graph that is not the pair's"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _side_lines(letter: str, label: str, width: int) -> list[str]:
    """``A: <label>`` wrapped, never cut: the label names the log, rank and compile a side is."""
    return textwrap.wrap(f"{letter}: {label}", width, subsequent_indent="   ", break_on_hyphens=False) or [f"{letter}:"]


def _change(a: int, b: int) -> str:
    sign = "+" if b >= a else "-"
    ratio = (b - a) / a if a else 0.0
    pct = (f" ({ratio:+.0%})" if abs(ratio) >= 0.01 or ratio == 0 else f" ({ratio:+.2%})") if a else ""
    return f"{sign}{format_bytes(abs(b - a))}{pct}"


def _counts(table: pd.DataFrame) -> tuple[str, str]:
    status = table["status"].value_counts()
    statuses = ("both", "only A", "only B") + (("offloaded",) if status.get("offloaded", 0) else ())  # saved/offloaded
    values = ", ".join(f"{int(status.get(s, 0))} {s}" for s in statuses)
    rules = table["match"].value_counts()
    shown = [*RULES, ACROSS_GRAPHS] if rules.get(ACROSS_GRAPHS, 0) else RULES
    matched = ", ".join(f"{r} {int(rules.get(r, 0))}" for r in shown)
    return values, matched


def _shape_text(row: pd.Series) -> str:
    """``[4, 8]``, or ``[4, 8] -> [6, 8]`` when the two sides' shapes differ."""
    shapes = [list(s) for s in (row["shape_a"], row["shape_b"]) if s is not None]
    if not shapes:
        return ""
    if len(shapes) == 2 and shapes[0] != shapes[1]:
        return f"{shapes[0]} -> {shapes[1]}"
    return str(shapes[0])


def _module_text(row: pd.Series) -> str:
    return str(row["module"]) if row["module"] is not None else NO_MODULE


def _status(row: pd.Series) -> str:
    """The status in the terminal's 6-letter column: ``off`` for a value one side offloads."""
    return "off" if row["status"] == "offloaded" else str(row["status"])


def _difference_line(row: pd.Series, width: int) -> str:
    nbytes = row["bytes_a"] if row["status"] == "only A" else row["bytes_b"]
    name = row["name_a"] if row["status"] == "only A" else row["name_b"]
    head = (f"  {_status(row):<6}  {_cut(_module_text(row), 16):<16} {_cut(str(row['op']), 12):<12} "
            f"{_cut(_shape_text(row), 13):<13} {format_bytes(nbytes):>9}  {_cut(str(name), 10):<10} ")
    if len(head + str(row["why"])) <= width:
        return head + str(row["why"])
    return head.rstrip() + "\n" + _cut(f"{'':<10}{row['why']}", width)


def _module_lines(by_module: pd.DataFrame, width: int) -> list[str]:
    """The modules whose saved activation bytes changed most."""
    lines: list[str] = []
    changed = by_module[by_module["change"] != 0].head(_MODULES)
    if len(changed):
        lines += ["", f"  {'module (activation bytes)':<40} {'A':>10} {'B':>10} {'change':>16}"]
        for _, r in changed.iterrows():
            lines.append(f"  {_cut(str(r['module']), 40):<40} {format_bytes(r['bytes_a']):>10} "
                         f"{format_bytes(r['bytes_b']):>10} {_change(int(r['bytes_a']), int(r['bytes_b'])):>16}")
    return lines


def _difference_lines(table: pd.DataFrame, width: int, where: str) -> list[str]:
    """The biggest values one side saves and the other does not, activations first."""
    diffs = table[table["status"] != "both"].copy()
    if not len(diffs):
        return ["", "A and B save the same values."]
    diffs["_size"] = -(diffs["bytes_a"] + diffs["bytes_b"])
    diffs["_state"] = diffs["kind"] != "activation"
    diffs = diffs.sort_values(["_state", "_size"], kind="stable")
    lines = ["", f"  {'':<6}  {'module':<16} {'op':<12} {'shape':<13} {'bytes':>9}  {'name':<10} why"]
    lines += [_difference_line(r, width) for _, r in diffs.head(_TOP).iterrows()]
    if len(diffs) > _TOP:
        lines.append(f"  ... {len(diffs) - _TOP} more differences in {where}")
    return lines


def diff_summary(a: Side, b: Side, table: pd.DataFrame, by_module: pd.DataFrame, width: int = WIDTH) -> str:
    """Totals for A and B (each equal to its memory table's ``saved_activation_bytes``), the change,
    the modules that changed most and the biggest differences, in at most ``width`` columns."""
    ta, tb = a.activation_bytes, b.activation_bytes
    values, matched = _counts(table)
    lines = [
        *_side_lines("A", a.label, width),
        *_side_lines("B", b.label, width),
        f"saved activations: A {format_bytes(ta)}, B {format_bytes(tb)}, change {_change(ta, tb)}",
    ]
    others = [f"{o}s A {format_bytes(a.bytes_of(o))}, B {format_bytes(b.bytes_of(o))}" for o in ("parameter", "input")
              if a.bytes_of(o) or b.bytes_of(o)]
    if others:
        lines.append(_cut("also saved, not activations: " + "; ".join(others), width))
    if a.bytes_of("offloaded") or b.bytes_of("offloaded"):  # copies activation offloading moved off the device
        lines.append(_cut(f"offloaded (copies on another device): A {format_bytes(a.bytes_of('offloaded'))}, "
                          f"B {format_bytes(b.bytes_of('offloaded'))}", width))
    lines += [_cut(f"saved values: {values}", width),
              _cut(f"each row's value found in the other graph by: {matched}", width)]
    lines += _module_lines(by_module, width) + _difference_lines(table, width, "Diff.table")
    return "\n".join(lines)


def step_diff_summary(labels: tuple[str, str], totals: tuple[int, int], graphs: tuple[int, int],
                      pair_lines: list[str], table: pd.DataFrame, by_module: pd.DataFrame,
                      width: int = WIDTH, notes: list[str] | None = None) -> str:
    """The whole step: each side's saved activations over all its graphs and the change, how the
    graphs were paired (one line each), then the modules and values as :func:`diff_summary` has them."""
    ta, tb = totals
    values, matched = _counts(table)
    lines = [*_side_lines("A", labels[0], width), *_side_lines("B", labels[1], width),
             f"whole step, saved activations: A {format_bytes(ta)}, B {format_bytes(tb)}, change {_change(ta, tb)}",
             f"graphs with a backward: A {graphs[0]}, B {graphs[1]}",
             *[line for n in notes or [] for line in textwrap.wrap("note: " + n, width, subsequent_indent="  ")],
             "", "graphs paired by the parameters and modules they hold (then frame, then order):"]
    lines += [_cut("  " + line, width) for line in pair_lines]
    lines += ["", _cut(f"saved values: {values}", width),
              _cut(f"each row's value found in the other step by: {matched}", width)]
    lines += _module_lines(by_module, width) + _difference_lines(table, width, "StepDiff.table")
    return "\n".join(lines)


def diff_table_text(table: pd.DataFrame, width: int = WIDTH) -> str:
    """The table for a terminal: one line per saved value (its reason, if any, on the next line),
    cut to ``width``."""
    # the shape column as wide as its longest shape (a rank's batch: "[4, 16] -> [6, 16]"), up to 24,
    # taken from the names column so that a line still fits
    sw = min(24, max([13] + [len(_shape_text(r)) for _, r in table.iterrows()]))
    nw = 21 - (sw - 13)
    head = f"{'status':<6} {'module':<16} {'op':<12} {'shape':<{sw}} {'A':>8} {'B':>8}  {'A / B name':<{nw}} match"
    lines = [_cut(head, width)]
    for _, r in table.iterrows():
        names = f"{r['name_a'] or '-'} / {r['name_b'] or '-'}"
        a = format_bytes(r["bytes_a"]) if r["status"] != "only B" else "-"
        b = format_bytes(r["bytes_b"]) if r["status"] != "only A" else "-"
        lines.append(_cut(f"{_status(r):<6} {_cut(_module_text(r), 16):<16} {_cut(str(r['op']), 12):<12} "
                          f"{_cut(_shape_text(r), sw):<{sw}} {a:>8} {b:>8}  {_cut(names, nw):<{nw}} "
                          f"{_SHORT[r['match']]}", width))
        if r["why"]:
            lines += textwrap.wrap(f"{'':<7}why: {r['why']}", width, subsequent_indent=" " * 12)
    lines += textwrap.wrap(_LEGEND, width, subsequent_indent="  ")
    if (table["status"] == "offloaded").any():
        lines.append("off: one side saves the value, the other offloads it (activation offloading's copy)")
    if (table["match"] == ACROSS_GRAPHS).any():
        lines.append(_LEGEND_STEP)
    return "\n".join(lines)


# --- the drawing ---------------------------------------------------------------------------------
_SIDE_COLORS = {"A": "#F1F6FC", "B": "#FDF3EE"}


def _side_items(side: Side, only: set[str], twins: set[str]) -> tuple[dict[str, Item], list[tuple[str, str]]]:
    """One side's drawn values: what it alone saves (marked), where the other side's own saved
    values sit in this graph (marked with what this side does to them), and their direct producers
    and users as faded context.  Ids are ``"A/name"``: the two graphs share node names."""
    s, p, graph = side.letter, side.partition, side.graph
    mark = "A-only" if s == "A" else "B-only"
    nodes = {n.name: n for n in graph.gm.graph.nodes if n.op != "output"}
    core = [n for n in nodes if n in only or n in twins]
    near = {x.name for n in core for x in nodes[n].all_input_nodes}
    near |= {u.name for n in core for u in nodes[n].users if u.op != "output"}
    shown = [n for n in nodes if n in set(core) | near]
    items: dict[str, Item] = {}
    for name in shown:
        info = graph.info.get(name)
        if info is None:
            continue
        it = Item(id=f"{s}/{name}", joint=name, info=info, side=s, context=name not in core)
        if name in only:
            it.cmp_saved = mark
        if name in p.recomputed:
            it.cmp_recomputed = mark
        items[it.id] = it
    edges = [(f"{s}/{x.name}", f"{s}/{n}") for n in shown for x in nodes[n].all_input_nodes
             if f"{s}/{x.name}" in items and f"{s}/{n}" in items]
    return items, edges


def diff_scene(a: Side, b: Side, table: pd.DataFrame, matching: Matching) -> Scene:
    """The values saved by one side only, in both graphs side by side (cluster A, cluster B), in the
    differences drawing's style; matched values are joined by dashed lines (``diff_links``)."""
    only_a = set(table.loc[table["status"] == "only A", "name_a"].dropna())
    only_b = set(table.loc[table["status"] == "only B", "name_b"].dropna())
    to_b, to_a = matching.a_to_b, matching.b_to_a
    items_a, edges_a = _side_items(a, only_a, {to_a[n] for n in only_b if n in to_a})
    items_b, edges_b = _side_items(b, only_b, {to_b[n] for n in only_a if n in to_b})
    scene = Scene(items={**items_a, **items_b}, edges=edges_a + edges_b, view="diff", title="",
                  two_sides=True, compare_names=("A", "B"), compact=True,
                  side_styles={"A": (f"A: {a.label}", _SIDE_COLORS["A"]), "B": (f"B: {b.label}", _SIDE_COLORS["B"])})
    ta, tb = a.activation_bytes, b.activation_bytes
    scene.caption.append(f"saved activations: A {format_bytes(ta)}, B {format_bytes(tb)}, change {_change(ta, tb)}")
    scene.caption.append(f"saved by A only: {len(only_a)}, by B only: {len(only_b)}; dashed lines join matched values")
    return scene


def diff_links(scene: Scene, matching: Matching) -> list[tuple[str, str, str]]:
    """(A id, B id, rule) for each matched pair drawn on both sides."""
    out = []
    for a_name, b_name in matching.a_to_b.items():
        ia, ib = f"A/{a_name}", f"B/{b_name}"
        if ia in scene.items and ib in scene.items and not (scene.items[ia].context and scene.items[ib].context):
            out.append((ia, ib, matching.rule[a_name]))
    return out


def draw_diff(a: Side, b: Side, table: pd.DataFrame, matching: Matching, timeout: float = DEFAULT_TIMEOUT) -> Drawing:
    """The differing saved values of A and B, each in its own graph, as a ``Drawing``."""
    scene = diff_scene(a, b, table, matching)
    n_diff = sum(1 for it in scene.items.values() if not it.context)
    n_only = sum(1 for it in scene.items.values() if it.cmp_saved)
    scene.title = (f"diff: {plural(n_only, 'value')} saved by one side only ({plural(n_diff, 'node')} marked on "
                   f"both sides, +{len(scene.items) - n_diff} neighbors)" if n_diff else
                   "diff: A and B save the same values: nothing to draw")
    g = dot.to_digraph(scene)
    for ia, ib, rule in diff_links(scene, matching):
        g.edge(ia, ib, style="dashed", constraint="false", dir="none", color="#9A9A9A", penwidth="1",
               tooltip=f"{ia} is {ib} (matched by {rule})", **{"class": "fx-match"})
    return Drawing(g, nodes=len(scene.items), timeout=timeout, caption=scene.title)
