"""``Trace.replay(strategies)``: each partition's graphs run on real tensors, the bytes alive by
storage after every node beside the memory table's liveness walk over fake tensors.  The saved
bytes are checked against the test's own run of the forward graph module (storages by data pointer),
and the model (batch-norm statistics included) is left as it was."""

from __future__ import annotations

import pytest
import torch

import fxviz
from fxviz.analysis.real.replay import REPLAYED_COLUMNS
from fxviz.sources.roles import STATE_ROLES

from .conftest import assert_unchanged, make_example, snapshot
from .test_measure import convbn

STRATEGIES = "default,min_cut,budget:0.5,recompute_all,eager"


def own_saved_bytes(tr, strategy: str) -> int:
    """The test's own count: the forward graph module called on clones of the capture's tensors, the
    storages of its saved outputs that are not a parameter's or an input's, each once."""
    part = tr.partition(strategy)
    args, held = [], set()
    for n in part.forward.graph.nodes:
        if n.op != "placeholder":
            continue
        joint = part.fw_to_joint.get(n.name, n.name)
        v = tr.graph.placeholder_values[joint]
        v = v.detach().clone() if isinstance(v, torch.Tensor) else v
        if isinstance(v, torch.Tensor) and tr.graph.info[joint].role in (*STATE_ROLES, "primal"):
            held.add(v.untyped_storage().data_ptr())
        args.append(v)
    with torch.no_grad():
        out = part.forward(*args)
    saved = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
             for t in out[tr.graph.num_fwd_outputs:] if isinstance(t, torch.Tensor)}
    return sum(b for k, b in saved.items() if k not in held)


@pytest.mark.parametrize("name", ["convbn", "mini_gpt"])
def test_replayed_twins_equal_the_estimates(name):
    model, inputs = convbn() if name == "convbn" else make_example("mini_gpt")
    loss = (lambda out: out.sum()) if name == "convbn" else (lambda out: out)
    tr = fxviz.trace(model, *inputs, backend="aot_eager", loss_fn=loss)
    before = snapshot(model)
    table = tr.replay(STRATEGIES)
    assert_unchanged(model, before)  # the forward graph updates batch norm's statistics: on clones
    assert list(table.columns[-len(REPLAYED_COLUMNS):]) == REPLAYED_COLUMNS
    for _, row in table.iterrows():
        if row["strategy"] == "eager":  # measured, not partitioned: nothing to replay, said so
            assert row[REPLAYED_COLUMNS].isna().all()
            assert "eager" in table.attrs["caption"].split("Not replayed:")[1]
            continue
        assert int(row["replayed_saved_activation_bytes"]) == own_saved_bytes(tr, row["strategy"])
        for estimate in ("saved_activation_bytes", "forward_peak_bytes", "backward_peak_bytes"):
            assert int(row[f"replayed_{estimate}"]) == int(row[estimate]), (row["strategy"], estimate)
        assert row["replayed_forward_seconds"] > 0 and row["replayed_backward_seconds"] > 0
    assert "replayed_saved_activation_bytes" in table.to_text()
