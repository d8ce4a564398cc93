"""A logged graph as its run partitioned it, read from the log's text (issue 46): the memory table's
``logged`` row and the saved table in about a second on a 64-layer step's 29 MB log, where rebuilding the
joint graph on fake tensors takes minutes of a busy machine.  What a view of the same graph worked out
before (another strategy's row, its fate for each saved value) comes from the log cache
(``sources.log.cache``); a view that needs what neither holds rebuilds (``Run.trace``) and keeps its answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fxviz.analysis.memory.columns import caption
from fxviz.analysis.memory.log_saved import COMPILED_PEAKS_NOTE, logged_row, logged_saved, logged_table
from fxviz.analysis.memory.saved_words import saved_caption
from fxviz.analysis.strategy.choices import budget_strategy, offered_of
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import Blank, Do, Say
from fxviz.sources.log.cache import LogCache, piece_key
from fxviz.sources.log.index import Compile, Piece
from fxviz.sources.log.light.layers import layers_text
from fxviz.sources.log.light.nodes import annotation
from fxviz.sources.log.light.piece import LightPiece
from fxviz.sources.log.run_config import run_budget
from fxviz.sources.log_source import LogSource

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["LoggedView", "REBUILD_SECONDS_PER_NODE", "PARTITION_SECONDS_PER_NODE"]

REBUILD_SECONDS_PER_NODE = 0.0015
"""Seconds a rebuild of a logged joint graph on fake tensors takes per node (inductor's passes included):
20 CPU s for a 64-layer Llama step's 14,960 nodes (benchmarks/RESULTS.md, issue 46)."""
PARTITION_SECONDS_PER_NODE = 0.0007
"""Seconds one of torch's partitioners takes per joint node (min-cut: 10.9 CPU s on the same graph)."""


class LoggedView:
    """Piece ``p`` of compile ``c`` read from the log's text: :meth:`memory_table` and :meth:`saved` of the
    run's own partition (strategy ``logged``), and of the strategies an earlier view of this graph kept
    (``cache``; None keeps nothing).  Raises ``light.text.Declined`` when the text holds what the light tier
    does not read (the caller rebuilds)."""

    def __init__(self, c: Compile, p: Piece, cache: LogCache | None = None, notes: Sequence[str] = ()) -> None:
        self.compile, self.part = c, p
        self.piece = LightPiece(c, p)
        self.source: LogSource = self.piece.source
        self.notes = list(notes)
        self.cache = cache
        self.key = piece_key(c, p) if cache is not None else None
        self.entry: dict[str, Any] = cache.load(self.key) if cache is not None else {}

    # --- what the run did, read once (from the cache, else the text) ------------------------------------
    def _logged(self) -> dict[str, Any]:
        got = self.entry.get("logged")
        if got is None:
            piece = self.piece
            got = {"row": logged_row(piece), "caption": caption(piece, piece.symbolic, ()), "nodes": piece.nodes,
                   "devices": sorted({a.device for n in piece.graph.placeholders
                                      if (a := annotation(n.annotation)) is not None and a.device}),
                   "recomputed": piece.facts.recomputed, "saved": [s.name for s in piece.facts.saved],
                   "missing": piece.missing}
            self._keep("logged", got)
        return dict(got)

    def _keep(self, part: str, value: Any) -> None:
        self.entry[part] = value
        if self.cache is not None:
            self.cache.update(self.key, part, value)

    @property
    def nodes(self) -> int:
        """The joint graph's nodes (inputs and ops)."""
        return int(self._logged()["nodes"])

    @property
    def devices(self) -> list[str]:
        """The devices of the graph's inputs, as the log's annotations name them."""
        return list(self._logged()["devices"])

    @property
    def offered(self) -> tuple[Strategy, ...]:
        """The strategies a rebuilt trace of this graph offers (``choices.offered``): ``logged``, the run's
        ``budget:B`` under a budget, then torch's partitioners."""
        return offered_of(True, budget_strategy(*run_budget(self.compile.functorch)), False)

    def kept(self) -> list[str]:
        """The strategies whose rows an earlier view kept, in offered order (``logged`` aside)."""
        rows = [name for name in self.entry.get("rows", {}) if name != "logged"]
        order = [s.name for s in self.offered]
        return sorted(rows, key=lambda s: order.index(s) if s in order else len(order))

    # --- the memory table --------------------------------------------------------------------------------
    def memory_table(self, strategies: Sequence[Strategy] | None = None) -> pd.DataFrame | None:
        """The memory table of ``strategies`` (default: ``logged`` and every strategy kept), or None when one
        is neither (the caller rebuilds: ``Run.trace``)."""
        names = ["logged", *self.kept()] if strategies is None else [s.name for s in strategies]
        kept = self.entry.get("rows", {})
        if any(n != "logged" and n not in kept for n in names):
            return None
        logged = self._logged()
        rows, notes = [], list(self.notes)
        for n in names:  # logged: as a rebuild left it, else read from the text
            rows.append(kept[n]["row"] if n in kept else logged["row"])
            notes += kept[n]["notes"] if n in kept else []
        if logged.get("missing"):
            notes.append(f"{logged['missing'][0].upper()}{logged['missing'][1:]}.")
        if "logged" in names and "logged" not in kept and self.piece.backend == "inductor":
            notes.append(COMPILED_PEAKS_NOTE)
        if strategies is None and not logged.get("missing"):
            notes.append(self._others_note(names))
        return logged_table(rows, logged["caption"], notes)

    def _others_note(self, shown: list[str]) -> Say:
        """What the default table leaves out, and what it costs to ask for it."""
        others = [s.name for s in self.offered if s.name not in shown]
        lead = ("Shown: logged, the run's own partition, as an earlier rebuild of this log computed it"
                if "logged" in self.entry.get("rows", {}) else
                "Shown: logged, the run's own partition, read from the log's text (the graph is not rebuilt)")
        if len(shown) > 1:
            lead += f"; {', '.join(shown[1:])}, kept from an earlier view of this log"
        if not others:
            return Say(lead + ".")
        nodes = self.nodes
        cost = nodes * (REBUILD_SECONDS_PER_NODE + PARTITION_SECONDS_PER_NODE * len(others))
        ask = ",".join(["logged", *others])
        return Say(f"{lead}. The other strategies ({', '.join(others)}) rebuild the joint graph of {nodes:,} nodes "
                   f"on fake tensors and partition it, about {max(cost, 1):.0f} s here; each is kept for later views "
                   "of this log: ", Do("memory_table", (("strategies", Blank(repr(ask), ask)),), on="view"), ".")

    def keep_table(self, df: pd.DataFrame) -> None:
        """Keep the rows of a rebuilt trace's memory table (a strategy that failed aside) for later views:
        ``logged``'s too, which then carries what only the rebuild gives (inductor's code's peaks).  Their
        caption's words are made again from the rows (random ops recomputed)."""
        rows = dict(self.entry.get("rows", {}))
        for _, r in df.iterrows():
            name = str(r["strategy"])
            offloads = str(r.get("offloaded_bytes")) not in ("0", "<NA>")  # its caption words are its partition's
            if isinstance(r.get("error"), str) or offloads:
                continue
            rows[name] = {"row": {k: _plain(v) for k, v in r.items()}, "notes": []}
        self._keep("rows", rows)

    # --- the saved table ---------------------------------------------------------------------------------
    def saved(self, compare: Sequence[str] | None = None) -> pd.DataFrame:
        """The saved table of strategy ``logged``, with a column for each of ``compare`` (default: every
        strategy whose fates an earlier view kept) that the cache holds."""
        kept = self.entry.get("fates", {})
        got = self.entry.get("saved_rows")
        if got is None:
            df = logged_saved(self.piece)
            self._keep("saved_rows", [{"name": i, **{k: _plain(v) for k, v in r.items()}} for i, r in df.iterrows()])
            self._keep("layers", layers_text(self.piece.layers))
        else:
            df = _saved_frame(got)
        names = [n for n in (compare if compare is not None else kept) if n in kept and n != "logged"]
        for n in names:
            df[n] = [_fate(kept[n], v) for v in df.index]
        df.attrs["caption"] = saved_caption("logged", len(df), False, names)
        return df

    @property
    def layers(self) -> str | None:
        """The model's stacks of identical layers in one sentence (``light.layers``), once :meth:`saved` ran."""
        return self.entry.get("layers")

    def keep_fates(self, name: str, saved: Sequence[str], recomputed: Sequence[str], offloaded: Sequence[str],
                   error: str | None) -> None:
        """Keep what strategy ``name`` does with each value (a rebuilt trace's partition) for later views."""
        fates = dict(self.entry.get("fates", {}))
        fates[name] = {"saved": list(saved), "recomputed": list(recomputed), "offloaded": list(offloaded),
                       "error": error}
        self._keep("fates", fates)


def _fate(kept: dict[str, Any], name: str) -> str:
    """``saved.fate`` of a kept partition."""
    if kept.get("error"):
        return "failed"
    if name in kept["saved"]:
        return "saved"
    if name in kept["offloaded"]:
        return "offloaded"
    return "recomputed" if name in kept["recomputed"] else "not needed"


def _plain(v: Any) -> Any:
    """A cell as JSON keeps it: a shape as a list, NaN and pandas' NA as None."""
    if isinstance(v, tuple):
        return list(v)
    try:
        return None if v is None or v != v else v
    except TypeError:  # pandas' NA: its comparison has no truth value
        return None


def _saved_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A kept saved table back as the frame ``logged_saved`` made."""
    import pandas as pd

    from fxviz.analysis.memory.saved_words import SAVED_COLUMNS

    df = pd.DataFrame([{**r, "shape": tuple(r["shape"]) if r.get("shape") is not None else None} for r in rows],
                      columns=["name"] + SAVED_COLUMNS).set_index("name")
    df["bytes"] = df["bytes"].astype("int64")
    df["logged"] = "saved"
    df.attrs.update(strategy="logged", strategy_words="", caption=saved_caption("logged", len(df), False, []))
    return df
