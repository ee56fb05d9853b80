import math

import pytest
import torch
from torch.testing import assert_close

from aiayn import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    TokenEmbedding,
    sinusoidal_encoding,
)


def test_token_embedding_is_scaled_by_sqrt_d_model():
    torch.manual_seed(0)
    embed = TokenEmbedding(vocab_size=10, d_model=16)
    tokens = torch.tensor([[1, 2, 3], [4, 5, 9]])
    out = embed(tokens)
    assert out.shape == (2, 3, 16)
    assert_close(out, embed.embedding.weight[tokens] * 4.0)


@pytest.mark.parametrize("bad", [-1, 10, 11])
def test_token_embedding_rejects_ids_outside_vocabulary(bad):
    embed = TokenEmbedding(vocab_size=10, d_model=16)
    with pytest.raises(ValueError, match=r"tokens .*vocab_size=10"):
        embed(torch.tensor([[1, bad]]))


def test_sinusoidal_encoding_equals_closed_formula():
    d_model = 16
    pe = sinusoidal_encoding(200, d_model)
    assert pe.shape == (200, d_model) and pe.dtype == torch.float32
    for pos in (0, 1, 7, 199):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert math.isclose(pe[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(
                pe[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6
            )


def test_offset_k_is_the_same_rotation_for_every_position():
    """PE(pos + k) = M_k PE(pos): a fixed 2x2 rotation per (sin, cos) frequency pair."""
    d_model, k = 8, 5
    pe = sinusoidal_encoding(100, d_model).double()
    pairs = pe.view(100, d_model // 2, 2)  # (pos, i, [sin, cos])
    omega = 1 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    c, s = torch.cos(k * omega), torch.sin(k * omega)
    # (i, 2, 2)
    rotation = torch.stack([torch.stack([c, s], -1), torch.stack([-s, c], -1)], -2)
    # sin(a + b) = sin a cos b + cos a sin b;  cos(a + b) = cos a cos b - sin a sin b
    shifted = torch.einsum("pij,ikj->pik", pairs[:-k], rotation)
    assert_close(shifted, pairs[k:], atol=1e-6, rtol=0)


def test_sinusoidal_encoding_rejects_odd_d_model():
    with pytest.raises(ValueError, match="d_model=7"):
        sinusoidal_encoding(10, 7)
    with pytest.raises(ValueError, match="d_model=7"):
        PositionalEncoding(7)


def test_positional_encoding_adds_pe_and_is_a_non_persistent_buffer():
    module = PositionalEncoding(d_model=8, max_positions=50)
    x = torch.randn(2, 6, 8)
    assert_close(module(x), x + sinusoidal_encoding(6, 8))
    assert module.pe.shape == (50, 8)
    assert "pe" not in module.state_dict()
    assert not any(p is module.pe for p in module.parameters())


@pytest.mark.parametrize("cls", [PositionalEncoding, LearnedPositionalEmbedding])
def test_positional_modules_reject_sequences_longer_than_max_positions(cls):
    module = cls(8, max_positions=5)
    assert module(torch.zeros(1, 5, 8)).shape == (1, 5, 8)
    with pytest.raises(ValueError, match=r"6 exceeds max_positions=5"):
        module(torch.zeros(1, 6, 8))


def test_learned_positional_embedding_is_trained():
    module = LearnedPositionalEmbedding(8, max_positions=10)
    x = torch.randn(2, 4, 8)
    assert_close(module(x), x + module.pe[:4])
    module(x).sum().backward()
    assert module.pe.grad[:4].abs().sum() > 0 and (module.pe.grad[4:] == 0).all()
