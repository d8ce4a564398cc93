"""How fxviz writes sizes and FLOP counts: one convention for the table, the drawings, the doctor,
the plots, the widget and the report.

Bytes in binary units (B, KiB, MiB, GiB, TiB: what ``torch.cuda.memory_summary`` and the
partitioner's logs use), three significant digits; FLOPs in decimal units.

    >>> format_bytes(1536), format_bytes(2048), format_bytes(512), format_bytes(256 * 2**20)
    ('1.5 KiB', '2 KiB', '512 B', '256 MiB')
    >>> format_flops(1428376960)
    '1.43 GFLOP'
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["BYTE_UNITS", "format_bytes", "format_flops", "byte_unit", "is_missing", "parse_size", "exact_size",
           "plural"]

BYTE_UNITS: tuple[tuple[str, int], ...] = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
_FLOP_UNITS: tuple[tuple[str, int], ...] = (("TFLOP", 10**12), ("GFLOP", 10**9), ("MFLOP", 10**6), ("kFLOP", 10**3))


def is_missing(n: Any) -> bool:
    """No number to show: None, NaN or pandas' NA."""
    if n is None:
        return True
    try:
        return bool(n != n) or (isinstance(n, float) and math.isinf(n))  # NaN, pandas NA
    except TypeError:  # pandas.NA refuses bool()
        return True


def _scaled(n: int, units: tuple[tuple[str, int], ...], base: str) -> str:
    for unit, size in units:
        if abs(n) >= size:
            value = n / size
            return f"{value:.3g} {unit}" if abs(value) < 1000 else f"{value:.0f} {unit}"
    return f"{n} {base}"


def format_bytes(n: Any, missing: str = "") -> str:
    """``1536`` -> ``'1.5 KiB'``; ``missing`` when there is no number (None, NaN, pandas NA)."""
    if is_missing(n):
        return missing
    return _scaled(int(n), BYTE_UNITS, "B")


def format_flops(n: Any, missing: str = "") -> str:
    """``1428376960`` -> ``'1.43 GFLOP'``; ``missing`` when there is no number."""
    if is_missing(n):
        return missing
    return _scaled(int(n), _FLOP_UNITS, "FLOP")


def byte_unit(largest: Any) -> tuple[str, int]:
    """The binary unit that keeps an axis of byte counts up to ``largest`` readable."""
    top = 0 if is_missing(largest) else int(largest)
    for unit, size in BYTE_UNITS:
        if top >= size:
            return unit, size
    return "B", 1


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(b|kib|mib|gib|tib)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int | None:
    """``'64MiB'`` -> ``67108864``, ``'1.5GiB'``, ``'1048576B'`` (binary units, any case); None
    when ``text`` is not a size.  Fractions of a byte round down.

        >>> parse_size("64MiB"), parse_size("1.5gib"), parse_size("1048576B"), parse_size("0.5")
        (67108864, 1610612736, 1048576, None)
    """
    m = _SIZE.match(text)
    if m is None:
        return None
    unit = m.group(2).lower()
    scale = 1 if unit == "b" else dict((u.lower(), n) for u, n in BYTE_UNITS)[unit]
    return int(float(m.group(1)) * scale)


def exact_size(n: int) -> str:
    """A byte count written exactly, in the largest binary unit that divides it (``parse_size``
    reads it back): ``67108864`` -> ``'64MiB'``, ``1610612736`` -> ``'1536MiB'``, ``1000`` -> ``'1000B'``."""
    for unit, size in BYTE_UNITS:
        if n and n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and ``word`` as a count reads: "1 value", "2 values" (``many``: an irregular plural)."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"
