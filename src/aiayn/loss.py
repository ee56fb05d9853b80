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
    never takes log(0); positions whose target is padding contribute nothing.
    """
    log_probs = logits.log_softmax(dim=-1).flatten(0, -2)  # (N, V)
    target = target.flatten()  # (N,)
    real = target != pad_id
    log_probs, target = log_probs[real], target[real]  # drop padding positions
    vocab = log_probs.size(-1)
    smoothed = torch.full_like(log_probs, smoothing / (vocab - 1))  # (N, V)
    smoothed[:, pad_id] = 0.0
    smoothed.scatter_(1, target[:, None], 1.0 - smoothing + smoothing / (vocab - 1))
    return -(smoothed * log_probs).sum(dim=-1).mean()
