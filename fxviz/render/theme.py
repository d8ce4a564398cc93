"""The one palette of fxviz: every view (graph, HTML report, widget, table highlights) takes its
colors from here, so a node looks the same wherever it appears.

Role fills are Paul Tol's *light* qualitative scheme (designed for colorblind readers and for
black text on colored cells); status and compare marks are strong colors from his *bright* and
*high-contrast* schemes, drawn as borders, edge colors and text badges, so they stay visible
together with the role fill.  Every mark also has a non-color cue (line width, double border,
dashes, badge text) for readers who cannot tell the colors apart at all.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fxviz.sources.role_names import INPUT_ROLES, ROLES

__all__ = [
    "FONT",
    "ROLE_COLORS",
    "ROLE_LABELS",
    "ROLE_DESCRIPTIONS",
    "INPUT_ROLES",
    "Mark",
    "STATUS",
    "COMPARE",
    "HIGHLIGHT",
    "EDGE_COLOR",
    "TIMELINE_COLORS",
    "FADE_ALPHA",
    "SEVERITY_COLORS",
    "SEVERITY_INK",
    "UI",
    "as_dict",
    "css_variables",
    "legend_html",
    "legend_dot",
    "CHECKPOINT",
    "faded",
]

# Every drawing's font (graph, node and edge labels, the SVG charts): DejaVu Sans, which the setup installs
# (scripts/run.sh: fonts-dejavu-core), named first so that dot measures text with the same font on every machine
# whatever other fonts it has (a bare "Helvetica" is Liberation Sans, Nimbus Sans or DejaVu Sans by what is
# installed, and a drawing's size with it); the rest is the fallback where DejaVu Sans is missing.
FONT = "DejaVu Sans,Helvetica,Arial,sans-serif"

# Paul Tol, "light" scheme (https://personal.sron.nl/~pault/): nine colors, all readable under
# black text, distinguishable with the common color-vision deficiencies.  Forward is blue and
# backward orange (the most robust pair); parameters and their gradients are both green-ish.
ROLE_COLORS: dict[str, str] = {
    "primal": "#EEDD88",     # light yellow
    "parameter": "#BBCC33",  # pear
    "buffer": "#AAAA00",     # olive
    "constant": "#DDDDDD",   # pale grey
    "tangent": "#FFAABB",    # pink
    "forward": "#77AADD",    # light blue
    "backward": "#EE8866",   # orange
    "output": "#99DDFF",     # light cyan
    "gradient": "#44BB99",   # mint
}

ROLE_LABELS: dict[str, str] = {
    "primal": "input",
    "parameter": "parameter",
    "buffer": "buffer",
    "constant": "constant",
    "tangent": "tangent",
    "forward": "forward op",
    "backward": "backward op",
    "output": "output",
    "gradient": "gradient",
}

ROLE_DESCRIPTIONS: dict[str, str] = {
    "primal": "a user input of the forward (primal)",
    "parameter": "a parameter lifted to a graph input",
    "buffer": "a buffer lifted to a graph input",
    "constant": "a tensor baked into the graph (get_attr)",
    "tangent": "the incoming gradient of a forward output",
    "forward": "an op of the forward pass",
    "backward": "an op of the backward pass",
    "output": "a forward output (the loss, an updated buffer)",
    "gradient": "a gradient the backward returns",
}


FADE_ALPHA = "40"  # hex alpha appended to a fill: faded nodes keep their hue, at 25% opacity
EDGE_COLOR = "#555555"
HIGHLIGHT = "#000000"


@dataclass(frozen=True)
class Mark:
    """One overlay: a color plus the non-color cue that carries the same meaning."""

    name: str
    color: str
    cue: str  # what the mark looks like, for the legend and docs
    description: str
    text: str = ""  # a darker shade for badge text on white, where ``color`` itself is too light

    @property
    def ink(self) -> str:
        return self.text or self.color


STATUS: dict[str, Mark] = {
    "saved": Mark("saved", "#AA3377", "thick border, thick edges to the backward, badge 'saved'",
                  "the backward reads this forward value, so it stays in memory between the passes"),
    "recomputed": Mark("recomputed", "#228833", "double border, green edges to the backward, badge 'recomputed'",
                       "the backward runs this forward op again instead of saving its result"),
    "removed": Mark("removed", "#999999", "faded fill, dashed border, badge 'removed'",
                    "dead code: in neither the forward nor the backward graph", text="#666666"),
}

# one curve per strategy in the memory timeline (the notebook's plot and the report's SVG alike)
TIMELINE_COLORS = [ROLE_COLORS["forward"], ROLE_COLORS["backward"], STATUS["saved"].color, ROLE_COLORS["gradient"],
                   STATUS["recomputed"].color, "#000000", ROLE_COLORS["buffer"], EDGE_COLOR]

CHECKPOINT = Mark("checkpoint", "#EE7733", "badge 'ckpt R: policy'",
                  "traced inside torch.utils.checkpoint region R; the policy (must_save, prefer_recompute...) "
                  "tells the partitioner whether to save or recompute it", text="#A84A10")
"""The mark of an op traced inside a ``torch.utils.checkpoint`` region (drawn whatever the strategy)."""

COMPARE: dict[str, Mark] = {
    "A-only": Mark("A-only", "#BB5566", "border and edges in this color, badge 'A only'",
                   "only strategy A does this"),
    "B-only": Mark("B-only", "#004488", "border and edges in this color, badge 'B only'",
                   "only strategy B does this"),
    "both": Mark("both", "#DDAA33", "border and edges in this color, badge 'both'",
                 "both strategies do this", text="#7A5C00"),
}


# The doctor's severities reuse the strong colors (Paul Tol's high-contrast red / yellow / blue) and
# the gradient green for "healthy"; each finding also carries a text badge as its non-color cue.
# The Jupyter card (render/doctor_view.py) and the explorer's doctor panel both read these.
SEVERITY_COLORS: dict[str, str] = {
    "error": COMPARE["A-only"].color,
    "warning": COMPARE["both"].color,
    "info": COMPARE["B-only"].color,
    "ok": ROLE_COLORS["gradient"],
}
# text on a badge filled with the severity color
SEVERITY_INK: dict[str, str] = {"error": "#FFFFFF", "warning": "#000000", "info": "#FFFFFF", "ok": "#000000"}

# The page around the drawings (the explorer pane, the report): inks, lines, fills and the accents
# for focus, links, search and selection.  Exported as ``--fxviz-<name>`` CSS variables; the
# static CSS uses no color of its own.
UI: dict[str, str] = {
    # text
    "text": "#222222",             # body text, buttons
    "text-soft": "#444444",        # code, fix hints, control labels
    "text-muted": "#555555",       # section titles, captions, table headers
    "text-label": "#666666",       # the keys of the details table
    "text-faint": "#777777",       # hints, "none", footers
    "text-note": "#777755",        # "not drawn in this view"
    "link": "#1A5FB4",
    "status-text": "#1A4D80",      # the search status line
    "error-text": "#AA3333",       # no search match, a failed strategy's row
    "ok-text": "#227766",          # the doctor's headline when all is well
    "on-strong": "#FFFFFF",        # text on a strong fill (the pressed view button)
    # surfaces and lines
    "page": "#FAFAFA",             # the report's page
    "surface": "#FFFFFF",          # panels, the graph's viewport
    "overlay": "rgba(255, 255, 255, .94)",  # the "computing" box over the graph
    "shadow": "rgba(0, 0, 0, .15)",
    "border": "#CCCCCC",           # the graph's viewport
    "border-light": "#DDDDDD",     # panels
    "border-strong": "#BBBBBB",    # buttons, table header rule
    "rule": "#EEEEEE",             # table row rules
    "button": "#F7F7F7",
    "button-hover": "#EAEAEA",
    "toggle": "#F3F3F3",           # the report's view buttons
    "code-fill": "#F6F6F6",
    "badge": "#EEEEFF",
    "badge-border": "#CCCCDD",
    "tag": "#EEEEEE",              # a severity tag without a color of its own
    "swatch-border": "#333333",
    "removed-fill": "#F3F3F3",     # the legend's "removed" mark
    "error-fill": "#FBEEF0",       # the error box under the graph
    "finding": "#999999",          # a finding of an unknown severity
    # accents
    "accent": COMPARE["B-only"].color,       # pressed view button, the selected table row's bar
    "accent-light": ROLE_COLORS["forward"],  # focus ring, spinner
    "selected-glow": "rgba(0, 0, 0, .55)",   # around the selected node (outline: --fxviz-highlight)
    "neighbor-glow": "rgba(0, 68, 136, .9)",  # producers and users of the selection (accent, 90%)
    "match-glow": "#E69F00",                 # search matches (Okabe-Ito orange)
    "row-hover": "#F4F8FC",
    "row-selected": "#DDE9F7",
    "row-compare": "#FBF1DC",
    "row-compare-bar": COMPARE["B-only"].color,  # the compared-with row is B: the graph's B-only color
}


def faded(color: str) -> str:
    """The same hue at 25% opacity (graphviz writes it as fill-opacity in SVG)."""
    return color[:7] + FADE_ALPHA


def as_dict() -> dict[str, dict[str, Any]]:
    """The palette as plain data (for the HTML report, the widget and JSON)."""
    return {
        "roles": {r: {"color": ROLE_COLORS[r], "label": ROLE_LABELS[r], "description": ROLE_DESCRIPTIONS[r]}
                  for r in ROLES},
        "status": {k: {"color": m.color, "text": m.ink, "cue": m.cue, "description": m.description}
                   for k, m in STATUS.items()},
        "compare": {k: {"color": m.color, "text": m.ink, "cue": m.cue, "description": m.description}
                    for k, m in COMPARE.items()},
        "other": {"highlight": {"color": HIGHLIGHT}, "edge": {"color": EDGE_COLOR}},
        "severity": {k: {"color": c, "text": SEVERITY_INK[k]} for k, c in SEVERITY_COLORS.items()},
        "ui": dict(UI),
    }


def css_variables(selector: str = ":root") -> str:
    """``--fxviz-role-forward: #77AADD;`` ... and ``.fxviz-role-forward { background: ... }``
    helpers, so HTML views use the same colors as the graphs: roles, marks, severities
    (``--fxviz-severity-error``, ``--fxviz-severity-error-ink``) and the page's own colors
    (``--fxviz-<name>`` for every name in :data:`UI`)."""
    lines = [f"{selector} {{"]
    for r in ROLES:
        lines.append(f"  --fxviz-role-{r}: {ROLE_COLORS[r]};")
    for k, m in STATUS.items():
        lines.append(f"  --fxviz-status-{k}: {m.color};")
    for k, m in COMPARE.items():
        lines.append(f"  --fxviz-compare-{k}: {m.color};")
    lines.append(f"  --fxviz-highlight: {HIGHLIGHT};")
    lines.append(f"  --fxviz-edge: {EDGE_COLOR};")
    for k, c in SEVERITY_COLORS.items():
        lines.append(f"  --fxviz-severity-{k}: {c};")
        lines.append(f"  --fxviz-severity-{k}-ink: {SEVERITY_INK[k]};")
    for k, c in UI.items():
        lines.append(f"  --fxviz-{k}: {c};")
    lines.append("}")
    for r in ROLES:
        lines.append(f".fxviz-role-{r} {{ background-color: var(--fxviz-role-{r}); color: #000; }}")
    return "\n".join(lines)


def legend_html(roles: Iterable[str] = ROLES) -> str:
    """A one-line HTML legend of role swatches (for the report and the widget)."""
    items = []
    for r in roles:
        items.append(
            f'<span class="fxviz-legend-item" title="{html.escape(ROLE_DESCRIPTIONS[r])}">'
            f'<span style="display:inline-block;width:0.9em;height:0.9em;border:1px solid {UI["swatch-border"]};'
            f'background:{ROLE_COLORS[r]};vertical-align:middle;margin-right:0.25em"></span>'
            f"{html.escape(ROLE_LABELS[r])}</span>")
    return '<div class="fxviz-legend">' + " &#160; ".join(items) + "</div>"


def legend_dot(roles: Iterable[str], statuses: Iterable[str] = (), compare: tuple[str, str] | None = None,
               compare_marks: Iterable[str] = (), checkpoint: bool = False) -> str:
    """The legend as graphviz HTML-like table rows (to sit inside a ``<TABLE>``): one colored
    swatch per role present, then the overlays present, each naming its non-color cue.

    Swatches are text glyphs, not table cells: graphviz stretches nested tables to the widest
    caption line, which pulled the swatches apart."""
    def swatch(color: str, text: str, bold: bool = False, ink: str = "") -> str:
        t = f"<B>{html.escape(text)}</B>" if bold else html.escape(text)
        return (f'<FONT POINT-SIZE="15" COLOR="{color}">■</FONT>'
                f'<FONT POINT-SIZE="10" COLOR="{ink or "#000000"}"> {t}</FONT>')

    def row(title: str, items: list[str]) -> str:
        return (f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="10" COLOR="#555555">{title}: </FONT>'
                + "<FONT POINT-SIZE=\"10\">   </FONT>".join(items) + "</TD></TR>")

    rows = []
    items = [swatch(ROLE_COLORS[r], ROLE_LABELS[r]) for r in roles]
    if items:
        rows.append(row("node colors", items))
    marks = []
    cue = {"saved": "saved for the backward: thick border and edges",
           "recomputed": "recomputed in the backward: double border, green edges",
           "removed": "removed: faded, dashed",
           "offloaded": "offloaded (a copy on another device): saved border and edges dashed"}
    for s in statuses:
        mark = STATUS["saved" if s == "offloaded" else s]  # offloading is a way of saving: its color, dashed
        marks.append(swatch(mark.color, cue[s], bold=True, ink=mark.ink))
    if compare is not None:
        a, b = compare
        names = {"A-only": f"only A ({a})", "B-only": f"only B ({b})", "both": "both A and B"}
        for k in compare_marks:
            marks.append(swatch(COMPARE[k].color, names[k] + ": border and edges", bold=True, ink=COMPARE[k].ink))
    if checkpoint:
        marks.append(swatch(CHECKPOINT.color, "checkpointed: badge 'ckpt region: policy'", bold=True,
                            ink=CHECKPOINT.ink))
    if marks:
        rows.append(row("marks", marks))
    return "".join(rows)
