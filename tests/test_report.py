"""The self-contained HTML report: its content is the analysis' content, it is one safe file, and
it is written atomically.  (Its behaviour in a real browser is tested in test_browser.py.)"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import html.parser
import json
import os
import re

import pytest
import torch
from torch import nn

import fxviz
from fxviz import _torch
from fxviz.core.errors import InputError, RenderError
from fxviz.frontends.cli.entry import main
from fxviz.frontends.report.page import build_report, report
from fxviz.payloads.report import report_data
from fxviz.payloads.views import ViewPayload, view_payload
from fxviz.render.graph.spec import DrawSpec
from fxviz.render.page.embed import clean_svg, packed_json, page_data, page_json, script_json, unpack_json

from .conftest import assert_unchanged, snapshot

EVIL = '</script><img src=x onerror=alert(1)><!--'


class Hostile(nn.Module):
    """A model whose module name and source line try to break out of the report."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module(EVIL, nn.Linear(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self, EVIL)(x).relu().sum()  # </script><script>alert("code")</script>


class _Elements(html.parser.HTMLParser):
    """Every start tag with its attributes, and the text of each <script>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in_script: dict[str, str | None] | None = None
        self._buf: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script, self._buf = dict(attrs), []

    def handle_endtag(self, tag: str) -> None:
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._buf)))
            self._in_script = None

    def handle_data(self, data: str) -> None:
        if self._in_script is not None:
            self._buf.append(data)


def _parse(text: str) -> _Elements:
    p = _Elements()
    p.feed(text)
    p.close()
    return p


def _data(text: str) -> dict:
    scripts = _parse(text).scripts
    (data_text,) = [body for attrs, body in scripts if attrs.get("id") == "fxviz-data"]
    return unpack_json(data_text)


@pytest.fixture(scope="module")
def alexnet_report(traces, tmp_path_factory):
    tr = traces[("alexnet", "lifted")]
    # budget=None: what the page holds must not depend on how busy the machine is (test_report_budget pins the budget)
    path = report(tr, tmp_path_factory.mktemp("report") / "alexnet.html", budget=None)
    return tr, path, path.read_text(encoding="utf-8")


def test_report_is_one_file_with_only_fxviz_scripts(alexnet_report):
    _, path, text = alexnet_report
    parsed = _parse(text)
    # exactly two script elements: inert JSON data and fxviz's module; no src anywhere
    kinds = [attrs.get("type") for attrs, _ in parsed.scripts]
    assert kinds == ["application/json", "module"]
    for tag, attrs in parsed.tags:
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name in ("src", "href", "action", "srcset", "poster", "data"):
                pytest.fail(f"<{tag} {name}={value!r}> in a report that must load nothing")
    assert not re.search(r"https?://", text), "no URL at all, not even an SVG namespace"
    assert "@import" not in text and "url(http" not in text
    # the Content-Security-Policy pins the one script by its hash: nothing else can run
    csp = next(a["content"] for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    module = next(body for attrs, body in parsed.scripts if attrs.get("type") == "module")
    digest = base64.b64encode(hashlib.sha256(module.encode("utf-8")).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp
    assert not any(p.startswith(".") and p.endswith(".tmp") for p in os.listdir(path.parent))


def test_report_data_is_the_analysis(alexnet_report):
    tr, _, text = alexnet_report
    data = _data(text)
    keys = [s["key"] for s in data["strategies"]]
    assert keys == ["min_cut", "default_partition", "budget:0.5:dp", "recompute_all", "eager"]  # torch.compile's first
    labels = [s["label"] for s in data["strategies"]]
    assert labels[0] == "min_cut (what torch.compile does)"  # as fxviz.trace and the explorer say it
    for k in keys:
        p = tr.partition(k)
        assert data["status"][k]["saved"] == list(p.saved)
        assert set(data["status"][k]["recomputed"]) == p.recomputed
        assert set(data["status"][k]["removed"]) == p.removed
    # one joint layout (in the fallback's markup) shared by the joint and compare views of every
    # strategy and pair: strategies are overlays from data["status"]; forward and backward views
    # are drawn per partitioning strategy; eager (measured, no graphs) has none
    layout = DrawSpec.of("joint", None).text()
    drawings = data["drawings"]
    assert data["drawing_in_fallback"] == layout and drawings[layout]["svg"] == ""  # not twice in the page
    assert drawings[layout]["overlay"] and drawings[layout]["strategy"] is None
    shared = [e for e in data["index"] if e["view"] in ("joint", "compare") and not e["differences"]]
    assert {e["drawing"] for e in shared} == {layout}
    # every view the controls can ask for, named by DrawSpec in Python (the page builds no key)
    assert {e["key"] for e in shared} == {DrawSpec.of("joint", a).text() for a in keys} | {
        DrawSpec.of("compare", a, b).text() for a in keys for b in keys if a != b}
    assert not any((d["view"] == "joint" and d["strategy"]) or (d["view"] == "compare" and not d["differences"])
                   for d in drawings.values())
    for k in keys:
        for side in ("forward", "backward"):
            key = DrawSpec.of(side, k).text()
            entry = next(e for e in data["index"] if e["view"] == side and e["strategy"] == k)
            assert entry["key"] == entry["drawing"] == key == drawings[key]["key"]
            if k == "eager":
                assert drawings[key]["error"] and not drawings[key]["svg"]
            else:
                assert drawings[key]["svg"] and not drawings[key]["error"], drawings[key]["error"]
    assert data["pairs"] == [["min_cut", "default_partition"]]  # the pair the compare view opens with
    # the layout carries no strategy's marks: the page draws them
    fallback = text[text.index('<div id="fxviz-fallback">'):text.index('<script type="application/json"')]
    assert "fx&#45;saved" not in fallback and 'class="node fx&#45;node' in fallback
    # node details come from the trace's NodeInfo and the joint graph's edges
    for n in tr.joint.graph.nodes:
        if n.op == "output":
            assert n.name not in data["nodes"]
            continue
        info, d = tr.graph.info[n.name], data["nodes"][n.name]
        assert d["role"] == info.role and d["module"] == info.module and d["op"] == info.short_op
        assert d["shape"] == (list(info.shape) if info.shape is not None else None)
        assert d["inputs"] == [a.name for a in n.all_input_nodes]
        assert d["users"] == [u.name for u in n.users if u.op != "output"]
    assert data["nodes"]["convolution"]["module"] == "features.0"
    # the memory table rows are the table's strategies, in order
    assert [r["key"] for r in data["table"]["rows"]] == keys
    df = tr.memory_table(keys)
    assert list(df["strategy"]) == keys
    assert data["doctor"]["healthy"] is True and data["doctor"]["findings"] == []
    # the notes under the table say what recompute-all still saves (random ops' outputs: AlexNet's
    # dropout) and what each strategy recomputes, by name, from the Partitions
    from fxviz.render.theme import INPUT_ROLES

    notes = data["table"]["notes"]
    ra = tr.partition("recompute_all")
    kept = [n for n in ra.saved if tr.graph.info[n].role not in INPUT_ROLES]
    assert kept
    producers = {n.name: [a.name for a in n.all_input_nodes] for n in tr.joint.graph.nodes}
    # AlexNet's dropout draws: on inductor's graph the seeds every mask is drawn from (aot_eager: the masks)
    nodes = {n.name: n for n in tr.joint.graph.nodes}
    assert all(any("dropout" in a for a in producers[n]) or _torch.is_random(nodes[n]) for n in kept)
    assert any(note.startswith(ra.label) and all(k in note for k in kept[:6]) for note in notes)
    for k in keys:
        p = tr.partition(k)
        if p.recomputed and k != "recompute_all":
            assert any(note.startswith(f"{p.label} recomputes {len(p.recomputed)}: ") for note in notes), k


def test_report_ships_each_pairs_differences_drawing_within_its_size(alexnet_report):
    """Issue 19: a small graph's report holds the differences-only drawing of the ordered pairs of
    its usable strategies, those with the opening strategy first, within an SVG budget (what differs
    computed here from the two Partitions), and the AlexNet report stays under 1 MB
    (benchmarks/REPORT_SIZES.md)."""
    tr, path, text = alexnet_report
    data = _data(text)
    usable = [s["key"] for s in data["strategies"] if not s["error"]]
    pairs = [(a, b) for a in usable for b in usable if a != b]
    differences = {(e["strategy"], e["compare"]): e["drawing"] for e in data["index"] if e["differences"]}
    # every pair with the strategy the page opens with, then others within the SVG budget
    opening = data["initial"]["strategy"]
    assert {p for p in pairs if opening in p} <= set(differences) <= set(pairs)
    from fxviz.payloads.graph import DIFFERENCES_SVG_BUDGET

    assert sum(len(data["drawings"][k]["svg"]) for k in differences.values()) <= DIFFERENCES_SVG_BUDGET
    joint = {n.name: n for n in tr.joint.graph.nodes if n.op != "output"}
    title = re.compile(r'<g id="node\d+" class="node[^"]*">\s*<title>([^<]+)</title>')
    for a, b in differences:
        pa, pb = tr.partition(a), tr.partition(b)
        diff = {n for n in joint if any((n in getattr(pa, k)) != (n in getattr(pb, k))
                                        for k in ("saved", "recomputed", "removed"))}
        near = {m.name for d in diff for m in [*joint[d].all_input_nodes, *joint[d].users] if m.op != "output"}
        key = differences[(a, b)]
        assert key == DrawSpec.of("compare", a, b, differences=True).text() == f"compare|{a}|{b}|-|-|differences"
        assert set(title.findall(data["drawings"][key]["svg"])) == diff | near, (a, b)
        assert "treated differently" in data["drawings"][key]["caption"]
    assert path.stat().st_size <= 1_000_000, path.stat().st_size


def test_model_strings_cannot_break_out(tmp_path):
    model, x = Hostile(), torch.randn(2, 4)
    before = snapshot(model)
    tr = fxviz.trace(model, x)
    path = report(tr, tmp_path / "hostile.html", strategies=["default", "min_cut"])
    assert_unchanged(model, before)
    text = path.read_text(encoding="utf-8")
    assert EVIL in {i.module for i in tr.graph.info.values()}, "the hostile name reached the graph"
    assert EVIL not in text and "</script><script>" not in text and "<img" not in text
    assert len(_parse(text).scripts) == 2
    data = _data(text)  # ... and reads back exactly through JSON.parse
    modules = {d["module"] for d in data["nodes"].values()}
    assert EVIL in modules
    assert any('</script><script>alert("code")</script>' in (d["code"] or "") for d in data["nodes"].values())


def test_script_json_round_trips_and_never_closes_a_script():
    value = {"a": EVIL, "b": "<!-- \u2028 \u2029 & > <", "c": [1, 2.5, None, True]}
    text = script_json(value)
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\u2028" not in text and "\u2029" not in text
    assert json.loads(text) == value


def test_clean_svg_refuses_what_graphviz_never_writes(traces):
    svg = traces[("mlp", "lifted")].draw().svg()
    cleaned = clean_svg(svg)
    assert cleaned.startswith("<svg") and "<!--" not in cleaned and "http" not in cleaned
    head = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10">'
    with pytest.raises(RenderError):
        clean_svg(head + "<script>alert(1)</script></svg>")
    with pytest.raises(RenderError):
        clean_svg(head.replace("viewBox", 'onload="alert(1)" viewBox') + "</svg>")
    with pytest.raises(RenderError):
        clean_svg(head + '<a xmlns:xlink="http://www.w3.org/1999/xlink" xlink:href="javascript:alert(1)"/></svg>')
    with pytest.raises(RenderError):
        clean_svg(head + "<foreignObject/></svg>")
    # escaped text that merely looks like markup is fine
    ok = clean_svg(head + '<g><title>&lt;img onerror=alert(1)&gt;</title></g></svg>')
    assert "&lt;img onerror=alert(1)&gt;" in ok


def test_report_is_written_atomically(traces, tmp_path):
    tr = traces[("mlp", "lifted")]
    path = tmp_path / "mlp.html"
    path.write_text("previous report")
    with pytest.raises(InputError):
        report(tr, path, strategies=[])
    assert path.read_text() == "previous report"
    report(tr, path, strategies=["default"], views=["joint"])
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert sorted(os.listdir(tmp_path)) == ["mlp.html"]


def test_build_report_records_views_that_cannot_be_drawn(traces):
    tr = traces[("mlp", "lifted")]
    data = _data(build_report(tr, strategies=["eager"], views=["backward", "joint"]))
    assert data["drawings"]["backward|eager|-|-|-"]["error"].startswith("eager")
    assert data["drawing_in_fallback"] == "joint|-|-|-|-"  # the joint layout, eager's marks drawn by the page
    assert data["initial"] == {"view": "joint", "strategy": "eager", "compare": None, "key": "joint|eager|-|-|-",
                               "drawing": "joint|-|-|-|-"}


def test_cli_report(tmp_path, capsys):
    out = tmp_path / "mlp.html"
    assert main(["report", "mlp", "-o", str(out), "--strategies", "default,min_cut", "--params", "closure"]) == 0
    assert out.exists() and str(out) in capsys.readouterr().out
    data = _data(out.read_text(encoding="utf-8"))
    assert [s["key"] for s in data["strategies"]] == ["default_partition", "min_cut"]
    assert "parameters closure" in data["summary"]
    assert data["doctor"]["healthy"] is False  # closure capture: the parameters get no gradient
    assert main(["report", "mlp", "-o", str(tmp_path / "x.html"), "--strategies", "nonsense"]) == 2
    # --group / --depth reach the drawing: module boxes in the joint layout
    out2 = tmp_path / "mlp-grouped.html"
    assert main(["report", "mlp", "-o", str(out2), "--strategies", "default,min_cut", "--group", "module",
                 "--depth", "1"]) == 0
    data = _data(out2.read_text(encoding="utf-8"))
    assert data["drawing_in_fallback"] == "joint|-|-|module|1"
    assert "fx&#45;group" in out2.read_text(encoding="utf-8")


def test_default_strategies_are_the_memory_tables(traces):
    from fxviz.analysis.strategy.strategies import OFFERED
    from fxviz.payloads.report import report_data

    tr = traces[("mlp", "lifted")]
    data = report_data(tr, views=("joint",))
    # what torch.compile does first (min_cut), then the rest of OFFERED
    assert [s["key"] for s in data["strategies"]] == [s.name for s in tr.offered] == list(tr.memory_table()["strategy"])
    assert set(s.name for s in tr.offered) == set(s.name for s in OFFERED) and tr.offered[0].name == "min_cut"


def test_page_data_is_strict_json():
    """Issue 27: a NaN (a graph-broken model's ``gradient.node`` with no backward) or an infinity in
    page data becomes null (the page shows "—"), numpy scalars plain numbers; JSON's NaN token,
    which ``JSON.parse`` refuses, never reaches a page (widget traits and report share this)."""
    np = pytest.importorskip("numpy")
    data = {"gradient": {"node": float("nan"), "gets": np.bool_(True)}, "bytes": np.int64(7),
            "ratio": np.float32(0.5), "peak": float("inf"), "low": -np.inf, "nan64": np.float64("nan"),
            "shape": (2, np.int32(3)), "rows": np.array([1.0, np.nan]), 3: None}
    want = {"gradient": {"node": None, "gets": True}, "bytes": 7, "ratio": 0.5, "peak": None, "low": None,
            "nan64": None, "shape": [2, 3], "rows": [1.0, None], "3": None}
    assert page_data(data) == want
    text = page_json(data)
    assert "NaN" not in text and "Infinity" not in text and json.loads(text) == want
    assert type(page_data(np.int64(7))) is int and type(page_data(np.float32(0.5))) is float
    assert unpack_json(packed_json(data)) == want
    with pytest.raises(TypeError, match="page data cannot hold"):
        page_data({"x": object()})


def test_the_widget_and_the_report_show_the_same_view_dict(traces):
    """One view schema: the widget's one synced view trait and the report's embedded drawing of the
    same DrawSpec are the same dict, built by one function."""
    pytest.importorskip("anywidget")
    tr = traces[("mlp", "lifted")]
    data = report_data(tr, strategies=["default", "min_cut"], views=("forward", "joint"))
    w = fxviz.explore(tr, view="forward", strategy="min_cut")
    key = DrawSpec.of("forward", "min_cut")
    assert w.view_key == key and w.pane.view_key == key.text()
    synced = w.pane.get_state()["view_data"]  # what goes over the wire (through page_data)
    assert synced == data["drawings"][key.text()] == view_payload(tr, key).to_json()
    assert set(synced) == {f.name for f in dataclasses.fields(ViewPayload)}
    assert w.pane.get_state()["constants"] == data["constants"]
