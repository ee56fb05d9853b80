"""Looking inside: the attention weights of every layer, read with PyTorch's hooks.

The model keeps no weights and takes no dict to write them into: ``attention_maps``
asks each attention for its weights (``need_weights=True``) through forward hooks
while the model runs, keeps them, and removes the hooks again.
"""

import torch
from torch import Tensor

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
        hooks += weights_recorded(layer.self_attn, maps["encoder_self"])
    for layer in model.decoder.layers:
        hooks += weights_recorded(layer.self_attn, maps["decoder_self"])
        hooks += weights_recorded(layer.cross_attn, maps["cross"])
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


def weights_recorded(attention: MultiHeadAttention, weights: list[Tensor]) -> list:
    """Hooks that make ``attention`` return its weights and append them to ``weights``.

    The first asks for the weights (need_weights=True); the second keeps them and
    passes the output alone on, as the layer expects.
    """

    def ask(module, args, kwargs):
        return args, kwargs | {"need_weights": True}

    def keep(module, args, kwargs, output):
        out, attention_weights = output
        weights.append(attention_weights)  # (B, h, T, S)
        return out

    return [
        attention.register_forward_pre_hook(ask, with_kwargs=True),
        attention.register_forward_hook(keep, with_kwargs=True),
    ]
