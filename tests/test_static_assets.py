"""The explorer's static files (fxviz/frontends/static) against the one palette (fxviz.render.theme): no
color literal in the CSS, every ``var(--fxviz-...)`` defined by ``theme.css_variables``, the
doctor's severity colors the same in the explorer's CSS and in the Jupyter card; and the shape
of explorer.js (small single-job functions, nothing the report's inline script refuses)."""

from __future__ import annotations

import pathlib
import re

import pytest

from fxviz.render import theme
from fxviz.render.text import doctor_view

STATIC = pathlib.Path(theme.__file__).parent.parent / "frontends" / "static"
CSS_FILES = ["explorer.css", "report.css"]
JS_FILES = ["explorer.js", "report.js"]

COLOR_LITERAL = re.compile(r"#[0-9a-fA-F]{3,8}\b|\b(?:rgba?|hsla?|hwb|lab|lch|oklab|oklch|color)\(", re.I)
VAR_USE = re.compile(r"var\(\s*(--fxviz-[\w-]+)")
VAR_DEF = re.compile(r"(--fxviz-[\w-]+)\s*:\s*([^;]+);")
# CSS named colors that a stylesheet might slip in (``transparent``, ``inherit``... are fine)
NAMED_COLORS = re.compile(r":\s*(?:[^;{}]*\s)?(black|white|red|green|blue|gray|grey|yellow|orange)\s*[;}]", re.I)


def _strip_comments(css: str) -> str:
    return re.sub(r"/\*.*?\*/", "", css, flags=re.S)


def _defined() -> dict[str, str]:
    return {k: v.strip() for k, v in VAR_DEF.findall(theme.css_variables())}


@pytest.mark.parametrize("name", CSS_FILES)
def test_css_has_no_color_literal(name):
    css = _strip_comments((STATIC / name).read_text())
    assert not COLOR_LITERAL.findall(css), f"{name}: use a var(--fxviz-...) from theme.css_variables"
    assert not NAMED_COLORS.findall(css), name


@pytest.mark.parametrize("name", CSS_FILES + JS_FILES)
def test_every_css_variable_used_is_defined_by_the_theme(name):
    used = set(VAR_USE.findall((STATIC / name).read_text()))
    missing = used - set(_defined())
    assert not missing, f"{name} uses undefined variables {sorted(missing)}"


def test_the_theme_defines_each_variable_once_and_the_css_uses_them():
    names = [k for k, _ in VAR_DEF.findall(theme.css_variables())]
    assert len(names) == len(set(names))
    used = set()
    for name in CSS_FILES:
        used |= set(VAR_USE.findall((STATIC / name).read_text()))
    unused_ui = {f"--fxviz-{k}" for k in theme.UI} - used
    assert not unused_ui, f"UI colors nobody uses: {sorted(unused_ui)}"
    assert theme.as_dict()["ui"] == theme.UI


def test_doctor_severity_colors_are_the_same_in_the_css_and_the_jupyter_card():
    css = _strip_comments((STATIC / "explorer.css").read_text())
    defined = _defined()
    for severity, color in doctor_view.SEVERITY_COLORS.items():
        assert color == theme.SEVERITY_COLORS[severity]
        rule = re.search(rf"\.fxviz-severity-{severity}\s*\{{([^}}]*)\}}", css)
        assert rule, severity
        assert f"var(--fxviz-severity-{severity})" in rule.group(1)
        assert defined[f"--fxviz-severity-{severity}"] == color
    assert set(doctor_view.SEVERITY_COLORS) == set(doctor_view.SEVERITY_LABELS)


def test_the_report_can_inline_the_scripts_and_styles():
    # html_report._asset refuses assets that could end their <script>/<style> element early
    for name in CSS_FILES + JS_FILES:
        text = (STATIC / name).read_text().lower()
        for closer in ("<script", "</script", "</style", "<!--"):
            assert closer not in text, (name, closer)


def _functions(js: str) -> dict[str, int]:
    """name -> line count of every top-level function, class method block and inner function,
    by brace matching from its header (good enough for this hand-written file)."""
    lines = js.splitlines()
    header = re.compile(r"^\s*(?:export\s+)?(?:function\s+(\w+)|class\s+(\w+)|(\w+)\s*\([^)]*\)\s*\{\s*$)")
    out: dict[str, int] = {}
    for i, line in enumerate(lines):
        m = header.match(line)
        if not m or line.strip().startswith(("if", "for", "while", "switch", "catch")):
            continue
        name = next(g for g in m.groups() if g)
        depth, seen = 0, False
        for j in range(i, len(lines)):
            depth += lines[j].count("{") - lines[j].count("}")
            seen = seen or "{" in lines[j]
            if seen and depth <= 0:
                if not m.group(2):  # a class is a namespace of methods, measured one by one
                    out[f"{name}@{i + 1}"] = j - i + 1
                break
    return out


@pytest.mark.parametrize(("name", "entry"), [("explorer.js", "createPane"), ("report.js", "startReport")])
def test_the_scripts_are_made_of_small_functions(name, entry):
    funcs = _functions((STATIC / name).read_text())
    assert f"{entry}@" in " ".join(funcs), funcs
    longest = max(funcs.items(), key=lambda kv: kv[1])
    assert longest[1] <= 80, f"the longest function in {name} is {longest[0]} ({longest[1]} lines)"


def test_the_report_script_copies_no_rule_of_pythons():
    """The compare partner (``analysis.choices``) and the piece selector's cut labels come with the page
    data; report.js names no strategy and cuts no text, and builds its DOM with explorer.js's ``h``."""
    js = (STATIC / "report.js").read_text()
    code = "\n".join(line.split("//")[0] for line in js.splitlines())
    for strategy in ("default", "min_cut"):
        assert f'"{strategy}"' not in code, strategy
    assert ".slice(" not in code and "compare_partners" in code and "createElement" not in code


@pytest.mark.parametrize("name", JS_FILES)
def test_the_scripts_read_fxvizs_constants_from_the_data(name):
    """The recomputed-node suffix, the SVG allowlist and the box-id quoting are fxviz's (render.scene,
    render.embed): they travel in the page data (``payloads.page_constants``; boxes as records with
    their members), never copied into the scripts; and no script builds a view key."""
    from fxviz.payloads.panels import page_constants
    from fxviz.render.graph.scene import RECOMPUTED_SUFFIX
    from fxviz.render.page.embed import SVG_ELEMENTS

    js = (STATIC / name).read_text()
    code = "\n".join(line.split("//")[0] for line in js.splitlines())  # comments may name them
    assert RECOMPUTED_SUFFIX not in code
    assert "lineargradient" not in code.lower() and "radialgradient" not in code.lower()  # the allowlist's
    assert "encodeURIComponent" not in code and "quoteModule" not in code
    assert not re.search(r"`\$\{state\.view\}\|", code), "a view key built in the script"
    c = page_constants()
    assert c["recomputed_suffix"] == RECOMPUTED_SUFFIX and set(c["svg_elements"]) == SVG_ELEMENTS
