"""Awkward but real structures through every view (issue 27): summary, memory table, doctor, draw,
report, explorer payload and the CLI.  None may crash or show an artefact ("None", NaN, "nan", an
empty caption); where torch has a number, fxviz's agrees with it (gradients with eager autograd,
saved sets with torch's partitioner called directly); a structure that cannot be shown is a clear
fxviz error."""

from __future__ import annotations

import json
import pathlib
import re
import warnings

import pytest
import torch

import fxviz
from fxviz import _torch
from fxviz.core.errors import FxvizError, FxvizWarning, NoFloatingOutputError, TraceError
from fxviz.frontends.cli.entry import main
from fxviz.payloads.views import view_payload
from fxviz.render.graph.spec import DrawSpec
from fxviz.render.page.embed import unpack_json

from .awkward_models import FACTORIES, all_eager_scalar, int_only_function

HERE = pathlib.Path(__file__).resolve().parent
NAMES = sorted(FACTORIES)
# words that betray a missing value shown as text
ARTEFACT = re.compile(r"\bNone\b|\bnan\b|\bNaN\b|<NA>|\binf\b")


def _clean(text: str, what: str) -> None:
    assert not ARTEFACT.search(text), f"{what}: {ARTEFACT.findall(text)} in\n{text}"


def _trace(name: str) -> fxviz.Trace:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FxvizWarning)
        model, inputs = FACTORIES[name]()
        return fxviz.trace(model, *inputs)


@pytest.fixture(scope="module")
def awkward(traces):
    """``awkward(name)``: the model's trace, made once per session (the session's ``traces.of``)."""
    return lambda name: traces.of(("awkward", name), lambda: _trace(name))


def _eager_grads(name: str) -> dict[str, torch.Tensor | None]:
    """torch's own answer: the .grad of every parameter after one eager backward of the loss fxviz
    uses (the sum of every floating output, or the scalar the model returns)."""
    model, inputs = FACTORIES[name]()
    out = model(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    loss = sum(o.sum() if not o.is_complex() else torch.view_as_real(o).sum()
               for o in outs if o.is_floating_point() or o.is_complex())
    if loss.requires_grad:
        loss.backward()
    return {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("name", NAMES)
def test_summary_table_and_doctor_words(awkward, name):
    tr = awkward(name)
    for piece in tr.pieces:
        _clean(piece.summary(), f"{name} summary of graph {piece.graph.index + 1}")
        if not piece.graph.has_backward:  # nothing to partition: said once, not a grid of "failed"
            text = piece.memory_table(["default", "min_cut"], scope="graph").to_text()
            assert "failed" not in text and "no backward graph" in text, text
    table = tr.memory_table(["default", "min_cut"])
    _clean(table.to_text(), f"{name} memory table")
    _clean(re.sub(r"<[^>]+>", " ", table._repr_html_()), f"{name} memory table (html)")
    doc = tr.doctor()
    _clean(str(doc), f"{name} doctor")
    _clean(re.sub(r"<[^>]+>", " ", doc._repr_html_()), f"{name} doctor (html)")


@pytest.mark.parametrize("name", NAMES)
def test_doctor_agrees_with_eager_autograd(awkward, name):
    grads = _eager_grads(name)
    table = awkward(name).doctor().table.set_index("parameter")
    for param, grad in grads.items():
        assert bool(table.loc[param, "gets_gradient"]) == (grad is not None), param
    checked = awkward(name).check_gradients()
    assert checked["ok"].all(), checked


@pytest.mark.parametrize("name", NAMES)
def test_saved_sets_are_torchs(awkward, name):
    for piece in awkward(name).pieces:
        if not piece.graph.has_backward:
            assert not piece.partition("min_cut").ok  # no backward: nothing to partition, said so
            continue
        g = piece.graph
        fwd, _ = _torch.min_cut_partition(_torch.copy_graph_module(g.gm), g.joint_inputs,
                                          num_fwd_outputs=g.num_fwd_outputs,
                                          static_lifetime_input_indices=g.static_lifetime_input_indices)
        torch_saved = [n.name for n in list(fwd.graph.nodes)[-1].args[0][g.num_fwd_outputs:]]
        assert piece.partition("min_cut").saved == torch_saved


@pytest.mark.parametrize("name", NAMES)
def test_drawings_and_payloads(awkward, name):
    tr = awkward(name)
    for piece in tr.pieces:
        views = ["joint", "forward", "backward"] if piece.graph.has_backward else ["joint"]
        for view in views:
            strategy = "default" if piece.graph.has_backward else None  # a forward-only graph: nothing to mark
            drawing = piece.draw(view, strategy=strategy)
            assert drawing.caption.strip(), f"{name} graph {piece.graph.index + 1} {view}: empty caption"
            _clean(drawing.caption, f"{name} {view} caption")
            payload = view_payload(piece, DrawSpec.of(view, strategy)).to_json()
            assert payload["svg"] and not payload["error"], payload["error"]
            _clean(payload["caption"], f"{name} {view} payload caption")
        if not piece.graph.has_backward:  # no forward/backward split to draw: a clear error, said in the pane
            for view in ("joint", "backward"):
                payload = view_payload(piece, DrawSpec.of(view, "default")).to_json()
                assert not payload["svg"] and "no backward graph" in payload["error"], payload["error"]
                _clean(payload["error"], f"{name} {view} payload error")


def _strings(data) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for v in data.values() for s in _strings(v)]
    if isinstance(data, list):
        return [s for v in data for s in _strings(v)]
    return []


@pytest.mark.parametrize("name", NAMES)
def test_report(awkward, name, tmp_path):
    path = fxviz.report(awkward(name), tmp_path / f"{name}.html", strategies=["default", "min_cut"],
                        views=("joint", "forward"))
    text = path.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="fxviz-data">(.*?)</script>', text, re.S)
    assert m
    data = unpack_json(m.group(1))
    json.dumps(data, allow_nan=False)  # strict JSON: no NaN or infinity anywhere
    if not awkward(name).graph.has_backward:  # the memory table's empty rows say why, under the table
        assert any("no backward graph" in note for note in data["table"]["notes"]), data["table"]["notes"]
    for s in _strings(data):
        if not s.lstrip().startswith("<svg"):
            _clean(s, f"{name} report text")


@pytest.mark.parametrize("name", NAMES)
def test_cli(awkward, name, capsys):
    tr = awkward(name)
    spec = f"{HERE / 'awkward_models.py'}:{name}"
    for argv in (["doctor", spec], ["table", spec, "--strategies", "default,min_cut"], ["nodes", spec]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FxvizWarning)  # the CLI prints them; pytest makes them errors
            rc = main(argv)
        assert rc == (1 if argv[0] == "doctor" and not tr.doctor().healthy else 0), argv
        out = capsys.readouterr().out
        assert out.strip()
        _clean(out, f"fxviz {argv[0]} {name}")


def test_no_graph_at_all_is_a_clear_error(capsys):
    """Every frame fell back to eager and the model returns its own loss: no graph is left."""
    model, inputs = all_eager_scalar()
    with pytest.raises(TraceError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore", FxvizWarning)
        fxviz.trace(model, *inputs)
    assert "captured no graph" in info.value.message and info.value.hint
    assert isinstance(info.value, FxvizError)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FxvizWarning)
        assert main(["doctor", f"{HERE / 'awkward_models.py'}:all_eager_scalar"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "captured no graph" in err[0] and "Traceback" not in "\n".join(err)


def test_reused_graphs_name_their_graph_and_modules(awkward):
    """The HF Mixtral case (issue 27 item 3): many graphs reused across layers, one of them without
    any parameter.  Every reused graph is named ("graph k", 1-based) with the modules it ran for; the
    list of findings past the first two ("likewise: ...") names them too, never "None"."""
    tr = awkward("moe_stack")
    doc = tr.doctor()
    reused = doc.diagnosis.of_kind("reused_graph")
    runs = {g.index: len(g.runs) for g in tr.capture.graphs}
    assert {f.graph for f in reused} == {g for g, n in runs.items() if n > 1} and len(reused) > 4
    text = str(doc)
    _clean(text, "moe_stack doctor")
    assert "(no parameters)" not in text
    for f in reused:
        assert f.message.startswith(f"graph {f.graph + 1} ") and "was compiled once" in f.message
        # the modules of its first run, or (no parameters) the graph's own modules or source lines
        assert f.module and ("layers.0" in f.module or "the code at awkward_models.py:" in f.module), f.message
    likewise = next(line for line in text.splitlines() if "likewise:" in line)
    assert "graph " in likewise and "layers.0" in likewise


def test_int_only_step_is_a_clear_error(capsys):
    """A step that computes only integers has no loss to differentiate: fxviz says so, in the API
    and in one line of the CLI."""
    fn, inputs = int_only_function()
    with pytest.raises(NoFloatingOutputError) as info:
        fxviz.trace(fn, *inputs)
    assert "no floating tensor to differentiate" in info.value.message and info.value.hint
    assert main(["nodes", f"{HERE / 'awkward_models.py'}:int_only_function"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "no floating tensor" in err[0] and "Traceback" not in "\n".join(err)
