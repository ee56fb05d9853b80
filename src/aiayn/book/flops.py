"""The FLOPs of a translation run's matrix products, counted from its own batches
("Translation in miniature")."""

import torch
from torch import nn

from aiayn.tasks.translation import NumberWordsTask


def linear_weights(module: nn.Module) -> int:
    """The weights of a module's linear layers (biases excluded)."""
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


def training_flops(
    model: nn.Module, task: NumberWordsTask, max_tokens: int, seed: int, steps: int
) -> float:
    """FLOPs of the matrix products of ``steps`` training steps: 6 per weight and
    position it reads, as the chapter "Hardware and schedule" counts them.

    The steps' batches are drawn again, as ``new_run`` seeds its data generator: the
    encoder's weights read the real source tokens, the encoder-decoder attention's W^K
    and W^V the padded memory, the rest of the decoder and the output layer the real
    target tokens. The attention scores themselves are left out.
    """
    cross = sum(
        layer.cross_attn.w_k.weight.numel() + layer.cross_attn.w_v.weight.numel()
        for layer in model.decoder.layers
    )
    source_side = linear_weights(model.encoder)
    target_side = linear_weights(model.decoder) - cross
    target_side += model.output_projection.weight.numel()
    src_lengths, tgt_lengths = task.corpus_lengths
    generator = torch.Generator().manual_seed(seed)
    flops = 0.0
    for _ in range(steps):
        batch = task.budget_batch_indices(max_tokens, generator)
        source = sum(src_lengths[i] for i in batch)
        memory = len(batch) * max(src_lengths[i] for i in batch)
        target = sum(tgt_lengths[i] for i in batch)
        flops += 6.0 * (source_side * source + cross * memory + target_side * target)
    return flops
