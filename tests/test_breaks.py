"""Issue 14: graph breaks and real-world model shapes, end to end.

Each test builds its own small model (no downloads) and checks fxviz against torch itself: eager
autograd for gradients and saved tensors, dynamo's own node metadata for module paths,
``torch.compile`` for what a capture must accept.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest
import torch
from torch import nn

import fxviz
from fxviz import _torch
from fxviz.core.graph_facts import joint_node_count
from fxviz.payloads.pieces import summaries

from .awkward_models import Router


# --- 3. module paths of a submodule called twice in a class with its own __getattr__ -------------
class _GetattrMixin(nn.Module):
    """diffusers' ModelMixin defines ``__getattr__``; dynamo then spells submodule lookups out as
    ``L['fn'].__dict__['_modules'][...]``."""

    def __getattr__(self, name: str):  # type: ignore[override]
        return super().__getattr__(name)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class _TwiceThroughBlocks(_GetattrMixin):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_Block(), _Block()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        for b in self.blocks:  # second call of each block: dynamo keys it "<id>@1"
            x = b(x)
        return x


def test_module_paths_of_a_second_call_in_a_getattr_model() -> None:
    # aot_eager's graph: GELU stays one gelu op per call (inductor decomposes it into erf, mul, add)
    tr = fxviz.trace(_TwiceThroughBlocks(), torch.randn(2, 4), backend="aot_eager")
    gelus = [n for n in tr.joint.graph.nodes if n.op == "call_function" and "gelu" in str(n.target)
             and tr.graph.info[n.name].phase == "forward"]
    assert len(gelus) == 4
    # torch's own record: the second calls carry the "@1" key and the __dict__ spelling
    raw_keys = [next(iter(reversed(n.meta["nn_module_stack"]))) for n in gelus]
    assert sum("@" in k for k in raw_keys) == 2
    assert all("__dict__" in list(n.meta["nn_module_stack"].values())[-1][0] for n in gelus)
    assert [tr.graph.info[n.name].module for n in gelus] == ["blocks.0.act", "blocks.1.act"] * 2
    assert not any("__dict__" in str(m) or "_modules" in str(m) for m in tr.nodes["module"].dropna())
    assert "__dict__" not in tr.draw(group="module").source


def test_module_path_spellings() -> None:
    f = _torch.module_path_from_stack_entry
    assert f("L['fn'].__dict__['_modules']['blocks'].0.act") == "blocks.0.act"
    assert f("L['self']._modules['features'][0]") == "features.0"
    assert f("L['self'].features[0]") == "features.0"


class _BreakBetween(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x).relu()
        torch._dynamo.graph_break()
        return self.b(h).sum()


def test_a_value_crossing_a_break_names_its_graph_as_people_count() -> None:
    """The activation graph 2 receives from graph 1 says "from graph 1" (1-based, through
    ``graph_name``, as the piece selector and the CLI count), not "from graph 0"."""
    from fxviz.sources.graphs import graph_name

    graphs = fxviz.trace(_BreakBetween(), torch.randn(2, 4)).capture.graphs
    assert len(graphs) == 2
    primals = [i.qualname for i in graphs[1].info.values() if i.role == "primal"]
    assert len(primals) == 1 and primals[0].endswith(f"(from {graph_name(0)})"), primals
    assert graph_name(0) == "graph 1"


# --- 4. tensors nested in list/tuple/dict arguments are inputs, not activations ----------------------
def test_eager_row_counts_nested_input_tensors_as_inputs() -> None:
    x = torch.randn(64, 64)
    w = torch.randn(64, 64, requires_grad=True)
    tr = fxviz.trace(lambda x, ws: torch.mm(x, ws[0]).sum(), x, [w])
    table = tr.memory_table(["eager", "default"]).set_index("strategy")
    # eager autograd itself: mm saves x (for w's gradient) and nothing it computed
    saved: list[torch.Tensor] = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        torch.mm(x, w).sum()
    assert [t.data_ptr() for t in saved] == [x.data_ptr()]
    assert table.loc["eager", "saved_activation_bytes"] == 0
    assert table.loc["eager", "saved_input_bytes"] == x.numel() * x.element_size()
    assert table.loc["eager", "saved_activation_bytes"] == table.loc["default_partition", "saved_activation_bytes"]
    assert table.loc["eager", "saved_input_bytes"] == table.loc["default_partition", "saved_input_bytes"]

    d = fxviz.trace(lambda x, ws: torch.mm(x, ws["w"]).sum(), x, {"w": w})
    assert d.memory_table(["eager"])["saved_activation_bytes"].iloc[0] == 0


# --- 5. a non-leaf input written in place through a view -------------------------------------------
def _fill_row(a: torch.Tensor) -> torch.Tensor:
    b = a[0]
    return b.masked_fill_(torch.ones_like(b, dtype=torch.bool), 0)


def test_non_leaf_input_written_in_place_through_a_view() -> None:
    a = torch.ones(2, 2, requires_grad=True).clone()
    before = a.detach().clone()
    tr = fxviz.trace(_fill_row, a)
    assert tr.graph.has_backward
    assert torch.equal(a.detach(), before) and not a.is_leaf  # the caller's tensor is untouched
    # the joint graph's input gradient equals torch.compile's (and eager autograd's) gradient; its
    # forward outputs are the mutated input, then the loss (num_fwd_outputs = mutations + outputs)
    base = torch.ones(2, 2, requires_grad=True)
    _fill_row(base.clone()).sum().backward()
    compiled_base = torch.ones(2, 2, requires_grad=True)
    torch.compile(_fill_row, backend="aot_eager")(compiled_base.clone()).sum().backward()
    assert torch.equal(base.grad, compiled_base.grad)
    assert tr.graph.num_fwd_outputs == 2
    args = (torch.ones(2, 2), torch.zeros(2, 2), torch.ones(()))
    outs = torch.fx.Interpreter(tr.joint).run(*args, enable_io_processing=False)
    assert torch.equal(outs[2], base.grad)


# --- 6. wording and torch's chatter -------------------------------------------------------------------
def test_selective_checkpoint_does_not_leak_torch_warning() -> None:
    code = textwrap.dedent("""
        import functools, torch, torch.nn as nn, fxviz
        from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts, CheckpointPolicy
        def policy(ctx, op, *a, **k):
            return CheckpointPolicy.MUST_SAVE if op is torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE
        class M(nn.Module):
            def __init__(s):
                super().__init__(); s.fc = nn.Linear(8, 8)
            def forward(s, x):
                return checkpoint(lambda y: torch.relu(s.fc(y)).sin(), x, use_reentrant=False,
                                  context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
        tr = fxviz.trace(M(), torch.randn(4, 8))
        tr.check_gradients()
        print("saved", tr.partition("default").saved)
    """)
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert "saved" in run.stdout
    assert "context_fn" not in run.stderr


# --- 1. the doctor over every piece: a Mixtral-style expert loop with graph breaks -------------------
class _Expert(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(d, 2 * d)
        self.w2 = nn.Linear(2 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(torch.relu(self.w1(x)))


class _MoEBlock(nn.Module):
    """topk routing, then a graph break, then an eager loop over the experts."""

    def __init__(self, d: int, experts: int = 2) -> None:
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.experts = nn.ModuleList(_Expert(d) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(self.gate(x), -1)
        top, idx = torch.topk(weights, 1, dim=-1)
        torch._dynamo.graph_break()
        out = torch.zeros_like(x)
        for i, expert in enumerate(self.experts):
            chosen = idx[:, 0] == i
            out = out + expert(x) * (top * chosen[:, None])
        return x + out


class MixtralStyle(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.embed = nn.Linear(d, d)
        self.layers = nn.ModuleList(_MoEBlock(d) for _ in range(2))
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for layer in self.layers:  # a graph break inside this loop: dynamo skips this frame
            h = layer(h)
        return self.head(h).sum()


def _mixtral() -> tuple[MixtralStyle, torch.Tensor]:
    torch.manual_seed(0)
    return MixtralStyle(), torch.randn(4, 8)


def test_doctor_over_pieces_agrees_with_eager_autograd() -> None:
    model, x = _mixtral()
    tr = fxviz.trace(model, x)
    assert len(tr.pieces) > 1 and tr.capture.graph_breaks
    grads = tr.check_gradients().set_index("parameter")
    assert bool(grads["ok"].all()) and bool(grads["eager_has_gradient"].all())

    doc = tr.doctor()
    table = doc.table.set_index("parameter")
    # eager autograd is the judge: nothing torch's eager run gives a gradient is reported as getting none
    assert bool(table.loc[grads.index, "gets_gradient"].all())
    assert doc.healthy and not [f for f in doc.findings if f.severity == "error"]
    assert not doc.diagnosis.of_kind("no_path")

    # parameters in no captured graph: exactly embed and head, told as code that ran outside every graph
    in_graphs = {i.qualname for p in tr.pieces for i in p.graph.info.values() if i.role == "parameter"}
    absent = [n for n, _ in model.named_parameters() if n not in in_graphs]
    outside = doc.diagnosis.of_kind("outside_graphs")
    assert sorted(f.module for f in outside) == ["embed", "head"]
    named_outside = {n for n in absent if n.startswith(("embed.", "head."))}
    assert named_outside == {"embed.weight", "embed.bias", "head.weight", "head.bias"}
    assert all("h = self.embed(x)" in f.message for f in outside if f.module == "embed")
    frames = doc.diagnosis.of_kind("eager_frame")
    assert frames and "forward (test_breaks.py:" in frames[0].message

    # layers.1 is in no graph's inputs, yet torch's compiled run gave it the eager gradient: dynamo ran
    # the graphs compiled for layers.0 again; the doctor says which graph and which run
    layer1 = [n for n in absent if n.startswith("layers.1.")]
    assert len(layer1) == 10 and bool(grads.loc[layer1, "ok"].all())
    reused = doc.diagnosis.of_kind("reused_graph")
    assert sorted(f.graph for f in reused) == [0, 1]
    assert {f.module for f in reused} == {"layers.0.gate", "layers.0.experts"}
    assert all("layers.1" in f.message and "2 times" in f.message for f in reused)
    assert all("run 2" in table.loc[n, "in_graph"] for n in layer1)
    # the doctor counts graphs as the piece selector and --piece do: "graph 1" is tr.pieces[0]
    labels = {p.label.split(" of ")[0] for p in summaries(tr)}
    assert all(f"graph {f.graph + 1} was compiled once" in f.message for f in reused)
    said = set(re.findall(r"graph \d+", " ".join([f.message for f in doc.findings] + list(table["in_graph"]))))
    assert said and said <= labels, said - labels

    # placeholders handed from one graph to the next are inputs, not constants (point 6)
    assert not any("constant" in f.message for f in doc.diagnosis.of_kind("duplicate_data"))
    # the summary counts what really gets a gradient
    assert "20 get a gradient from the captured graphs (10 through a graph reused" in tr.summary()
    assert "4 are used only outside every graph" in tr.summary()


# --- 2. every view covers every piece -----------------------------------------------------------------
def _report_json(html_text: str) -> dict:
    import re

    from fxviz.render.page.embed import unpack_json

    m = re.search(r'<script type="application/json" id="fxviz-data">(.*?)</script>', html_text, re.S)
    assert m, "no data element"
    return unpack_json(m.group(1))


def test_pieces_in_draw_table_overview_and_report(tmp_path, monkeypatch) -> None:
    import pandas as pd
    import pytest

    from fxviz.api import facade
    from fxviz.core.errors import InputError

    model, x = _mixtral()
    tr = fxviz.trace(model, x)
    n = len(tr.pieces)
    made = []  # the facts of every graph run: computed once per model, whichever piece asks
    monkeypatch.setattr(facade, "piece_facts", lambda cap, real=facade.piece_facts: made.append(cap) or real(cap))
    # draw(piece=i) is that piece's own graph
    for i in range(n):
        drawing = tr.draw(piece=i)
        assert f"graph {i + 1} of {n}" in drawing.caption or f"graph {i + 1} of {n}" in drawing.source
        assert drawing.nodes == tr.pieces[i].draw().nodes
    with pytest.raises(InputError):
        tr.draw(piece=n)

    # the per-piece memory table: each piece's rows are its own memory_table; the totals sum runs x value,
    # a value crossing a break that two graphs save counted once (tests/test_compiled_step: the real step's)
    strategies = ["default_partition", "min_cut"]
    by_piece = tr.memory_table(strategies + ["eager"], scope="step")
    for i, piece in enumerate(tr.pieces):
        own = piece.memory_table(strategies, scope="graph").set_index("strategy")
        rows = by_piece[by_piece["piece"] == i].set_index("strategy")
        for s in strategies:
            mine, theirs = rows.loc[s, "saved_activation_bytes"], own.loc[s, "saved_activation_bytes"]
            assert (pd.isna(mine) and pd.isna(theirs)) or mine == theirs
    runs = {g: len(tr.pieces[g].graph.runs) for g in range(n)}
    assert runs[0] == 2 and runs[1] == 2  # the block graphs ran once per layer
    for s in strategies:
        want = sum(runs[p.graph.index] * int(p.memory_table([s], scope="graph")["saved_activation_bytes"].iloc[0])
                   for p in tr.pieces if p.graph.has_backward)
        total = by_piece[(by_piece["piece"] == "total") & (by_piece["strategy"] == s)]
        assert 0 < int(total["saved_activation_bytes"].iloc[0]) <= want
    eager_total = by_piece[by_piece["strategy"] == "eager"]
    assert list(eager_total["piece"]) == ["total"]

    # the overview: one box per piece, reused graphs double-bordered, execution edges numbered
    src = tr.draw("overview").source
    assert all(f"piece{i} [" in src for i in range(n))
    assert src.count("peripheries=2") == 2
    assert 'piece0 -> piece1 [label=" 1, 3 "' in src and "embed" in src
    tr.draw("overview").svg()

    # the report holds every piece's views and the whole-model overview
    path = fxviz.report(tr, tmp_path / "moe.html", strategies=strategies, views=("joint", "forward"))
    data = _report_json(path.read_text())
    assert [p["piece"] for p in data["pieces"]] == list(range(n))
    for p, piece in zip(data["pieces"], tr.pieces):
        assert p["label"] == f"graph {piece.graph.index + 1} of {n}"
        assert p["nodes"] == joint_node_count(piece.graph.info.values())
        payload = p.get("payload", data)
        assert set(payload["nodes"]) == {k for k, i in piece.graph.info.items() if i.op != "output"}
        if piece.graph.has_backward:
            assert any(d["svg"] for d in payload["drawings"].values()), p["label"]
    assert data["overview"]["view"]["svg"].lstrip().startswith("<svg") and data["overview"]["table"]["rows"]
    assert all(p.summary() for p in tr.pieces) and len(tr.pieces[0].saved(run=1)) and len(made) == 1


def test_report_of_a_first_graph_without_backward_carries_no_nan(tmp_path) -> None:
    """Issue 27 item 1: the gate's parameters get no gradient (eager autograd agrees), the doctor's
    table has no gradient node for them (NaN in its DataFrame), and the page data says null where
    the report used to raise "Out of range float values are not JSON compliant"."""
    torch.manual_seed(0)
    model, x = Router(), torch.randn(3, 4)
    model(x).sum().backward()
    assert model.gate.weight.grad is None and model.expert.weight.grad is not None  # torch's own answer
    model.zero_grad(set_to_none=True)
    tr = fxviz.trace(model, x)
    assert len(tr.pieces) > 1 and not tr.pieces[0].graph.has_backward
    text = fxviz.report(tr, tmp_path / "routed.html").read_text(encoding="utf-8")
    nodes = _report_json(text)["nodes"]
    gate = {n["gradient"]["parameter"]: n["gradient"] for n in nodes.values()
            if n["gradient"] and n["role"] in ("parameter", "constant")}
    assert set(gate) == {"gate.weight", "gate.bias"}
    assert all(g["gets"] is False and g["node"] is None for g in gate.values())


@pytest.mark.browser
def test_report_piece_selector_in_chromium(tmp_path, artifacts) -> None:
    from .browser_util import browser, chromium_path

    if chromium_path() is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    model, x = _mixtral()
    tr = fxviz.trace(model, x)
    path = fxviz.report(tr, tmp_path / "moe.html", strategies=["default", "min_cut"], views=("joint", "forward"))
    with browser() as b:
        page = b.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".fxviz-viewport svg g.node", timeout=120_000)
        options = page.eval_on_selector_all("#fxviz-piece option", "os => os.map(o => o.value)")
        assert options == ["-1"] + [str(i) for i in range(len(tr.pieces))]
        # pick graph 2: its own nodes are drawn and its summary shown
        page.select_option("#fxviz-piece", "1")
        page.wait_for_function("() => document.querySelector('.fxviz-summary').textContent.includes('graph 2 of')")
        titles = set(page.eval_on_selector_all(".fxviz-viewport g.node > title", "ts => ts.map(t => t.textContent)"))
        assert titles and titles <= set(tr.pieces[1].graph.info) and not titles <= set(tr.pieces[0].graph.info)
        page.screenshot(path=str(artifacts / "report-moe-graph2.png"))
        # the whole-model overview: one box per piece
        page.select_option("#fxviz-piece", "-1")
        page.wait_for_selector(".fxviz-viewport svg g#piece-0", timeout=30_000)
        boxes = page.eval_on_selector_all(".fxviz-viewport svg g.node", "gs => gs.map(g => g.id)")
        assert {f"piece-{i}" for i in range(len(tr.pieces))} <= set(boxes)
        page.screenshot(path=str(artifacts / "report-moe-overview.png"))
        # back to graph 1
        page.select_option("#fxviz-piece", "0")
        page.wait_for_function("() => document.querySelector('.fxviz-summary').textContent.includes('graph 1 of')")
        assert not b.page_errors and not b.console_errors, (b.page_errors, b.console_errors)


def test_explorer_piece_selector_and_overview() -> None:
    pytest.importorskip("anywidget")
    model, x = _mixtral()
    tr = fxviz.trace(model, x)
    w = fxviz.explore(tr)
    n = len(tr.pieces)
    options = list(w.piece_control.options)
    assert [v for _, v in options] == [-1] + list(range(n))
    label = options[2][0]
    nodes = joint_node_count(tr.pieces[1].graph.info.values())
    assert label.startswith(f"graph 2 of {n}: {nodes} nodes") and "ran 2" in label
    assert w.piece_control.value == 0 and w.trace is tr.pieces[0]
    w.piece_control.value = 1
    assert w.trace is tr.pieces[1] and set(w.pane.nodes) <= set(tr.pieces[1].graph.info)
    w.piece_control.value = -1
    assert w.pane.view_key == "overview" and all(f"graph {i + 1} of {n}" in w.pane.svg for i in range(n))
    assert any(r["key"].startswith("whole model:") for r in w.pane.table["rows"])
    w.piece_control.value = 0
    assert w.pane.view_key.startswith("joint|") and w.trace is tr.pieces[0]


def test_cli_draw_piece_overview_and_table_totals(tmp_path, capsys) -> None:
    from fxviz.frontends.cli.entry import main

    spec = "tests.test_breaks:_mixtral"
    # two graphs (gate, experts): the frame around them runs eagerly, and a model returning a 0-dim
    # loss needs no graph of fxviz's own for the loss
    assert main(["draw", spec, "--piece", "2", "-o", str(tmp_path / "g2.svg")]) == 0
    out = capsys.readouterr().out
    assert "graph 2 of 2" in out and (tmp_path / "g2.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert main(["draw", spec, "--piece", "overview", "-o", str(tmp_path / "all.dot")]) == 0
    dot = (tmp_path / "all.dot").read_text()
    assert all(f"piece{i} [" in dot for i in range(2)) and "peripheries=2" in dot
    assert main(["draw", spec, "--piece", "4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--piece 4 is not a graph" in err[0] and "hint:" in err[0]
    assert main(["table", spec, "--strategies", "default", "--exact"]) == 0
    out = capsys.readouterr().out
    assert "== graph 2 of 2" in out and "== whole model: 2 graphs" in out
    assert main(["doctor", spec]) == 0  # healthy: every parameter gets its eager gradient
    out = capsys.readouterr().out
    assert "ran outside every captured graph" in out and "ran 2 times" in out


@pytest.mark.browser
def test_report_differences_toggle_per_piece_in_chromium(tmp_path, monkeypatch) -> None:
    """A graph-broken report whose first piece ships differences drawings and whose second is
    too big to: the toggle shows the drawing on the first and fades the others on the second."""
    from fxviz.payloads import graph as payloads  # where the limit is read

    from .browser_util import browser, chromium_path
    from .test_browser import _wait_key

    if chromium_path() is None:
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    model, x = _mixtral()
    tr = fxviz.trace(model, x)
    sizes = [len(p.graph.info) - 1 for p in tr.pieces]
    monkeypatch.setattr(payloads, "DIFFERENCES_NODE_LIMIT", (sizes[0] + sizes[1]) // 2)
    assert sizes[0] <= payloads.DIFFERENCES_NODE_LIMIT < sizes[1]
    path = fxviz.report(tr, tmp_path / "moe.html", strategies=["default", "min_cut"], views=("joint", "compare"))
    with browser(viewport=(1024, 768)) as b:
        page = b.new_page()
        page.goto(path.as_uri())
        page.wait_for_selector(".fxviz-viewport svg g.node", timeout=120_000)
        page.click("button[data-view='compare']")
        _wait_key(page, "compare|default_partition|min_cut|-|-")
        page.click(".fxviz-diff-toggle")  # piece 1 (small): the pair's own drawing
        _wait_key(page, "compare|default_partition|min_cut|-|-|differences")
        faded = "() => document.querySelector('.fxviz-viewport svg').classList.contains('fxviz-diffonly')"
        assert not page.evaluate(faded)
        page.select_option("#fxviz-piece", "1")  # piece 2 (no drawings): the toggle stays on and fades
        page.wait_for_function("() => document.querySelector('.fxviz-summary').textContent.includes('graph 2 of')")
        page.wait_for_function(faded)
        assert page.get_attribute(".fxviz-diff-toggle", "aria-pressed") == "true"
        page.click(".fxviz-diff-toggle")  # off: nothing fades
        page.wait_for_function(f"() => !({faded})()")
        page.click(".fxviz-diff-toggle")  # on again, then back to piece 1: its drawing again
        page.wait_for_function(faded)
        page.select_option("#fxviz-piece", "0")
        _wait_key(page, "compare|default_partition|min_cut|-|-|differences")
        assert not page.evaluate(faded)
        assert not b.page_errors and not b.console_errors, (b.page_errors, b.console_errors)
