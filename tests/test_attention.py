import math

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from aiayn import (
    MultiHeadAttention,
    scaled_dot_product_attention,
    subsequent_mask,
)


def random_qkv(batch=2, heads=3, t=4, s=5, d_k=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, heads, t, d_k, generator=g),
        torch.randn(batch, heads, s, d_k, generator=g),
        torch.randn(batch, heads, s, d_k, generator=g),
    )


def random_mask(shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(shape, generator=g) > 0.4
    mask[..., 0] = True  # at least one key per query
    return mask


# --- scaled dot-product attention (Eq. 1)
# -------------------------------------------------


def test_sdpa_shapes_and_rows_sum_to_one():
    q, k, v = random_qkv()
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 4, 8)
    assert weights.shape == (2, 3, 4, 5)
    assert_close(weights.sum(-1), torch.ones(2, 3, 4))


def test_sdpa_equals_formula_written_out():
    q, k, v = random_qkv()
    expected = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(8), dim=-1) @ v
    assert_close(scaled_dot_product_attention(q, k, v)[0], expected)


def test_sdpa_matches_pytorch_without_mask():
    q, k, v = random_qkv()
    assert_close(
        scaled_dot_product_attention(q, k, v)[0],
        F.scaled_dot_product_attention(q, k, v),
    )


def test_sdpa_matches_pytorch_with_mask():
    q, k, v = random_qkv()
    mask = random_mask((2, 1, 4, 5))
    ours, _ = scaled_dot_product_attention(q, k, v, mask)
    assert_close(ours, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def test_masked_positions_get_exactly_zero_weight():
    q, k, v = random_qkv()
    mask = random_mask((2, 1, 4, 5))
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()
    assert_close(weights.sum(-1), torch.ones(2, 3, 4))


def test_causal_mask_gives_upper_triangle_zero():
    q, k, v = random_qkv(t=5, s=5)
    _, weights = scaled_dot_product_attention(q, k, v, subsequent_mask(5))
    assert (weights.triu(diagonal=1) == 0).all()


def test_fully_masked_row_gives_zeros_not_nan():
    q, k, v = random_qkv()
    mask = torch.ones(1, 1, 4, 5, dtype=torch.bool)
    mask[..., 2, :] = False  # query 2 may attend to nothing
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not weights.isnan().any()
    assert (weights[..., 2, :] == 0).all() and (out[..., 2, :] == 0).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_masked_attention_is_finite_in_half_precision(dtype):
    q, k, v = (t.to(dtype) * 30 for t in random_qkv())  # large scores
    mask = random_mask((2, 1, 4, 5))
    mask[0, 0, 1] = False
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert out.dtype == dtype
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    assert (weights[0, :, 1] == 0).all()


def test_sdpa_applies_dropout_module_to_weights():
    q, k, v = random_qkv()
    torch.manual_seed(0)
    _, weights = scaled_dot_product_attention(q, k, v, dropout=torch.nn.Dropout(0.5))
    assert (weights == 0).any()
    assert not torch.allclose(weights.sum(-1), torch.ones(2, 3, 4))


# --- multi-head attention
# --------------------------------------------------------------


def make_mha(d_model=16, h=4, seed=0, **kwargs):
    torch.manual_seed(seed)
    return MultiHeadAttention(d_model, h, **kwargs).eval()


def test_mha_rejects_d_model_not_divisible_by_h():
    with pytest.raises(ValueError, match=r"d_model=100 is not divisible by h=8"):
        MultiHeadAttention(100, 8)


def test_mha_shapes_self_and_cross_attention():
    mha = make_mha()
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 7, 16)
    assert mha(x, x, x).shape == (2, 3, 16)
    assert mha(x, memory, memory).shape == (2, 3, 16)
    assert mha(x, memory, memory.flip(1)).shape == (2, 3, 16)
    assert (mha.d_k, mha.h) == (4, 4)


def per_head_loop(mha, query, key, value, mask=None):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O with per-head weight slices."""
    heads = []
    for i in range(mha.h):
        rows = slice(i * mha.d_k, (i + 1) * mha.d_k)  # head i's W^Q_i, W^K_i, W^V_i
        q = query @ mha.w_q.weight[rows].T + mha.w_q.bias[rows]  # (B, T, d_k)
        k = key @ mha.w_k.weight[rows].T + mha.w_k.bias[rows]
        v = value @ mha.w_v.weight[rows].T + mha.w_v.bias[rows]
        scores = q @ k.transpose(-2, -1) / math.sqrt(mha.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ v)
    return mha.w_o(torch.cat(heads, dim=-1))


def test_mha_equals_loop_over_heads():
    mha = make_mha()
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 6, 16)
    mask = random_mask((2, 1, 6))
    assert_close(mha(x, x, x), per_head_loop(mha, x, x, x))
    assert_close(
        mha(x, memory, memory, mask),
        per_head_loop(mha, x, memory, memory, mask),
    )
    value = torch.randn(2, 6, 16)
    assert_close(mha(x, memory, value, None), per_head_loop(mha, x, memory, value))


def test_mha_fully_masked_row_gives_zero_heads_not_nan():
    mha = make_mha()
    x = torch.randn(2, 4, 16)
    mask = torch.ones(2, 4, 4, dtype=torch.bool)
    mask[1, 2] = False
    weights = []
    mha.attention_weights.register_forward_hook(lambda m, i, w: weights.append(w))
    out = mha(x, x, x, mask)
    assert not out.isnan().any() and (weights[0][1, :, 2] == 0).all()
    # with every key masked the head outputs are zero, leaving only the output bias
    assert_close(out[1, 2], mha.w_o.bias)


def test_mha_output_is_invariant_to_permuting_keys_and_values():
    mha = make_mha()
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 7, 16)
    mask = random_mask((2, 1, 7))
    perm = torch.randperm(7)
    permuted = memory[:, perm]
    assert_close(
        mha(x, memory, memory, mask), mha(x, permuted, permuted, mask[..., perm])
    )


def test_mha_rejects_float_mask_and_bad_shape():
    mha = make_mha()
    x = torch.randn(2, 3, 16)
    with pytest.raises(TypeError, match="mask"):
        mha(x, x, x, torch.ones(2, 1, 3))
    with pytest.raises(
        ValueError, match=r"mask of shape \(2, 1, 1, 4\).*\(2, 4, 3, 3\)"
    ):
        mha(x, x, x, torch.ones(2, 1, 4, dtype=torch.bool))
