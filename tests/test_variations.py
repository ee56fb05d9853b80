"""Model variations (Table 3): rows, perplexity, a row's run; row E's option."""

import math

import pytest
import torch
from torch import Tensor, nn

from aiayn.model.embeddings import PositionalEncoding
from aiayn.model.transformer import Transformer
from aiayn.tasks import get_task, held_out_sources
from aiayn.tools.variations import ROWS, perplexity, row_config, run_row
from aiayn.train.checkpoints import load_checkpoint, save_checkpoint
from aiayn.train.config import TrainConfig
from aiayn.train.state import new_run

TASK_OBJECT = get_task(row_config({}, 0).task)
SOURCES = held_out_sources(TASK_OBJECT, "validation", 8)


class ConstantLogits(nn.Module):
    """A stand-in model: the same logits at every position, (B, T, V)."""

    def __init__(self, logits: Tensor):
        super().__init__()
        self.logits = logits

    def forward(self, src, tgt, src_mask=None, tgt_mask=None) -> Tensor:
        return self.logits.expand(tgt.size(0), tgt.size(1), -1)


def test_a_uniform_model_has_the_vocabulary_size_as_perplexity():
    vocab = len(TASK_OBJECT.tgt_tokenizer)
    model = ConstantLogits(torch.zeros(vocab))
    assert perplexity(model, TASK_OBJECT, SOURCES) == pytest.approx(vocab, rel=1e-5)


def test_perplexity_counts_every_target_token_and_no_padding():
    """Sources of different lengths (so some padding); a model certain of the end
    token gives it probability p and spreads the rest over the other tokens."""
    sources = ["1", "1 2 3 4 5 6"]
    tokenizer = TASK_OBJECT.tgt_tokenizer
    logits = torch.zeros(len(tokenizer))
    logits[tokenizer.eos_id] = 3.0
    p_eos = logits.softmax(-1)[tokenizer.eos_id].item()
    p_other = logits.softmax(-1)[0].item()
    real_tokens = [len(TASK_OBJECT.target(s).split()) for s in sources]  # + </s> each
    nll = len(sources) * -math.log(p_eos) + sum(real_tokens) * -math.log(p_other)
    expected = math.exp(nll / (sum(real_tokens) + len(sources)))
    got = perplexity(ConstantLogits(logits), TASK_OBJECT, sources)
    assert got == pytest.approx(expected, rel=1e-6)


def test_every_row_is_a_valid_change_of_the_base_run():
    groups = [group for group, _ in ROWS]
    assert groups[0] == "base" and set(groups) == {"base", "A", "B", "C", "D", "E"}
    for _, changes in ROWS:
        config = row_config(changes, 0, steps=10)
        model_fields = vars(config.model_config) | vars(config)
        assert all(model_fields[name] == value for name, value in changes.items())


def test_heads_rows_keep_the_computation_constant():
    """Rows A: h * d_k = d_model, so the attention projections keep their size."""

    def attention_size(changes: dict) -> int:
        model = Transformer(row_config(changes, 0, steps=1).model_config)
        return sum(p.numel() for p in model.encoder.layers[0].self_attn.parameters())

    heads_rows = [changes for group, changes in ROWS if group == "A"]
    assert len(heads_rows) >= 2
    assert {attention_size(changes) for changes in heads_rows} == {attention_size({})}


def test_a_row_run_is_reproducible_and_reports_its_scores():
    first = run_row({"encoder_layers": 1, "decoder_layers": 1}, 3, steps=2)
    second = run_row({"encoder_layers": 1, "decoder_layers": 1}, 3, steps=2)
    timing = {"seconds", "cpu_seconds"}
    assert {k: v for k, v in first.items() if k not in timing} == {
        k: v for k, v in second.items() if k not in timing
    }
    assert first["steps"] == 2 and first["perplexity"] > 1.0
    assert 0.0 <= first["exact_match"] <= first["token_accuracy"] <= 1.0


def test_a_checkpoint_from_before_row_e_loads_with_sinusoids(tmp_path):
    """Checkpoints whose model config has no `positional` field still load."""
    config = TrainConfig(
        model_config=row_config({"d_model": 16, "h": 2}, 0).model_config,
        device="cpu",
    )
    path = tmp_path / "old.pt"
    save_checkpoint(new_run(config), path)
    saved = torch.load(path, weights_only=True)
    del saved["config"]["model_config"]["positional"]
    torch.save(saved, path)
    state = load_checkpoint(path)
    assert state.config.model_config.positional == "sinusoidal"
    assert isinstance(state.model.positional, PositionalEncoding)
