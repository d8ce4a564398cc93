"""What an advice aims for: ``saved="50%"`` / ``saved="3 GiB"`` (the activations the backward holds)
or ``peak="8 GiB"`` (the step's peak, parameters, gradients and optimizer state included), parsed once.

    >>> parse_target(saved="50%")
    Target(kind='saved', fraction=0.5, nbytes=None)
    >>> parse_target(peak="8GiB").nbytes
    8589934592
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from fxviz.core.errors import InputError
from fxviz.core.units import format_bytes, parse_size

__all__ = ["Target", "parse_target", "optimizer_bytes", "FORMS"]

FORMS = "saved='50%' (of what the plain step saves), saved='3 GiB' or a byte count, peak='8 GiB' or a byte count"
_PERCENT = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*%\s*$")


@dataclass(frozen=True)
class Target:
    """``kind``: ``saved`` or ``peak``.  ``fraction``: of the plain step's saved activation bytes (a
    ``saved`` target only); ``nbytes``: an absolute byte count."""

    kind: str
    fraction: float | None = None
    nbytes: int | None = None

    def bytes_for(self, plain_saved: int) -> int:
        """The target in bytes, given what the plain step saves."""
        if self.nbytes is not None:
            return self.nbytes
        assert self.fraction is not None
        return int(plain_saved * self.fraction)

    def label(self, plain_saved: int) -> str:
        what = "saved activations" if self.kind == "saved" else "step peak"
        if self.fraction is not None:
            return f"{what} <= {self.fraction:.0%} of {format_bytes(plain_saved) or '0 B'} = " \
                   f"{format_bytes(self.bytes_for(plain_saved)) or '0 B'}"
        return f"{what} <= {format_bytes(self.nbytes) or '0 B'}"


def _size(value: str | int, name: str, percent: bool) -> Target:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InputError(f"{name}={value!r} is not a target", f"accepted forms: {FORMS}")
    if isinstance(value, int):
        if value < 0:
            raise InputError(f"{name}={value} is negative", f"accepted forms: {FORMS}")
        return Target(name, nbytes=value)
    if value.strip().startswith("-"):
        raise InputError(f"{name}={value!r} is negative", f"accepted forms: {FORMS}")
    m = _PERCENT.match(value)
    if m is not None and percent:
        fraction = float(m.group(1)) / 100
        if not 0 <= fraction <= 1:
            raise InputError(f"{name}={value!r} is not between 0% and 100%", f"accepted forms: {FORMS}")
        return Target(name, fraction=fraction)
    nbytes = parse_size(value.replace(" ", ""))
    if nbytes is None:
        why = "a peak is an amount of memory, not a share" if m is not None else "not a size fxviz reads"
        raise InputError(f"{name}={value!r}: {why}", f"accepted forms: {FORMS} (binary units: B, KiB, MiB, GiB, TiB)")
    return Target(name, nbytes=nbytes)


def parse_target(saved: str | int | None = None, peak: str | int | None = None) -> Target:
    """One target from ``saved=`` or ``peak=``; an ``InputError`` naming the accepted forms otherwise."""
    if (saved is None) == (peak is None):
        raise InputError("give one target: saved= or peak=", f"accepted forms: {FORMS}")
    return _size(saved, "saved", True) if saved is not None else _size(peak, "peak", False)  # type: ignore[arg-type]


def optimizer_bytes(optimizer: str | int | None, param_bytes: int) -> int:
    """The optimizer state held through the step: ``"adam"``/``"adamw"`` two moments per parameter,
    as big as the parameters, ``"sgd"`` none (no momentum), a byte count as given, None nothing."""
    if optimizer is None:
        return 0
    if isinstance(optimizer, int) and not isinstance(optimizer, bool) and optimizer >= 0:
        return optimizer
    if isinstance(optimizer, str) and optimizer.lower() in ("adam", "adamw"):
        return 2 * param_bytes
    if isinstance(optimizer, str) and optimizer.lower() == "sgd":
        return 0
    raise InputError(f"optimizer={optimizer!r} is not one fxviz sizes",
                     "use optimizer='adam', 'adamw', 'sgd' or a byte count of its state")
