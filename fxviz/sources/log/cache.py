"""What a view of a logged graph worked out, kept on disk for the next view of the same graph (issue 46).

A log's graphs do not change: each payload carries the md5 torch wrote for it, which the index checks
(``Piece.damaged``).  An entry is keyed by those md5s (the joint, forward and backward graphs', dynamo's
graph's and guards'), the compile's other logged facts (input sources, size hints, functorch's config), the
torch that reads it and fxviz's own code: a changed payload, another torch or an edited fxviz is another key.
Entries are JSON (memory-table rows, saved values and fates, each op's module), never pickles of torch's
objects, under ``$FXVIZ_CACHE_DIR`` or ``$XDG_CACHE_HOME/fxviz`` (``~/.cache/fxviz``); the oldest are
dropped past ``LIMIT_BYTES``.  ``FXVIZ_CACHE_DIR=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
from functools import lru_cache
from typing import Any

from fxviz.core import supported
from fxviz.sources.log.index import Compile, Piece

__all__ = ["LogCache", "cache_root", "piece_key", "LIMIT_BYTES"]

LIMIT_BYTES = 512 << 20
"""The most the cache keeps; the entries read longest ago go first."""
_VERSION = 1  # the entries' layout


def cache_root() -> pathlib.Path | None:
    """Where entries live (None: turned off)."""
    chosen = os.environ.get("FXVIZ_CACHE_DIR")
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "0", "off", "none") else pathlib.Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "fxviz"


@lru_cache(maxsize=1)
def _code_stamp() -> str:
    """fxviz's own code, as sizes and times of its modules: an edited fxviz computes afresh."""
    root = pathlib.Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def piece_key(c: Compile, p: Piece) -> str | None:
    """The entry of piece ``p`` of ``c`` (None when a graph of it is damaged or its md5 is not logged)."""
    kinds = [k for k in ("aot_joint_graph", "aot_forward_graph", "aot_backward_graph", "aot_inference_graph")
             if k in p.offsets]
    if p.damaged or not kinds or any(k not in p.md5 for k in kinds):
        return None
    facts = {
        "layout": _VERSION, "code": _code_stamp(), "torch": supported.installed_torch(),
        "graphs": {k: p.md5[k] for k in kinds}, "dynamo": c.dynamo_md5, "guards": c.guards_md5,
        "sources": sorted(c.sources), "parameters": sorted((k, repr(v)) for k, v in c.parameters.items()),
        "hints": sorted(c.hints.items()), "static": p.static, "functorch": sorted((k, repr(v)) for k, v in
                                                                                 c.functorch.items()),
        "inductor": c.inductor, "pieces": len(c.pieces), "piece": c.pieces.index(p),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True, default=str).encode()).hexdigest()[:40]


class LogCache:
    """The entries under ``root`` (default :func:`cache_root`; nothing is kept when it is None or cannot
    be written)."""

    def __init__(self, root: pathlib.Path | None = None) -> None:
        self.root = root if root is not None else cache_root()

    def _path(self, key: str) -> pathlib.Path | None:
        return None if self.root is None else self.root / "logs" / f"{key}.json"

    def load(self, key: str | None) -> dict[str, Any]:
        """The entry of ``key`` ({} when there is none, or it cannot be read)."""
        path = self._path(key) if key is not None else None
        if path is None or not path.is_file():
            return {}
        try:
            data = json.loads(path.read_text())
            os.utime(path)  # read now: the last to go
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("layout") == _VERSION else {}

    def update(self, key: str | None, part: str, value: Any) -> None:
        """Set ``part`` of the entry of ``key`` (atomically; a cache that cannot be written is skipped)."""
        path = self._path(key) if key is not None else None
        if path is None:
            return
        data = self.load(key) or {"layout": _VERSION}
        data[part] = value
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data, default=_plain))
            os.replace(tmp, path)
            self._trim(path.parent)
        except OSError:
            return

    def text(self, key: str | None, name: str) -> str | None:
        """A text kept beside the entry of ``key`` (a rebuilt graph's ``print_readable``), or None."""
        path = self._path(key) if key is not None else None
        found = path.with_suffix(f".{name}.txt") if path is not None else None
        if found is None or not found.is_file():
            return None
        try:
            os.utime(found)
            return found.read_text()
        except OSError:
            return None

    def keep_text(self, key: str | None, name: str, text: str) -> None:
        """Keep ``text`` beside the entry of ``key`` (atomically; skipped where nothing can be written)."""
        path = self._path(key) if key is not None else None
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text)
            os.replace(tmp, path.with_suffix(f".{name}.txt"))
            self._trim(path.parent)
        except OSError:
            return

    @staticmethod
    def _trim(folder: pathlib.Path) -> None:
        """Drop the entries (and texts) read longest ago while the folder holds more than ``LIMIT_BYTES``."""
        files = sorted((f for f in folder.iterdir() if f.suffix in (".json", ".txt")), key=lambda f: f.stat().st_mtime)
        total = sum(f.stat().st_size for f in files)
        for f in files:
            if total <= LIMIT_BYTES:
                return
            total -= f.stat().st_size
            f.unlink(missing_ok=True)


def _plain(value: Any) -> Any:
    """What JSON does not take itself: tuples of a shape are lists; numpy/pandas scalars their Python value."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not kept in the cache")
