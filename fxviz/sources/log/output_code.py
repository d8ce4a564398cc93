"""The code inductor generated for one logged compile: its forward and backward wrapper modules, as the
log's ``inductor_output_code`` records hold them (the text ``GraphLowering.codegen()`` returns).

A compile logs its forward's code when it compiles and its backward's when the backward first runs
(AOTAutograd compiles it lazily): the backward's is the one whose ``call`` unpacks ``tangents_*``.
With several graphs in one compile (DDP buckets), the ``piece``-th of each.  Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from fxviz.sources.log.reader import ReadStats, Record, read_records

__all__ = ["OutputCode", "read_output_code"]


@dataclass(frozen=True)
class OutputCode:
    """One logged compile's forward code, and its backward's (None when the log holds none)."""

    forward: str
    backward: str | None


def _unpacks_tangents(code: str) -> bool:
    call = code[code.find("def call("):]
    return "tangents_" in call.split("= args", 1)[0]


def read_output_code(path: str, compile_id: str, piece: int = 0) -> OutputCode | None:
    """The output code of compile ``compile_id`` (``"0/0"``) in the log file ``path``; None where the log
    holds none (another backend, a cache hit that logged no code, a compile id it does not name)."""
    frame, _, number = compile_id.lstrip("!").rpartition("/")
    if not frame.isdigit() or not number.isdigit():
        return None
    key = (int(frame), int(number))
    codes: list[str] = []

    def keep(r: Record) -> bool:
        return r.kind == "inductor_output_code"

    with open(path, "rb") as f:
        for r in read_records(f, ReadStats(), keep=keep):
            if r.kind == "inductor_output_code" and r.payload is not None and r.compile_key[:2] == key \
                    and "def call(" in r.payload:
                codes.append(r.payload)
    forwards = [c for c in codes if not _unpacks_tangents(c)]
    backwards = [c for c in codes if _unpacks_tangents(c)]
    if piece >= len(forwards):
        return None
    return OutputCode(forwards[piece], backwards[piece] if piece < len(backwards) else None)
