"""How the doctor's ``Diagnosis`` looks: terminal text (``str``) and a Jupyter card (HTML).

Reads the analysis objects only; every fact shown comes from ``fxviz.analysis.doctor``.
"""

from __future__ import annotations

import html
import re
import textwrap
from typing import TYPE_CHECKING, Any

from fxviz.analysis.doctor.findings import Diagnosis, Finding
from fxviz.render import theme
from fxviz.render.text.table import fitted_text
from fxviz.sources.graphs import INFERENCE_NOTE, graph_name

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DoctorReport", "SEVERITY_COLORS", "SEVERITY_LABELS"]

# Severity marks: the palette's severity colors (theme.SEVERITY_COLORS, shared with the explorer's
# doctor panel), each with a text badge as the non-color cue.
SEVERITY_COLORS = {s: theme.SEVERITY_COLORS[s] for s in ("error", "warning", "info")}
SEVERITY_LABELS = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}

KIND_TITLES = {
    "captured_as_constant": "parameters captured as constants (closure capture)",
    "no_path": "no differentiable path to the loss",
    "unused": "parameters never used in the forward",
    "gradient_dropped": "gradients computed but not returned",
    "outside_graphs": "code that ran outside every captured graph",
    "eager_frame": "frames dynamo ran as plain Python",
    "reused_graph": "one graph run for several modules",
    "duplicate_data": "the same data held more than once",
    "frozen": "frozen parameters (requires_grad=False)",
    "measured_copies": "the compiled step keeps copies the partition does not show (measured)",
    "measured_extra": "the compiled step keeps values the partition does not save (measured)",
    "run_config": "what the logged run's partitioner was told (its functorch config)",
    "allgathered": "FSDP2's all-gathered parameters the backward reads (a logged FSDP2 run)",
}


def subject(f: Finding) -> str:
    """What one finding is about, in a few words (the "likewise" list): its parameter, else its graph
    and module, else its module, else its first node; never "None"."""
    if f.parameter:
        return f.parameter
    if f.graph is not None:
        return graph_name(f.graph) + (f" ({f.module})" if f.module else "")
    if f.module:
        return f.module
    return f.nodes[0] if f.nodes else KIND_TITLES.get(f.kind, f.kind)


def _shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The per-parameter table as text shows it: a missing value (no gradient node) is "—"."""
    return table.astype(object).where(table.notna(), "\u2014")


def _groups(findings: list[Finding]) -> list[tuple[str, str, str, list[Finding]]]:
    """Findings grouped by (severity, kind, fix), in the diagnosis' order."""
    groups: dict[tuple[str, str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.severity, f.kind, f.fix), []).append(f)
    return [(s, k, fix, fs) for (s, k, fix), fs in groups.items()]


class DoctorReport:
    """What ``Trace.doctor()`` returns: the findings and the per-parameter table, displayed as
    text in a terminal and as a card in Jupyter.  ``.diagnosis`` is the plain data."""

    def __init__(self, diagnosis: Diagnosis) -> None:
        self.diagnosis = diagnosis

    # --- the data ---------------------------------------------------------------------------------
    @property
    def findings(self) -> list[Finding]:
        return self.diagnosis.findings

    @property
    def table(self) -> pd.DataFrame:
        return self.diagnosis.table

    @property
    def healthy(self) -> bool:
        return self.diagnosis.healthy

    @property
    def missing(self) -> list[str]:
        return self.diagnosis.missing

    def headline(self) -> str:
        d = self.diagnosis
        t = d.table
        need = int(t["requires_grad"].sum()) if len(t) else 0
        graphs = f"{d.graphs} graphs" if d.graphs > 1 else "1 graph"
        words = f" ({d.strategy_words})" if d.strategy_words else ""
        partition = "no partition (inference)" if d.inference else f"partition '{d.strategy}'{words}"
        origin = f"{d.origin} of a log, checked alone; " if d.origin else ""
        where = f"{d.title} ({origin}parameters {d.params_mode}, {graphs}, {partition})"
        if not len(t):
            state = "no model parameters"
        elif not need and (t["reason"] == INFERENCE_NOTE).all():
            state = f"{INFERENCE_NOTE}: no gradient expected"
        elif not need:
            state = f"no parameter requires grad ({len(t)} frozen): no gradient is expected"
        elif d.healthy:
            state = ("healthy: the one parameter that requires grad gets a gradient" if need == 1
                     else f"healthy: all {need} parameters that require grad get a gradient")
        else:
            state = f"{len(d.missing)} of {need} parameters that require grad get no gradient"
        return f"fxviz doctor: {where}: {state}"

    # --- terminal ---------------------------------------------------------------------------------
    def __str__(self) -> str:
        width = 100
        lines = [self.headline()]
        counts = {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITY_LABELS}
        lines.append("  " + ", ".join(f"{n} {SEVERITY_LABELS[s].lower()}{'s' if n != 1 else ''}"
                                      for s, n in counts.items()))
        for severity, kind, fix, fs in _groups(self.findings):
            who = f" ({len(fs)})" if len(fs) > 1 else ""
            lines.append("")
            lines.append(f"{SEVERITY_LABELS[severity]:<7} {KIND_TITLES.get(kind, kind)}{who}")
            shown = fs if len(fs) <= 4 else fs[:2]
            for f in shown:
                lines += textwrap.wrap(f.message, width, initial_indent="  - ", subsequent_indent="    ")
            if len(fs) > len(shown):
                rest = "; ".join(f"{subject(f)} ({', '.join(f.nodes)})" if f.nodes
                                 else subject(f) for f in fs[len(shown):])
                lines += textwrap.wrap(f"likewise: {rest}", width, initial_indent="  - ",
                                       subsequent_indent="    ")
            lines += textwrap.wrap(fix, width, initial_indent="  fix: ", subsequent_indent="       ")
        if len(self.table):
            lines.append("")
            lines.append(fitted_text(_shown_table(self.table), width, drop=("requires_grad", "in_graph")))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    # --- Jupyter ----------------------------------------------------------------------------------
    def _repr_html_(self) -> str:
        ok_color = theme.SEVERITY_COLORS["ok"]
        head_color = ok_color if self.healthy else SEVERITY_COLORS["error"]
        parts = [
            '<div class="fxviz-doctor" style="font-family:Helvetica,Arial,sans-serif;font-size:13px;'
            'max-width:1100px">',
            f'<div style="border-left:6px solid {head_color};padding:4px 10px;margin-bottom:8px">'
            f'<b>{html.escape(self.headline())}</b></div>',
        ]
        for severity, kind, fix, fs in _groups(self.findings):
            color = SEVERITY_COLORS[severity]
            badge = (f'<span style="background:{color};color:{theme.SEVERITY_INK[severity]};'
                     f'font-weight:bold;padding:1px 6px;border-radius:3px;font-size:11px">'
                     f'{SEVERITY_LABELS[severity]}</span>')
            who = f" ({len(fs)})" if len(fs) > 1 else ""
            items = "".join(f"<li>{self._finding_html(f)}</li>" for f in fs)
            if len(fs) > 4:
                first = "".join(f"<li>{self._finding_html(f)}</li>" for f in fs[:2])
                rest = "".join(f"<li>{self._finding_html(f)}</li>" for f in fs[2:])
                items = (f"{first}<details><summary>{len(fs) - 2} more like these</summary>"
                         f'<ul style="padding-left:0">{rest}</ul></details>')
            parts.append(
                f'<div style="border-left:6px solid {color};padding:4px 10px;margin:6px 0">'
                f'{badge} <b>{html.escape(KIND_TITLES.get(kind, kind))}{who}</b>'
                f'<ul style="margin:4px 0 4px 0;padding-left:20px">{items}</ul>'
                f'<div><i>fix:</i> {html.escape(fix)}</div></div>')
        if len(self.table):
            parts.append(self._table_html())
        parts.append("</div>")
        return "".join(parts)

    @staticmethod
    def _finding_html(f: Finding) -> str:
        text = html.escape(f.message)
        if not f.nodes:
            return text
        names = "|".join(re.escape(html.escape(n)) for n in sorted(set(f.nodes), key=len, reverse=True))
        return re.sub(rf"(?<![\w.])({names})(?!\w)", r'<code title="joint-graph node">\1</code>', text)

    def _table_html(self) -> str:
        import pandas as pd
        t = self.table
        yes = theme.ROLE_COLORS["gradient"]
        no = SEVERITY_COLORS["error"]
        head = "".join(f'<th style="text-align:left;padding:2px 8px;border-bottom:1px solid #999">'
                       f"{html.escape(c)}</th>" for c in t.columns)
        rows = []
        for _, r in t.iterrows():
            cells = []
            for c in t.columns:
                v: Any = r[c]
                style = "padding:2px 8px"
                text = "—" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)
                if c == "gets_gradient":
                    if v:
                        style += f";background:{yes}"
                        text = "yes"
                    elif r["requires_grad"]:
                        style += f";background:{no};color:#fff;font-weight:bold"
                        text = "NO"
                    else:
                        text = "no (frozen)"
                cells.append(f'<td style="{style}">{html.escape(text)}</td>')
            rows.append("<tr>" + "".join(cells) + "</tr>")
        return ('<table style="border-collapse:collapse;margin-top:8px;font-size:12px">'
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
