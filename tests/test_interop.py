import pytest
import torch
from torch import nn
from torch.testing import assert_close

from aiayn import (
    MultiHeadAttention,
    load_multihead_attention,
    padding_mask,
    store_multihead_attention,
    subsequent_mask,
    to_key_padding_mask,
    to_torch_mask,
)

D_MODEL, H = 16, 4


def loaded_pair():
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(D_MODEL, H, batch_first=True).eval()
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_(std=0.3)  # nonzero biases too
    ours = load_multihead_attention(MultiHeadAttention(D_MODEL, H), theirs).eval()
    return ours, theirs


def test_mask_conventions_are_opposite():
    mask = padding_mask(torch.tensor([[5, 6, 0]]), 0)
    assert torch.equal(to_torch_mask(mask), ~mask)
    # True = padding
    assert to_key_padding_mask(mask).tolist() == [[False, False, True]]


def test_multihead_attention_matches_pytorch_self_attention():
    ours, theirs = loaded_pair()
    x = torch.randn(3, 5, D_MODEL)
    expected, _ = theirs(x, x, x, need_weights=False)
    assert_close(ours(x, x, x), expected)


def test_multihead_attention_matches_pytorch_with_key_padding_mask():
    ours, theirs = loaded_pair()
    x, memory = torch.randn(2, 3, D_MODEL), torch.randn(2, 6, D_MODEL)
    # (B, 1, S)
    mask = padding_mask(torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]]), 0)
    expected, _ = theirs(x, memory, memory, key_padding_mask=to_key_padding_mask(mask))
    assert_close(ours(x, memory, memory, mask), expected)


def test_multihead_attention_matches_pytorch_with_causal_bool_mask_and_weights():
    ours, theirs = loaded_pair()
    x = torch.randn(2, 5, D_MODEL)
    mask = subsequent_mask(5)  # ours: True = may attend
    expected, their_weights = theirs(
        x,
        x,
        x,
        attn_mask=to_torch_mask(mask),
        need_weights=True,
        average_attn_weights=False,
    )
    weights = []
    ours.attention_weights.register_forward_hook(lambda m, i, w: weights.append(w))
    assert_close(ours(x, x, x, mask), expected)
    assert_close(weights[0], their_weights)


def test_multihead_attention_goes_back_to_pytorch():
    ours, _ = loaded_pair()
    theirs = store_multihead_attention(
        ours, nn.MultiheadAttention(D_MODEL, H, batch_first=True).eval()
    )
    x = torch.randn(2, 5, D_MODEL)
    assert_close(ours(x, x, x), theirs(x, x, x, need_weights=False)[0])
    back = load_multihead_attention(MultiHeadAttention(D_MODEL, H), theirs)
    for loaded, original in zip(back.parameters(), ours.parameters(), strict=True):
        assert torch.equal(loaded, original)


def test_load_rejects_mismatched_shapes_and_missing_biases():
    with pytest.raises(ValueError, match="d_model=16, h=4"):
        load_multihead_attention(
            MultiHeadAttention(16, 4), nn.MultiheadAttention(16, 2)
        )
    with pytest.raises(ValueError, match="biases"):
        load_multihead_attention(
            MultiHeadAttention(16, 4), nn.MultiheadAttention(16, 4, bias=False)
        )
