"""Attention masks.

One convention everywhere in this package: a mask is a boolean tensor and ``True`` means
"this query position may attend to this key position". Masks broadcast against the
attention scores, whose last two axes are (queries, keys).

torch.nn.MultiheadAttention uses the opposite convention for boolean masks (True =
masked); aiayn.interop converts at that boundary.
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
    """Raise a clear error unless ``mask`` is a boolean mask that broadcasts to ``scores_shape``."""
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must be a torch.bool tensor (True means 'may attend'), got dtype {mask.dtype}"
        )
    scores_shape = tuple(scores_shape)
    try:
        broadcast = torch.broadcast_shapes(mask.shape, scores_shape)
    except RuntimeError:
        broadcast = None
    if mask.dim() < 2 or broadcast != scores_shape:
        raise ValueError(
            f"mask of shape {tuple(mask.shape)} does not broadcast to the attention scores' "
            f"shape {scores_shape} (queries, keys last)"
        )
