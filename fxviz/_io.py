"""Atomic file writes: a temporary file beside the target, then ``os.replace``.

A crash, a full disk or Ctrl-C never leaves a half-written SVG, PNG or report behind, and the
previous file survives any failure.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

__all__ = ["write_atomic"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> pathlib.Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically, with normal file permissions."""
    path = pathlib.Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
