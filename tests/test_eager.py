"""The eager reference row: what eager autograd saves, measured here with saved_tensors_hooks."""

from __future__ import annotations

import pytest
import torch

from fxviz import _torch
from fxviz.analysis.strategy.eager import measure_eager

from .conftest import SMALL, assert_unchanged, snapshot


def hooked_saves(model, inputs, reduce, params_require_grad=None, inputs_require_grad=None) -> dict[str, int]:
    """Storage bytes of everything eager autograd packs for the backward, by owner."""
    params = {n: p.detach().clone().requires_grad_(p.requires_grad if params_require_grad is None
                                                   else params_require_grad)
              for n, p in model.named_parameters()}
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    xs = []
    for x in inputs:
        c = x.detach().clone()
        if inputs_require_grad and c.is_floating_point():
            c = c.requires_grad_(True).clone()  # not a leaf: the model may write into it
        xs.append(c)
    owner = {t.untyped_storage().data_ptr(): "parameter" for t in list(params.values()) + list(buffers.values())}
    owner.update({t.untyped_storage().data_ptr(): "input" for t in xs})
    kept, storages = [], {}

    def pack(t):
        kept.append(t)
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    rng = torch.get_rng_state()
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            reduce(torch.func.functional_call(model, {**params, **buffers}, tuple(xs)))
    finally:
        torch.set_rng_state(rng)
    out = {"activation": 0, "parameter": 0, "input": 0}
    for ptr, nbytes in storages.items():
        out[owner.get(ptr, "activation")] += nbytes
    out["storages"] = len(storages)
    return out


@pytest.fixture(scope="module")
def aot_traces(example_models):
    """The examples traced with ``backend="aot_eager"``: AOTAutograd's own ops (native_batch_norm,
    native_dropout, max_pool2d_with_indices...), the ones eager runs, so that each tensor eager saves
    has a joint node to be named by.  Inductor's graph (the default) decomposes those ops: there its
    values stay unmapped (listed as such), and no partition of it keeps eager's storages."""
    import fxviz

    class _Lazy(dict):
        def __missing__(self, name):
            model, inputs = example_models[name]
            self[name] = fxviz.trace(model, *inputs, backend="aot_eager")
            return self[name]

    return _Lazy()


def _eager_row(tr):
    df = tr.memory_table(["eager"])
    assert df["error"].iloc[0] is None, df["error"].iloc[0]
    return df.iloc[0]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_eager_row_equals_saved_tensors_hooks(traces, example_models, name):
    tr = traces[(name, "lifted")]
    model, inputs = example_models[name]
    expected = hooked_saves(model, inputs, tr.capture.reduce)
    row = _eager_row(tr)
    assert row["saved_activation_bytes"] == expected["activation"]
    assert row["saved_param_bytes"] == expected["parameter"]
    assert row["saved_input_bytes"] == expected["input"]
    assert row["saved_storages"] == expected["storages"]


def test_eager_row_in_closure_mode_mirrors_the_capture(traces, example_models):
    """Closure capture: parameters are constants, floating inputs require grad; eager does the same."""
    tr = traces[("mlp", "closure")]
    model, inputs = example_models["mlp"]
    expected = hooked_saves(model, inputs, tr.capture.reduce, params_require_grad=False, inputs_require_grad=True)
    row = _eager_row(tr)
    assert row["saved_activation_bytes"] == expected["activation"]
    assert row["saved_param_bytes"] == expected["parameter"]
    assert "closure" in tr.memory_table(["eager"]).attrs["caption"]


@pytest.mark.parametrize("name", sorted(SMALL))
def test_every_saved_tensor_maps_to_a_joint_node_of_its_shape(aot_traces, name):
    tr = aot_traces[name]
    p = tr.partition("eager")
    assert p.reference and p.measurement is not None and p.forward is None and p.backward is None
    assert p.unmapped == []
    nodes = {n.name: n for n in tr.joint.graph.nodes}
    for s in p.measurement.saved:
        val = _torch.meta_val(nodes[s.joint])
        assert tuple(val.shape) == s.shape, s
        # CPU dropout's float mask corresponds to the graph's bool mask; every other dtype agrees
        assert str(val.dtype).replace("torch.", "") == s.dtype or (s.dtype == "float32" and val.dtype == torch.bool)
    assert p.saved == list(dict.fromkeys(s.joint for s in p.measurement.saved))


def _storages(tr, names):
    nodes = {n.name: n for n in tr.joint.graph.nodes}
    return {_torch.storage_key(_torch.meta_val(nodes[n])) for n in names
            if isinstance(_torch.meta_val(nodes[n]), torch.Tensor)}


@pytest.mark.parametrize("name", ["mlp", "pointwise_chain", "alexnet"])
def test_eager_saves_what_the_default_partition_saves(aot_traces, name):
    """Without fusion or recomputation, torch's default partition keeps exactly eager's storages;
    the bytes differ only by CPU dropout's float masks (the graph's are bool: a quarter)."""
    tr = aot_traces[name]
    eager, default = tr.partition("eager"), tr.partition("default")
    assert _storages(tr, eager.saved) == _storages(tr, default.saved)
    table = tr.memory_table(["default", "eager"])
    d, e = table.iloc[0], table.iloc[1]
    masks = eager.measurement.float_mask_bytes
    assert (masks > 0) == (name == "alexnet")
    assert e["saved_activation_bytes"] == d["saved_activation_bytes"] + masks - masks // 4
    assert e["saved_param_bytes"] == d["saved_param_bytes"]
    assert e["saved_input_bytes"] == d["saved_input_bytes"]
    if masks:
        assert "float mask" in table.attrs["caption"]


def test_batchnorm_eager_saves_the_running_stat_buffers_the_graph_saves_new_copies(aot_traces):
    """A real difference the table shows: eager's BatchNorm backward keeps the running-stat
    buffers (parameter-owned), the functional graph saves the updated running stats (new storages)."""
    tr = aot_traces["resnet_block"]
    table = tr.memory_table(["default", "eager"])
    d, e = table.iloc[0], table.iloc[1]
    stats = sum(b.numel() * b.element_size() for n, b in tr.capture.model.named_buffers() if "running" in n)
    assert d["saved_activation_bytes"] - e["saved_activation_bytes"] == stats
    assert e["saved_param_bytes"] - d["saved_param_bytes"] == stats


def test_measuring_eager_changes_nothing(example_models, traces):
    model, _ = example_models["alexnet"]
    tr = traces[("alexnet", "lifted")]
    before = snapshot(model)
    m = measure_eager(tr.capture, tr.graph)
    assert_unchanged(model, before)
    assert m.saves >= m.saved_tensors >= m.storages > 0
    assert all(p.grad is None for p in model.parameters())


class _WritesIntoInput(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        x.mul_(2)
        return self.lin(x).relu()


class _ForbidsHooks(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        with torch.autograd.graph.disable_saved_tensors_hooks("this model forbids saved-tensor hooks"):
            return self.lin(x).relu()


@pytest.mark.parametrize("params", ["lifted", "closure"])
def test_model_writing_into_its_input(params):
    """Closure mode makes the input require grad; eager then hands the model a non-leaf copy
    (a leaf requiring grad cannot be written in place), as AOTAutograd's functionalization allows."""
    import fxviz

    torch.manual_seed(0)
    model, x = _WritesIntoInput(), torch.randn(2, 4)
    tr = fxviz.trace(model, x, params=params)
    expected = hooked_saves(model, (x,), tr.capture.reduce, params_require_grad=params == "lifted",
                            inputs_require_grad=params == "closure")
    row = _eager_row(tr)
    assert (row["saved_activation_bytes"], row["saved_param_bytes"], row["saved_input_bytes"]) == (
        expected["activation"], expected["parameter"], expected["input"])


def test_eager_failure_is_an_error_row_not_a_crash():
    import fxviz

    tr = fxviz.trace(_ForbidsHooks(), torch.randn(2, 4))
    df = tr.memory_table(["default", "eager"])
    assert df["error"].iloc[0] is None and df["saved_activation_bytes"].iloc[0] > 0
    assert "this model forbids saved-tensor hooks" in df["error"].iloc[1]
    assert tr.partition("eager").error == df["error"].iloc[1]


def test_a_kv_cache_the_output_holds_is_not_called_checkpoint():
    """GPT-2 returns its KV cache (``past_key_values``, an object, not a pytree): its keys and values
    are alive after the forward because the output holds them, and the model has no checkpointing,
    so nothing is "held by checkpoint itself".  The reference is the model's own output: every
    storage the eager row counts as an activation is one autograd saved (saved_tensors_hooks)."""
    transformers = pytest.importorskip("transformers")
    import fxviz

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config)
    ids = torch.randint(0, 64, (2, 8))
    with torch.no_grad():
        cache = model(ids, use_cache=True).past_key_values
    assert cache is not None and not isinstance(cache, (tuple, list, dict))  # an object dynamo and pytree do not walk
    tr = fxviz.trace(lambda ids: model(ids, labels=ids, use_cache=True), ids)
    m = measure_eager(tr.capture, tr.graph)
    assert m.checkpoint_bytes == 0 and m.checkpoint_storages == 0
    assert all(t.held_by == "autograd" for t in m.saved)
    assert not any("checkpoint itself" in n for n in m.notes)
