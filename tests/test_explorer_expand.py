"""Opening a box in the explorer (issue 15: "Expanding a box -- in the explorer: click it; in the
API: ``draw(expand=[...])`` -- shows its inside"), and the boxes' real members in the view payload.

The kernel side is driven as the front-end drives it (the pane's ``expand`` / ``collapse``
messages); every expected value comes from the scene fxviz builds (``Group.members``) or the
joint graph.  The Chromium test runs the real ``explorer.js`` widget against a real ``Explorer``,
its model relayed by Playwright (no Jupyter server: the cheapest route where a double click reaches
the kernel and the new drawing comes back).  Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import dataclasses
import html
import json
import pathlib
import re
import shutil

import pytest

pytest.importorskip("anywidget")
pytest.importorskip("ipywidgets")

import fxviz
from fxviz.frontends.report.page import STATIC
from fxviz.frontends.widgets.explorer import Explorer
from fxviz.render.graph import scene as sc

from .browser_util import browser, chromium_path

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="needs graphviz's dot")

_TITLE = re.compile(r'<g id="node\d+" class="node([^"]*)">\s*<title>([^<]+)</title>')
FUNCTION_BOX = "examples.forward()"  # mini_gpt's loss: ops of no module, in examples.py's forward (one box: no "#k")


def drawn(svg: str) -> dict[str, str]:
    """SVG node title (unescaped: graphviz writes ``-`` as ``&#45;``) -> its class list."""
    return {html.unescape(title): cls for cls, title in _TITLE.findall(svg)}


def scene_groups(tr: fxviz.Trace, svg: str, expand: tuple[str, ...] = ()) -> dict[str, sc.Group]:
    """The boxes of the joint view as the scene builds them, at the level the drawing's caption names."""
    level = int(re.search(r"collapsed into boxes at level (\d+) of the model", svg).group(1))
    # with the partition the explorer draws: a backward node it computes in the forward sits in the forward
    scene = sc.joint_scene(tr.graph, tr.partition(tr.default_strategy))
    return sc.structure_scene(scene, sc.Structure(scene, tr.graph), level, expand).groups


@pytest.fixture(scope="module")
def gpt_trace(traces) -> fxviz.Trace:
    """mini_gpt as AOTAutograd traces it (backend="aot_eager"): the loss's backward is one
    ``nll_loss_backward`` op (inductor decomposes it), the box records below name it."""
    return traces[("mini_gpt", "lifted", "aot_eager")]


@pytest.fixture()
def gpt(gpt_trace) -> Explorer:
    """mini_gpt (390 nodes): the default view collapses it into boxes."""
    return fxviz.explore(gpt_trace)


def test_box_members_come_from_the_scene(gpt, gpt_trace):
    """Each drawn box's record lists the scene's own members: the function box its function's ops,
    the loss's backward ops placed in ``lm_head``'s box (their recorded module is none)."""
    tr = gpt_trace
    boxes = {b["id"]: b for b in gpt.pane.boxes}
    groups = scene_groups(tr, gpt.pane.svg)
    assert set(boxes) == set(groups) and set(boxes) <= set(drawn(gpt.pane.svg))
    for gid, g in groups.items():
        assert boxes[gid]["members"] == list(dict.fromkeys(m.joint for m in g.members)), gid
        assert (boxes[gid]["side"], boxes[gid]["kind"], boxes[gid]["label"]) == (g.side, g.kind, g.path)
    fn = next(b for b in boxes.values() if b["kind"] == "function")
    assert fn["key"] == FUNCTION_BOX and fn["members"]
    assert all(not tr.graph.info[m].module for m in fn["members"])  # a module-path guess finds none of them
    placed = boxes["backward/lm_head"]
    strays = [m for m in placed["members"] if tr.graph.info[m].module != "lm_head"]
    assert "nll_loss_backward" in strays, strays


def test_expand_message_opens_the_box_and_collapse_brings_the_cached_view_back(gpt, gpt_trace):
    # the explorer opens mini_gpt at level 1 (h.0, h.1): level 2 is taller than a screen's 1:3 once the
    # captions wrap (issue 35's pictures); opening h.0 draws its submodules' boxes
    tr = gpt_trace
    first_svg, first_key = gpt.pane.svg, gpt.pane.view_key
    box = next(b for b in gpt.pane.boxes if b["id"] == "forward/h.0")
    gpt._on_pane_msg(None, {"event": "expand", "key": box["key"]}, None)
    assert gpt.expanded == ["h.0"] and gpt.pane.expanded == ["h.0"]
    assert gpt.pane.view_key == first_key + "|+h.0" and gpt.pane.error == ""
    titles = drawn(gpt.pane.svg)
    assert "forward/h.0" not in titles
    inner = {m for b in gpt.pane.boxes for m in b["members"]}
    for name in box["members"]:  # every node of the box: drawn as itself or in a box of a submodule
        where = next((b for b in gpt.pane.boxes if name in b["members"]), None)
        assert name in titles or (where and where["key"].startswith("h.0.")), name
    assert any(n in titles for n in box["members"])
    # the records still equal the scene's groups with the box open
    groups = scene_groups(tr, gpt.pane.svg, ("h.0",))
    assert {b["id"]: b["members"] for b in gpt.pane.boxes} == \
        {gid: list(dict.fromkeys(m.joint for m in g.members)) for gid, g in groups.items()}
    assert inner == {m.joint for g in groups.values() for m in g.members}
    assert gpt.pane.keep_zoom  # same view, one box more open: the front-end keeps the window

    gpt._on_pane_msg(None, {"event": "collapse", "key": "h.0"}, None)
    assert gpt.expanded == [] and gpt.pane.svg == first_svg and gpt.pane.view_key == first_key
    assert gpt.timings[-1].cached


def test_function_box_opens(gpt, gpt_trace):
    tr = gpt_trace
    fn = next(b for b in gpt.pane.boxes if b["kind"] == "function")
    gpt._on_pane_msg(None, {"event": "expand", "key": fn["key"]}, None)
    titles = drawn(gpt.pane.svg)
    assert fn["id"] not in titles
    assert set(fn["members"]) <= set(titles)
    # the same drawing as the API's
    drawing = tr.draw("joint", strategy=tr.default_strategy, expand=[fn["key"]])  # what the explorer opens with
    assert gpt.pane.svg == fxviz.render.page.embed.clean_svg(drawing.svg())
    # its ops stay together in a dashed frame named after the box, as an opened module's do
    src = drawing.source
    start = src.index(f"label=<{sc.OPENED_FUNCTION}{html.escape(fn['label'])}>")
    block = src[src.rindex("subgraph", 0, start):src.index("}", start)]
    framed = set(re.findall(r"^\s*(\w+) \[", block, re.M))
    assert framed == set(fn["members"]), framed ^ set(fn["members"])


def test_bookkeeping_box_opens():
    """Train-mode batch norm's in-place updates share one box; ``expand`` takes its name."""
    from .conftest import make_example

    model, inputs = make_example("resnet_block")
    tr = fxviz.trace(model, *inputs)
    closed = tr.draw(depth=1, expand=["0"])  # expand implies the structure's boxes
    box = next(b for b in closed.boxes if b["kind"] == "bookkeeping")
    assert box["key"] == sc.BOOKKEEPING and box["id"] in drawn(closed.svg())
    opened = tr.draw(depth=1, expand=["0", sc.BOOKKEEPING])
    assert all(b["kind"] != "bookkeeping" for b in opened.boxes)
    titles = drawn(opened.svg())
    for name in box["members"]:
        assert name in titles or any(name in b["members"] for b in opened.boxes), name


def test_opened_boxes_survive_strategy_switches_and_go_where_they_do_not_exist(gpt):
    gpt.expand("h.1.mlp.c_fc")
    gpt.expand(FUNCTION_BOX)
    assert gpt.pane.expanded == sorted(["h.1.mlp.c_fc", FUNCTION_BOX])
    gpt.strategy_control.value = "min_cut"  # a strategy switch keeps them
    assert gpt.expanded == ["h.1.mlp.c_fc", FUNCTION_BOX] and "|+" in gpt.pane.view_key
    gpt.group_control.value = "none"  # every node: no boxes to open, nothing is forgotten
    assert gpt.pane.expanded == [] and "|+" not in gpt.pane.view_key
    assert gpt.expanded == ["h.1.mlp.c_fc", FUNCTION_BOX]
    gpt.group_control.value = "auto"
    assert gpt.pane.expanded == sorted(["h.1.mlp.c_fc", FUNCTION_BOX])
    gpt.view_control.value = "backward"  # the loss's forward ops have no box there: not applied, not forgotten
    if gpt.pane.boxes:
        assert gpt.expanded == ["h.1.mlp.c_fc", FUNCTION_BOX] and gpt.pane.expanded == ["h.1.mlp.c_fc"]
        assert "backward/h.1.mlp.c_fc" not in drawn(gpt.pane.svg)
    gpt.view_control.value = "joint"  # back where the box exists: open again
    assert gpt.pane.expanded == sorted(["h.1.mlp.c_fc", FUNCTION_BOX])
    gpt._on_pane_msg(None, {"event": "collapse"}, None)  # "collapse all"
    assert gpt.expanded == [] and gpt.pane.expanded == []


def test_explore_opens_boxes_from_the_start(gpt_trace):
    tr = gpt_trace
    w = fxviz.explore(tr, expand=["h.0.attn", FUNCTION_BOX])
    assert w.expanded == ["h.0.attn", FUNCTION_BOX]
    assert w.pane.svg == fxviz.render.page.embed.clean_svg(tr.draw("joint", strategy=tr.default_strategy,
                                                          expand=sorted(["h.0.attn", FUNCTION_BOX])).svg())
    with pytest.raises(fxviz.InputError, match="not a module or box"):
        fxviz.explore(tr, expand=["no.such.box"])


def test_unknown_box_is_an_error_in_the_pane(gpt):
    svg = gpt.pane.svg
    gpt._on_pane_msg(None, {"event": "expand", "key": "no.such.box"}, None)
    assert "not a module or box of this graph" in gpt.pane.error and gpt.expanded == []
    assert gpt.pane.svg == svg
    with pytest.raises(fxviz.InputError, match="not a module or box"):
        gpt.expand("no.such.box")


def test_small_graph_draws_no_boxes_and_keeps_its_keys(traces):
    w = fxviz.explore(traces[("mlp", "lifted")])
    assert w.pane.boxes == [] and w.pane.expanded == []
    with pytest.raises(fxviz.InputError):
        w.expand("0")


# --- Chromium: double-click a box, see its inside, close it again ----------------------------------
_HOST = """<!DOCTYPE html><html><head><meta charset="utf-8"><style>{css}</style><style>{palette}</style></head>
<body><div id="root" style="width:{width}"></div><script type="module">
{js}
// a stand-in for anywidget's model: trait values relayed to the Python Explorer by Playwright
const values = JSON.parse(document.getElementById("state").textContent);
const listeners = {{}};
const model = {{
  get: (k) => values[k],
  set: (k, v) => {{ values[k] = v; }},
  save_changes: () => {{}},
  send: async (content) => {{
    window.__fxvizPending = (window.__fxvizPending || 0) + 1;
    const changed = await window.fxvizSend(content);
    Object.assign(values, changed);
    for (const k of Object.keys(changed)) for (const [ev, fn] of listeners[k] || []) fn();
    window.__fxvizPending -= 1;
  }},
  on: (events, fn) => {{ for (const e of events.split(" ")) (listeners[e.slice(7)] ||= []).push([e, fn]); }},
  off: () => {{}},
}};
render({{ model, el: document.getElementById("root") }});
window.__fxvizReady = true;
</script><script type="application/json" id="state">{state}</script></body></html>"""


def _synced(pane) -> dict:
    return {k: v for k, v in pane.get_state().items() if not k.startswith("_") and k not in ("layout",)}


def relayed_page(explorer: Explorer, path, width: str = "1450px"):
    """Write the host page of ``explorer``'s pane to ``path``; returns the relay that Playwright
    exposes as ``fxvizSend``: a message from the page goes to the Explorer, the traits it changed
    come back."""
    pane = explorer.pane
    state = json.dumps(_synced(pane)).replace("<", "\\u003c")
    path.write_text(_HOST.format(css=(STATIC / "explorer.css").read_text(), palette=pane.palette_css,
                                 js=(STATIC / "explorer.js").read_text(), state=state, width=width))

    def relay(content: dict) -> dict:
        before = _synced(pane)
        explorer._on_pane_msg(pane, content, None)
        after = _synced(pane)
        return {k: v for k, v in after.items() if before.get(k) != v}

    return relay


@pytest.mark.browser
@pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_double_click_opens_a_box_in_chromium(gpt, tmp_path, artifacts):
    pytest.importorskip("playwright.sync_api")
    pane = gpt.pane
    relay = relayed_page(gpt, tmp_path / "host.html")

    box_id = "forward/h.0"
    box = next(b for b in pane.boxes if b["id"] == box_id)
    with browser() as b:
        page = b.new_page()
        page.expose_function("fxvizSend", relay)
        page.goto((tmp_path / "host.html").as_uri())
        page.wait_for_function("() => window.__fxvizReady && document.querySelector('.fxviz-viewport svg g.node')")
        unit = page.locator(f".fxviz-viewport g.node.fx-group:has(> title:text-is('{box_id}'))")
        # a click shows the box's details: its real members and an "expand" button
        page.locator(".fxviz-search").fill("h.0")
        unit.click()
        details = page.locator(".fxviz-details-body")
        assert f"{len(box['members'])} nodes collapsed into this box" in details.inner_text()
        assert page.locator(".fxviz-expand-box").count() == 1
        page.locator(".fxviz-search").fill("")
        unit.dblclick()
        page.wait_for_function("id => !window.__fxvizPending && ![...document.querySelectorAll("
                               "'.fxviz-viewport g.node > title')].some(t => t.textContent === id)", arg=box_id,
                               timeout=60_000)
        titles = set(page.eval_on_selector_all(".fxviz-viewport g.node > title", "ts => ts.map(t => t.textContent)"))
        inside = [n for n in box["members"] if n in titles]
        assert inside, "the box's nodes are drawn"
        assert page.locator(".fxviz-opened .fxviz-chip").inner_text().startswith("h.0")
        assert gpt.expanded == ["h.0"]
        # the opened nodes are in the window (the view moved to where the box was)
        in_view = page.evaluate("""(names) => {
            const vp = document.querySelector('.fxviz-viewport').getBoundingClientRect();
            return names.filter(n => { const t = [...document.querySelectorAll('.fxviz-viewport g.node > title')]
                .find(t => t.textContent === n); if (!t) return false; const r = t.parentNode.getBoundingClientRect();
                return r.right > vp.left && r.left < vp.right && r.bottom > vp.top && r.top < vp.bottom; });
        }""", inside)
        assert in_view, inside
        page.screenshot(path=str(artifacts / "explorer-expand-open.png"))
        # the details of the selected, now opened box offer to collapse it; the chip's x does it
        assert page.locator(".fxviz-collapse-box").count() == 1
        page.locator(".fxviz-opened .fxviz-chip-close").click()
        page.wait_for_function("id => !window.__fxvizPending && [...document.querySelectorAll("
                               "'.fxviz-viewport g.node > title')].some(t => t.textContent === id)", arg=box_id,
                               timeout=60_000)
        assert page.locator(".fxviz-opened").is_hidden()
        assert gpt.expanded == []
        page.screenshot(path=str(artifacts / "explorer-expand-closed.png"))

        # the details' button opens a function box; two chips and "collapse all" close both
        unit.dblclick()
        page.wait_for_function("() => !window.__fxvizPending && document.querySelectorAll('.fxviz-chip').length === 1")
        fn = next(x for x in gpt.pane.boxes if x["kind"] == "function")
        page.locator(".fxviz-search").fill(fn["label"])  # a box's name finds the box and counts its nodes
        assert f"{len(fn['members'])} nodes match" in page.inner_text(".fxviz-statusline")
        page.locator(f".fxviz-viewport g.node.fx-group:has(> title:text-is('{fn['id']}'))").click()
        details_text = details.inner_text()
        assert "function box" in details_text and f"{len(fn['members'])} nodes collapsed" in details_text
        page.screenshot(path=str(artifacts / "explorer-expand-function-details.png"))
        page.locator(".fxviz-search").fill("")
        page.locator(".fxviz-expand-box").click()
        page.wait_for_function("() => !window.__fxvizPending && document.querySelectorAll('.fxviz-chip').length === 2")
        assert gpt.expanded == ["h.0", FUNCTION_BOX]
        titles = set(page.eval_on_selector_all(".fxviz-viewport g.node > title", "ts => ts.map(t => t.textContent)"))
        assert set(fn["members"]) <= titles and fn["id"] not in titles
        page.screenshot(path=str(artifacts / "explorer-expand-two-open.png"))
        page.locator(".fxviz-collapse-all").click()
        page.wait_for_function("() => !window.__fxvizPending && !document.querySelectorAll('.fxviz-chip').length")
        assert gpt.expanded == []
        assert not b.page_errors and not b.console_errors, (b.page_errors, b.console_errors)
        assert not b.blocked


def test_report_ships_each_drawings_boxes(gpt_trace):
    """The report's page reads a box's members from its payload too (no module-path guess)."""
    tr = gpt_trace
    from fxviz.payloads.report import report_data

    data = report_data(tr, strategies=["default"], views=("joint", "backward"))
    assert data["drawings"]
    for key, d in data["drawings"].items():
        ids = {b["id"] for b in d["boxes"]}
        assert ids and ids == {t for t, cls in drawn(d["svg"]).items() if "fx&#45;group" in cls}, key
    placed = next(b for b in data["drawings"]["joint|-|-|-|-"]["boxes"] if b["id"] == "backward/lm_head")
    assert "nll_loss_backward" in placed["members"]


@pytest.mark.browser
@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.skipif(chromium_path() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_double_click_opens_a_box_in_jupyterlab(jupyter, artifacts):
    """The same through JupyterLab's real widget comm (a kernel in the session's Jupyter server)."""
    pytest.importorskip("playwright.sync_api")
    from . import test_browser as tb

    root = jupyter.root
    cells = ["import fxviz\nfrom tests.conftest import make_example\nmodel, inputs = make_example('mini_gpt')",
             "explorer = fxviz.explore(fxviz.trace(model, *inputs, backend='aot_eager'))\nexplorer"]
    nb = {"cells": [{"cell_type": "code", "execution_count": None, "id": f"cell{i}", "metadata": {}, "outputs": [],
                     "source": src} for i, src in enumerate(cells)],
          "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
          "nbformat": 4, "nbformat_minor": 5}
    (root / "expand.ipynb").write_text(json.dumps(nb))
    if not (root / "tests").exists():
        (root / "tests").symlink_to(pathlib.Path(__file__).parent, target_is_directory=True)
    box_id = "forward/h.0"
    gone = ("id => ![...document.querySelectorAll('.fxviz-viewport g.node > title')].some(t => t.textContent === id)"
            " && document.querySelector('.fxviz-chip')")
    back = ("id => [...document.querySelectorAll('.fxviz-viewport g.node > title')].some(t => t.textContent === id)"
            " && !document.querySelector('.fxviz-chip')")
    server = dataclasses.replace(jupyter, app="jupyterlab")
    with browser(viewport=(1600, 1000)) as b, jupyter.kernels_stopped():
        page = b.new_page()
        page.goto(server.lab_url("expand.ipynb"), timeout=tb.LONG)
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell .jp-InputArea", timeout=tb.LONG)
        tb._wait_kernel_idle(page, "jupyterlab")
        tb._run_all(page)
        page.wait_for_selector(".fxviz-explorer .fxviz-viewport svg g.node.fx-group", timeout=300_000)
        page.locator(".fxviz-explorer .fxviz-search").fill("h.0")
        page.locator(f".fxviz-viewport g.node.fx-group:has(> title:text-is('{box_id}'))").dblclick()
        page.wait_for_function(gone, arg=box_id, timeout=tb.LONG)
        assert page.eval_on_selector(".fxviz-explorer", "e => e.dataset.viewKey").endswith("|+h.0")
        page.locator(".fxviz-explorer .fxviz-search").fill("")
        page.locator(".fxviz-explorer-widget").scroll_into_view_if_needed()
        page.screenshot(path=str(artifacts / "explorer-expand-jupyterlab.png"))
        page.locator(".fxviz-chip-close").click()
        page.wait_for_function(back, arg=box_id, timeout=tb.LONG)
        assert page.eval_on_selector(".fxviz-explorer", "e => e.dataset.viewKey") == "joint|min_cut|-|-|-"
        assert tb._ours(b.page_errors) == [] and b.console_errors == [] and b.blocked == []
    tb._stop_kernel(server, "expand.ipynb")
