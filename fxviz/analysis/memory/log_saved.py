"""The saved table and the memory-table row of a logged graph's own partition (strategy ``logged``), made
from the light tier's facts (``sources.log.light``) without torch or a rebuild: the same rows, words and
columns ``saved.saved_table`` and ``table.memory_table`` give on the rebuilt graph (the tests hold them
side by side on logs of real runs)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fxviz.analysis.memory.columns import COLUMNS, table_frame
from fxviz.analysis.memory.saved_words import ROW_ORDER, SAVED_COLUMNS, output_words, saved_caption
from fxviz.core.errors import Say
from fxviz.sources.log.guards import allgathered_note
from fxviz.sources.log.light.logged import SavedValue
from fxviz.sources.log.light.nodes import GETITEM, LightNode, annotation, source_line
from fxviz.sources.log.light.piece import LightPiece
from fxviz.sources.log.signature import size_at
from fxviz.sources.role_names import LIFTED_STATE_ROLES, STATE_ROLES

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["logged_row", "logged_table", "logged_saved", "COMPILED_PEAKS_NOTE"]

_RECOMPUTED_RANDOM = ("recomputed_random_ops: random ops the backward runs again, drawing afresh unless torch "
                      "functionalizes the RNG (so the backward's mask is not the forward's): ")


def logged_row(piece: LightPiece) -> dict[str, Any]:
    """The memory table's row of strategy ``logged`` (every column of ``COLUMNS``).  The light tier walks the
    logged graphs op by op: the ``unfused_*`` peaks, and the step's own under ``aot_eager``; the peaks of
    inductor's code need the graph rebuilt (``COMPILED_PEAKS_NOTE``)."""
    row: dict[str, Any] = {c: None for c in COLUMNS}
    row.update(piece.facts.row, strategy="logged", seconds=0.0)
    row["unfused_forward_peak_bytes"] = row["forward_peak_bytes"]
    row["unfused_backward_peak_bytes"] = row["backward_peak_bytes"]
    if piece.backend == "inductor":
        row["forward_peak_bytes"] = row["backward_peak_bytes"] = None  # and its layout copies: the code's
    else:
        row["layout_copy_bytes"] = 0  # aot_eager runs the graphs as they are: no copy in another layout
    return row


COMPILED_PEAKS_NOTE = ("forward_peak_bytes, backward_peak_bytes of logged: the peaks of inductor's logged code need "
                       "the graph rebuilt (name another strategy: --strategy logged,min_cut; or "
                       "fxviz.load_logs(LOG).trace().memory_table()); unfused_* is the walk over the logged graphs.")
"""Why a log's own table of an inductor run leaves its peaks empty."""


def logged_table(rows: list[dict[str, Any]], base: str, notes: list[Any]) -> pd.DataFrame:
    """The memory table of ``rows`` (the ``logged`` row first, rows a cache holds after) with ``base``, the
    caption a rebuilt graph's table has (``columns.caption`` of the graph), and ``notes`` (text or ``Say``)
    after it, the words on random ops recomputed first as ``table.memory_table`` puts them."""
    redraws = [f"{r['strategy']} ({r['recomputed_random_ops']})" for r in rows if r.get("recomputed_random_ops")]
    words = list(dict.fromkeys(([_RECOMPUTED_RANDOM + ", ".join(redraws) + "."] if redraws else []) + notes))
    df = table_frame(rows)
    df.attrs["caption"] = Say(base, *(Say(" ", w) for w in words)) if words else base
    return df


def _sizes(n: LightNode, hints: dict[str, int]) -> tuple[int, ...] | None:
    a = annotation(n.annotation)
    return None if a is None else tuple(d if isinstance(d, int) else size_at(d, hints) for d in a.sizes)


class _Words:
    """What the saved table says of a logged value, as ``saved.op_words`` says it of a rebuilt node."""

    def __init__(self, piece: LightPiece) -> None:
        self.piece = piece
        self.roles = piece.roles
        self.modules = piece.modules

    def role(self, n: LightNode) -> tuple[str, str | None]:
        return self.roles.get(n.name, ("primal", None)) if n.op == "placeholder" else (n.op, None)

    def note(self, n: LightNode) -> str | None:
        role, qual = self.role(n)
        if n.op == "placeholder" and role in LIFTED_STATE_ROLES and qual:
            return allgathered_note(qual, self.piece.guards)  # FSDP2's unsharded parameters
        return None

    def module(self, n: LightNode) -> str | None:
        """``saved.owner_module``: the op's module, or the module holding a parameter or buffer."""
        role, qual = self.role(n)
        if n.op != "placeholder":
            return self.modules.get(n.name)
        if role in STATE_ROLES and qual and "." in qual:
            return qual.rsplit(".", 1)[0]
        return None

    def op(self, n: LightNode) -> str:
        if n.op == "placeholder":
            return "placeholder"
        if n.target is GETITEM and isinstance(n.args[0], LightNode):
            return f"{n.args[0].target.packet if n.args[0].target else n.args[0].op}[{n.args[1]}]"
        return n.target.packet if n.target is not None else n.op

    def what(self, n: LightNode) -> str:
        sized = (n.annotation or "").startswith("Sym(")
        if n.op == "placeholder":
            if sized:
                return "a size (SymInt)"
            role, qual = self.role(n)
            label = {"primal": "input", "tangent": "tangent"}.get(role, role)
            words = f"{label} `{qual}`" if qual else label
            note = self.note(n)
            return f"{words} ({note})" if note else words
        assert n.target is not None
        if n.target is GETITEM and isinstance(n.args[0], LightNode):
            parent = n.args[0]
            return output_words(parent.target.packet if parent.target else parent.op,
                                n.args[1] if isinstance(n.args[1], int) else 0)
        if n.target.view and n.args and isinstance(n.args[0], LightNode):
            base = n.args[0]
            role, qual = self.role(base)
            if qual and base.op == "placeholder" and role in STATE_ROLES:
                return f"a view of {role} `{qual}`"
            return f"a view of `{base.name}`"
        if sized:
            return f"a size ({n.target.packet})"
        return output_words(n.target.packet, 0)

    def row(self, sv: SavedValue) -> dict[str, Any]:
        # the forward graph's node: the run partitioned the joint after inductor's passes, which the forward
        # shows (a view of ``mul_51`` where the logged joint still has the ``alias`` the passes dropped)
        n = self.piece.forward.by_name.get(sv.name) or self.piece.graph.by_name[sv.name]
        a = annotation(n.annotation)
        return {"name": sv.name, "kind": sv.kind, "module": self.module(n), "op": self.op(n), "what": self.what(n),
                "shape": _sizes(n, self.piece.compile.hints), "dtype": a.dtype_name if a is not None else None,
                "bytes": sv.nbytes, "shares_storage_with": sv.shares_storage_with,
                "source": source_line(n) if n.op == "call_function" else None}


def logged_saved(piece: LightPiece) -> pd.DataFrame:
    """The saved table of strategy ``logged``: one row per value the run's backward read from its forward,
    as ``saved.saved_table`` makes it of the rebuilt graph (no comparison columns: another strategy needs
    the rebuild)."""
    import pandas as pd

    words = _Words(piece)
    rank = {k: i for i, k in enumerate(ROW_ORDER)}
    rows = sorted((words.row(sv) for sv in piece.facts.saved), key=lambda r: rank.get(r["kind"], 0))  # stable
    df = pd.DataFrame(rows, columns=["name"] + SAVED_COLUMNS).set_index("name")
    df["bytes"] = df["bytes"].astype("int64")
    df["logged"] = "saved"  # the strategy's own column, as saved.saved_table puts it first
    df.attrs["strategy"] = "logged"
    df.attrs["strategy_words"] = ""
    df.attrs["caption"] = saved_caption("logged", len(df), False, [])
    return df
