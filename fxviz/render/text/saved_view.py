"""The saved-tensor table for people: a terminal text that fits a width (the ``fxviz saved``
command), and the rows as plain data for the explorer's and the report's "saved tensors" panel.

Formats ``analysis.saved``'s frames; derives nothing.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pandas as pd

from fxviz.analysis.memory.saved_words import HELD_ANYWAY, SAVED_COLUMNS
from fxviz.core.units import format_bytes, is_missing, plural
from fxviz.render.graph.scene_types import format_shape

__all__ = ["FATE_CODES", "KIND_SHORT", "saved_text", "by_module_text", "saved_records", "strategy_columns"]

FATE_CODES: dict[str, str] = {"saved": "S", "offloaded": "O", "recomputed": "R", "not needed": "-", "failed": "!"}
"""One letter per fate in the terminal's strategy columns (the legend under the table spells them)."""

KIND_SHORT: dict[str, str] = {"activation": "act", "parameter": "param", "input": "input", "offloaded": "off",
                              "symint": "size"}


def strategy_columns(df: pd.DataFrame) -> list[str]:
    """The strategy columns of a saved table (every column after the table's own): the strategy
    listed first, then the others."""
    return [c for c in df.columns if c not in SAVED_COLUMNS and c != "measured"]


def _step_mark(mark: Any) -> str:
    """``mark_saved``'s words for the terminal's narrow ``step`` column: held, copy +90.8 KiB, not held."""
    text = "" if is_missing(mark) else str(mark)
    if text.startswith("held as a copy"):
        return "copy +" + text.rpartition(", ")[2].rstrip(")")
    return text


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 1, 0)] + "…"


_GATHERED = re.compile(r" \(all-gathered by FSDP2's \w+ \([^)]*\); [^)]*\)")
"""A parameter's FSDP2 note in the saved table's ``what`` (``logs.guards``), shortened for the terminal."""


def _totals(df: pd.DataFrame) -> str:
    sums = df.groupby("kind")["bytes"].sum()
    parts = [f"{format_bytes(int(sums.get(k, 0)))} {k}s" for k in ("activation", "parameter", "input")
             if sums.get(k, 0)]
    params = df[df["kind"] == "parameter"]
    gathered = int(params[params["what"].astype(str).str.contains("all-gathered by FSDP2", regex=False)]["bytes"].sum())
    if gathered and parts:  # FSDP2's unsharded parameters: not held anyway as a model's are
        i = next(i for i, p in enumerate(parts) if p.endswith(" parameters"))
        parts[i] += (" all-gathered by FSDP2" if gathered == int(sums.get("parameter", 0))
                     else f" ({format_bytes(gathered)} all-gathered by FSDP2)")
    if sums.get("offloaded", 0):  # copies on another device: apart from the device's activations
        parts.append(f"{format_bytes(int(sums['offloaded']))} offloaded")
    return ", ".join(parts) or "0 B"


def saved_text(df: pd.DataFrame, title: str, top: int | None = 20, width: int = 100) -> str:
    """The table as lines of at most ``width`` characters: rank, value, kind, module, what,
    tensor, bytes, then one letter per strategy, the listed one first (legend below); the inputs and
    parameters the step holds anyway after a line that says so.  ``top``: rows shown (None or 0: all)."""
    others = strategy_columns(df)
    measured = "measured" in df.columns  # Trace.saved(measured=m): what the real step holds, per value
    shown = df if not top else df.head(top)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:len(others)]
    words = f" ({df.attrs['strategy_words']})" if df.attrs.get("strategy_words") else ""
    head = [f"{title}: {plural(len(df), 'value')} saved for the backward by strategy "
            f"{df.attrs.get('strategy', '?')}{words} ({_totals(df)})"]
    rows = []
    for rank, (name, r) in enumerate(shown.iterrows(), 1):
        what = _GATHERED.sub(" (all-gathered)", str(r["what"]))
        if not is_missing(r["module"]):  # the module is in its own column: `h.0.fc.weight` reads `weight`
            what = what.replace(f"`{r['module']}.", "`")
        if isinstance(r["shares_storage_with"], str):
            what += f" (storage of {r['shares_storage_with']})"
        size = "shared" if isinstance(r["shares_storage_with"], str) else format_bytes(r["bytes"]) \
            if r["kind"] != "symint" else ""
        rows.append([str(rank), str(name), KIND_SHORT.get(r["kind"], r["kind"]),
                     "" if is_missing(r["module"]) else str(r["module"]), what,
                     format_shape(r["shape"], r["dtype"]) if r["kind"] != "symint" else "", size,
                     " ".join(FATE_CODES.get(r[c], "?") for c in others)]
                    + ([_step_mark(r["measured"])] if measured else []))
    names = ["#", "value", "kind", "module", "what", "tensor", "bytes", " ".join(letters)] + ["step"] * measured
    caps = [4, 16, 5, 22 - 8 * measured, 0, 20, 10, 2 * len(others), 14]  # the step column takes the module's room
    widths = [min(max([len(names[i])] + [len(row[i]) for row in rows]), caps[i] or 999) for i in range(len(names))]
    rest = width - sum(w for i, w in enumerate(widths) if i != 4) - (len(names) - 1) * 2
    if rest < 12:  # the module column gives room to the what column first
        widths[3] = max(6, widths[3] - (12 - rest))
        rest = width - sum(w for i, w in enumerate(widths) if i != 4) - (len(names) - 1) * 2
    widths[4] = max(12, min(rest, max([len(names[4])] + [len(row[4]) for row in rows])))
    if rest > widths[4]:  # room left once every "what" fits: the module column takes it (long HF paths)
        widths[3] = min(widths[3] + rest - widths[4], max([len(names[3])] + [len(row[3]) for row in rows]))
    right = {0, 6}

    def line(cells: list[str]) -> str:
        out = [_cut(c, w).rjust(w) if i in right else _cut(c, w).ljust(w)
               for i, (c, w) in enumerate(zip(cells, widths))]
        return "  ".join(out).rstrip()

    def lines(cells: list[str]) -> list[str]:
        """A row; a ``what`` longer than its column goes on under it (the value's name, its module's
        parameter, an offloaded copy's device: cut, they said nothing), other cells blank there."""
        parts = textwrap.wrap(cells[4], widths[4], break_on_hyphens=False) or [""]
        if len(parts) == 1:
            return [line(cells)]
        return [line([*cells[:4], parts[0], *cells[5:]])] + [line(["", "", "", "", p] + [""] * (len(cells) - 5))
                                                             for p in parts[1:]]

    body = [line(names)]
    said = False
    for r, kind in zip(rows, shown["kind"]):
        if kind in HELD_ANYWAY and not said:  # the rows before cost memory; these the step holds anyway
            body.append("held anyway (inputs and parameters: the step holds them whatever the partition saves)")
            said = True
        body += lines(r)
    tail = []
    if top and len(df) > top:
        tail.append(f"... {len(df) - top} more (--top 0 shows all)")
    if others:
        listed = df.attrs.get("strategy")
        tail.append(_wrap("what each strategy does: " + ", ".join(
            f"{a} = {s}" + (" (listed)" if s == listed else "") for a, s in zip(letters, others)), width))
        moved = ", O offloaded (a copy in place of the value)" if (df[others] == "offloaded").any().any() else ""
        codes = "  S saved, R recomputed, - not needed (the backward reads another value), ! fails on this graph"
        tail.append(_wrap(codes + moved, width) if moved else codes)
    copies = (" and offloaded_bytes (off: activation offloading's copy of a value, on the device its 'what' "
              "names; not among the activations)." if (df["kind"] == "offloaded").any() else ".")
    tail.append(_wrap("bytes count storages: a value sharing a storage says whose; kinds add up to the "
                      "memory table's saved_activation/param/input_bytes" + copies, width))
    if measured:
        tail.append(_wrap("step: what the real compiled step holds for the value (held; copy +B: held as a copy "
                          "of B in another layout, memory the partition does not count; not held)", width))
    return "\n".join([_wrap(h, width) for h in head] + body + tail)


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width))


def by_module_text(df: pd.DataFrame, title: str, width: int = 100) -> str:
    """``memory_by_module``'s frame as lines of at most ``width`` characters."""
    total = int(df["saved_activation_bytes"].sum()) if len(df) else 0
    head = [f"{title}: saved activations per module (level {df.attrs.get('level', '?')}), strategy "
            f"{df.attrs.get('strategy', '?')}: {format_bytes(total) or '0 B'} in all"]
    rows = [[str(r["module"]), format_bytes(r["saved_activation_bytes"]) or "0 B",
             f"{100 * r['saved_activation_bytes'] / total:.0f}%" if total else "", str(r["saved_activations"]),
             str(r["biggest"])] for _, r in df.iterrows()]
    names = ["module", "bytes", "share", "values", "biggest value"]
    widths = [max([len(names[i])] + [len(row[i]) for row in rows]) for i in range(len(names))]
    widths[0] = min(widths[0], width - sum(widths[1:]) - 8)
    right = {1, 2, 3}
    lines = ["  ".join(_cut(c, w).rjust(w) if i in right else _cut(c, w).ljust(w)
                       for i, (c, w) in enumerate(zip(cells, widths))).rstrip() for cells in [names] + rows]
    return "\n".join([_wrap(h, width) for h in head] + lines)


def saved_records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows as plain JSON-able records for a panel: name, kind, module, op, what, tensor,
    bytes, shares, source, ``held`` (an input or parameter the step holds anyway), and ``fates``
    (strategy -> fate) for the frame's strategy columns."""
    others = strategy_columns(df)
    out = []
    for name, r in df.iterrows():
        out.append({
            "name": str(name), "kind": str(r["kind"]), "module": None if is_missing(r["module"]) else str(r["module"]),
            "op": str(r["op"]), "what": str(r["what"]),
            "tensor": format_shape(r["shape"], r["dtype"]) if r["kind"] != "symint" else "",
            "bytes": int(r["bytes"]),
            "shares": r["shares_storage_with"] if isinstance(r["shares_storage_with"], str) else None,
            "source": None if is_missing(r["source"]) else str(r["source"]),
            "held": r["kind"] in HELD_ANYWAY,  # the step holds it anyway: listed after the activations
            "fates": {c: str(r[c]) for c in others},
            **({"measured": str(r["measured"])} if "measured" in df.columns else {}),
        })
    return out
