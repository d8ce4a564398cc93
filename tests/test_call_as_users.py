"""Models as users call them (issue 32 item 3): keyword inputs, the model's own ``.loss``, and a
``loss_fn`` applied where the user's step applies it.

The reference is a real ``torch.compile(model)`` training step run in a fresh process with
``TORCH_TRACE`` (``tests/compile_log.py`` reads its log): the tangents its backward graph takes and the
values its forward saves must be fxviz's.  Both sides use the ``aot_eager`` backend (fxviz's default
capture; torch.compile then partitions with min-cut, fxviz's ``min_cut`` strategy), so
the comparison is exact and fast.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import fxviz
from fxviz.core.errors import InputError

from .compile_log import read_log, saved_of_backward
from .logs_util import cached_log


class KeywordModel(nn.Module):
    """Takes keywords and returns a dict with ``loss`` (when given labels) and ``logits``, as a
    Hugging Face causal LM does."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.head = nn.Linear(8, 16)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                labels: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        logits = self.head(torch.tanh(self.emb(input_ids)))
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = nn.functional.cross_entropy(logits.view(-1, 16), labels.view(-1))
        return out


def _keyword_model() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return KeywordModel(), torch.randint(0, 16, (2, 5))


def _gpt2() -> tuple[nn.Module, torch.Tensor]:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config), torch.randint(0, 32, (2, 6))


def model_vocab(model: nn.Module) -> int:
    return model.head.out_features if isinstance(model, KeywordModel) else model.config.vocab_size


def _logits_loss(out):
    return out["logits"].float().pow(2).mean()


# the user's steps, as a script runs them: (what fxviz is given, the step the real run compiles)
STEPS = {
    "own_loss": "out = torch.compile(model, backend='aot_eager')(input_ids=ids, labels=ids)\n"
                "out['loss'].backward()",
    "loss_fn_outside": "out = torch.compile(model, backend='aot_eager')(ids)\n"
                       "(out['logits'].float().pow(2).mean()).backward()",
    "compile_loss": "step = torch.compile(lambda ids: model(ids)['logits'].float().pow(2).mean(),\n"
                    "                     backend='aot_eager')\n"
                    "step(ids).backward()",
}

_SCRIPT = """
import torch
from tests.test_call_as_users import {factory} as factory
model, ids = factory()
{step}
"""


def _real_step(factory: str, step: str) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """Run the user's step for real with TORCH_TRACE (``logs_util.cached_log``); for each backward graph in
    compile order (a graph break makes several), what its forward saved and its tangents as (name,
    "dtype[shape]")."""
    log = cached_log(_SCRIPT.format(factory=factory, step=STEPS[step]))
    out = []
    for g in read_log(log):
        if g.kind == "aot_backward_graph":
            # "f32[2, 5, 16][80, 16, 1]cpu": dtype and shape (then strides and device)
            tangents = [(name, re.match(r"\w+\[[^\]]*\]", t).group(0))
                        for name, t in re.findall(r'^\s*(tangents_\d+): "([^"]*)"', g.code, re.M)]
            out.append((saved_of_backward(g.code), tangents))
    return out


def _fxviz_tangents(tr: fxviz.Trace) -> list[tuple[str, str]]:
    out = []
    for n in tr.joint.graph.nodes:
        if n.op == "placeholder" and tr.graph.info[n.name].role == "tangent":
            t = n.meta["val"]
            dtype = {torch.float32: "f32", torch.int64: "i64", torch.bool: "b8"}.get(t.dtype, str(t.dtype))
            out.append((n.name, f"{dtype}[{', '.join(str(s) for s in t.shape)}]"))
    return out


def _trace(model: nn.Module, ids: torch.Tensor, step: str) -> fxviz.Trace:
    if step == "own_loss":
        return fxviz.trace(model, input_ids=ids, labels=ids, backend="aot_eager")  # the real steps' backend
    return fxviz.trace(model, ids, loss_fn=_logits_loss, compile_loss=step == "compile_loss", backend="aot_eager")


@pytest.mark.parametrize("factory", ["_keyword_model", pytest.param("_gpt2", marks=pytest.mark.slow)])
@pytest.mark.parametrize("step", sorted(STEPS))
def test_saved_set_and_tangents_are_the_real_steps(factory, step):
    model, ids = globals()[factory]()
    tr = _trace(model, ids, step)
    real = _real_step(factory, step)
    pieces = [p for p in tr.pieces if p.graph.has_backward]
    assert len(pieces) == len(real) >= 1
    for piece, (saved, tangents) in zip(pieces, real):
        assert _fxviz_tangents(piece) == tangents
        assert piece.partition("min_cut").saved == saved
    assert tr.capture.loss_outside == (step != "compile_loss")
    every = [t for p in pieces for _, t in _fxviz_tangents(p)]
    if step == "compile_loss":  # the loss is the graph's one output: one scalar tangent
        assert every == ["f32[]"]
    else:  # the graphs return the model's outputs: the logits' gradient comes in as a tangent
        assert any(t.endswith(f"{model_vocab(model)}]") for t in every), every
    grads = tr.check_gradients()
    assert grads["ok"].all(), grads.to_string()


def test_keyword_inputs_are_bound_and_named():
    model, ids = _keyword_model()
    tr = fxviz.trace(model, input_ids=ids, labels=ids)
    assert tr.capture.input_names == ["input_ids", "attention_mask", "labels"]
    assert "own loss" in tr.capture.loss
    same = fxviz.trace(model, inputs={"input_ids": ids, "labels": ids})
    assert same.partition("default").saved == tr.partition("default").saved
    with pytest.raises(InputError, match="both"):
        fxviz.trace(model, ids, input_ids=ids)
    with pytest.raises(InputError, match=r"takes no input named 'labelz'.*did you mean 'labels'"):
        fxviz.trace(model, ids, labelz=ids)
    with pytest.raises(InputError, match="both as keywords and in inputs"):
        fxviz.trace(model, input_ids=ids, inputs={"input_ids": ids})


def test_a_keyword_that_is_an_fxviz_option_goes_in_inputs():
    class TakesParams(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x: torch.Tensor, params: torch.Tensor | None = None) -> torch.Tensor:
            return self.lin(x if params is None else x * params).sum()

    x, p = torch.randn(2, 4), torch.randn(4)
    tr = fxviz.trace(TakesParams(), x, inputs={"params": p})
    assert tr.capture.input_names == ["x", "params"]
    assert any(i.role == "primal" and i.qualname == "params" for i in tr.graph.info.values())
