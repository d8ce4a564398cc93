"""When the real compiled step keeps more for the backward than the partition saves
(``Trace.measure()``): copies of parameters and inputs the backend made in another layout, and
values the partition does not save at all; with the knob torch offers where there is one.

The knob is inductor's layout optimisation (``_torch.LAYOUT_KNOB``): with it on, inductor runs
convolutions channels-last (always on CPU with mkldnn; on GPU for conv-heavy graphs) and saves a
channels-last copy of each convolution weight and input the backward reads.  Turned off, AlexNet's
step (batch 1, CPU, torch 2.13) keeps 1,338,112 B instead of 11,814,400 B: min-cut's own figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fxviz import _torch
from fxviz.analysis.doctor.findings import Finding
from fxviz.core.units import format_bytes

if TYPE_CHECKING:
    from fxviz.analysis.real.measure import Measured


def _layout_fix(layouts: set[str], measured: Measured) -> str:
    if measured.backend == "inductor" and any(x.startswith("channels_last") for x in layouts):
        now = "" if _torch.layout_optimization() else " (it is off in this session now: measure again)"
        return (f"if memory matters more than convolution speed, set {_torch.LAYOUT_KNOB} = False (or the "
                "environment variable TORCHINDUCTOR_LAYOUT_OPTIMIZATION=0) before torch.compile: inductor then "
                "keeps the weights' own layout and saves them as themselves (here about "
                f"{format_bytes(measured.saved_bytes - measured.copy_bytes)} instead of "
                f"{format_bytes(measured.saved_bytes)}); convolutions may run slower{now}")
    return ("torch offers no switch for this copy; count it in the step's memory (Trace.measure().saved_bytes), "
            "not the partition's estimate")


def measured_findings(measured: Measured | None) -> list[Finding]:
    """Findings for a measured step (none without a measurement, or when it keeps no more)."""
    if measured is None:
        return []
    findings = []
    copies = measured.copies
    if len(copies):
        sources = [str(s) for s in copies["source"]]
        layouts = {str(x) for x in copies["layout"]}
        params = int((copies["kind"] == "parameter copy").sum())
        inputs = len(copies) - params
        what = " and ".join(x for x in (f"{params} parameter(s)" if params else "",
                                         f"{inputs} input(s)" if inputs else "") if x)
        estimate = ("" if measured.estimated_bytes is None else
                    f" The {measured.strategy} partition saves {format_bytes(measured.estimated_bytes)}; the step "
                    f"keeps {format_bytes(measured.saved_bytes)}.")
        findings.append(Finding(
            "measured_copies", "warning", None, tuple(str(v) for v in copies["value"] if v is not None),
            f"{measured.backend} keeps a {', '.join(sorted(layouts))} copy of {what} for the backward "
            f"({', '.join(sources)}): {format_bytes(measured.copy_bytes)} that no partition view shows, because the "
            f"partition saves them as themselves.{estimate}",
            _layout_fix(layouts, measured), cause="layout_copy", bytes=measured.copy_bytes))
    saved = measured.saved
    extra = saved[(saved["kind"] == "activation") & saved["value"].isna()]
    if len(extra):
        nbytes = int(extra["bytes"].sum())
        findings.append(Finding(
            "measured_extra", "info", None, (),
            f"the compiled step keeps {len(extra)} value(s) the {measured.strategy} partition does not save: "
            f"{format_bytes(nbytes)} ({', '.join(f'{s} {d}' for s, d in zip(extra['shape'], extra['dtype']))}).",
            "read Trace.measure().saved for what each holds; the backend's own graphs (a TORCH_TRACE log's "
            "post-grad graph and output code) show where it is made",
            cause="not_in_partition", bytes=nbytes))
    return findings
