"""Output and input safety.

* fxviz never unpickles untrusted data: no ``torch.load`` without ``weights_only=True``, no
  ``pickle``/``marshal``/``shelve``/``dill`` loads, no ``pandas.read_pickle``, no
  ``numpy.load(allow_pickle=True)``, no unsafe ``yaml.load``, no ``eval`` — checked on the syntax
  tree of every module, so a comment or a string cannot hide or fake a call.
* Files are written atomically (a temporary file in the same folder, then ``os.replace``) to the
  path the user gave: a failed or interrupted write leaves the old file untouched and no debris.
* Model-provided strings (module and buffer names full of markup) never become markup or script
  in fxviz's SVG or HTML.
"""

from __future__ import annotations

import ast
import os
import pathlib
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
import torch
from torch import nn

import fxviz

PACKAGE = pathlib.Path(fxviz.__file__).parent

# name of the called function (last dotted part, or the full dotted path) -> why it is unsafe
UNSAFE_CALLS = {
    "pickle.load": "unpickles", "pickle.loads": "unpickles", "cPickle.load": "unpickles",
    "marshal.load": "unmarshals", "marshal.loads": "unmarshals", "shelve.open": "unpickles",
    "dill.load": "unpickles", "dill.loads": "unpickles", "cloudpickle.load": "unpickles",
    "cloudpickle.loads": "unpickles", "read_pickle": "unpickles", "jit.load": "loads TorchScript",
    "eval": "evaluates a string",
}


def _dotted(func: ast.AST) -> str:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


def _kw(call: ast.Call, name: str) -> ast.AST | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def unsafe_loads(source: str, filename: str = "<source>") -> list[str]:
    """Every call in ``source`` that could unpickle or evaluate untrusted data."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        where = f"{filename}:{node.lineno} {name}(...)"
        last2 = ".".join(name.split(".")[-2:])
        if name.endswith("torch.load"):
            flag = _kw(node, "weights_only")
            if not (isinstance(flag, ast.Constant) and flag.value is True):
                found.append(f"{where} without weights_only=True")
        elif name.endswith("np.load") or name.endswith("numpy.load"):
            flag = _kw(node, "allow_pickle")
            literal = isinstance(flag, ast.Constant)
            if (literal and flag.value is not False) or (flag is not None and not literal):
                found.append(f"{where} with allow_pickle")
        elif name.endswith("yaml.load"):
            loader = _kw(node, "Loader")
            if loader is None or "Safe" not in _dotted(loader):
                found.append(f"{where} without a SafeLoader")
        elif last2 in UNSAFE_CALLS or name in UNSAFE_CALLS or name.split(".")[-1] == "read_pickle":
            found.append(f"{where}: {UNSAFE_CALLS.get(last2) or UNSAFE_CALLS.get(name) or 'unpickles'}")
    return found


def test_the_checker_finds_unsafe_loads():
    bad = """
import torch, pickle, yaml, numpy as np, pandas as pd
torch.load(path)                           # weights_only missing
torch.load(path, weights_only=False)
pickle.loads(data)
yaml.load(text)
np.load(f, allow_pickle=True)
pd.read_pickle(f)
eval(user_text)
"""
    assert len(unsafe_loads(bad)) == 7, unsafe_loads(bad)
    good = """
import torch, yaml, numpy as np
torch.load(path, weights_only=True)        # torch.load(path) in a comment is not a call
yaml.load(text, Loader=yaml.SafeLoader)
np.load(f)
s = "pickle.loads(data)"
"""
    assert unsafe_loads(good) == []


UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"}


def unsafe_imports(source: str) -> list[str]:
    """Imports of serialisation modules that execute code on load (fxviz needs none of them)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in UNSAFE_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
            found.append(node.module or "")
    return found


def test_fxviz_never_unpickles_or_evaluates_untrusted_data():
    assert unsafe_imports("from pickle import loads\nimport marshal") == ["pickle", "marshal"]
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        offenders += unsafe_loads(text, str(path.relative_to(PACKAGE.parent)))
        offenders += [f"{path.relative_to(PACKAGE.parent)} imports {m}" for m in unsafe_imports(text)]
    assert not offenders, offenders


def test_exec_only_runs_fx_generated_code():
    """The code view's ``exec`` runs torch.fx's own code generation, whose identifiers fxviz
    sanitises; the advice's runs the code it offers to paste (``analysis/advice/changes``: fxviz's
    templates, integers and module paths that are dotted identifiers, so what is offered is what is
    checked); nothing else in fxviz executes strings."""
    calls = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _dotted(node.func) in ("exec", "builtins.exec", "compile"):
                calls.append(f"{path.relative_to(PACKAGE)}:{_dotted(node.func)}")
    assert set(calls) <= {"analysis/graph/code.py:exec", "analysis/graph/code.py:compile",
                          "analysis/advice/changes.py:exec", "analysis/advice/changes.py:compile"}, calls


# --- atomic writes ------------------------------------------------------------------------------------
class _Markup(nn.Module):
    NAME = '<img src=x onerror="alert(1)">{|}->"\\l&amp;'
    SCRIPT = "<script>alert('fxviz')</script>"

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.add_module(self.NAME, nn.Linear(4, 4))
        self.register_buffer(self.SCRIPT, torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self, self.NAME)(x) + getattr(self, self.SCRIPT)


@pytest.fixture(scope="module")
def markup_trace():
    return fxviz.trace(_Markup(), torch.randn(2, 4))


@pytest.fixture(scope="module")
def mlp_trace(traces):
    return traces[("mlp", "lifted")]


def _writers(tr):
    """(name, write(path)) for every fxviz function that writes a file the user names."""
    out = []
    if hasattr(tr, "draw"):
        out.append(("Drawing.save(svg)", lambda p: tr.draw().save(p.with_suffix(".svg"))))
        out.append(("Drawing.save(png)", lambda p: tr.draw().save(p.with_suffix(".png"))))
    if hasattr(fxviz, "report"):
        out.append(("fxviz.report", lambda p: fxviz.report(tr, p.with_suffix(".html"))))
    return out


def _spy_replace(monkeypatch, fail: BaseException | None = None) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        calls.append((os.fspath(src), os.fspath(dst)))
        if fail is not None:
            raise fail
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    return calls


def test_files_are_written_by_rename_from_a_temporary_file_beside_the_target(mlp_trace, tmp_path, monkeypatch):
    writers = _writers(mlp_trace)
    if not writers:
        pytest.skip("no file writers have landed yet (Trace.draw, fxviz.report)")
    for name, write in writers:
        folder = tmp_path / name.replace("(", "_").replace(")", "")
        folder.mkdir()
        calls = _spy_replace(monkeypatch)
        written = pathlib.Path(write(folder / "out"))
        monkeypatch.undo()
        assert written.parent == folder and written.exists() and written.stat().st_size > 0, name
        assert calls and pathlib.Path(calls[-1][1]) == written, f"{name} did not rename into place: {calls}"
        assert pathlib.Path(calls[-1][0]).parent == folder, f"{name}: the temporary file must be beside the target"
        assert sorted(p.name for p in folder.iterdir()) == [written.name], f"{name} left debris"


@pytest.mark.parametrize("failure", [OSError("disk full"), KeyboardInterrupt()], ids=["oserror", "interrupt"])
def test_a_failed_write_leaves_the_old_file_and_no_debris(mlp_trace, tmp_path, monkeypatch, failure):
    writers = _writers(mlp_trace)
    if not writers:
        pytest.skip("no file writers have landed yet (Trace.draw, fxviz.report)")
    for name, write in writers:
        folder = tmp_path / re.sub(r"\W", "_", name)
        folder.mkdir()
        targets = [folder / f"out{s}" for s in (".svg", ".png", ".html")]
        for t in targets:
            t.write_bytes(b"the user's previous file")
        _spy_replace(monkeypatch, fail=failure)
        with pytest.raises(type(failure)):
            write(folder / "out")
        monkeypatch.undo()
        for t in targets:
            assert t.read_bytes() == b"the user's previous file", f"{name} damaged {t.name}"
        assert sorted(p.name for p in folder.iterdir()) == sorted(t.name for t in targets), f"{name} left debris"


def test_a_render_that_fails_leaves_the_old_file(tmp_path):
    if not hasattr(fxviz.Trace, "draw"):
        pytest.skip("Trace.draw has not landed yet")
    model, inputs = fxviz.examples.mini_gpt(n_layer=2, n_embd=32, n_head=4, vocab=64, block_size=32, seq=8)
    tr = fxviz.trace(model, *inputs)
    target = tmp_path / "g.svg"
    target.write_text("old")
    with pytest.raises(fxviz.RenderError) as info:
        tr.draw(group="none", timeout=0.05).save(target)  # no layout of ~340 nodes in 50 ms
    assert "\n" not in str(info.value) and info.value.hint
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["g.svg"]


# --- markup from the model never becomes markup --------------------------------------------------------
def _svg_elements(svg: str) -> list[ET.Element]:
    return list(ET.fromstring(svg).iter())


def test_model_strings_never_become_svg_markup(markup_trace):
    if not hasattr(fxviz.Trace, "draw"):
        pytest.skip("Trace.draw has not landed yet")
    names = set(markup_trace.nodes.qualname.dropna()) | set(markup_trace.nodes.module.dropna())
    assert _Markup.SCRIPT in names and any(_Markup.NAME in n for n in names)  # the payload reached the views
    for kwargs in ({}, {"group": "module"}, {"strategy": "default"}, {"view": "backward"}):
        svg = markup_trace.draw(**kwargs).svg()
        elements = _svg_elements(svg)  # parses: the payload did not break the document
        tags = {e.tag.rsplit("}", 1)[-1] for e in elements}
        assert not tags & {"script", "img", "foreignObject", "iframe", "object", "embed"}, (kwargs, tags)
        for e in elements:
            for attr, value in e.attrib.items():
                assert not attr.lower().startswith("on"), (kwargs, attr)
                assert not value.strip().lower().startswith("javascript:"), (kwargs, attr, value)
        assert "<script" not in svg and "<img" not in svg, kwargs


class _Tags(HTMLParser):
    """The real start tags and attributes of a page (escaped text is not a tag)."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def count(self, tag: str) -> int:
        return sum(1 for t, _ in self.tags if t == tag)

    def handlers(self) -> list[str]:
        return [f"{t} {k}" for t, attrs in self.tags for k, _ in attrs if k.lower().startswith("on")]


def test_model_strings_never_become_html_markup(markup_trace, mlp_trace, tmp_path):
    if not hasattr(fxviz, "report"):
        pytest.skip("fxviz.report has not landed yet")
    page = pathlib.Path(fxviz.report(markup_trace, tmp_path / "r.html")).read_text(encoding="utf-8")
    plain = pathlib.Path(fxviz.report(mlp_trace, tmp_path / "plain.html")).read_text(encoding="utf-8")
    assert "<img src=x" not in page and 'onerror="alert(1)"' not in page
    assert "<script>alert('fxviz')</script>" not in page
    tags, baseline = _Tags(page), _Tags(plain)
    assert tags.count("svg") > 0  # the drawings are inline, with the payload in them
    # the payload adds no tag or attribute that can run code: the same as a report without it
    for tag in ("script", "img", "iframe", "object", "embed", "foreignobject"):
        assert tags.count(tag) == baseline.count(tag), tag
    assert sorted(set(tags.handlers())) == sorted(set(baseline.handlers()))
    assert all(v is None or not v.strip().lower().startswith("javascript:") for _, attrs in tags.tags for _, v in attrs)
