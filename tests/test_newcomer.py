"""Issue 47: a newcomer's first hour outside the notebook (the notebook walk is
``test_browser.test_newcomer_walk_in_jupyter``): the README's Hugging Face factory on the CLI, called with
its keywords, and hints that fit the mistake made.  Every number is the Python API's on the same model,
whose numbers the rest of the suite checks against torch."""

from __future__ import annotations

import pathlib
import re

import pytest
import torch
from torch import nn

import fxviz
from fxviz.frontends.cli.entry import main

README = pathlib.Path(__file__).parent.parent / "README.md"


def _readme_factory() -> str:
    """The ``hf_llama.py`` the README's CLI section shows, as written there."""
    text = README.read_text(encoding="utf-8")
    block = text.split("# hf_llama.py\n", 1)[1].split("```", 1)[0]
    return block


def test_cli_walk_of_the_readmes_hugging_face_factory(tmp_path, capsys):
    """The README's factory returns (model, {"input_ids": ids, "labels": ids}); the CLI calls the model with
    those keywords, its own .loss is the loss (applied outside the graph, as the step applies it), and the
    saved table lists min_cut's activations first, min_cut's column first, default_partition named so."""
    pytest.importorskip("transformers")
    (tmp_path / "hf_llama.py").write_text(_readme_factory())
    spec = f"{tmp_path / 'hf_llama.py'}:make"
    assert main(["nodes", spec]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "LlamaForCausalLM: joint graph" in out and "1 primal" in out  # input_ids, and labels: the same tensor
    assert "loss = the model's own loss (output .loss), applied outside the graph" in out
    assert "views show min_cut (what torch.compile does) by default" in out

    assert main(["saved", spec, "--top", "0"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    head = " ".join(lines[:2])
    assert "saved for the backward by strategy min_cut (what torch.compile does)" in head
    assert "A = min_cut (listed), B = default_partition" in " ".join(text.split())
    rows = [line for line in lines if re.match(r"^\s*\d+\s+\S+\s+(act|param|input|size|off)\s", line)]
    kinds = [line.split()[2] for line in rows]
    held = lines.index(next(line for line in lines if line.startswith("held anyway")))
    first_held = next(i for i, k in enumerate(kinds) if k in ("param", "input"))
    assert kinds[0] == "act" and set(kinds[:first_held]) <= {"act", "size", "off"}
    assert set(kinds[first_held:]) <= {"param", "input"}
    assert all(lines.index(r) > held for r in rows if r.split()[2] in ("param", "input"))

    # the same model traced in Python with the same keywords: the CLI's rows are its rows
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, use_cache=False)
    ids = torch.randint(0, 128, (2, 16))
    tr = fxviz.trace(LlamaForCausalLM(config), input_ids=ids, labels=ids)
    df = tr.saved()
    names = [line.split()[1] for line in rows]  # a long name is cut to its column: "convert_element…"
    assert len(names) == len(df) and all(n == m or (n.endswith("…") and m.startswith(n[:-1]))
                                         for n, m in zip(names, df.index))
    assert df.columns[9] == "min_cut" and set(df["min_cut"]) == {"saved"}
    assert tr.capture.loss_outside and tr.capture.loss == "loss = the model's own loss (output .loss), applied " \
        "outside the graph as the step applies it"


def test_input_names_strategies_and_options_suggest_what_was_meant():
    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
            return self.fc(input_ids).sum()

    x = torch.randn(3, 4)
    with pytest.raises(fxviz.InputError) as err:  # issue 47: "bind them in a wrapper: lambda x: ..."
        fxviz.trace(Model(), input_id=x)
    assert err.value.message == "the model takes no input named 'input_id'"
    assert err.value.hint.startswith("did you mean 'input_ids'? fxviz.trace(model, input_ids=...)")
    with pytest.raises(fxviz.InputError) as err:
        fxviz.trace(Model(), x, backnd="inductor")
    assert "did you mean the option backend=" in err.value.hint
    with pytest.raises(fxviz.StrategyError) as err:
        fxviz.trace(Model(), x).partition("min-cutt")
    assert err.value.hint.startswith("did you mean 'min_cut'? valid forms:")
    with pytest.raises(fxviz.StrategyError) as err:
        fxviz.trace(Model(), x).partition("budgt:0.3")
    assert err.value.hint.startswith("did you mean 'budget:0.3'?")
    with pytest.raises(fxviz.InputError) as err:
        fxviz.trace(Model(), x).draw("jiont")
    assert "did you mean 'joint'" in str(err.value)
    with pytest.raises(fxviz.InputError) as err:  # a dict passed where keywords go: said as that
        fxviz.trace(Model(), {"input_ids": x})
    assert "fxviz.trace(model, **inputs)" in err.value.hint


def test_a_meta_model_with_real_inputs_is_named_as_that():
    """Issue 47: a Hugging Face model on the meta device with CPU ids and labels got "Found DynamicCache in
    output ... register a pytree" and a hint to use capture_route='dynamo', the route it was on."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=4, num_key_value_heads=2)
    with torch.device("meta"):
        model = transformers.LlamaForCausalLM(config)
    ids = torch.randint(0, 128, (1, 8))
    with pytest.raises(fxviz.InputError) as err:
        fxviz.trace(model, ids, labels=ids)
    assert err.value.message.startswith("the model is on the meta device, and its input(s) input_ids, labels on cpu")
    assert "input_ids.to('meta')" in err.value.hint and "dynamo" not in err.value.hint


def test_a_meta_capture_says_so_in_the_summary_and_every_title():
    """A model on the meta device is traced by aot_function over fake tensors, with AOTAutograd's graph and
    default_partition, not what torch.compile runs: said beside every number, not only in the repr."""
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    tr = fxviz.trace(model, torch.empty(2, 4, device="meta"))
    assert tr.capture.route == "aot" and tr.default_strategy.name == "default_partition"
    summary = " ".join(tr.summary().split())
    assert "note: the model is on the meta device, which torch.compile cannot run" in summary
    assert "shown with default_partition" in summary
    tag = "[on the meta device: aot_function's graph, not torch.compile's]"
    assert tag in tr.draw().caption and tag in tr.draw("backward").caption
    from fxviz.payloads.report import report_data

    assert tag in report_data(tr, strategies=["default"], views=("joint",))["title"]
    plain = fxviz.trace(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)), torch.randn(2, 4))
    assert "note:" not in plain.summary() and "[" not in plain.capture.title
