"""The training loss with label smoothing (§5.4)."""

import torch
from torch import Tensor


def label_smoothed_loss(
    logits: Tensor, target: Tensor, smoothing: float, pad_id: int
) -> Tensor:
    """Cross-entropy against a smoothed target, averaged over the non-padding tokens.

    logits (..., V), target (...) ids. The target distribution gives 1 - smoothing to
    the right token and spreads ``smoothing`` uniformly over the V - 1 tokens other
    than padding (padding is never a right answer). Computed from log_softmax, so it
    never takes log(0); positions whose target is padding contribute nothing. (They
    are weighted by 0, not dropped: dropping them would make the host wait for the
    count, on a GPU.)
    """
    log_probs = logits.log_softmax(dim=-1)  # (..., V)
    vocab = log_probs.size(-1)
    smoothed = torch.full_like(log_probs, smoothing / (vocab - 1))  # (..., V)
    smoothed[..., pad_id] = 0.0
    smoothed.scatter_(-1, target[..., None], 1.0 - smoothing + smoothing / (vocab - 1))
    per_token = -(smoothed * log_probs).sum(dim=-1)  # (...)
    real = target != pad_id
    return torch.where(real, per_token, 0.0).sum() / real.sum()
