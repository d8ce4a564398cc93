"""Atomic file writes: a temporary file beside the target, then ``os.replace``.

A crash, a full disk or Ctrl-C never leaves a half-written SVG, PNG or report behind, and the
previous file survives any failure.  A missing directory is not created (a typo in ``-o`` would
otherwise make one silently, as pandas' ``to_csv`` also refuses to); it and an unwritable place
are ``OutputError``s that name the path.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

from fxviz.core.errors import OutputError

__all__ = ["check_writable", "write_atomic"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def check_writable(path: str | os.PathLike[str]) -> pathlib.Path:
    """``path`` if a file can be written there; else an ``OutputError`` naming why (so the CLI can
    refuse ``-o`` before minutes of tracing)."""
    path = pathlib.Path(path)
    parent = path.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        raise OutputError(f"cannot write {path}: the directory {parent} {what}",
                          hint=f"create it first (mkdir -p {parent}) or write to an existing directory")
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a directory",
                          hint="pass the path of a file in it, not the directory itself")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {path}: the directory {parent} is not writable")
    return path


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> pathlib.Path:
    """Write ``data`` (text as UTF-8) to ``path`` atomically, with normal file permissions."""
    path = pathlib.Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    parent = check_writable(path).parent
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    except OSError as e:
        raise OutputError(f"cannot write {path}: {e.strerror or e}") from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise OutputError(f"cannot write {path}: {e.strerror or e}") from e
        raise
    return path
