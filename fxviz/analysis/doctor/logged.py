"""What a logged run's partitioner was told: the settings of its functorch config the log
recorded (``Capture.log_config``), said when they change what the run saved: an activation-memory
budget below 1 (min-cut solved a knapsack), or activation offloading switched on."""

from __future__ import annotations

from fxviz.analysis.doctor.findings import Finding
from fxviz.analysis.strategy.choices import step_strategy
from fxviz.sources.graphs import Capture
from fxviz.sources.log.signature import OFFLOAD_PREFIX  # the name torch gives an offloaded value's copy


def config_findings(cap: Capture) -> list[Finding]:
    """One finding per setting of the run's functorch config that shaped what its graphs saved."""
    config = cap.log_config
    if cap.route != "log" or not config:
        return []
    out: list[Finding] = []
    budget = cap.torch_budget[0]  # parsed once, by the capture (a value the log garbled reads as 1)
    if budget < 1:
        replay = step_strategy(cap).name
        estimator = config.get("activation_memory_budget_runtime_estimator")
        how = ", ".join(f"{w} {config[k]}" for k, w in (("activation_memory_budget_solver", "solver"),
                                                         ("activation_memory_budget_runtime_estimator", "estimator"))
                        if k in config)
        message = (f"the run partitioned under activation_memory_budget={budget:g}" + (f" ({how})" if how else "")
                   + ": torch.compile's min-cut solved a knapsack, recomputing values plain min-cut saves; strategy "
                   f"'logged' is what it saved, strategy '{replay}' replays it with this torch")
        if estimator not in (None, "flops"):
            message += f" (but with this session's runtime estimator, not the run's {estimator!r})"
        out.append(Finding("run_config", "info", None, (), message,
                           f"compare strategies logged, {replay} and min_cut in the memory table"))
    if config.get("enable_activation_offloading"):
        logged = cap.graphs[0].logged
        moved = [] if logged is None else [n.name for n in logged[0].graph.nodes if n.name.startswith(OFFLOAD_PREFIX)]
        what = (f"its forward graph copies {len(moved)} saved value(s) to the CPU ({', '.join(moved[:4])}"
                + (" ..." if len(moved) > 4 else "") + ")" if moved else
                "its forward graph offloads nothing (torch offloads only values a pass marked 'should_offload')")
        out.append(Finding("run_config", "info", None, (), f"the run set enable_activation_offloading=True: {what}",
                           "the memory table's offloaded_bytes and the saved table's 'offloaded' rows (fxviz saved "
                           "--logs DIR) count the copies apart from the device's activations; the forward graph "
                           "shows them (fxviz code --logs DIR --part forward)"))
    return out
