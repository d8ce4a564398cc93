"""What the run's min-cut was told, as its log recorded functorch's config (``index.FUNCTORCH_KEYS``):
its activation-memory budget and solver, in the words every caption of a logged graph uses."""

from __future__ import annotations

from typing import Any

__all__ = ["run_config_text", "run_budget"]


def run_config_text(config: dict[str, Any]) -> str:
    """``; the run's functorch config: activation_memory_budget=0.5, solver dp, estimator flops``: what
    the run's min-cut was told, as its log recorded it ("" when the log recorded nothing)."""
    if "activation_memory_budget" not in config:
        return ""
    text = f"; the run's functorch config: activation_memory_budget={run_budget(config)[0]:g}"
    text += "".join(f", {w} {config[k]}" for k, w in (("activation_memory_budget_solver", "solver"),
                                                      ("activation_memory_budget_runtime_estimator", "estimator"))
                    if k in config)
    if config.get("enable_activation_offloading"):
        text += ", enable_activation_offloading=True"
    return text


def run_budget(config: dict[str, Any]) -> tuple[float, str]:
    """(budget, solver) the run's min-cut used, as ``Capture.torch_budget`` holds them (no solver
    recorded reads as torch's default ``dp``)."""
    try:
        budget = float(config.get("activation_memory_budget", 1.0))
    except (TypeError, ValueError):
        budget = 1.0
    solver = str(config.get("activation_memory_budget_solver") or "dp")
    return budget, solver
