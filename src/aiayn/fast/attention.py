"""Multi-head attention in fewer, faster operations, on a reference layer's weights.

The reference ``MultiHeadAttention`` (aiayn.model.attention) projects the query, key
and value with its three Linears W^Q, W^K, W^V, and computes Eq. (1) step by step,
keeping the weights. Here the same weights do the same work in fewer kernels:

- one matrix product for all three projections in self-attention (their weights
  concatenated at run time, [W^Q W^K W^V]), two in encoder-decoder attention, and only
  the real positions with a ``packing`` (aiayn.fast.packing);
- the projections split in two halves, so that a decoder with a key/value cache
  (aiayn.fast.cache) projects only its new positions;
- Eq. (1) by PyTorch's fused kernel, ``F.scaled_dot_product_attention``, which never
  materialises the weights; on a CPU, for at most ``Kernels.short_sequence`` keys,
  ``short_sequence_attention``, which there beats the fused kernel.

tests/test_fast.py checks every path against the reference, forward and backward.
"""

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.fast.packing import Packing
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.masks import check_mask


@dataclass(frozen=True)
class Kernels:
    """Which kernels the fast model runs: a setting of the model, not of the library.

    ``short_sequence``: on a CPU, attention over at most this many keys runs
    ``short_sequence_attention`` instead of the fused kernel, whose fixed cost per
    (example, head) can outweigh there the memory it saves; the fused kernel wins on
    long sequences (book/appendix-fast-paths.md times both). 0: the fused kernel
    always. ``pack``: a training step on a CPU computes the position-wise layers on
    the real positions only (aiayn.fast.packing).
    """

    short_sequence: int = 32
    pack: bool = True


DEFAULT_KERNELS = Kernels()


def short_sequence_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
) -> Tensor:
    """Eq. (1) as scaled_dot_product_attention computes it, in fewer operations.

    The same arguments, shapes and output; the weights are not returned, and
    ``dropout_p`` drops them as the reference's nn.Dropout does (F.dropout). A masked
    score becomes the dtype's most negative number, whose exponential in the softmax is
    exactly 0, so the weights need no second masking, unless a query has no key at all:
    its weights would be equal instead, so its output is set to zero, as the other
    paths give. On a CPU, for a few dozen keys, forward and backward are faster than
    the fused kernel's.

    The scores are laid out key by query, (..., S, T), and the softmax runs over
    their second-to-last axis: PyTorch's CPU softmax over a last axis of a dozen
    elements is slow (on the AVX-512 path, forward and backward take several times
    as long as over the other axis; book/appendix-fast-paths.md times both).
    """
    d_k = query.size(-1)
    # (..., S, d_k) @ (..., d_k, T) -> (..., S, T): a column of keys per query
    scores_by_key = key @ query.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        lowest = torch.finfo(scores_by_key.dtype).min
        scores_by_key = scores_by_key.masked_fill(~mask.transpose(-2, -1), lowest)
    weights = scores_by_key.softmax(dim=-2).transpose(-2, -1)  # (..., T, S)
    if dropout_p > 0:  # laid out (T, S), as the reference's: the same mask is drawn
        weights = F.dropout(weights.contiguous(), dropout_p)
    out = weights @ value  # (..., T, d_v)
    if mask is not None:
        sees_a_key = mask.any(dim=-1, keepdim=True)  # (..., T, 1)
        if not sees_a_key.all():  # reads the mask on the host: meant for the CPU
            out = out.masked_fill(~sees_a_key, 0.0)
    return out


def unpacked(x: Tensor, packing: Packing | None) -> Tensor:
    """x itself; with a packing, (N, width) -> (B, T, width), zeros at the padding."""
    return x if packing is None else packing.unpack(x)


def project(
    attention: MultiHeadAttention,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    packing: Packing | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """Q W^Q, K W^K, V W^V for all heads at once, in the fewest matrix products.

    (B, T, d_model), (B, S, d_model), (B, S, d_model)
        -> heads (B, h, T, d_k), (B, h, S, d_k), (B, h, S, d_v)
    With a ``packing``, the query (and in self-attention the key and value) holds only
    the real positions, (N, d_model): the products skip the padding.
    """
    if query is key and key is value:  # self-attention: one product for all three
        projections = (attention.w_q, attention.w_k, attention.w_v)
        # (B, T, h (2 d_k + d_v)) -> (B, T, h d_k), (B, T, h d_k), (B, T, h d_v)
        q, k, v = unpacked(fused(projections, query), packing).split(
            [p.out_features for p in projections], dim=-1
        )
        return (
            heads(attention, q, attention.d_k),
            heads(attention, k, attention.d_k),
            heads(attention, v, attention.d_v),
        )
    q = project_query(attention, query, packing)
    return q, *project_key_value(attention, key, value)


def project_query(
    attention: MultiHeadAttention, query: Tensor, packing: Packing | None = None
) -> Tensor:
    """Q W^Q alone: (B, T, d_model) -> (B, h, T, d_k)."""
    q = unpacked(attention.w_q(query), packing)  # (B, T, h d_k)
    return heads(attention, q, attention.d_k)


def project_key_value(
    attention: MultiHeadAttention, key: Tensor, value: Tensor
) -> tuple[Tensor, Tensor]:
    """K W^K and V W^V: (B, S, d_model) each -> (B, h, S, d_k), (B, h, S, d_v)."""
    if key is value:  # encoder-decoder attention: keys and values in one product
        projections = (attention.w_k, attention.w_v)
        k, v = fused(projections, key).split(
            [p.out_features for p in projections], dim=-1
        )
    else:
        k, v = attention.w_k(key), attention.w_v(value)
    return heads(attention, k, attention.d_k), heads(attention, v, attention.d_v)


def fused(projections: tuple[nn.Linear, ...], x: Tensor) -> Tensor:
    """x through several Linears in one matrix product: their outputs side by side.

    (..., d_model) -> (..., sum of out_features). The weights are concatenated at
    every call (a copy of the weights, small beside the activations), so gradients
    reach each Linear's own parameters.
    """
    weight = torch.cat([p.weight for p in projections])
    bias = torch.cat([p.bias for p in projections])
    return F.linear(x, weight, bias)


def heads(attention: MultiHeadAttention, x: Tensor, width: int) -> Tensor:
    """(B, T, h width) -> (B, h, T, width), contiguous: the fused kernel runs faster
    on heads laid out one after another."""
    return attention.split_heads(x, width).contiguous()


def attend(
    attention: MultiHeadAttention,
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None,
    kernels: Kernels,
    packing: Packing | None = None,
) -> Tensor:
    """Attention in every head, then Concat and W^O: the reference's output.

    q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v), mask broadcastable to
    (B, T, S) -> (B, T, d_model); with a ``packing``, (N, d_model).
    """
    B, h, T, _ = q.shape
    if mask is not None:
        mask = mask.unsqueeze(-3)  # (B, 1, T, S): the same mask for every head
        check_mask(mask, (B, h, T, k.size(-2)))
    # the reference's dropout of the weights, at its rate
    dropout_p = attention.attn_dropout.p if attention.training else 0.0
    if q.device.type == "cpu" and k.size(-2) <= kernels.short_sequence:
        out = short_sequence_attention(q, k, v, mask, dropout_p)
    else:
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p
        )
    # (B, h, T, d_v) -> (B, T, h d_v)
    out = out.transpose(1, 2).reshape(B, T, h * attention.d_v)
    return attention.w_o(out if packing is None else packing.pack(out))
