"""Issue 15: the default drawing of real models is readable.  Models are built from library
configs with random weights (tests/real_models.py, no downloads); every number is measured from
the SVG that ``dot`` lays out (tests/svg_measure.py), or checked against the joint graph torch
traced."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from collections import defaultdict

import pytest

import fxviz
from fxviz.render.graph import scene as sc

from .real_models import MODELS
from .svg_measure import SVG, measure

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="needs graphviz's dot")

NEEDS = {"llama": "transformers", "t5": "transformers", "gpt2": "transformers", "vit": "transformers",
         "convnext": "transformers", "resnet18": "transformers", "unet": None}
REPEATED = ("llama", "t5", "gpt2", "vit")  # models whose default view draws identical blocks side by side


@pytest.fixture(scope="module")
def real():
    cache: dict[str, fxviz.Trace] = {}

    def get(name: str) -> fxviz.Trace:
        if NEEDS[name]:
            pytest.importorskip(NEEDS[name])
        if name not in cache:
            model, inputs = MODELS[name]()
            cache[name] = fxviz.trace(model, *inputs)
        return cache[name]

    return get


def _boxes(svg: str) -> dict[str, str]:
    """SVG title -> label text of every module box."""
    root = ET.fromstring(svg)
    out = {}
    for g in root.iter(SVG + "g"):
        if "fx-group" in g.get("class", "").split():
            out[g.find(SVG + "title").text] = " ".join(t.text or "" for t in g.iter(SVG + "text"))
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_default_view_is_screen_sized(real, name):
    tr = real(name)
    svg = tr.draw().svg()
    m = measure(svg)
    assert m.boxes > 0, "a real model's default view collapses modules"
    assert m.units <= 150, m
    assert 1 / 3 <= m.aspect <= 3, m
    # inductor's capture (the default) rewrites attention in its joint passes; the ops a pass makes carry
    # no module stack, and sit in the module their inputs share (ViT's attention: 6 loose ops before)
    assert m.loose <= 5, m


def test_ops_a_pass_made_sit_in_their_module(real):
    """inductor's pattern rewrite turns a ViT's eager attention into ``_scaled_dot_product_flash_attention``
    ops that record no stack: each sits in the module its query, key and value were made in."""
    tr = real("vit")
    made = [n for n in tr.joint.graph.nodes if n.op == "call_function" and "scaled_dot_product" in str(n.target)
            and not n.meta.get("stack_trace")]
    assert made, "inductor's joint passes made no attention op on this torch: nothing to check"
    for n in made:
        modules = {tr.graph.info[a.name].module for a in n.all_input_nodes if tr.graph.info[a.name].phase == "forward"}
        assert tr.graph.info[n.name].module, n.name
        assert all(m == tr.graph.info[n.name].module or m.startswith(tr.graph.info[n.name].module + ".")
                   for m in modules if m), (n.name, tr.graph.info[n.name].module, modules)


@pytest.mark.parametrize("name", REPEATED)
def test_repeated_blocks_are_marked(real, name):
    """Boxes whose module paths differ only in a layer index and that hold the same number of
    nodes (three or more) are marked with one pattern letter and the number of repeats."""
    boxes = _boxes(real(name).draw().svg())
    alike: dict[tuple[str, str], list[str]] = defaultdict(list)
    for title, text in boxes.items():
        count = re.search(r"(\d+) nodes?:", text)
        stem = re.sub(r"(^|\.)\d+(?=\.|$)", r"\1#", title)
        if stem != title and count and int(count.group(1)) >= 3:  # two-op boxes are not "blocks"
            alike[(stem, count.group(1))].append(title)
    repeated = {k: v for k, v in alike.items() if len(v) > 1}
    assert repeated, f"{name}: no repeated blocks drawn"
    for titles in repeated.values():
        found = [re.search(r"pattern (\w) ×(\d+)", boxes[t]) for t in titles]
        assert all(found), [(t, boxes[t]) for t in titles]
        marks = {f.groups() for f in found if f}
        assert len(marks) == 1 and int(next(iter(marks))[1]) >= len(titles), (titles, marks)


def test_gradient_accumulation_adds_sit_in_their_module(real):
    """The ``add`` torch inserts to sum the gradients of a tensor used twice has no module of its
    own (its seq_nr is the loss's); drawn, it sits in the module that used the tensor."""
    tr = real("llama")
    adds = [i for i in tr.graph.info.values() if i.phase == "backward" and i.short_op == "add" and not i.module]
    assert len(adds) >= 20  # what the issue counted as loose ops beside the layers
    scene = sc.joint_scene(tr.graph)
    st = sc.Structure(scene, tr.graph)
    for info in adds:
        path = st.path[info.name]
        assert path, info.name
        # the module that used the tensor runs the source line torch recorded for the add
        runs_it = {i.module for i in tr.graph.info.values() if i.phase == "forward" and i.source == info.source}
        assert any(m == ".".join(path) or m.startswith(".".join(path) + ".") for m in runs_it), info.name


def test_bookkeeping_is_one_box(real):
    """Train-mode batch norm updates running statistics and counters in place: values that reach
    neither the loss nor the backward.  They share one box instead of a 20-wide row."""
    tr = real("resnet18")
    gm = tr.joint
    nodes = {n.name: n for n in gm.graph.nodes}
    out = next(n for n in gm.graph.nodes if n.op == "output")
    user_outputs = [a for a in out.args[0][:tr.graph.num_fwd_outputs]
                    if a is not None and not (tr.graph.info[a.name].qualname or "").endswith("(updated in place)")]
    live = set()
    todo = list(user_outputs) + [n for n in gm.graph.nodes if n.op == "call_function"
                                 and tr.graph.info[n.name].phase == "backward"]
    while todo:
        n = todo.pop()
        if n.name not in live:
            live.add(n.name)
            todo += n.all_input_nodes
    st = sc.Structure(sc.joint_scene(tr.graph), tr.graph)
    assert st.bookkeeping and not st.bookkeeping & live, sorted(st.bookkeeping & live)
    buffers = tr.capture.model.named_buffers()
    counters = {f"{m}.num_batches_tracked" for m, _ in
                ((k.rsplit(".", 1)[0], v) for k, v in buffers if k.endswith("num_batches_tracked"))}
    held = {tr.graph.info[i].qualname for i in st.bookkeeping if tr.graph.info[i].role == "buffer"}
    assert counters <= held and len(counters) == 20
    boxes = _boxes(tr.draw().svg())
    book = [t for t in boxes if sc.BOOKKEEPING.strip("()") in t.replace("%20", " ")]
    assert len(book) == 1
    assert f"{len(st.bookkeeping)} nodes" in boxes[book[0]]
    assert all(nodes[i].op in ("call_function", "placeholder") for i in st.bookkeeping)


def test_expand_opens_a_box(real):
    """``draw(expand=[path])`` draws the module's inside: each of its nodes as itself or inside a
    box of one of its submodules; the box itself is gone."""
    tr = real("gpt2")
    before = _boxes(tr.draw().svg())
    title = next(t for t in before if t.startswith("forward/") and ".attn" in t and "c_attn" not in t)
    path = title.split("/", 1)[1]
    svg = tr.draw(expand=[path]).svg()
    after = _boxes(svg)
    assert title not in after
    drawn = {g.find(SVG + "title").text for g in ET.fromstring(svg).iter(SVG + "g")
             if "node" in g.get("class", "").split()}
    inside = [i for i in tr.graph.info.values() if i.phase == "forward" and i.module
              and (i.module == path or i.module.startswith(path + "."))]
    assert inside
    for info in inside:
        assert info.name in drawn or any(t.startswith(f"forward/{path}.") for t in drawn), info.name
    with pytest.raises(fxviz.InputError, match="not a module"):
        tr.draw(expand=["no.such.module"])


def test_expand_takes_a_function_box_by_the_name_its_box_shows(real):
    """A function box inside a module is keyed ``module.file.fn()``; its box reads ``file.fn()``,
    and that name opens it too (one box ends with it). Numbers count boxes only: a lone box has none."""
    from fxviz.render.graph.views import openable

    tr = real("gpt2")
    names = openable(tr.graph, "joint")
    children = {m for m, _ in tr.capture.model.named_children()}
    inner = sorted(n for n in names if n.endswith(")") and n.split(".")[0] in children)
    assert inner, sorted(names)

    def label(key: str) -> str:  # what the box reads: file.fn() (#k)
        return ".".join(key.split(".")[-2:])

    def sharing(key: str) -> int:
        return sum(n.endswith("." + label(key)) for n in names)

    unique = next(k for k in inner if sharing(k) == 1)  # masking_utils' functions, in `transformer`
    assert tr.draw(expand=[label(unique)]).svg() == tr.draw(expand=[unique]).svg()
    shared = next(k for k in inner if sharing(k) > 1)  # eager_attention_forward(): once per layer
    with pytest.raises(fxviz.InputError, match=f"names {sharing(shared)} boxes"):
        tr.draw(expand=[label(shared)])
    assert not any(n.endswith("#1") for n in names) or all(
        n[:-1] + "2" in names for n in names if n.endswith("#1"))
    with pytest.raises(fxviz.InputError, match=r"e\.g\. expand="):
        tr.draw(expand=["masking_utils.no_such_fn()"])
