"""Looking inside: the attention weights of every layer, read with PyTorch's hooks.

The model keeps no weights and takes no dict to write them into: each attention's
weights pass through its ``attention_weights`` module (an nn.Identity), and
``attention_maps`` puts a forward hook there while the model runs, keeps what passes,
and removes the hooks again.
"""

import torch
from torch import Tensor
from torch.utils.hooks import RemovableHandle

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.masks import subsequent_mask
from aiayn.model.transformer import Transformer

# attention weights by kind ("encoder_self", "decoder_self", "cross"), one per layer
AttentionMaps = dict[str, list[Tensor]]


@torch.no_grad()
def attention_maps(
    model: Transformer,
    src: Tensor,
    tgt: Tensor,
    src_mask: Tensor | None = None,
    tgt_mask: Tensor | None = None,
) -> AttentionMaps:
    """Run ``model`` and return the attention weights of every layer.

    One tensor per layer: "encoder_self" (B, h, S, S), "decoder_self" (B, h, T, T)
    and "cross" (B, h, T, S) (rows are queries, columns keys). Ask in eval mode: in
    training mode the weights are those after attention dropout.
    """
    maps: AttentionMaps = {"encoder_self": [], "decoder_self": [], "cross": []}
    hooks = []
    for layer in model.encoder.layers:
        hooks.append(weights_recorded(layer.self_attn, maps["encoder_self"]))
    for layer in model.decoder.layers:
        hooks.append(weights_recorded(layer.self_attn, maps["decoder_self"]))
        hooks.append(weights_recorded(layer.cross_attn, maps["cross"]))
    if tgt_mask is None:  # as decode: no looking ahead
        tgt_mask = subsequent_mask(tgt.size(1), device=tgt.device)
    try:  # the reference stacks, in a FastTransformer too
        memory = model.encoder(model.positional(model.src_embed(src)), src_mask)
        x = model.positional(model.tgt_embed(tgt))
        model.decoder(x, memory, src_mask, tgt_mask)
    finally:
        for hook in hooks:
            hook.remove()
    return maps


def weights_recorded(
    attention: MultiHeadAttention, weights: list[Tensor]
) -> RemovableHandle:
    """A hook that appends ``attention``'s weights (B, h, T, S) to ``weights``."""

    def keep(module, args, output):
        weights.append(output)

    return attention.attention_weights.register_forward_hook(keep)
