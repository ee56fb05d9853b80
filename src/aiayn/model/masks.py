"""Attention masks.

One convention everywhere in this package: a mask is a boolean tensor and ``True`` means
"this query position may attend to this key position". Masks broadcast against the
attention scores, whose last two axes are (queries, keys).

torch.nn.MultiheadAttention uses the opposite convention for boolean masks (True =
masked); aiayn.model.interop converts at that boundary.
"""

from collections.abc import Sequence

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int) -> Tensor:
    """Mask out padding keys: (B, S) token ids -> (B, 1, S), True where not padding.

    The middle axis of size 1 broadcasts over query positions: every query sees the same
    keys.
    """
    return (tokens != pad_id).unsqueeze(-2)  # (B, S) -> (B, 1, S)


def subsequent_mask(size: int, device: torch.device | str | None = None) -> Tensor:
    """Causal mask (size, size): query ``t`` may attend to keys ``0..t``."""
    return torch.ones(size, size, dtype=torch.bool, device=device).tril()


def target_mask(tgt: Tensor, pad_id: int) -> Tensor:
    """Decoder self-attention mask (B, T, T): no padding keys, no future positions."""
    causal = subsequent_mask(tgt.size(-1), device=tgt.device)  # (T, T)
    return padding_mask(tgt, pad_id) & causal  # (B, 1, T) & (T, T) -> (B, T, T)


def check_mask(mask: Tensor, scores_shape: Sequence[int]) -> None:
    """Raise a clear error unless ``mask`` is a boolean mask of one of the shapes above.

    The scores are (..., T, S): queries, keys. A mask either has the scores' rank, keys
    last and T or 1 queries before them, each axis the scores' size or 1: padding_mask's
    (B, 1, S), target_mask's (B, T, T). Or it is the same for every sequence, with fewer
    axes, all 1 but the last two: (T, T) in self-attention, like subsequent_mask's, or
    (1, S). PyTorch's (B, S) key-padding mask is neither: it would line up the batch
    with the queries. (Only when B == T == S can no shape tell it from a (T, T) mask.)
    """
    if mask.dtype != torch.bool:
        raise TypeError(
            "mask must be a torch.bool tensor (True means 'may attend'), "
            f"got dtype {mask.dtype}"
        )
    scores_shape, shape = tuple(scores_shape), tuple(mask.shape)
    *_, queries, keys = scores_shape
    if len(shape) < len(scores_shape):  # the same mask for every sequence
        last_two = shape[-2:]
        fits = (
            len(shape) >= 2
            and all(size == 1 for size in shape[:-2])
            and (last_two == (1, keys) or last_two == (queries, keys) == (keys, keys))
        )
    else:
        fits = (
            len(shape) == len(scores_shape)
            and shape[-1] == keys
            and all(m in (1, s) for m, s in zip(shape, scores_shape, strict=True))
        )
    if not fits:
        raise ValueError(
            f"mask of shape {shape} does not fit the attention scores' shape "
            f"{scores_shape} (queries, keys last): expected (T, T) or (1, S), or the "
            "scores' rank ending in (T or 1, S), like (B, 1, S) or (B, T, S); a "
            "key-padding mask needs the middle axis: (B, 1, S)"
        )
