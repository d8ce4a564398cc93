"""fxviz's exceptions: every error a user can cause says what went wrong and how to fix it.

Each class carries a default ``hint``; raising code may override it.  ``str(err)`` is one line
(the message), and ``err.hint`` is the fix, so the CLI can print both on one line each.
"""

from __future__ import annotations

__all__ = [
    "FxvizError",
    "InputError",
    "TraceError",
    "NoFloatingOutputError",
    "StrategyError",
    "RenderError",
    "ModelSpecError",
    "LogError",
    "FxvizWarning",
]


class FxvizError(Exception):
    """Base class of every error fxviz raises on purpose."""

    hint: str = "see the fxviz README"

    def __init__(self, message: str, hint: str | None = None) -> None:
        message = " ".join(str(message).split())  # always one line
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = " ".join(str(hint).split())

    def __str__(self) -> str:
        return f"{self.message} (hint: {self.hint})"


class InputError(FxvizError):
    """The example inputs (or arguments) do not fit the model or the call."""

    hint = "pass example inputs the model accepts: fxviz.trace(model, x) with x shaped as in model(x)"


class TraceError(FxvizError):
    """torch could not trace the model into a joint forward+backward graph."""

    hint = "check that model(*inputs) runs eagerly; try capture_route='dynamo' for data-dependent Python"


class NoFloatingOutputError(FxvizError):
    """The model produced nothing differentiable to build a loss from."""

    hint = "return a floating-point tensor, or pass loss_fn=... that maps the outputs to a scalar"


class StrategyError(FxvizError):
    """An unknown or failing partition strategy."""

    hint = (
        "use 'default', 'min_cut', 'budget:B[:dp|greedy|ilp]' with 0<=B<=1, 'eager', "
        "'recompute_all', 'optimal:B' (a fraction or a size such as 64MiB), 'logged' (a trace read from a log), "
        "or a callable with a torch partitioner's signature"
    )


class RenderError(FxvizError):
    """Drawing failed: graphviz missing, or a layout that would take too long."""

    hint = "install graphviz (apt-get install graphviz, or conda install -c conda-forge graphviz)"


class ModelSpecError(FxvizError):
    """A CLI model spec that names no model."""

    hint = ("use a built-in example (alexnet, mlp, resnet_block, mini_gpt, pointwise_chain), "
            "'package.module:factory' or 'path/to/file.py:factory', where factory() returns (model, inputs)")


class LogError(FxvizError):
    """A log of a real run that fxviz cannot read: missing, truncated, corrupt, without AOT graphs."""

    hint = "point fxviz at the directory TORCH_TRACE=dir wrote (or one file in it) of a torch.compile training run"


class FxvizWarning(UserWarning):
    """Something the user must know to read a result correctly (e.g. an empty backward)."""
