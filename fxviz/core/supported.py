"""The torch range fxviz supports: what the compatibility run passed (``bash scripts/run.sh compat``,
docs/COMPAT.md); pyproject.toml states the same.  Imported first by ``fxviz/__init__.py``, so an older
torch is refused at ``import fxviz`` in one line rather than failing deep inside a trace; a newer torch
is untested, so fxviz says so once and lets it through."""

from __future__ import annotations

import os
import re
import sys
import warnings

from fxviz.core.errors import FxvizWarning

__all__ = ["TORCH_RANGE", "check_torch", "installed_torch", "torch_minor"]

TORCH_RANGE = ">=2.9,<2.16"
_OLDEST, _FIRST_UNTESTED = "2.9", "2.16"


def check_torch(version: str | None = None) -> None:
    """Raise ImportError for a torch older than the range; warn (FxvizWarning) for a newer one."""
    v = version or installed_torch()
    if torch_minor(v) < torch_minor(_OLDEST):
        raise ImportError(f"fxviz supports torch {TORCH_RANGE} (docs/COMPAT.md) and this is torch {v}: "
                          f"pip install 'torch{TORCH_RANGE}'")
    if torch_minor(v) >= torch_minor(_FIRST_UNTESTED):
        warnings.warn(f"fxviz is tested on torch {TORCH_RANGE} (docs/COMPAT.md) and this is torch {v}: if "
                      f"something fails, pip install 'torch{TORCH_RANGE}'", FxvizWarning, stacklevel=3)


def installed_torch() -> str:
    """torch's version without importing torch (``fxviz --help`` must not pay torch's import):
    the loaded module's when it is loaded, else the installed distribution's."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return str(torch.__version__)
    found = _dist_info_version()
    if found is not None:
        return found
    import importlib.metadata  # egg-info, zipped or unusual installs: its import is 30 ms of every command

    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise ImportError(f"fxviz needs torch, and none is installed: pip install 'torch{TORCH_RANGE}'") from None


def _dist_info_version() -> str | None:
    """The ``Version:`` of the first ``torch-*.dist-info`` on ``sys.path`` (where ``importlib.metadata``
    finds it); None where a path holds torch's metadata in another form, or none does."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        mine = [n for n in names if n.lower().startswith("torch-") or n.lower() == "torch.egg-info"]
        dist = [n for n in mine if n.endswith(".dist-info") and n.split("-")[0].lower() == "torch"]
        if not mine:
            continue
        if len(dist) != 1 or len(mine) != 1:
            return None  # an egg-info, or several: importlib.metadata decides
        try:
            with open(os.path.join(entry or ".", dist[0], "METADATA"), encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():
                        break
        except OSError:
            pass
        return None
    return None


def torch_minor(version: str) -> tuple[int, int]:
    """``'2.13.0+cpu'`` -> ``(2, 13)``: the supported range is stated in minors."""
    found = re.match(r"(\d+)\.(\d+)", version)
    if found is None:
        raise ImportError(f"fxviz cannot read torch's version {version!r}: pip install 'torch{TORCH_RANGE}'")
    return int(found.group(1)), int(found.group(2))


check_torch()
