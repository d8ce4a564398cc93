"""The torch range fxviz supports: what the compatibility run passed (``bash scripts/run.sh compat``,
docs/COMPAT.md); pyproject.toml states the same.  Imported first by ``fxviz/__init__.py``, so an older
torch is refused at ``import fxviz`` in one line rather than failing deep inside a trace; a newer torch
is untested, so fxviz says so once and lets it through."""

from __future__ import annotations

import warnings

import torch

from .errors import FxvizWarning

__all__ = ["TORCH_RANGE", "check_torch"]

TORCH_RANGE = ">=2.9,<2.15"
_OLDEST, _FIRST_UNTESTED = "2.9", "2.15"


def check_torch(version: str | None = None) -> None:
    """Raise ImportError for a torch older than the range; warn (FxvizWarning) for a newer one."""
    v = torch.torch_version.TorchVersion(version or torch.__version__)
    if v < _OLDEST:
        raise ImportError(f"fxviz supports torch {TORCH_RANGE} (docs/COMPAT.md) and this is torch {v}: "
                          f"pip install 'torch{TORCH_RANGE}'")
    if v >= _FIRST_UNTESTED:
        warnings.warn(f"fxviz is tested on torch {TORCH_RANGE} (docs/COMPAT.md) and this is torch {v}: if "
                      f"something fails, pip install 'torch{TORCH_RANGE}'", FxvizWarning, stacklevel=3)


check_torch()
