import pytest
import torch

from aiayn import check_mask, padding_mask, subsequent_mask, target_mask


def test_padding_mask_marks_real_tokens_and_broadcasts_over_queries():
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    mask = padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 3) and mask.dtype == torch.bool
    assert mask.tolist() == [[[True, True, False]], [[True, False, False]]]


def test_subsequent_mask_is_lower_triangular_with_diagonal():
    mask = subsequent_mask(4)
    assert mask.dtype == torch.bool
    assert torch.equal(
        mask, torch.tensor([[i >= j for j in range(4)] for i in range(4)])
    )


def test_target_mask_combines_padding_and_causality():
    tgt = torch.tensor([[1, 2, 0]])
    mask = target_mask(tgt, pad_id=0)
    assert mask.shape == (1, 3, 3)
    expected = [[True, False, False], [True, True, False], [True, True, False]]
    assert mask[0].tolist() == expected


@pytest.mark.parametrize(
    ("shape", "scores"),
    [
        ((2, 1, 5), (2, 3, 5)),  # padding_mask: (B, 1, S)
        ((2, 3, 3), (2, 3, 3)),  # target_mask: (B, T, T)
        ((3, 3), (2, 3, 3)),  # subsequent_mask: (T, T), the same for every sequence
        ((5, 5), (2, 4, 5, 5)),  # ... and for every head
        ((1, 5), (2, 3, 5)),
        ((2, 1, 1, 5), (2, 4, 3, 5)),  # (B, 1, S) made ready for heads: (B, 1, 1, S)
        ((1, 3, 3), (2, 4, 3, 3)),  # (T, T) made ready for heads: (1, T, T)
    ],
)
def test_check_mask_accepts_the_documented_shapes(shape, scores):
    check_mask(torch.ones(shape, dtype=torch.bool), scores)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
def test_check_mask_rejects_non_bool_mask(dtype):
    with pytest.raises(TypeError, match=r"mask.*True means 'may attend'"):
        check_mask(torch.ones(2, 1, 5, dtype=dtype), (2, 3, 5))


@pytest.mark.parametrize("shape", [(2, 1, 4), (3, 3, 5), (1, 2, 3, 5), (5,)])
def test_check_mask_rejects_shapes_that_do_not_broadcast(shape):
    with pytest.raises(ValueError, match=r"mask of shape .* \(2, 3, 5\)"):
        check_mask(torch.ones(shape, dtype=torch.bool), (2, 3, 5))


@pytest.mark.parametrize(
    ("shape", "scores"),
    [
        ((3, 5), (3, 3, 5)),  # B == T = 3: it would broadcast, row b masking query b
        ((4, 5), (2, 4, 5)),  # a (T, S) mask outside self-attention
        ((2, 1, 5), (2, 4, 3, 5)),  # (B, 1, S) against heads: B would line up with h
    ],
)
def test_check_mask_rejects_a_key_padding_mask_without_its_middle_axis(shape, scores):
    expected = r"key-padding mask needs the middle axis: \(B, 1, S\)"
    with pytest.raises(ValueError, match=expected):
        check_mask(torch.ones(shape, dtype=torch.bool), scores)
