"""A measured step (``Trace.measure()``) for people: the terminal text the CLI prints under
``--measure``, and plain records for the report's and the explorer's "measured step" panel.

Formats ``analysis.measure``'s ``Measured``; derives nothing.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

from fxviz.core.units import format_bytes, is_missing
from fxviz.render.graph.scene_types import format_shape

if TYPE_CHECKING:
    from fxviz.analysis.real.measure import Measured

__all__ = ["measured_headline", "measured_text", "measured_records", "measured_data"]


def _signed(n: int) -> str:
    return ("+" if n > 0 else "") + format_bytes(n)


def measured_headline(m: Measured) -> str:
    """One sentence: what the real step keeps beside the estimate, and the difference."""
    step = f"the real torch.compile(backend={m.backend!r}) step keeps {format_bytes(m.saved_bytes)} for its backward"
    if m.estimated_bytes is None:
        return step + " (no estimate: the partition it uses failed on this graph)"
    diff = m.difference or 0
    return (step + f"; the {m.strategy} partition it uses saves {format_bytes(m.estimated_bytes)} "
            + ("(the same)" if diff == 0 else f"({_signed(diff)})"))


def _timing(m: Measured) -> str:
    parts = [f"compile {m.compile_seconds:.1f} s", f"forward {1e3 * m.forward_seconds:.1f} ms"]
    if m.backward_seconds is not None:
        parts.append(f"backward {1e3 * m.backward_seconds:.1f} ms")
    peaks = [f"{phase} peak {format_bytes(b)}" for phase, b in
             (("forward", m.forward_peak_bytes), ("backward", m.backward_peak_bytes)) if b is not None]
    where = " (above the state before the step)" if peaks else ""
    return "step: " + ", ".join(parts + peaks) + where + f"; {m.saves} tensors saved"


def _row_what(r: Any) -> str:
    return str(r["what"]) + (f" (+{int(r['views']) - 1} views)" if int(r["views"]) > 1 else "")


def measured_text(m: Measured, width: int = 100, top: int | None = 15) -> str:
    """Headline, the difference in words, then one line per saved storage (biggest first;
    ``top`` rows, None or 0: all): bytes, kind, tensor and layout, what it holds."""
    lines = textwrap.wrap("measured: " + measured_headline(m) + ".", width)
    reason = m.reason()
    if reason:
        lines += textwrap.wrap(f"the difference: {reason}.", width, subsequent_indent="  ")
    df = m.saved
    shown = df if not top else df.head(top)
    rows = [[format_bytes(int(r["bytes"])), str(r["kind"]), format_shape(r["shape"], r["dtype"]),
             "" if is_missing(r["layout"]) else str(r["layout"]), _row_what(r)] for _, r in shown.iterrows()]
    names = ["bytes", "kind", "tensor", "layout", "what it holds"]
    widths = [max([len(names[i])] + [len(row[i]) for row in rows]) for i in range(4)]
    widths = [widths[0], widths[1], min(widths[2], 24), min(widths[3], 14)]
    rest = max(20, width - sum(widths) - 8)
    lines.append("")
    for cells in [names] + rows:  # the last column wraps under itself
        head = "  ".join([cells[0].rjust(widths[0])] + [c[:w].ljust(w) for c, w in zip(cells[1:4], widths[1:])])
        what = textwrap.wrap(cells[4], rest) or [""]
        lines.append(f"{head}  {what[0]}".rstrip())
        lines += [" " * (len(head) + 2) + more for more in what[1:]]
    if top and len(df) > top:
        lines.append(f"... {len(df) - top} more storages")
    lines.append("")
    for note in [_timing(m)] + list(m.notes):
        lines += textwrap.wrap(note, width)
    return "\n".join(lines)


def measured_records(m: Measured) -> list[dict[str, Any]]:
    """One plain record per saved storage, as the page shows it."""
    return [{"bytes": int(r["bytes"]), "bytes_text": format_bytes(int(r["bytes"])), "kind": str(r["kind"]),
             "tensor": format_shape(r["shape"], r["dtype"]),
             "layout": "" if is_missing(r["layout"]) else str(r["layout"]),
             "value": None if is_missing(r["value"]) else str(r["value"]), "what": _row_what(r)}
            for _, r in m.saved.iterrows()]


def measured_data(m: Measured) -> dict[str, Any]:
    """The page's "measured step" panel: headline, the difference in words, the storages, timing."""
    return {"headline": measured_headline(m), "reason": m.reason(), "strategy": m.strategy,
            "saved_bytes": m.saved_bytes, "estimated_bytes": m.estimated_bytes, "difference": m.difference,
            "saved_text": format_bytes(m.saved_bytes),
            "estimated_text": "" if m.estimated_bytes is None else format_bytes(m.estimated_bytes),
            "difference_text": "" if m.difference is None else _signed(m.difference),
            "rows": measured_records(m), "notes": [_timing(m)] + list(m.notes),
            "caption": str(m.saved.attrs.get("caption", ""))}
