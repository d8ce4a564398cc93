"""What the eager reference measured: its own type, read by name (``Partition.measurement``).

Kept apart from ``eager.py`` (which runs the model) so that ``partition.py`` can name the type
without importing the code that measures it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SavedTensor", "EagerMeasurement"]


@dataclass(frozen=True)
class SavedTensor:
    """One tensor eager autograd saved (unique by storage, offset, shape, stride and dtype)."""

    op: str  # the aten op that produced it in eager ("input"/"parameter" for leaves)
    shape: tuple[int, ...]
    dtype: str
    owner: str  # activation | parameter | input
    storage_bytes: int
    numel_bytes: int
    joint: str | None  # the joint-graph node it corresponds to, when matched
    held_by: str = "autograd"  # autograd (seen by saved_tensors_hooks) | checkpoint (its own cache / inputs)


@dataclass
class EagerMeasurement:
    saved: list[SavedTensor] = field(default_factory=list)
    saves: int = 0  # pack-hook calls (one tensor may be saved by several ops)
    storages: int = 0
    activation_bytes: int = 0
    param_bytes: int = 0
    input_bytes: int = 0
    estimate_bytes: int = 0  # numel*itemsize over the saved tensors, blind to aliasing (torch's way)
    forward_ops: int = 0  # aten ops eager ran in the forward (and the loss)
    float_mask_bytes: int = 0  # CPU dropout's float masks among the saved activations
    checkpoint_bytes: int = 0  # activation storages held by torch.utils.checkpoint, not seen by the hooks
    checkpoint_storages: int = 0
    recomputed_ops: int | None = None  # forward ops eager checkpointing ran again in the backward
    recompute_flops: int | None = None  # None: not measured
    recompute_bytes: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def saved_tensors(self) -> int:
        return len(self.saved)
