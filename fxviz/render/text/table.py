"""The memory table for people: MiB/GiB, best value per column marked, the caption under it.

The analysis layer's frame keeps exact integers; this module only formats it.  In a notebook a
``MemoryTable`` (a ``DataFrame``) displays as the styled table; ``memory_table_text`` is the
terminal version the CLI prints.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pandas as pd

from fxviz.core.units import format_bytes, format_flops, is_missing
from fxviz.render.theme import EDGE_COLOR, ROLE_COLORS, STATUS, faded

__all__ = ["MemoryTable", "best_rows", "shown_columns", "style_memory_table", "memory_table_text", "format_cell",
           "PANEL_COLUMNS", "COLUMN_WORDS", "LOWER_IS_BETTER"]

# columns where a smaller number is plainly better (the ones whose best value is marked)
LOWER_IS_BETTER: tuple[str, ...] = (
    "saved_activation_bytes", "recomputed_ops", "recompute_flops", "recompute_bytes",
    "forward_peak_bytes", "backward_peak_bytes", "gap_to_optimal_flops", "gap_to_optimal_bytes",
)
BEST_FILL = faded(ROLE_COLORS["gradient"])  # mint, at 25%: the same palette as every view
ERROR_COLOR = STATUS["removed"].color


# the columns a narrow table shows (the explorer's and the report's side panel; the full table is
# tr.memory_table()), and each column's short header (fits a 1024 px screen) and what it means, in which unit
PANEL_COLUMNS: tuple[str, ...] = ("strategy", "saved_activation_bytes", "saved_tensors", "recomputed_ops",
                                  "recomputed_random_ops", "recompute_flops", "forward_peak_bytes",
                                  "backward_peak_bytes")
COLUMN_WORDS: dict[str, tuple[str, str]] = {
    "strategy": ("strategy", "the partition strategy"),
    "saved_activation_bytes": ("saved", "saved activations, bytes of unique storages the backward keeps (views and "
                               "aliases count once; parameters and inputs excluded)"),
    "saved_tensors": ("tensors", "saved tensors: values the forward hands to the backward (count)"),
    "recomputed_ops": ("recomp.", "recomputed ops: forward ops the backward runs again (count)"),
    "recomputed_random_ops": ("random", "recomputed random ops (dropout, rand): the backward redraws them, so its "
                              "mask differs from the forward's unless the RNG state is replayed (count)"),
    "recompute_flops": ("FLOPs", "FLOPs of the recomputed ops (matmul/conv; pointwise ops count 0)"),
    "forward_peak_bytes": ("fwd peak", "forward peak: the most bytes held while the forward runs, parameters "
                           "included, as the step runs it (inductor's generated code; aot_eager: the graph op by op)"),
    "backward_peak_bytes": ("bwd peak", "backward peak: the most bytes held while the backward runs, gradients "
                            "included, as the step runs it"),
    "unfused_forward_peak_bytes": ("fwd walk", "forward peak of the unfused graph run op by op (a liveness walk)"),
    "unfused_backward_peak_bytes": ("bwd walk", "backward peak of the unfused graph run op by op"),
    "layout_copy_bytes": ("copies", "copies inductor's code saves for the backward in another layout (channels-last "
                          "weights) where the partition saves a parameter or input itself"),
    "eager_held_bytes": ("eager", "what code outside the graphs holds when the backward begins (measured with the "
                         "model; not in a log)"),
    "measured_forward_peak_bytes": ("real fwd", "the real compiled step's forward peak (measure()), plus the "
                                    "row's resident bytes"),
    "measured_backward_peak_bytes": ("real bwd", "the real compiled step's backward peak (measure())"),
    "offloaded_bytes": ("offloaded", "bytes activation offloading copied off the device for the backward (not in "
                        "'saved'; the peaks count a value only while it is on the device)"),
    "measured_saved_bytes": ("measured", "what the real torch.compile step kept for its backward (saved-tensor "
                             "hooks), counted as 'saved' counts: parameters and inputs excluded, their copies "
                             "included; the difference and its reason are under the table"),
}


def format_cell(column: str, value: Any, missing: str = "") -> str:
    """One cell of the memory table as people read it, by its column: sizes in B/KiB/MiB/GiB, FLOPs in
    units, seconds, the measured difference signed; ``missing`` where there is no value.  The one
    formatter of the notebook table, the terminal table and the pages' panel."""
    if is_missing(value):
        return missing
    if column == "measured_difference_bytes":  # measured minus estimated: the sign is the news
        return ("+" if int(value) > 0 else "") + format_bytes(value)
    if column.endswith("_bytes"):
        return format_bytes(value)
    if column.endswith("_flops"):
        return format_flops(value)
    if column == "seconds":
        return f"{value:.2f}"
    if column.endswith("_seconds"):  # a replay's forward/backward: milliseconds mostly
        return f"{value:.2f} s" if value >= 1 else f"{value * 1e3:.2f} ms"
    return str(value)


def _formatter(column: str) -> Any:
    return lambda v: format_cell(column, v)


def best_rows(df: pd.DataFrame) -> dict[str, set[Any]]:
    """Per lower-is-better column present: the index labels of the rows holding its minimum
    (error rows and missing values excluded).  A column where every row ties marks nothing."""
    ok = df["error"].isna() if "error" in df else pd.Series(True, index=df.index)
    out: dict[str, set[Any]] = {}
    for c in LOWER_IS_BETTER:
        if c not in df:
            continue
        values = df.loc[ok, c].dropna()
        if values.nunique() < 2:
            continue
        out[c] = set(values.index[values == values.min()])
    return out


def _empty_columns(df: pd.DataFrame) -> set[str]:
    """Metrics no strategy that ran has a value for (``gap_to_optimal_*`` without an ``optimal`` row):
    an empty row or column says nothing, so it is left out of what is shown (the frame keeps it)."""
    ran = df[df["error"].isna()] if "error" in df else df
    if not len(ran):
        return set()
    return {str(c) for c in df.columns
            if c not in ("strategy", "error") and not ran[c].map(lambda v: v is not None and v == v).any()}


def shown_columns(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` without the columns that say nothing on most runs where every row's is zero or empty:
    ``offloaded_bytes`` (no activation offloading), ``layout_copy_bytes`` (no layout copy),
    ``eager_held_bytes`` (no code outside the graphs, or a log), and the ``unfused_*`` walk where it is the
    peak shown beside it in every row (``aot_eager``: the step runs the graphs op by op); the frame keeps them."""
    quiet = [c for c in ("offloaded_bytes", "layout_copy_bytes", "eager_held_bytes")
             if c in df and not df[c].fillna(0).astype(bool).any()]
    quiet += [f"unfused_{c}" for c in ("forward_peak_bytes", "backward_peak_bytes")
              if f"unfused_{c}" in df and c in df and df[f"unfused_{c}"].fillna(-1).equals(df[c].fillna(-1))]
    if quiet:
        out = df.drop(columns=quiet)
        out.attrs = dict(df.attrs)
        return out
    return df


def style_memory_table(df: pd.DataFrame) -> Any:
    """A pandas ``Styler``: human units, best value per column on a mint fill and bold, error
    rows grey and italic, the caption underneath."""
    df = shown_columns(df)
    best = best_rows(df)
    errors = set(df.index[df["error"].notna()]) if "error" in df else set()

    def cell_styles(frame: pd.DataFrame) -> pd.DataFrame:
        styles = pd.DataFrame("", index=frame.index, columns=frame.columns)
        for c, rows in best.items():
            for r in rows:
                styles.loc[r, c] = f"background-color: {BEST_FILL}; font-weight: bold"
        for r in errors:
            styles.loc[r, :] = f"color: {ERROR_COLOR}; font-style: italic"
        return styles

    empty = _empty_columns(df)
    columns = [c for c in df.columns if c != "error" and c not in empty]
    if errors:  # the reason next to the strategy's name, not at the far right
        columns.insert(columns.index("strategy") + 1 if "strategy" in columns else 0, "error")
    styler = pd.DataFrame(df[columns]).style.format({c: _formatter(c) for c in columns}, escape="html")
    styler = styler.apply(cell_styles, axis=None).hide(axis="index")
    styler = styler.format_index(lambda c: str(c).replace("_", " "), axis=1)
    text_columns = [c for c in ("strategy", "error", "measured_reason") if c in columns]
    styles = [
        {"selector": "", "props": "border-collapse: collapse; font-size: 0.9em; "
                                  "font-variant-numeric: tabular-nums"},
        {"selector": "th", "props": "white-space: normal; max-width: 7.5em; vertical-align: bottom; "
                                    f"text-align: right; padding: 2px 8px; border-bottom: 2px solid {EDGE_COLOR}"},
        {"selector": "td", "props": "padding: 2px 8px; border-bottom: 1px solid #DDDDDD; white-space: nowrap"},
        {"selector": "caption", "props": "caption-side: bottom; text-align: left; font-size: 0.85em; "
                                         "max-width: 70em; padding-top: 6px"},
    ]
    styler = styler.set_table_styles(styles)
    numbers = [c for c in columns if c not in text_columns]
    styler = styler.set_properties(subset=numbers, **{"text-align": "right"})
    if text_columns:
        styler = styler.set_properties(subset=text_columns, **{"text-align": "left"})
    if "measured_reason" in columns:  # a sentence: it wraps
        styler = styler.set_properties(subset=["measured_reason"], **{"white-space": "normal", "min-width": "28em"})
    caption = df.attrs.get("caption")
    if caption:
        styler = styler.set_caption(caption + " Marked: the best value of each column.")
    return styler


_NUMBER_LIKE = re.compile(r"^\s*[-+]?[\d.]")


def _left_aligned(df: pd.DataFrame, colwidth: int) -> pd.DataFrame:
    """Text columns (names, ops, reasons: no value starts like a number) padded on the right, so a
    terminal shows them left-aligned as people read them; pandas right-aligns every cell.  Numbers and
    sizes ("8 KiB") keep pandas' right alignment, which lines their digits up."""
    out: dict[object, Any] = {}
    for c in df.columns:
        values = df[c]
        texts = [v for v in values if isinstance(v, str) and v]
        if not pd.api.types.is_string_dtype(values) or not texts or any(_NUMBER_LIKE.match(v) for v in texts):
            out[c] = values
            continue
        cells = ["" if v is None or (not isinstance(v, str) and v != v) else str(v) for v in values]
        cells = [v if len(v) <= colwidth else v[:colwidth - 3] + "..." for v in cells]
        w = max([len(str(c))] + [len(v) for v in cells])
        out[str(c).ljust(w)] = [v.ljust(w) for v in cells]
    return pd.DataFrame(out, index=df.index)


def fitted_text(df: pd.DataFrame, width: int = 100, drop: tuple[str, ...] = ()) -> str:
    """``df`` as terminal text at most ``width`` columns wide, text columns left-aligned: the columns
    in ``drop`` go first (in that order) while it is wider, then long cells are cut with an ellipsis."""
    df = df.copy()
    for colwidth in (70, 50, 40, 30, 24, 18):
        with pd.option_context("display.max_rows", None, "display.width", 10_000, "display.max_colwidth", colwidth):
            text = "\n".join(line.rstrip() for line in _left_aligned(df, colwidth).to_string(index=False).splitlines())
        if max((len(line) for line in text.splitlines()), default=0) <= width:
            return text
        if drop and drop[0] in df.columns:
            df = df.drop(columns=[drop[0]])
            drop = drop[1:]
    return "\n".join(line if len(line) <= width else line[:width - 1] + "…" for line in text.splitlines())


def _row_label(df: pd.DataFrame, r: Any) -> str:
    """A row's column header in the terminal table: its strategy, after its graph in a step's table
    (``graph 2 min_cut``, ``step min_cut``)."""
    strategy = str(df.loc[r, "strategy"]) if "strategy" in df else str(r)
    if "piece" not in df:
        return strategy
    piece = df.loc[r, "piece"]
    from fxviz.sources.graphs import graph_name  # here: a log's own table is printed without torch (issue 46)

    return f"{'step' if piece == 'total' else graph_name(int(piece))} {strategy}"


def memory_table_text(df: pd.DataFrame, width: int = 100) -> str:
    """The table for a terminal, one column per strategy (so it fits): human units, ``*`` after
    each row's best value, failures listed, then the caption wrapped to ``width``."""
    errors = df["error"].notna() if "error" in df else pd.Series(False, index=df.index)
    reasons = set(df["error"][errors]) if errors.any() else set()
    if len(df) and errors.all() and len(reasons) == 1:
        # one reason for every row (a graph without backward): said once, not as a grid of "failed"
        return "\n".join(textwrap.wrap(f"no strategy applies to this graph: {reasons.pop()} "
                                        f"({', '.join(str(x) for x in df['strategy'])})", width))
    df = shown_columns(df)
    best = best_rows(df)
    empty = _empty_columns(df)
    metrics = [c for c in df.columns
               if c not in ("piece", "strategy", "error", "seconds", "measured_reason") and c not in empty]
    shown = pd.DataFrame(index=pd.Index(metrics))
    for r in df.index:
        label = _row_label(df, r)
        if errors[r]:
            shown[label] = ["failed"] + [""] * (len(metrics) - 1)
            continue
        shown[label] = [_formatter(c)(df.loc[r, c]) + ("*" if r in best.get(c, ()) else "") for c in metrics]
    lines = [line.rstrip() for line in shown.to_string().splitlines()]
    for r in df.index[errors]:
        lines.append(f"{df.loc[r, 'strategy']} failed: {df.loc[r, 'error']}")
    if "measured_reason" in df:  # the measured twin's difference, in words, under its column
        for r in df.index[df["measured_reason"].notna()]:
            difference = format_cell("measured_difference_bytes", df.loc[r, "measured_difference_bytes"])
            lines += textwrap.wrap(f"measured - estimated ({df.loc[r, 'strategy']}): {difference}; "
                                   f"{df.loc[r, 'measured_reason']}", width, subsequent_indent="  ")
    caption = df.attrs.get("caption")
    if caption:
        lines.append("")
        lines += textwrap.wrap(caption + " *: the best value of each row.", width)
    return "\n".join(lines)


class MemoryTable(pd.DataFrame):
    """The raw memory table (exact integers) that displays itself styled in a notebook.  Its rows are
    labelled by strategy (``mt.loc["min_cut"]``; a step's table ``mt.loc["step min_cut"]``,
    ``mt.loc["graph 1 min_cut"]``), as its terminal text heads each column, so a selection
    (``mt.loc[:, ["saved_activation_bytes"]]``) keeps the names; the ``strategy`` column stays."""

    @property
    def _constructor(self) -> type:
        return MemoryTable

    @classmethod
    def of(cls, frame: pd.DataFrame) -> MemoryTable:
        """``frame`` (``analysis``'s memory table: exact integers, one row per strategy) as a
        ``MemoryTable`` labelled by strategy, its ``attrs`` kept."""
        out = cls(frame)
        out.attrs = dict(frame.attrs)
        if "strategy" in out.columns:
            out.index = pd.Index([_row_label(out, r) for r in out.index])
        return out

    def styled(self) -> Any:
        """The pandas ``Styler`` the notebook shows."""
        return style_memory_table(self)

    def _repr_html_(self) -> str:
        return style_memory_table(self).to_html()

    def to_text(self, width: int = 100) -> str:
        return memory_table_text(self, width)

    def __repr__(self) -> str:
        """In a terminal (``print(table)``, the REPL's echo) the table as ``to_text`` lays it out, one
        column per strategy, not pandas' ``[5 rows x 22 columns]`` with most columns cut; a slice
        that is no longer a whole memory table prints as the DataFrame it is."""
        if not {"strategy", "saved_activation_bytes"} <= set(self.columns):
            return super().__repr__()
        return (f"{self.to_text()}\n[memory table: {len(self)} strategies x {self.shape[1]} columns, a pandas "
                f"DataFrame; .to_string() prints it as one]")
