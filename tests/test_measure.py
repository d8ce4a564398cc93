"""``Trace.measure()`` against an independent count: each test compiles a copy of the model itself
(``torch.compile``, the same backend), catches what the step saves with its own
``saved_tensors_hooks`` and counts the storages that are not a parameter or an input."""

from __future__ import annotations

import copy
import dataclasses

import pandas as pd
import pytest
import torch
from torch import nn

import fxviz
from fxviz.analysis.doctor.diagnose import diagnose
from fxviz.analysis.real.measure import add_measured, mark_saved, session_step_strategy
from fxviz.core.errors import FxvizError
from fxviz.core.units import format_bytes

from .conftest import assert_unchanged, make_example, snapshot


def independent_count(model: nn.Module, inputs: tuple, backend: str, loss=lambda out: out.sum()) -> dict:
    """The test's own real step: what it saved, storage by storage (bytes, the tensor)."""
    m = copy.deepcopy(model)
    args = tuple(x.clone() for x in inputs)
    state = {t.untyped_storage().data_ptr() for t in list(m.parameters()) + list(m.buffers()) + list(args)}
    saved: dict[int, torch.Tensor] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.setdefault(t.untyped_storage().data_ptr(), t)
        return t

    def step(*a):
        return loss(m(*a))

    compiled = torch.compile(step, backend=backend)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = compiled(*args)
    out.backward()
    torch._dynamo.reset()
    activations = {k: t for k, t in saved.items() if k not in state}
    return {"bytes": sum(t.untyped_storage().nbytes() for t in activations.values()),
            "sizes": sorted(t.untyped_storage().nbytes() for t in activations.values()),
            "tensors": list(activations.values()), "params": dict(m.named_parameters())}


def measured_sizes(measured) -> list[int]:
    rows = measured.saved[~measured.saved["kind"].isin(["parameter", "input"])]
    return sorted(int(b) for b in rows["bytes"])


class ConvBN(nn.Module):
    """A small conv net with batch norm (running statistics move in every training step)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                      nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(2))
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def convbn() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return ConvBN(), (torch.randn(2, 3, 8, 8),)


@pytest.fixture(scope="module")
def alexnet_inductor():
    """AlexNet at batch 1 under inductor: one trace, one measure, one independent count (the
    compiles share inductor's on-disk cache, so the kernels are built once)."""
    model, inputs = make_example("alexnet")
    before = snapshot(model)
    tr = fxviz.trace(model, *inputs, backend="inductor", loss_fn=lambda out: out.sum())
    measured = tr.measure()
    assert_unchanged(model, before)
    return tr, measured, independent_count(model, inputs, "inductor")


def test_alexnet_inductor_equals_the_independent_count(alexnet_inductor):
    tr, measured, count = alexnet_inductor
    assert measured.saved_bytes == count["bytes"]
    assert measured_sizes(measured) == count["sizes"]
    # the partition (min-cut as inductor calls it) saves the conv weights and the input as themselves
    table = tr.memory_table([session_step_strategy()])
    estimated = int(table["saved_activation_bytes"].iloc[0])
    assert measured.estimated_bytes == estimated
    assert measured.saved_bytes == estimated + measured.copy_bytes  # the copies are the whole difference


def test_a_measure_and_the_tables_print_readably_in_a_terminal(alexnet_inductor):
    """``print(measured)`` is one line of its figures (not the whole ``saved`` frame); ``print(table)`` lays
    every strategy out as a column with units (not pandas' ``[5 rows x 22 columns]``)."""
    tr, measured, _ = alexnet_inductor
    text = repr(measured)
    assert all(len(ln) <= 100 for ln in text.splitlines()) and measured.backend in text
    assert format_bytes(measured.saved_bytes) in " ".join(text.split())
    assert f"{measured.saves} saved values" in " ".join(text.split()) and "DataFrame" not in text
    table = add_measured(tr.memory_table(), measured)
    shown = repr(table)
    assert "rows x" not in shown and "strategies x" in shown
    for strategy in table["strategy"]:
        assert str(strategy) in shown.splitlines()[0]
    assert format_bytes(int(table["saved_activation_bytes"].iloc[0])) in shown
    assert repr(table[["strategy", "saved_tensors"]]) == repr(pd.DataFrame(table[["strategy", "saved_tensors"]]))


def test_alexnet_copies_name_their_source(alexnet_inductor):
    tr, measured, count = alexnet_inductor
    copies = measured.copies
    assert len(copies) > 0
    params = count["params"]
    for _, row in copies.iterrows():
        if row["kind"] == "parameter copy":
            source = params[row["source"]]
            # the test's own step saved a tensor holding that parameter's values, in another storage
            assert any(t.shape == source.shape and torch.equal(t, source) for t in count["tensors"]), row["source"]
            primal = [n for n, i in tr.graph.info.items() if i.qualname == row["source"]]
            assert row["value"] in primal
            assert f"`{row['value']}`" in row["what"] and row["source"] in row["what"]
    assert {r for r in copies["kind"]} <= {"parameter copy", "input copy"}


def test_alexnet_twin_doctor_and_saved_marks(alexnet_inductor):
    tr, measured, _ = alexnet_inductor
    table = add_measured(tr.memory_table(), measured)
    row = table[table["strategy"] == measured.strategy]
    assert int(row["measured_saved_bytes"].iloc[0]) == measured.saved_bytes
    assert int(row["measured_difference_bytes"].iloc[0]) == measured.saved_bytes - int(
        row["saved_activation_bytes"].iloc[0])
    assert table[table["strategy"] != measured.strategy]["measured_saved_bytes"].isna().all()
    parts = [p.partition(measured.strategy) for p in tr.pieces]
    found = diagnose(tr.capture, parts, measured).of_kind("measured_copies")
    assert len(found) == 1 and found[0].bytes == measured.copy_bytes
    assert "layout_optimization" in found[0].fix
    marked = mark_saved(tr.saved(measured.strategy), measured, tr.graph)
    for _, row in measured.copies.iterrows():
        assert marked.loc[row["value"], "measured"].startswith("held as a copy")
    assert "not held" not in set(marked["measured"])  # every value min-cut saves, the step holds


@pytest.mark.parametrize("name", ["alexnet", "mini_gpt"])
def test_aot_eager_measured_equals_estimated(name):
    model, inputs = make_example(name)
    before = snapshot(model)
    loss = (lambda out: out.sum()) if name == "alexnet" else (lambda out: out)
    tr = fxviz.trace(model, *inputs, loss_fn=loss, backend="aot_eager")
    measured = tr.measure()
    assert_unchanged(model, before)
    count = independent_count(model, inputs, "aot_eager", loss)
    assert measured.saved_bytes == count["bytes"]
    assert measured_sizes(measured) == count["sizes"]
    estimated = int(tr.memory_table([session_step_strategy()])["saved_activation_bytes"].iloc[0])
    assert measured.saved_bytes == measured.estimated_bytes == estimated
    assert measured.copies.empty and measured.difference == 0
    assert not measured.saved["value"].isna().any()  # every storage named


def test_convbn_inductor_and_the_layout_knob():
    """Under inductor on CPU the conv weights are saved as channels-last copies; with the knob the
    doctor recommends, the step keeps what the partition saves."""
    model, inputs = convbn()
    before = snapshot(model)
    tr = fxviz.trace(model, *inputs, backend="inductor")
    measured = tr.measure()
    count = independent_count(model, inputs, "inductor")
    assert measured.saved_bytes == count["bytes"]
    assert measured_sizes(measured) == count["sizes"]
    assert set(measured.copies["source"]) >= {"features.0.weight", "features.3.weight"}
    assert set(measured.copies["layout"]) == {"channels_last"}
    with torch._inductor.config.patch(layout_optimization=False):
        plain = tr.measure()
    assert plain.copies.empty
    assert plain.saved_bytes == plain.estimated_bytes
    assert_unchanged(model, before)
    assert torch._inductor.config.layout_optimization


def test_a_log_has_no_model_to_measure():
    model, inputs = convbn()
    tr = fxviz.trace(model, *inputs)
    log_like = dataclasses.replace(tr.capture, source=dataclasses.replace(tr.capture.source, model=None, fn=None))
    from fxviz.analysis.real.measure import measure_step

    with pytest.raises(FxvizError, match="no model"):
        measure_step(log_like, [])


def test_a_function_over_a_module_and_the_users_compile_are_left_untouched():
    """A traced function runs on the module it closes over (nothing to copy): measure puts its
    batch-norm statistics, .grad and the RNG back; the user's own compiled model keeps its cache."""
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

    net, (x,) = convbn()
    torch.compile(net, backend="aot_eager")(x.clone())  # the user's own compile, before fxviz
    entries = len(_debug_get_cache_entry_list(ConvBN.forward.__code__))
    assert entries > 0

    def fn(inp):
        return net(inp)

    tr = fxviz.trace(fn, x, backend="aot_eager")
    before = snapshot(net)  # after the trace: measure's own promise
    measured = tr.measure()
    assert_unchanged(net, before)
    assert len(_debug_get_cache_entry_list(ConvBN.forward.__code__)) == entries
    count = independent_count(net, (x,), "aot_eager")
    assert measured.saved_bytes == count["bytes"] == measured.estimated_bytes
    params = measured.saved[measured.saved["kind"] == "parameter"]["source"]
    assert any(str(s).endswith("features.0.weight") for s in params), list(params)
