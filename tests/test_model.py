import dataclasses
import math

import pytest
import torch
from torch.testing import assert_close

from aiayn import (
    LearnedPositionalEmbedding,
    Transformer,
    TransformerConfig,
    attention_maps,
    padding_mask,
    scaled_dot_product_attention,
    target_mask,
)

SMALL = dict(d_model=16, h=4, encoder_layers=2, decoder_layers=2, d_ff=32)
SRC = torch.tensor([[3, 4, 5, 6, 7], [3, 4, 5, 0, 0]])  # 0 = padding
TGT = torch.tensor([[1, 8, 9, 2], [1, 8, 0, 0]])


def small_model(src_vocab=11, tgt_vocab=11, seed=0, **kwargs):
    torch.manual_seed(seed)
    fields = {**SMALL, "dropout": 0.0, **kwargs}
    config = TransformerConfig(src_vocab=src_vocab, tgt_vocab=tgt_vocab, **fields)
    return Transformer(config).eval()


def masks(src=SRC, tgt=TGT):
    return padding_mask(src, 0), target_mask(tgt, 0)


def test_forward_returns_logits_of_the_right_shape():
    model = small_model(tgt_vocab=13)
    logits = model(SRC, TGT, *masks())
    assert logits.shape == (2, 4, 13)
    # logits, not probabilities
    assert not torch.allclose(logits.sum(-1), torch.ones(2, 4))
    assert model.encode(SRC, masks()[0]).shape == (2, 5, 16)


def test_forward_equals_encode_then_decode_then_projection():
    model = small_model()
    src_mask, tgt_mask = masks()
    memory = model.encode(SRC, src_mask)
    expected = model.output_projection(model.decode(memory, src_mask, TGT, tgt_mask))
    assert_close(model(SRC, TGT, src_mask, tgt_mask), expected)


def test_default_target_mask_is_causal():
    model = small_model()
    tgt = torch.tensor([[1, 8, 9, 2]])
    changed = torch.tensor([[1, 8, 9, 5]])
    src = SRC[:1]
    assert_close(model(src, tgt)[:, :3], model(src, changed)[:, :3])


def test_three_way_weight_tying_is_one_tensor():
    model = small_model()
    shared = model.tgt_embed.embedding.weight
    assert model.src_embed.embedding.weight is shared
    assert model.output_projection.weight is shared
    n_params = sum(p.numel() for p in model.parameters())
    untied = small_model(tie_weights=False)
    assert sum(p.numel() for p in untied.parameters()) == n_params + 2 * 11 * 16


def test_tying_with_different_vocabularies_ties_target_side_only():
    model = small_model(src_vocab=7, tgt_vocab=11)
    assert model.output_projection.weight is model.tgt_embed.embedding.weight
    assert model.src_embed.embedding.weight.shape == (7, 16)
    untied = small_model(src_vocab=7, tgt_vocab=11, tie_weights=False)
    assert untied.output_projection.weight is not untied.tgt_embed.embedding.weight
    src = torch.tensor([[1, 6, 2]])
    assert untied(src, TGT[:1]).shape == (1, 4, 11)


def test_every_matrix_is_xavier_initialised():
    """W^Q, W^K and W^V with the bound of the three side by side, as
    nn.MultiheadAttention's one stacked matrix; every other matrix its own."""
    model = small_model()
    for name, p in model.named_parameters():
        if p.dim() > 1:
            fan_out, fan_in = p.shape
            if name.endswith(("w_q.weight", "w_k.weight", "w_v.weight")):
                fan_out *= 3  # d_k = d_v here
            bound = math.sqrt(6 / (fan_in + fan_out))
            assert p.abs().max() <= bound, name
            assert p.abs().max() > 0.8 * bound, name


def test_embedding_scale_is_applied_in_the_model():
    model = small_model()
    x = model.src_embed(SRC)
    assert_close(x, model.src_embed.embedding.weight[SRC] * 4.0)  # sqrt(16)


def test_full_model_padding_invariance():
    """Extra (masked) source and target padding leave the real logits unchanged."""
    model = small_model()
    src, tgt = torch.tensor([[3, 4, 5]]), torch.tensor([[1, 8, 9]])
    src_padded, tgt_padded = (
        torch.tensor([[3, 4, 5, 0, 0]]),
        torch.tensor([[1, 8, 9, 0]]),
    )
    expected = model(src, tgt, *masks(src, tgt))
    padded = model(src_padded, tgt_padded, *masks(src_padded, tgt_padded))
    assert_close(padded[:, :3], expected)


def test_config_rebuilds_the_model():
    model = small_model()
    clone = Transformer(model.config)
    clone.load_state_dict(model.state_dict())
    clone.eval()
    assert_close(clone(SRC, TGT, *masks()), model(SRC, TGT, *masks()))
    assert model.config.d_model == 16 and model.config.tie_weights is True


def test_a_config_rejects_an_unknown_positional_encoding():
    model = small_model()
    with pytest.raises(ValueError, match="positional='rotary'"):
        dataclasses.replace(model.config, positional="rotary")


def test_learned_positions_and_key_value_widths_plug_in():
    """Table 3's row E (learned positions) and row B (d_k, d_v) are options."""
    model = small_model(positional="learned", d_k=3, d_v=5)
    assert isinstance(model.positional, LearnedPositionalEmbedding)
    attention = model.decoder.layers[0].cross_attn
    # W^Q, W^K: h d_k outputs each, W^V: h d_v; W^O maps h d_v back to d_model
    assert attention.w_q.weight.shape == attention.w_k.weight.shape == (4 * 3, 16)
    assert attention.w_v.weight.shape == (4 * 5, 16)
    assert attention.w_o.weight.shape == (16, 4 * 5)
    assert model(SRC, TGT, *masks()).shape == (*TGT.shape, 11)


def test_same_seed_same_model_and_output():
    a, b = small_model(seed=3, dropout=0.1), small_model(seed=3, dropout=0.1)
    a.train(), b.train()
    torch.manual_seed(1)
    out_a = a(SRC, TGT, *masks())
    torch.manual_seed(1)
    out_b = b(SRC, TGT, *masks())
    assert torch.equal(out_a, out_b)
    assert not torch.equal(out_a, a.eval()(SRC, TGT, *masks()))  # dropout did something


def test_attention_maps_are_returned_not_stored():
    model = small_model()
    src_mask, tgt_mask = masks()
    state = {k: v for m in model.modules() for k, v in vars(m).items()}
    maps = attention_maps(model, SRC, TGT, src_mask, tgt_mask)
    assert {k: v for m in model.modules() for k, v in vars(m).items()}.keys() == (
        state.keys()
    )
    assert [len(maps[k]) for k in ("encoder_self", "decoder_self", "cross")] == [
        2,
        2,
        2,
    ]
    assert all(w.shape == (2, 4, 5, 5) for w in maps["encoder_self"])
    assert all(w.shape == (2, 4, 4, 4) for w in maps["decoder_self"])
    assert all(w.shape == (2, 4, 4, 5) for w in maps["cross"])
    for weights in maps["cross"]:
        assert (weights[1, :, :, 3:] == 0).all()  # source padding gets no attention
    for weights in maps["decoder_self"]:
        assert (weights.triu(diagonal=1) == 0).all()  # no attention to the future
    # the weights of the first layer are those of Eq. (1) on its projections
    x = model.positional(model.src_embed(SRC))
    attention = model.encoder.layers[0].self_attn
    q, k, v = (
        attention.split_heads(w(x), 4)
        for w in (attention.w_q, attention.w_k, attention.w_v)
    )
    _, weights = scaled_dot_product_attention(q, k, v, src_mask.unsqueeze(1))
    assert_close(maps["encoder_self"][0], weights)


def test_bad_token_ids_and_lengths_raise_clear_errors():
    model = small_model(max_positions=6)
    with pytest.raises(ValueError, match=r"tokens .*vocab_size=11"):
        model(torch.tensor([[3, 11]]), TGT[:1])
    with pytest.raises(ValueError, match=r"tokens .*vocab_size=11"):
        model(SRC[:1], torch.tensor([[1, -1]]))
    with pytest.raises(ValueError, match=r"sequence length 7 exceeds max_positions=6"):
        model(torch.ones(1, 7, dtype=torch.long), TGT[:1])


def test_base_model_parameter_count_on_meta_device():
    with torch.device("meta"):
        model = Transformer(TransformerConfig(src_vocab=37000, tgt_vocab=37000))
    # the shared matrix counted once
    n_params = sum(p.numel() for p in model.parameters())
    assert model.output_projection.weight.is_meta
    assert n_params == 63_082_496
    assert 60e6 < n_params < 65e6


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_model_runs_on_cuda():
    model = small_model().cuda()
    src, tgt = SRC.cuda(), TGT.cuda()
    src_mask, tgt_mask = masks(src, tgt)
    logits = model(src, tgt, src_mask, tgt_mask)
    assert logits.device.type == "cuda" and torch.isfinite(logits).all()
    assert_close(logits.cpu(), small_model()(SRC, TGT, *masks()), atol=1e-4, rtol=1e-4)
    fully_masked = torch.zeros(2, 1, 5, dtype=torch.bool, device="cuda")
    assert torch.isfinite(model(src, tgt, fully_masked, tgt_mask)).all()
