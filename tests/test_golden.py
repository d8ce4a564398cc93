"""Golden DOT files: a few small drawings pinned byte for byte (torchview's ``.gv`` expectations), so a
refactor of ``render/`` that changes a drawing fails here.  ``FXVIZ_UPDATE_GOLDEN=1`` rewrites them from
the current code (a test run never edits the tree by itself); read the diff before committing it.

The DOT holds no checkout path, address or id: source lines are written as ``file.py:line``, so the
files match wherever the repository is cloned.  Editing ``fxviz/examples.py`` or ``_summed`` below moves
those line numbers: refresh the files then."""

from __future__ import annotations

import os
import pathlib
import re

import pytest

import fxviz
from fxviz.examples import get_example

GOLDEN = pathlib.Path(__file__).parent / "golden"
UPDATE = os.environ.get("FXVIZ_UPDATE_GOLDEN") == "1"


def _summed(model):
    """``model`` returning the sum of its output: a scalar output is the loss as it is, so the
    drawings hold no source line of fxviz's own loss code (only this file's and the example's)."""
    cls = type(model)

    class Summed(cls):
        def forward(self, *args):
            return super().forward(*args).sum()

    Summed.__name__ = Summed.__qualname__ = cls.__name__
    model.__class__ = Summed
    return model


def _chain() -> fxviz.Trace:
    model, inputs = get_example("pointwise_chain", batch=4, features=8, depth=2)
    return fxviz.trace(_summed(model), *inputs)


def _gpt() -> fxviz.Trace:
    model, inputs = get_example("mini_gpt", n_layer=1, n_embd=16, n_head=2, vocab=32)
    return fxviz.trace(_summed(model), *inputs)


@pytest.fixture(scope="module")
def chain(traces):
    return traces.of(("golden", "chain"), _chain)


@pytest.fixture(scope="module")
def gpt(traces):
    return traces.of(("golden", "mini_gpt"), _gpt)


def check_golden(file: str, text: str, what: str) -> None:
    """``text`` equals ``tests/golden/<file>`` (rewritten instead with ``FXVIZ_UPDATE_GOLDEN=1``); every
    golden test (drawings, CLI output, report data) compares through here."""
    path = GOLDEN / file
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path.name}: run with FXVIZ_UPDATE_GOLDEN=1 and commit it"
    assert text == path.read_text(encoding="utf-8"), (
        f"{what} changed: if intended, refresh with FXVIZ_UPDATE_GOLDEN=1 and read the diff")


def _check(name: str, source: str) -> None:
    check_golden(f"{name}.dot", source, f"the drawing {name}")


CHAIN_VIEWS = {
    "chain_joint": {"view": "joint", "strategy": "min_cut"},
    "chain_forward": {"view": "forward", "strategy": "min_cut"},
    "chain_backward": {"view": "backward", "strategy": "min_cut"},
    "chain_compare": {"view": "compare", "strategy": "default", "compare": "min_cut"},
}


@pytest.mark.parametrize("name", CHAIN_VIEWS)
def test_pointwise_chain_views(chain, name):
    _check(name, chain.draw(group="none", **CHAIN_VIEWS[name]).source)


def test_grouped_mini_gpt(gpt):
    _check("gpt_module_depth2", gpt.draw(group="module", depth=2).source)


def test_expanded_box(gpt):
    boxes = gpt.draw(group="module", depth=1).boxes
    assert "h" in {b["label"] for b in boxes}, [b["label"] for b in boxes]
    _check("gpt_expand_h", gpt.draw(group="module", depth=1, expand=["h"]).source)


def test_golden_files_hold_no_checkout_path():
    for path in GOLDEN.glob("*.dot"):
        text = path.read_text()
        assert not re.search(r"0x[0-9a-f]{6,}|/(work|home|tmp|Users)/", text), path.name


def test_the_drawings_font_is_installed():
    """The drawings name DejaVu Sans first (``render.theme.FONT``) so that ``dot`` measures their text the
    same on every machine: the golden report's SVG sizes hold only where it is installed."""
    import shutil
    import subprocess

    from fxviz.render.theme import FONT

    assert FONT.split(",")[0] == "DejaVu Sans"
    if shutil.which("fc-match") is None:
        pytest.skip("no fontconfig (fc-match) to ask")
    found = subprocess.run(["fc-match", "-f", "%{family}", "DejaVu Sans"], capture_output=True, text=True).stdout
    assert "DejaVu Sans" in found, f"fontconfig gives {found!r} for DejaVu Sans: apt-get install fonts-dejavu-core"
