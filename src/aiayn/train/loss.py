"""The training loss with label smoothing (§5.4), and a batch's loss under teacher
forcing."""

import torch
from torch import Tensor, nn

from aiayn.model.masks import padding_mask, target_mask
from aiayn.tasks import Batch


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


def teacher_forced_logits(model: nn.Module, batch: Batch) -> Tensor:
    """The decoder reads the true target shifted right (``tgt_in``) under the padding
    and causal masks: logits (B, T, V) for every target position at once."""
    return model(
        batch.src,
        batch.tgt_in,
        padding_mask(batch.src, batch.src_pad_id),
        target_mask(batch.tgt_in, batch.tgt_pad_id),
    )


def batch_loss(
    model: nn.Module, batch: Batch, smoothing: float
) -> tuple[Tensor, Tensor, Tensor]:
    """The label-smoothed loss of a batch under teacher forcing, in the model's
    mode (``train`` sets training mode).

    Returns the loss, and two (B, T) masks: the target positions the model predicts
    right, and the real (not padding) ones. ``model`` may be the DDP-wrapped model.
    """
    logits = teacher_forced_logits(model, batch)  # (B, T, V)
    loss = label_smoothed_loss(logits, batch.tgt_out, smoothing, batch.tgt_pad_id)
    real = batch.tgt_out != batch.tgt_pad_id
    correct = (logits.argmax(dim=-1) == batch.tgt_out) & real
    return loss, correct, real
