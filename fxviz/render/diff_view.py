"""A diff of two partitions as text for a terminal or a notebook: the summary (one screen, 100
columns) and the table, each line cut to the width.  Reads ``analysis.diff``'s frames; derives
nothing."""

from __future__ import annotations

import pandas as pd

from ..analysis.diff import Side
from ..analysis.match import RULES
from ..units import format_bytes

__all__ = ["WIDTH", "diff_summary", "diff_table_text"]

WIDTH = 100
_TOP = 10  # differences listed in the summary
_MODULES = 8  # modules listed in the summary
_SHORT = {"name": "name", "module+op+position": "place", "op+shape": "op+shape", "unmatched": "none"}
_LEGEND = "match: name = same name; place = module+op+position; op+shape; none = unmatched"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _change(a: int, b: int) -> str:
    sign = "+" if b >= a else "-"
    pct = f" ({(b - a) / a:+.0%})" if a else ""
    return f"{sign}{format_bytes(abs(b - a))}{pct}"


def _counts(table: pd.DataFrame) -> tuple[str, str]:
    status = table["status"].value_counts()
    values = ", ".join(f"{int(status.get(s, 0))} {s}" for s in ("both", "only A", "only B"))
    rules = table["match"].value_counts()
    matched = ", ".join(f"{r} {int(rules.get(r, 0))}" for r in RULES)
    return values, matched


def _difference_line(row: pd.Series, width: int) -> str:
    nbytes = row["bytes_a"] if row["status"] == "only A" else row["bytes_b"]
    name = row["name_a"] if row["status"] == "only A" else row["name_b"]
    head = (f"  {row['status']:<6}  {_cut(str(row['module']), 16):<16} {_cut(str(row['op']), 12):<12} "
            f"{_cut(str(row['shape']), 13):<13} {format_bytes(nbytes):>9}  {_cut(str(name), 10):<10} ")
    if len(head + str(row["why"])) <= width:
        return head + str(row["why"])
    return head.rstrip() + "\n" + _cut(f"{'':<10}{row['why']}", width)


def diff_summary(a: Side, b: Side, table: pd.DataFrame, by_module: pd.DataFrame, width: int = WIDTH) -> str:
    """Totals for A and B (each equal to its memory table's ``saved_activation_bytes``), the change,
    the modules that changed most and the biggest differences, in at most ``width`` columns."""
    ta, tb = a.activation_bytes, b.activation_bytes
    values, matched = _counts(table)
    lines = [
        _cut(f"A: {a.label}", width),
        _cut(f"B: {b.label}", width),
        f"saved activations: A {format_bytes(ta)}, B {format_bytes(tb)}, change {_change(ta, tb)}",
    ]
    others = [f"{o}s A {format_bytes(a.bytes_of(o))}, B {format_bytes(b.bytes_of(o))}" for o in ("parameter", "input")
              if a.bytes_of(o) or b.bytes_of(o)]
    if others:
        lines.append(_cut("also saved, not activations: " + "; ".join(others), width))
    lines += [_cut(f"saved values: {values}", width), _cut(f"matched by: {matched}", width)]
    changed = by_module[by_module["change"] != 0].head(_MODULES)
    if len(changed):
        lines += ["", f"  {'module (activation bytes)':<40} {'A':>10} {'B':>10} {'change':>16}"]
        for _, r in changed.iterrows():
            lines.append(f"  {_cut(str(r['module']), 40):<40} {format_bytes(r['bytes_a']):>10} "
                         f"{format_bytes(r['bytes_b']):>10} {_change(int(r['bytes_a']), int(r['bytes_b'])):>16}")
    diffs = table[table["status"] != "both"].copy()
    if len(diffs):
        # activations first (what the totals count), biggest first
        diffs["_size"] = -(diffs["bytes_a"] + diffs["bytes_b"])
        diffs["_state"] = diffs["owner"] != "activation"
        diffs = diffs.sort_values(["_state", "_size"], kind="stable")
        lines += ["", f"  {'':<6}  {'module':<16} {'op':<12} {'shape':<13} {'bytes':>9}  {'name':<10} why"]
        lines += [_difference_line(r, width) for _, r in diffs.head(_TOP).iterrows()]
        if len(diffs) > _TOP:
            lines.append(f"  ... {len(diffs) - _TOP} more differences in Diff.table")
    else:
        lines += ["", "A and B save the same values."]
    return "\n".join(lines)


def diff_table_text(table: pd.DataFrame, width: int = WIDTH) -> str:
    """The table for a terminal: one line per saved value (its reason, if any, on the next line),
    cut to ``width``."""
    head = f"{'status':<6} {'module':<16} {'op':<12} {'shape':<13} {'A':>8} {'B':>8}  {'A / B name':<21} match"
    lines = [_cut(head, width)]
    for _, r in table.iterrows():
        names = f"{r['name_a'] or '-'} / {r['name_b'] or '-'}"
        a = format_bytes(r["bytes_a"]) if r["status"] != "only B" else "-"
        b = format_bytes(r["bytes_b"]) if r["status"] != "only A" else "-"
        lines.append(_cut(f"{r['status']:<6} {_cut(str(r['module']), 16):<16} {_cut(str(r['op']), 12):<12} "
                          f"{_cut(str(r['shape']), 13):<13} {a:>8} {b:>8}  {_cut(names, 21):<21} {_SHORT[r['match']]}",
                          width))
        if r["why"]:
            lines.append(_cut(f"{'':<7}why: {r['why']}", width))
    lines.append(_LEGEND)
    return "\n".join(lines)
