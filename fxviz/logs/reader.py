"""Stream the records of a structured trace log (``TORCH_TRACE=dir``), one at a time.

A log is a sequence of records.  Each starts with a glog-style line whose tail is a JSON
envelope (``{"aot_joint_graph": {}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0,
"has_payload": "<md5>"}``); a record with a payload continues with tab-indented lines.  The
writer is torch's structured-trace handler (read it in torch's ``_logging/_internal.py``).

The reader holds one line at a time: payloads are handed to the caller line by line (or kept,
for the kinds it asks for), and each record carries the byte offset of its payload so a later
pass can seek straight to it.  A 1 GB log therefore never needs 1 GB of memory.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from .. import _supported
from ..errors import FxvizWarning, LogError

__all__ = ["Record", "ReadStats", "read_records", "read_payload", "log_files", "ENVELOPE_KEYS", "other_torch_notes",
           "warn_other_torch"]

# glog prefix: level letter, MMDD hh:mm:ss.micro, thread/process id, file:line] -- optional [rankN]:
_HEADER = re.compile(rb"^(?:\[rank\d+\]:)?[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]*\] (\{.*\})\s*$")

ENVELOPE_KEYS = frozenset({
    "frame_id", "frame_compile_id", "attempt", "has_payload", "rank", "compiled_autograd_id", "stack",
    "payload_filename",
})
"""Envelope fields that are not the record's kind."""


def log_files(path: str | pathlib.Path) -> list[str]:
    """The files of a ``TORCH_TRACE`` directory (one per rank), or the one file given; a missing path or an
    empty directory raises ``LogError``.  Torch-free, so ``fxviz logs /missing`` answers at once."""
    p = pathlib.Path(path)
    if not p.exists():
        raise LogError(f"no such log: {p}", "pass the directory TORCH_TRACE=dir wrote, or one file in it")
    files = sorted(str(f) for f in p.iterdir() if f.is_file() and not f.name.startswith(".")) if p.is_dir() \
        else [str(p)]
    if not files:
        raise LogError(f"{p} is empty: no log files", "run the training with TORCH_TRACE=<this dir> set")
    return files


@dataclass
class Record:
    """One record: its kind (``aot_joint_graph``, ``artifact``...), the kind's metadata, the
    envelope, and where its payload starts in the file (``payload_offset``, -1 when none)."""

    kind: str
    metadata: Any
    envelope: dict[str, Any]
    payload_offset: int = -1
    payload: str | None = None  # kept only for the kinds the caller asked for
    tally: dict[str, Any] = field(default_factory=dict)  # what ``on_payload_line`` counted

    @property
    def compile_key(self) -> tuple[int | None, int | None, int, int | None]:
        """(frame_id, frame_compile_id, attempt, compiled_autograd_id) of the compile it belongs to."""
        e = self.envelope
        return (e.get("frame_id"), e.get("frame_compile_id"), int(e.get("attempt") or 0),
                e.get("compiled_autograd_id"))

    @property
    def artifact_name(self) -> str | None:
        return self.metadata.get("name") if self.kind == "artifact" and isinstance(self.metadata, dict) else None


@dataclass
class ReadStats:
    """What the reader met besides well-formed records."""

    records: int = 0
    corrupt_lines: int = 0  # neither a record header nor a payload line, or a header with bad JSON
    truncated: bool = False  # the file ends inside a record: a header cut short, a payload short of its md5
    kinds: dict[str, int] = field(default_factory=dict)
    bytes: int = 0


def _kind(envelope: dict[str, Any]) -> tuple[str, Any]:
    for k, v in envelope.items():
        if k not in ENVELOPE_KEYS:
            return k, v
    return "unknown", None


def read_records(f: IO[bytes], stats: ReadStats, keep: Callable[[Record], bool] = lambda r: False,
                 on_payload_line: Callable[[Record, str], None] | None = None,
                 wants_lines: Callable[[Record], bool] | None = None) -> Iterator[Record]:
    """Yield every record of a binary file object, in order.

    ``keep(record)`` says whether to collect the record's payload into ``record.payload``
    (only then is it held in memory); ``on_payload_line(record, line)`` sees every payload line
    (without its leading tab) of every record ``wants_lines(record)`` accepts (all when it is None),
    for counting on the fly.  A record is yielded once its payload has been read.

    Payload lines nobody asked for are only counted past (their byte offsets), never decoded: most of
    a big log is payloads fxviz does not read (chromium events, storages, guards), and decoding each
    line made reading a 100 MB log several times slower than tlparse (issue 26).
    """
    offset = 0
    current: Record | None = None
    kept: list[bytes] | None = None
    per_line = False  # whether on_payload_line sees the current record's lines
    expect_payload = False
    got_payload = False
    raw_last = b""
    for raw in f:
        raw_last = raw
        start = offset
        offset += len(raw)
        if raw[:1] == b"\t":
            if current is None:
                stats.corrupt_lines += 1
                continue
            if not got_payload:
                got_payload = True
                current.payload_offset = start
            if kept is not None:
                kept.append(raw)
            if per_line:
                on_payload_line(current, raw[1:].decode("utf-8", "replace").rstrip("\n"))  # type: ignore[misc]
            continue
        if current is not None:
            if kept is not None:
                current.payload = _joined(kept)
            yield current
            current, kept = None, None
        m = _HEADER.match(raw)
        if m is None:
            if raw.strip():
                stats.corrupt_lines += 1
                stats.truncated = stats.truncated or raw[-1:] != b"\n"  # a header cut short
            continue
        try:
            envelope = json.loads(m.group(1))
        except ValueError:
            stats.corrupt_lines += 1
            continue
        if not isinstance(envelope, dict):
            stats.corrupt_lines += 1
            continue
        kind, meta = _kind(envelope)
        current = Record(kind, meta, envelope)
        stats.records += 1
        stats.kinds[kind] = stats.kinds.get(kind, 0) + 1
        expect_payload = "has_payload" in envelope
        got_payload = False
        kept = [] if keep(current) else None
        per_line = on_payload_line is not None and (wants_lines is None or wants_lines(current))
    stats.bytes = offset
    # only the file's last line can lack its newline; that alone is no cut (9 complete logs of other
    # people's runs end so): a record is whole when its payload matches the md5 torch wrote for it
    cut = bool(raw_last) and raw_last[-1:] != b"\n"
    if current is not None:
        whole = _payload_md5_matches(f, current) if expect_payload and got_payload else None
        if (expect_payload and not got_payload) or whole is False or (cut and whole is None and expect_payload):
            stats.truncated = True
        elif cut and not expect_payload and raw_last[:1] == b"\t":
            stats.truncated = True  # payload lines after a record that announced none
        if kept is not None:
            current.payload = _joined(kept)
        yield current


def _joined(lines: list[bytes]) -> str:
    """A kept payload as text, decoded once: each line without its leading tab and its newline."""
    return "\n".join(raw[1:].decode("utf-8", "replace").rstrip("\n") for raw in lines)


def _payload_md5_matches(f: IO[bytes], record: Record) -> bool | None:
    """Whether the last record's payload is all there: a file cut between two payload lines ends
    cleanly, and a whole one may lack its final newline, so only the payload's md5, which torch writes
    as ``has_payload``, can tell.  None when there is nothing to check against."""
    digest = record.envelope.get("has_payload")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{32}", digest)) or not f.seekable():
        return None
    f.seek(record.payload_offset)
    h = hashlib.md5(usedforsecurity=False)
    first = True
    for raw in f:
        if not raw.startswith(b"\t"):
            break
        h.update((b"" if first else b"\n") + raw[1:].rstrip(b"\n"))
        first = False
    return h.hexdigest() == digest


def read_payload(path: str, offset: int) -> str:
    """The payload that starts at byte ``offset`` of ``path`` (up to the next record)."""
    out: list[str] = []
    with open(path, "rb") as f:
        f.seek(offset)
        for raw in f:
            if not raw.startswith(b"\t"):
                break
            out.append(raw[1:].decode("utf-8", "replace").rstrip("\n"))
    return "\n".join(out)


def other_torch_notes(written: list[str], reading: str | None = None) -> list[str]:
    """One sentence per torch minor that wrote the log other than the one reading it (the log records
    its writer in the ``torch_version`` artifact): the graphs are the run's, but every result fxviz
    computes from them (decompositions, partitioners, inductor's passes) is this torch's."""
    here = reading or _supported.installed_torch()
    notes = []
    for v in dict.fromkeys(written):
        try:
            same = _supported.torch_minor(v) == _supported.torch_minor(here)
        except ImportError:  # a version string fxviz cannot read: nothing to compare
            continue
        if not same:
            notes.append(f"the log was written by torch {v} and is read with torch {here}: strategy 'logged' is the "
                         f"run's own; every other strategy is computed by torch {here}'s partitioners and "
                         f"passes, which may choose differently from torch {v}'s")
    return notes


def warn_other_torch(written: list[str]) -> None:
    """Warn once per torch minor that wrote the log other than the reading one (``other_torch_notes``)."""
    import warnings

    for note in other_torch_notes(written):
        warnings.warn(note, FxvizWarning, stacklevel=3)
