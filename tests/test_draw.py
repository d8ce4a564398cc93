"""The draw layer, rendered with the real ``dot`` and read back from the SVG it writes.

Expected node sets come from the graphs and the ``Partition`` themselves (never from fxviz's
drawing code); what is checked is what a reader sees: fill colors, border widths, double borders,
dashes, edge titles.
"""

from __future__ import annotations

import html
import re
import shutil
import xml.etree.ElementTree as ET
from collections import Counter

import pytest
import torch
from torch import nn

import fxviz
from fxviz.core.errors import InputError, RenderError
from fxviz.core.units import format_bytes
from fxviz.render import theme
from fxviz.render.graph.drawing import Drawing
from fxviz.render.graph.limits import NODE_LIMIT
from fxviz.render.graph.scene import RECOMPUTED_SUFFIX
from fxviz.sources.roles import ROLES

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="needs graphviz's dot")

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"
EXAMPLES = ["mlp", "alexnet", "resnet_block", "mini_gpt", "pointwise_chain"]
STRATEGIES = ["default", "min_cut"]
SAVED = theme.STATUS["saved"].color.lower()
RECOMPUTED = theme.STATUS["recomputed"].color.lower()


# --- reading the SVG back --------------------------------------------------------------------------
def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def _classes(g: ET.Element) -> list[str]:
    return g.get("class", "").split()


def _shapes(g: ET.Element) -> list[ET.Element]:
    """The node's own outline(s), in drawing order (before any label-cell backgrounds)."""
    out = []
    for el in g.iter():
        if el.tag in (SVG + "path", SVG + "polygon", SVG + "ellipse"):
            out.append(el)
        elif el.tag == SVG + "text":
            break
    return out


def svg_nodes(root: ET.Element, kind: str = "fx-node") -> dict[str, ET.Element]:
    nodes = {}
    for g in root.iter(SVG + "g"):
        if "node" in _classes(g) and kind in _classes(g):
            title = g.find(SVG + "title")
            assert title is not None and title.text
            assert title.text not in nodes, f"duplicate node title {title.text}"
            nodes[title.text] = g
    return nodes


def svg_edges(root: ET.Element) -> list[tuple[str, str, ET.Element]]:
    edges = []
    for g in root.iter(SVG + "g"):
        if "edge" in _classes(g):
            a, sep, b = g.find(SVG + "title").text.partition("->")
            assert sep, "every edge title names its endpoints"
            edges.append((a, b, g))
    return edges


def fill(g: ET.Element) -> str:
    return _shapes(g)[0].get("fill").lower()


def stroke(g: ET.Element) -> tuple[str, float]:
    s = _shapes(g)[0]
    return s.get("stroke").lower(), float(s.get("stroke-width", "1"))


def double_border(g: ET.Element) -> bool:
    return len(_shapes(g)) >= 2


def dashed(g: ET.Element) -> bool:
    return _shapes(g)[0].get("stroke-dasharray") is not None


def edge_stroke(g: ET.Element) -> tuple[str, float]:
    p = next(g.iter(SVG + "path"))
    return p.get("stroke").lower(), float(p.get("stroke-width", "1"))


def role_color(role: str) -> str:
    return theme.ROLE_COLORS[role].lower()


# --- fixtures --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def drawn(traces):
    """svg roots of (example, view, strategy) drawn with every node, computed once."""
    cache: dict = {}

    def get(name: str, view: str = "joint", strategy: str | None = None, compare: str | None = None,
            **kw):
        key = (name, view, strategy, compare, tuple(sorted(kw.items())))
        if key not in cache:
            tr = traces[(name, "lifted")]
            cache[key] = parse(tr.draw(view, strategy=strategy, compare=compare, group="none", **kw).svg())
        return cache[key]

    return get


def graph_edges(gm) -> set[tuple[str, str]]:
    return {(a.name, n.name) for n in gm.graph.nodes if n.op != "output" for a in n.all_input_nodes}


# --- palette ---------------------------------------------------------------------------------------
def test_palette_is_one_color_per_role_and_exports():
    colors = [theme.ROLE_COLORS[r] for r in ROLES]
    assert len(set(colors)) == len(ROLES)
    marks = [m.color for m in list(theme.STATUS.values()) + list(theme.COMPARE.values())]
    assert len(set(marks)) == len(marks) and not set(marks) & set(colors)
    data = theme.as_dict()
    assert {r: v["color"] for r, v in data["roles"].items()} == theme.ROLE_COLORS
    assert set(data["status"]) == {"saved", "recomputed", "removed"}
    assert set(data["compare"]) == {"A-only", "B-only", "both"}
    css = theme.css_variables()
    for r in ROLES:
        assert f"--fxviz-role-{r}: {theme.ROLE_COLORS[r]};" in css
    legend = theme.legend_html(["forward", "backward"])
    assert theme.ROLE_COLORS["forward"] in legend and "backward op" in legend


# --- every example, every view ---------------------------------------------------------------------
@pytest.mark.parametrize("name", EXAMPLES)
def test_joint_view_nodes_colors_and_edges(name, traces, drawn):
    tr = traces[(name, "lifted")]
    root = drawn(name)
    nodes = svg_nodes(root)
    expected = {n.name for n in tr.joint.graph.nodes if n.op != "output"}
    assert set(nodes) == expected
    for node, g in nodes.items():
        assert fill(g) == role_color(tr.graph.info[node].role), node
    # every data-flow edge is drawn once, titled producer->consumer (backward edges included,
    # although they are laid out bottom-up)
    titles = Counter((a, b) for a, b, _ in svg_edges(root))
    assert set(titles) == graph_edges(tr.joint) and max(titles.values()) == 1
    # forward and backward are two clusters, and every backward-phase node sits in the backward one
    clusters = {g.find(SVG + "title").text: g for g in root.iter(SVG + "g") if "cluster" in _classes(g)}
    assert {"cluster_forward", "cluster_backward"} <= set(clusters)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", EXAMPLES)
def test_joint_view_marks_exactly_the_partition(name, strategy, traces, drawn):
    tr = traces[(name, "lifted")]
    p = tr.partition(strategy)
    root = drawn(name, strategy=strategy)
    nodes = svg_nodes(root)
    for node, g in nodes.items():
        role = role_color(tr.graph.info[node].role)
        assert fill(g) == role, node  # marks never hide the role color (removed: same hue, faded)
        color, width = stroke(g)
        assert ((color, width) == (SAVED, 3.0)) == (node in p.saved), node
        assert double_border(g) == (node in p.recomputed), node
        assert dashed(g) == (node in p.removed), node
        if node in p.removed:
            assert float(_shapes(g)[0].get("fill-opacity")) < 0.5
    # saved edges: thick, in the saved color, exactly from saved values to backward ops
    phase = {k: v.phase for k, v in tr.graph.info.items()}
    thick = {(a, b) for a, b, g in svg_edges(root) if edge_stroke(g)[0] == SAVED}
    assert thick == {(a, b) for a, b in graph_edges(tr.joint)
                     if a in p.saved and phase[b] == "backward" and b not in p.removed}
    assert thick  # every example saves something
    # values that reach the backward by recomputation: green edges
    green = {(a, b) for a, b, g in svg_edges(root) if edge_stroke(g)[0] == RECOMPUTED}
    assert green == {(a, b) for a, b in graph_edges(tr.joint)
                     if a in p.recomputed and a not in p.saved and phase[a] == "forward"
                     and phase[b] == "backward" and b not in p.removed}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", EXAMPLES)
def test_forward_view(name, strategy, traces, drawn):
    tr = traces[(name, "lifted")]
    p = tr.partition(strategy)
    nodes = svg_nodes(drawn(name, "forward", strategy))
    expected = {p.fw_to_joint.get(n.name, n.name) for n in p.forward.graph.nodes if n.op != "output"}
    assert set(nodes) == expected
    for node, g in nodes.items():
        assert fill(g) == role_color(tr.graph.info[node].role), node
        assert (stroke(g) == (SAVED, 3.0)) == (node in p.saved), node
        assert not double_border(g)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", EXAMPLES)
def test_backward_view(name, strategy, traces, drawn):
    tr = traces[(name, "lifted")]
    p = tr.partition(strategy)
    root = drawn(name, "backward", strategy)
    nodes = svg_nodes(root)
    in_forward = set(p.fw_to_joint.values())
    expected, saved_inputs, recomputed = set(), set(), set()
    for n in p.backward.graph.nodes:
        if n.op == "output":
            continue
        joint = p.bw_to_joint.get(n.name, n.name)
        if n.op == "call_function" and joint in p.recomputed:
            ident = joint + RECOMPUTED_SUFFIX if joint in in_forward else joint
            recomputed.add(ident)
        else:
            ident = joint
        if n.op == "placeholder" and joint in p.saved:
            saved_inputs.add(ident)
        expected.add(ident)
    assert set(nodes) == expected
    assert {j for j in p.recomputed} == {i.removesuffix(RECOMPUTED_SUFFIX) for i in recomputed}
    for node, g in nodes.items():
        joint = node.removesuffix(RECOMPUTED_SUFFIX)
        assert fill(g) == role_color(tr.graph.info[joint].role), node
        assert double_border(g) == (node in recomputed), node
        assert (stroke(g) == (SAVED, 3.0)) == (node in saved_inputs), node
    assert saved_inputs == set(p.saved) & expected
    # edges out of saved inputs are thick
    for a, b, g in svg_edges(root):
        assert (edge_stroke(g)[0] == SAVED) == (a in saved_inputs), (a, b)


@pytest.mark.parametrize("name", EXAMPLES)
def test_compare_view(name, traces, drawn):
    tr = traces[(name, "lifted")]
    a, b = tr.partition("default"), tr.partition("min_cut")
    root = drawn(name, strategy="default", compare="min_cut")
    nodes = svg_nodes(root)
    sa, sb = set(a.saved), set(b.saved)
    colors = {k: m.color.lower() for k, m in theme.COMPARE.items()}

    def which(x: bool, y: bool) -> str | None:
        return "both" if x and y else "A-only" if x else "B-only" if y else None

    for node, g in nodes.items():
        assert fill(g) == role_color(tr.graph.info[node].role), node
        saved = which(node in sa, node in sb)
        recomputed = which(node in a.recomputed, node in b.recomputed)
        removed = which(node in a.removed, node in b.removed)  # by one only: a difference, marked too
        mark = saved or recomputed or (removed if removed != "both" else None)
        color, width = stroke(g)
        assert (color if width == 3.0 else None) == (colors[mark] if mark else None), node
        assert double_border(g) == (recomputed is not None), node
    text = "".join(root.itertext())
    for p in (a, b):
        assert f"saves {len(p.saved)} values" in text
    assert f"saved by A only: {len(sa - sb)}, by B only: {len(sb - sa)}, by both: {len(sa & sb)}" in text


# --- labels, tooltips, ids -------------------------------------------------------------------------
def test_labels_and_tooltips_name_things(traces, drawn):
    tr = traces[("alexnet", "lifted")]
    root = drawn("alexnet", strategy="min_cut")
    nodes = svg_nodes(root)
    info = tr.graph.info
    grad = next(n for n, i in info.items() if i.role == "gradient" and i.qualname == "features.0.weight")
    assert "grad features.0.weight" in "".join(nodes[grad].itertext())
    param = next(n for n, i in info.items() if i.role == "parameter" and i.qualname == "features.0.weight")
    assert "features.0.weight" in "".join(nodes[param].itertext())
    conv = nodes["convolution"]
    text = " ".join(conv.itertext())
    assert "convolution" in text and "f32[1, 64, 55, 55]" in text
    link = next(conv.iter(SVG + "a"))
    tip = link.get(XLINK + "title")
    assert link.find(SVG + "title").text == tip  # browsers show the innermost <title> on hover
    assert "aten.convolution.default" in tip and "module: features.0" in tip and "users: relu" in tip
    assert info["convolution"].source in tip
    p = tr.partition("min_cut")
    saved = next(s for s in p.saved if info[s].role == "forward" and info[s].bytes)
    assert "saved" in "".join(nodes[saved].itertext())


# --- module grouping -------------------------------------------------------------------------------
def _module_of(i) -> str:
    if i.module:
        return i.module
    if i.role in ("parameter", "buffer", "constant") and i.qualname and "." in i.qualname:
        return i.qualname.rsplit(".", 1)[0]
    return ""


def test_group_depth_one_boxes_counts_and_edges(traces):
    tr = traces[("alexnet", "lifted")]
    p = tr.partition("min_cut")
    table = tr.saved("min_cut")
    root = parse(tr.draw(group="module", depth=1, strategy="min_cut").svg())
    boxes = svg_nodes(root, "fx-group")
    info = tr.graph.info
    # a backward node min-cut computes in the forward (and saves) is drawn in the forward's box
    moved = {j for j in p.fw_to_joint.values() if j in info and info[j].phase == "backward"}
    unit = {}
    for name, i in info.items():
        if name == "output":
            continue
        top = _module_of(i).split(".")[0]
        unit[name] = f"{'forward' if name in moved else i.phase}/{top}" if top else name
    members = Counter(u for u in unit.values() if "/" in u)
    assert set(boxes) == set(members)
    for box, g in boxes.items():
        text = " ".join(g.itertext())
        assert re.search(rf"\b{members[box]} nodes?:", text), box
        # the saved badge counts activations (their bytes as the memory table counts them) apart from
        # the parameters and inputs the box saves, which are resident anyway (tr.saved's kinds)
        rows = table[[unit.get(n) == box for n in table.index]]
        acts = rows[rows["kind"] == "activation"]
        if len(acts):
            noun = "activation" if len(acts) == 1 else "activations"
            assert f"saved {len(acts)} {noun}: {format_bytes(int(acts['bytes'].sum()))}" in text, box
        else:
            assert "activation" not in text, box
        held = rows[rows["kind"].isin(["parameter", "input"])]
        assert (len(held) > 0) == ("(resident)" in text), box
        assert len(rows) == sum(1 for n, u in unit.items() if u == box and n in p.saved)
    # edges between boxes are deduplicated and counted
    pairs = Counter((unit[a], unit[b]) for a, b in graph_edges(tr.joint) if unit[a] != unit[b])
    drawn_edges = svg_edges(root)
    assert Counter((a, b) for a, b, _ in drawn_edges) == Counter(set(pairs))
    for a, b, g in drawn_edges:
        label = "".join(t.text or "" for t in g.iter(SVG + "text"))
        assert label == (f"×{pairs[(a, b)]}" if pairs[(a, b)] > 1 else ""), (a, b)


def test_group_nested_clusters_and_repeated_blocks(traces):
    tr = traces[("mini_gpt", "lifted")]
    root = parse(tr.draw(group="module").svg())  # full nesting: every node, in module clusters
    nodes = svg_nodes(root)
    assert set(nodes) == {n for n in tr.graph.info if n != "output"}
    labels = {t.text for g in root.iter(SVG + "g") if "cluster" in _classes(g) for t in g.iter(SVG + "text")}
    assert {"h", "h.0", "h.0.attn", "h.1.mlp.c_fc", "forward", "backward (drawn bottom-up)"} <= labels
    root = parse(tr.draw(group="module", depth=2).svg())
    boxes = svg_nodes(root, "fx-group")
    for side in ("forward", "backward"):
        found = [re.search(r"pattern (\w) ×2", " ".join(boxes[f"{side}/{b}"].itertext())) for b in ("h.0", "h.1")]
        assert all(found) and found[0].group(1) == found[1].group(1), side
    assert "pattern" not in " ".join(boxes["forward/wte"].itertext()) if "forward/wte" in boxes else True


def test_big_graphs_collapse_by_default_with_a_caption(traces):
    tr = traces[("mini_gpt", "lifted")]
    n = len(tr.graph.info) - 1
    d = tr.draw(node_limit=n - 1)
    root = parse(d.svg())
    assert svg_nodes(root, "fx-group") and len(svg_nodes(root)) < n
    assert f"{n} nodes is more than {n - 1}" in "".join(root.itertext())
    assert not svg_nodes(parse(tr.draw(node_limit=n).svg()), "fx-group")
    assert NODE_LIMIT >= 100


def test_level_counts_are_the_units_drawn(traces):
    """``Structure.count`` (counted by module place: the default view counts every level to pick
    one) is the number of distinct units ``Structure.units`` draws (what the picture shows), at every
    level, with each box opened or none, lists of blocks one box or not."""
    from fxviz.render.graph import scene as sc

    for key in (("mini_gpt", "lifted"), ("resnet_block", "lifted")):
        tr = traces[key]
        scene = sc.joint_scene(tr.graph, tr.partition())
        st = sc.Structure(scene, tr.graph)
        opened = [frozenset(), *(frozenset({name}) for name in sorted(st.openable()))]
        assert len(opened) > 3 and (key[0] != "resnet_block" or frozenset({sc.BOOKKEEPING}) in opened)
        for level in range(1, st.max_level + 1):
            for expand in opened:
                for containers in (False, True):
                    units = {u for u, _, _ in st.units(level, expand, containers).values()}
                    assert st.count(level, expand, containers) == len(units), (key, level, expand, containers)


def test_highlight(traces):
    tr = traces[("alexnet", "lifted")]
    root = parse(tr.draw(highlight="features.3").svg())
    nodes = svg_nodes(root)
    info = tr.graph.info
    hits = {n for n, i in info.items() if n != "output" and (
        (i.module or "") == "features.3" or (i.qualname or "").startswith("features.3."))}
    assert hits
    for node, g in nodes.items():
        shape = _shapes(g)[0]
        if node in hits:
            assert float(shape.get("stroke-width")) >= 3 and shape.get("fill-opacity") is None, node
        else:
            assert float(shape.get("fill-opacity")) < 0.5, node


# --- escaping --------------------------------------------------------------------------------------
NASTY = 'x<y>&"{a|b}"\\ ü→\nz'
SCRIPT = '<script>alert(1)</script>'


class Weird(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleDict({NASTY: nn.Linear(4, 4), SCRIPT: nn.Linear(4, 4),
                                     "a,b->ab": nn.Linear(4, 4)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.blocks[NASTY](x)
        h = self.blocks["<script>alert(1)</script>"](h)  # <b>{x|y}</b> "q" \ ü → </svg>
        h = self.blocks["a,b->ab"](h)
        return torch.einsum("a,b->ab", h[0], h[1]).sum()


@pytest.fixture(scope="module")
def weird():
    model = Weird()
    return fxviz.trace(model, torch.randn(2, 4))


@pytest.mark.parametrize("kw", [{}, {"strategy": "min_cut"}, {"group": "module"}, {"depth": 2},
                                {"view": "backward", "strategy": "min_cut"}, {"compare": "min_cut"},
                                {"highlight": "blocks"}])
def test_escaping_corpus_renders_valid_svg_without_injection(weird, kw):
    svg = weird.draw(**kw).svg()
    root = parse(svg)  # well-formed XML
    tags = {el.tag for el in root.iter()}
    assert SVG + "script" not in tags and "script" not in tags
    text = "".join(root.itertext()) + " ".join(a.get(XLINK + "title", "") for a in root.iter(SVG + "a"))
    # model-provided strings come out as text, intact (label newlines shown as ⏎, tooltips keep them)
    assert SCRIPT in text
    assert 'x<y>&"{a|b}"\\ ü→' in text
    assert "a,b->ab" in text


def test_escaping_in_tooltips_keeps_backslashes_and_newlines(weird):
    root = parse(weird.draw(group="none").svg())
    tips = [a.get(XLINK + "title", "") for a in root.iter(SVG + "a")]
    assert any(f"module: blocks.{NASTY}" in t for t in tips)
    assert any('# <b>{x|y}</b> "q" \\ ü → </svg>' in t for t in tips)


# --- the Drawing object ----------------------------------------------------------------------------
def test_drawing_display_and_save(traces, tmp_path):
    tr = traces[("mlp", "lifted")]
    d = tr.draw(strategy="min_cut")
    assert tr.draw(strategy="min_cut") is d  # cached per arguments
    assert tr.draw(strategy="default") is not d
    # no strategy named: the default's saves marked, as every view shows them (issue 47: roles only)
    assert tr.default_strategy.name == "min_cut" and tr.draw() is d
    assert "fx&#45;saved" in d.svg() or "fx-saved" in d.svg()
    bundle = d._repr_mimebundle_()
    assert bundle["text/html"].count("<svg") == 1 and "<?xml" not in bundle["text/html"]
    assert "<title>addmm</title>" in bundle["text/html"]
    parse(bundle["image/svg+xml"])
    assert d.source.startswith("digraph")
    for suffix, magic in ((".svg", b"<?xml"), (".png", b"\x89PNG"), (".dot", b"digraph"), (".pdf", b"%PDF")):
        path = d.save(tmp_path / f"g{suffix}")
        assert path.read_bytes().startswith(magic), suffix
        assert oct(path.stat().st_mode & 0o777) != oct(0o600)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.dot", "g.pdf", "g.png", "g.svg"]  # no temp files
    with pytest.raises(RenderError, match="image format"):
        d.save(tmp_path / "g.bmpx")


def test_layout_timeout_raises_with_advice_and_display_shows_source(traces):
    tr = traces[("mini_gpt", "lifted")]
    d = tr.draw(group="none", timeout=0.05)  # every node: the collapsed default lays out in ~0.05 s
    with pytest.raises(RenderError) as err:
        d.svg()
    assert "longer than 0.05 s" in err.value.message and "group='module'" in err.value.hint
    bundle = d._repr_mimebundle_()
    assert "could not draw" in bundle["text/html"] and "digraph" in bundle["text/html"]


def test_missing_dot_says_how_to_install_and_shows_source(traces, monkeypatch, tmp_path):
    tr = traces[("mlp", "lifted")]
    d = Drawing(tr.draw().digraph)  # a fresh, not yet laid out drawing
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no dot anywhere
    with pytest.raises(RenderError, match="not found"):
        d.svg()
    bundle = d._repr_mimebundle_()
    assert "apt-get install graphviz" in bundle["text/html"] and "digraph" in bundle["text/plain"]
    assert "<svg" not in bundle["text/html"]


def test_bad_arguments(traces):
    tr = traces[("mlp", "lifted")]
    with pytest.raises(InputError):
        tr.draw("sideways")
    with pytest.raises(InputError):
        tr.draw("forward", strategy="default", compare="min_cut")
    with pytest.raises(InputError):
        tr.draw(group="layers")
    with pytest.raises(InputError):
        tr.draw(depth=0)


def test_cli_draw(tmp_path, capsys):
    from fxviz.frontends.cli.entry import main

    out = tmp_path / "g.svg"
    assert main(["draw", "mlp", "-o", str(out), "--strategy", "min_cut", "--view", "backward"]) == 0
    root = parse(out.read_text())
    assert svg_nodes(root)
    assert str(out) in capsys.readouterr().out
    png = tmp_path / "m.png"
    assert main(["draw", "mlp", "-o", str(png), "--group", "module", "--depth", "1", "--compare", "min_cut"]) == 0
    assert png.read_bytes().startswith(b"\x89PNG")
    # --expand opens boxes as draw(expand=...) does; an unknown box is a one-line error, exit 2
    opened = tmp_path / "open.dot"
    assert main(["draw", "mlp", "-o", str(opened), "--group", "module", "--depth", "1", "--expand", "0"]) == 0
    model, inputs = fxviz.examples.get_example("mlp")
    expected = fxviz.trace(model, *inputs).draw(group="module", depth=1, expand=["0"])
    assert opened.read_text() == expected.source != fxviz.trace(model, *inputs).draw(group="module", depth=1).source
    capsys.readouterr()
    assert main(["draw", "mlp", "--group", "module", "--expand", "no.such.box"]) == 2
    assert "not a module or box" in capsys.readouterr().err


def test_eager_reference_has_no_graphs_but_marks_what_it_saves(traces):
    tr = traces[("mlp", "lifted")]
    p = tr.partition("eager")
    root = parse(tr.draw(strategy="eager").svg())
    saved = {n for n, g in svg_nodes(root).items() if stroke(g) == (SAVED, 3.0)}
    assert saved == set(p.saved) and saved
    assert "measured in eager" in "".join(root.itertext())
    with pytest.raises(InputError, match="no forward graph"):
        tr.draw("forward", strategy="eager")


def test_forward_only_graph_and_graph_breaks_draw():
    lin = nn.Linear(4, 4).requires_grad_(False)
    tr = fxviz.trace(lin, torch.randn(2, 4))
    root = parse(tr.draw().svg())
    assert set(svg_nodes(root)) == {n.name for n in tr.joint.graph.nodes if n.op != "output"}
    assert not any("cluster" in _classes(g) for g in root.iter(SVG + "g"))  # one side only

    class Breaks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.a(x)
            if h.sum().item() > 0:  # data-dependent Python: a graph break
                h = h * 2
            return self.b(h)

    tr = fxviz.trace(Breaks(), torch.randn(2, 4))
    assert len(tr.pieces) > 1
    for piece in tr.pieces:
        text = "".join(parse(piece.draw(strategy="min_cut").svg()).itertext())
        assert f"graph {piece.graph.index + 1} of {len(tr.pieces)}" in text


@pytest.mark.parametrize("strategy", ["default", "min_cut", "budget:0.5"])
def test_saved_badges_add_up_to_the_memory_table(strategy):
    """Aliases of a saved storage (pointwise_chain's detach of each sigmoid) and saved views of a
    parameter are labelled '0 B new': the bytes the badges show add up to the table's activations."""
    from fxviz.render.graph import scene as sc

    model, inputs = fxviz.examples.pointwise_chain()
    tr = fxviz.trace(model, *inputs, backend="aot_eager")  # its detach nodes (inductor's passes remove them)
    p = tr.partition(strategy)
    scene = sc.joint_scene(tr.graph, p)
    shown = sum(it.info.bytes or 0 for it in scene.items.values()
                if it.saved and it.alias_of is None and it.info.role not in ("primal", "parameter", "buffer"))
    assert shown == int(tr.memory_table([strategy])["saved_activation_bytes"].iloc[0])
    if strategy == "default":
        aliases = {it.joint: it.alias_of for it in scene.items.values() if it.alias_of}
        assert {"detach": "sigmoid", "detach_1": "sigmoid_1", "detach_2": "sigmoid_2"}.items() <= aliases.items()
        assert "saved: alias of sigmoid (0 B new)" in html.unescape(tr.draw(strategy=strategy).svg())


# --- issue 19: the differences-only compare ------------------------------------------------------
def _treated_differently(tr, a: str, b: str) -> set[str]:
    """From the two Partitions themselves: joint nodes saved, recomputed or removed by one only."""
    pa, pb = tr.partition(a), tr.partition(b)
    out = set()
    for name in tr.graph.info:
        if tr.graph.info[name].op == "output":
            continue
        if any((name in getattr(pa, k)) != (name in getattr(pb, k)) for k in ("saved", "recomputed", "removed")):
            out.add(name)
    return out


@pytest.mark.parametrize("name", ["pointwise_chain", "mini_gpt", "mlp"])
def test_differences_only_draws_the_differing_nodes_and_their_neighbors(name, traces):
    tr = traces[(name, "lifted")]
    diff = _treated_differently(tr, "min_cut", "default")
    assert diff, "min-cut and the default differ on these examples"
    joint = {n.name: n for n in tr.graph.gm.graph.nodes if n.op != "output"}
    near = set()
    for d in diff:
        near |= {a.name for a in joint[d].all_input_nodes} | {u.name for u in joint[d].users if u.op != "output"}
    near -= diff
    drawing = tr.draw("compare", strategy="min_cut", compare="default", differences=True)
    root = parse(drawing.svg())
    nodes = svg_nodes(root)
    assert set(nodes) == diff | near
    context = {t for t, g in nodes.items() if "fx-context" in _classes(g)}
    assert context == near
    assert not list(root.iter(SVG + "g")) or not any("fx-group" in _classes(g) for g in root.iter(SVG + "g"))
    for t in near:  # the tooltip says why it is there
        assert "context:" in nodes[t].find(f"{SVG}g/{SVG}a").get(f"{XLINK}title")
    # both sides kept where the differences reach both
    clusters = {g.find(SVG + "title").text for g in root.iter(SVG + "g") if "cluster" in _classes(g)}
    sides = {tr.graph.info[n].phase for n in diff | near}
    assert ({"cluster_forward", "cluster_backward"} <= clusters) == (len(sides) == 2)
    text = "".join(root.itertext())
    assert (f"min_cut vs default_partition: {len(diff)} nodes treated differently (+{len(near)} neighbors shown as "
            "context)") \
        in text
    # every edge drawn is a graph edge between two drawn nodes
    edges = {(a, b) for a, b, _ in svg_edges(root)}
    assert edges == {(a, b) for a, b in graph_edges(tr.graph.gm) if a in nodes and b in nodes}
    # the same set as the compare drawing's marks say: one test for both
    assert tr.draw("compare", strategy="min_cut", compare="default", differences=True) is drawing  # cached
    full = svg_nodes(parse(tr.draw("joint", strategy="min_cut", compare="default", group="none").svg()))
    marked = {t for t, g in full.items() if any(c in _classes(g) for c in
              ("fx-saved-A-only", "fx-saved-B-only", "fx-recomputed-A-only", "fx-recomputed-B-only",
               "fx-removed-A-only", "fx-removed-B-only"))}
    assert marked == diff


def test_differences_only_when_nothing_differs_says_so(traces):
    tr = traces[("pointwise_chain", "lifted")]
    drawing = tr.draw("compare", strategy="default", compare="default", differences=True)
    root = parse(drawing.svg())
    assert svg_nodes(root) == {}
    text = " ".join(root.itertext())
    assert "default_partition vs default_partition: the same values saved, recomputed and removed: nothing to draw" \
        in text
    assert drawing.caption == "PointwiseChain: default_partition and default_partition treat every node alike"
    assert 200 < float(root.get("width").removesuffix("pt")) < 768  # fits a 1024 px screen (768 pt), in DejaVu Sans


def test_differences_only_needs_a_partner(traces):
    tr = traces[("mlp", "lifted")]
    with pytest.raises(InputError, match="differences=True") as err:
        tr.draw("joint", strategy="min_cut", differences=True)
    assert "compare=" in err.value.hint
    with pytest.raises(InputError, match="compare"):
        tr.draw("compare", strategy="min_cut")


def test_cli_draws_the_differences(tmp_path):
    from fxviz.frontends.cli.entry import main

    out = tmp_path / "diff.svg"
    assert main(["draw", "pointwise_chain", "-o", str(out), "--compare", "min_cut", "--differences"]) == 0
    assert "treated differently" in out.read_text()
    assert main(["draw", "pointwise_chain", "-o", str(out), "--differences"]) != 0
