"""Stream the records of a structured trace log (``TORCH_TRACE=dir``), one at a time.

A log is a sequence of records.  Each starts with a glog-style line whose tail is a JSON
envelope (``{"aot_joint_graph": {}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0,
"has_payload": "<md5>"}``); a record with a payload continues with tab-indented lines.  The
writer is torch's structured-trace handler (read it in torch's ``_logging/_internal.py``).

The reader holds one block of the file at a time (and the payloads of the kinds the caller asks
for, one record's at a time); each record carries the byte offset of its payload so a later pass
can seek straight to it.  A 1 GB log therefore never needs 1 GB of memory.
"""

from __future__ import annotations

import functools
import json
import pathlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from fxviz.core import supported as _supported
from fxviz.core.errors import FxvizWarning, LogError

__all__ = ["Record", "ReadStats", "read_records", "read_payload", "log_files", "ENVELOPE_KEYS", "other_torch_notes",
           "warn_other_torch", "payload_md5"]

# glog prefix: level letter, MMDD hh:mm:ss.micro, thread/process id, file:line] -- optional [rankN]:
# (matched from a line's start with match(buf, start, end): no ^, which would only match at buf's start)
_HEADER = re.compile(rb"(?:\[rank\d+\]:)?[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]*\] (\{.*\})\s*$")
_LINE_START = re.compile(rb"\n(?=[^\t])")
"""The newline before a line that is no payload line (payload lines start with a tab): a record's
header, a blank or a stray line.  A literal first byte: ``re`` scans for it in C, no Python step per line."""
_BLOCK = 1 << 23
_JSON = json.JSONDecoder()
"""Bytes read at a time (8 MB): a block is searched in one call; memory is a block and one kept payload."""

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
    raw: bytes | None = None  # the payload as the file holds it (tab-led lines): kept only for the kinds asked for

    @functools.cached_property
    def payload(self) -> str | None:
        """The kept payload as torch wrote it (each line without its tab), decoded; None when not kept."""
        return None if self.raw is None else _untabbed(self.raw).decode("utf-8", "replace")

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


def read_records(f: IO[bytes], stats: ReadStats, keep: Callable[[Record], bool] = lambda r: False) -> Iterator[Record]:
    """Yield every record of a binary file object, in order, once its payload has been read.

    ``keep(record)`` says whether to collect the record's payload into ``record.raw`` (only then is it
    held in memory; ``record.payload`` decodes it).

    The file is read in blocks and its record lines found with one ``re`` search per block (a payload
    line starts with a tab, every other line is a record's header or a stray): payloads nobody asked for
    are skipped at C speed, never split into lines.  Reading a big log line by line in Python made
    ``fxviz logs`` several times slower than tlparse (issues 26 and 36).
    """
    base = 0  # the file offset of buf[0]
    buf = b""
    current: Record | None = None
    kept: list[bytes] | None = None  # the current record's payload so far, as the file holds it
    expect_payload = got_payload = False
    last_byte = b""
    eof = False

    def payload_lines(a: int, b: int) -> None:
        """``buf[a:b]``, payload lines: the current record's (kept when asked for), or corrupt."""
        nonlocal got_payload
        if current is None:
            stats.corrupt_lines += _lines(buf, a, b)
            return
        if not got_payload:
            got_payload = True
            current.payload_offset = base + a
        if kept is not None:
            kept.append(buf[a:b])

    while not eof:
        chunk = f.read(_BLOCK)
        eof = not chunk
        last_byte = chunk[-1:] or last_byte
        end = len(buf) + len(chunk) if eof else len(buf) + chunk.rfind(b"\n") + 1
        if not eof and end == len(buf):  # no line ends in this chunk: read on
            buf += chunk
            continue
        buf += chunk
        pos = 0
        starts = [0] if buf[:1] not in (b"\t", b"") else []
        starts += [m.end() for m in _LINE_START.finditer(buf, 0, end)]
        for s in starts:
            if s > pos:  # payload lines
                payload_lines(pos, s)
            e = buf.find(b"\n", s, end) + 1 or end
            pos = e
            if current is not None:
                if kept is not None:
                    current.raw = b"".join(kept)
                yield current
                current, kept = None, None
            m = _HEADER.match(buf, s, e)
            if m is None:
                raw = buf[s:e]
                if raw.strip():
                    stats.corrupt_lines += 1
                    stats.truncated = stats.truncated or raw[-1:] != b"\n"  # a header cut short
                continue
            try:  # json.loads, less its work on bytes (it guesses their encoding: a header's is utf-8)
                text = m.group(1).decode()
                envelope, stop = _JSON.raw_decode(text)
                if stop != len(text):
                    raise ValueError("extra data after the envelope")
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
        if end > pos:  # payload lines up to the block's last whole line
            payload_lines(pos, end)
        base += end
        buf = buf[end:]
    stats.bytes = base
    # only the file's last line can lack its newline; that alone is no cut (9 complete logs of other
    # people's runs end so): a record is whole when its payload matches the md5 torch wrote for it
    cut = bool(last_byte) and last_byte != b"\n"
    if current is not None:
        whole = _payload_md5_matches(f, current) if expect_payload and got_payload else None
        if (expect_payload and not got_payload) or whole is False or (cut and whole is None and expect_payload):
            stats.truncated = True
        elif cut and not expect_payload and got_payload:
            stats.truncated = True  # payload lines after a record that announced none
        if kept is not None:
            current.raw = b"".join(kept)
        yield current


def _lines(buf: bytes, start: int, end: int) -> int:
    """How many lines ``buf[start:end]`` holds (the last may lack its newline)."""
    return buf.count(b"\n", start, end) + (buf[end - 1:end] != b"\n")


def _untabbed(data: bytes) -> bytes:
    """Payload lines as the file holds them (``\tline\n``...) as the payload torch wrote: each line
    without its leading tab, joined by newlines (the last one's dropped)."""
    if data.endswith(b"\n"):
        data = data[:-1]  # the last line's newline (a line may be a tab alone: its payload line is empty)
    return data[1:].replace(b"\n\t", b"\n")


def payload_md5(raw: bytes) -> str:
    """The md5 of a payload as the file holds it (tab-led lines), as torch computes ``has_payload``."""
    import hashlib  # here: its OpenSSL load is start-up time every other reading skips

    return hashlib.md5(_untabbed(raw), usedforsecurity=False).hexdigest()


def _payload_md5_matches(f: IO[bytes], record: Record) -> bool | None:
    """Whether the last record's payload is all there: a file cut between two payload lines ends
    cleanly, and a whole one may lack its final newline, so only the payload's md5, which torch writes
    as ``has_payload``, can tell.  None when there is nothing to check against."""
    digest = record.envelope.get("has_payload")
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{32}", digest)) or not f.seekable():
        return None
    f.seek(record.payload_offset)
    data = f.read()
    m = _LINE_START.search(data)
    if m is not None:  # a line written after the read: the payload ends before it
        data = data[:m.end()]
    return payload_md5(data) == digest


def read_payload(path: str, offset: int) -> str:
    """The payload that starts at byte ``offset`` of ``path`` (up to the next record)."""
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(_BLOCK)
        if data[:1] != b"\t":
            return ""
        searched = 0
        while True:
            m = _LINE_START.search(data, searched)
            if m is not None:
                data = data[:m.end()]
                break
            chunk = f.read(_BLOCK)
            if not chunk:
                break
            searched = len(data) - 1  # the last newline may start a record in the next block
            data += chunk
    return _untabbed(data).decode("utf-8", "replace")


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
