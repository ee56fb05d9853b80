"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2)."""

import math
from collections.abc import Callable

import torch
from torch import Tensor, nn

from aiayn.model.masks import check_mask


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout: Callable[[Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V, Eq. (1), step by step.

    Args:
        query: (..., T, d_k) queries.
        key: (..., S, d_k) keys.
        value: (..., S, d_v) values.
        mask: optional bool tensor broadcastable to (..., T, S); True = may attend.
        dropout: optional module (e.g. ``nn.Dropout``) applied to the attention weights.

    Returns:
        output (..., T, d_v) and weights (..., T, S). Masked positions get exactly zero
        weight; a query whose keys are all masked gets all-zero weights (and output),
        never NaN.
    """
    d_k = query.size(-1)
    # (..., T, d_k) @ (..., d_k, S)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        check_mask(mask, scores.shape)
        # The paper's -inf, but finite: the most negative number of this
        # dtype (float16 too).
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)  # (..., T, S), each row sums to 1
    if mask is not None:
        # exact zeros; fully masked rows become 0
        weights = weights.masked_fill(~mask, 0.0)
    if dropout is not None:
        weights = dropout(weights)
    return weights @ value, weights  # (..., T, S) @ (..., S, d_v) -> (..., T, d_v)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, as in §3.2.2,
    where head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i).

    forward(query (B, T, d_model), key (B, S, d_model), value (B, S, d_model),
            mask broadcastable to (B, T, S)) -> (B, T, d_model)

    The h projections W^Q_i (d_model x d_k each) sit side by side in one Linear
    ``w_q`` (d_model -> h d_k): head i reads columns [i d_k, (i + 1) d_k) of Q W^Q.
    Likewise ``w_k`` (h d_k) and ``w_v`` (h d_v); ``w_o`` is W^O (h d_v -> d_model).
    Each has a bias, as nn.MultiheadAttention's projections do (the paper writes none).
    d_k and d_v default to the paper's d_model / h; Table 3 varies them (rows A and B).

    The attention weights of every head, (B, h, T, S), pass through the
    ``attention_weights`` module (nn.Identity): a forward hook there reads them
    (aiayn.model.maps.attention_maps).

    Not in the paper: where attention dropout acts (§5.4 describes dropout on sub-layer
    outputs and embedding sums only; §6.3 mentions "both attention and residual"
    dropout without saying where or at what rate). Here it drops the attention
    weights, as nn.MultiheadAttention does. dropout=0.0 removes it.
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        dropout: float = 0.0,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        if None in (d_k, d_v) and d_model % h != 0:
            raise ValueError(f"d_model={d_model} is not divisible by h={h}")
        self.h = h
        self.d_k = d_k or d_model // h  # the paper's d_k = d_v = d_model / h
        self.d_v = d_v or d_model // h
        self.w_q = nn.Linear(d_model, h * self.d_k)  # W^Q_1, ..., W^Q_h side by side
        self.w_k = nn.Linear(d_model, h * self.d_k)  # W^K_1, ..., W^K_h
        self.w_v = nn.Linear(d_model, h * self.d_v)  # W^V_1, ..., W^V_h
        self.w_o = nn.Linear(h * self.d_v, d_model)  # W^O
        self.attn_dropout = nn.Dropout(dropout)  # on the weights, as in PyTorch
        self.attention_weights = nn.Identity()  # where hooks read the weights

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
    ) -> Tensor:
        B, T, _ = query.shape
        q = self.split_heads(self.w_q(query), self.d_k)  # (B, h, T, d_k)
        k = self.split_heads(self.w_k(key), self.d_k)  # (B, h, S, d_k)
        v = self.split_heads(self.w_v(value), self.d_v)  # (B, h, S, d_v)
        if mask is not None:
            mask = mask.unsqueeze(-3)  # (B, 1, T, S): the same mask for every head
        heads, weights = scaled_dot_product_attention(q, k, v, mask, self.attn_dropout)
        self.attention_weights(weights)  # (B, h, T, S)
        concat = heads.transpose(1, 2).reshape(B, T, self.h * self.d_v)  # Concat
        return self.w_o(concat)  # (B, T, d_model)

    def split_heads(self, x: Tensor, width: int) -> Tensor:
        """(B, T, h width) -> (B, h, T, width): head i gets slice i of the features."""
        return x.unflatten(-1, (self.h, width)).transpose(1, 2)
