"""The encoder and decoder layers in fewer operations, on the reference layers' weights.

Each function computes what the reference layer's forward computes (aiayn.model.layers)
with the fast attention (aiayn.fast.attention), and optionally:

- a ``packing`` (aiayn.fast.packing): x holds only the real positions, (N, d_model),
  and so does the output; attention alone sees them padded;
- in the decoder, a key/value cache (aiayn.fast.cache): x holds only the new positions,
  self-attention reads the earlier positions' keys and values from the cache, and
  encoder-decoder attention reads the memory's keys and values, projected once. The
  cache is not changed: the layer returns the one that holds the new positions too.

The residual connections and the feed-forward network compute as the reference's: the
LayerNorm in one fused kernel (``layer_norm``: the taught LayerNorm, written op by op,
is several times slower forward and backward), their dropout at the modules' rates
with a cheaper random mask (``aiayn.fast.dropout``), measured to matter.
"""

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.fast.attention import (
    Kernels,
    attend,
    project,
    project_key_value,
    project_query,
)
from aiayn.fast.cache import LayerCache
from aiayn.fast.dropout import dropout
from aiayn.fast.packing import Packing
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.layers import DecoderLayer, EncoderLayer, LayerNorm, ResidualSublayer


def residual(
    sublayer_residual: ResidualSublayer, x: Tensor, sublayer: Callable[[Tensor], Tensor]
) -> Tensor:
    """ResidualSublayer's forward: its LayerNorm in one fused kernel, its dropout at
    the module's rate with the cheaper mask."""
    norm, p = sublayer_residual.norm, sublayer_residual.dropout.p
    training = sublayer_residual.training
    if sublayer_residual.norm_first:
        return x + dropout(sublayer(layer_norm(norm, x)), p, training)
    return layer_norm(norm, x + dropout(sublayer(x), p, training))


def feed_forward(ffn: PositionwiseFeedForward, x: Tensor) -> Tensor:
    """PositionwiseFeedForward's forward, its dropout with the cheaper mask."""
    hidden = dropout(F.relu(ffn.linear1(x)), ffn.dropout.p, ffn.training)
    return ffn.linear2(hidden)


def layer_norm(norm: LayerNorm | nn.Identity, x: Tensor) -> Tensor:
    """norm(x) in one fused kernel, F.layer_norm on norm's weight and bias; an
    nn.Identity (the stacks' final norm in a post-LN model) returns x."""
    if isinstance(norm, nn.Identity):
        return x
    return F.layer_norm(x, norm.weight.shape, norm.weight, norm.bias, norm.eps)


def encoder_layer(
    layer: EncoderLayer,
    x: Tensor,
    mask: Tensor | None,
    kernels: Kernels,
    packing: Packing | None = None,
) -> Tensor:
    """EncoderLayer's forward: x (B, S, d_model), or (N, d_model) with a packing."""

    def self_attention(y: Tensor) -> Tensor:
        heads = project(layer.self_attn, y, y, y, packing)
        return attend(layer.self_attn, *heads, mask, kernels, packing)

    x = residual(layer.self_attn_residual, x, self_attention)
    return residual(
        layer.feed_forward_residual, x, lambda y: feed_forward(layer.feed_forward, y)
    )


def decoder_layer(
    layer: DecoderLayer,
    x: Tensor,
    memory: Tensor,
    masks: tuple[Tensor | None, Tensor | None],
    kernels: Kernels,
    cache: LayerCache | None = None,
    packing: Packing | None = None,
) -> tuple[Tensor, LayerCache | None]:
    """DecoderLayer's forward, and the cache with x's positions added.

    x (B, T, d_model), or (N, d_model) with a packing; memory (B, S, d_model);
    masks: (src_mask, tgt_mask); with a cache of t positions, tgt_mask broadcasts to
    (B, T, t + T).
    """
    src_mask, tgt_mask = masks
    new_cache = cache

    def self_attention(y: Tensor) -> Tensor:
        nonlocal new_cache
        q, k, v = project(layer.self_attn, y, y, y, packing)
        if cache is not None:  # earlier positions first: (B, h, t + T, d_k or d_v)
            k = torch.cat([cache.keys, k], dim=-2)
            v = torch.cat([cache.values, v], dim=-2)
            new_cache = LayerCache(k, v, cache.memory_keys, cache.memory_values)
        return attend(layer.self_attn, q, k, v, tgt_mask, kernels, packing)

    def cross_attention(y: Tensor) -> Tensor:
        if cache is None:
            heads = project(layer.cross_attn, y, memory, memory, packing)
        else:  # the memory was projected once, by start_cache
            q = project_query(layer.cross_attn, y, packing)  # (B, h, T, d_k)
            heads = (q, cache.memory_keys, cache.memory_values)
        return attend(layer.cross_attn, *heads, src_mask, kernels, packing)

    x = residual(layer.self_attn_residual, x, self_attention)
    x = residual(layer.cross_attn_residual, x, cross_attention)
    x = residual(
        layer.feed_forward_residual, x, lambda y: feed_forward(layer.feed_forward, y)
    )
    return x, new_cache


def start_cache(layer: DecoderLayer, memory: Tensor) -> LayerCache:
    """A cache with no target positions yet, and the memory's keys and values."""
    # (B, S, d_model) -> (B, h, S, d_k), (B, h, S, d_v)
    memory_keys, memory_values = project_key_value(layer.cross_attn, memory, memory)
    B, attention = memory.size(0), layer.self_attn
    keys = memory.new_empty(B, attention.h, 0, attention.d_k)  # (B, h, 0, d_k)
    values = memory.new_empty(B, attention.h, 0, attention.d_v)
    return LayerCache(keys, values, memory_keys, memory_values)
