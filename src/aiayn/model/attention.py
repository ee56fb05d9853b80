"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2)."""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
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
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, as in §3.2.2.

    forward(query (B, T, d_model), key (B, S, d_model), value (B, S, d_model),
            mask broadcastable to (B, T, S)) -> (B, T, d_model);
    with need_weights=True, also the attention weights of every head (B, h, T, S).

    The h projections W^Q_i (d_model x d_k each) sit side by side in one matrix W^Q
    (d_model x h d_k), and likewise W^K and W^V (h d_v wide). The three are stacked in
    one Linear ``in_proj``, the layout of nn.MultiheadAttention: its rows [0, h d_k) are
    W^Q, then W^K, then W^V. d_k and d_v default to the paper's d_model / h; Table 3
    (row B) varies them.

    Not in the paper: where attention dropout acts (§5.4 describes dropout on sub-layer
    outputs and embedding sums only; §6.3 mentions "both attention and residual"
    dropout without saying where or at what rate). Here it drops the attention
    weights, as nn.MultiheadAttention does. dropout=0.0 removes it.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dropout: float = 0.0,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        if None in (d_k, d_v) and d_model % nhead != 0:
            raise ValueError(f"d_model={d_model} is not divisible by nhead={nhead}")
        self.nhead = nhead
        self.d_k = d_k or d_model // nhead  # the paper's d_k = d_v = d_model / h
        self.d_v = d_v or d_model // nhead
        # [W^Q; W^K; W^V]: h d_k + h d_k + h d_v rows
        self.in_proj = nn.Linear(d_model, nhead * (2 * self.d_k + self.d_v))
        self.out_proj = nn.Linear(nhead * self.d_v, d_model)  # W^O
        self.attn_dropout = nn.Dropout(dropout)  # on the weights, as in PyTorch

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        B, T, _ = query.shape
        widths = [self.nhead * self.d_k] * 2 + [self.nhead * self.d_v]
        w_q, w_k, w_v = self.in_proj.weight.split(widths)  # W^Q, W^K, W^V
        b_q, b_k, b_v = self.in_proj.bias.split(widths)
        q = self.split_heads(F.linear(query, w_q, b_q), self.d_k)  # (B, h, T, d_k)
        k = self.split_heads(F.linear(key, w_k, b_k), self.d_k)  # (B, h, S, d_k)
        v = self.split_heads(F.linear(value, w_v, b_v), self.d_v)  # (B, h, S, d_v)
        if mask is not None:
            check_mask(mask, (B, T, key.size(1)))
            mask = mask.unsqueeze(-3)  # (B, 1, T, S): the same mask for every head
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.attn_dropout)
        out = out.transpose(1, 2).reshape(B, T, self.nhead * self.d_v)  # Concat
        out = self.out_proj(out)  # (B, T, d_model)
        return (out, weights) if need_weights else out

    def split_heads(self, x: Tensor, width: int) -> Tensor:
        """(B, T, h width) -> (B, h, T, width): head i gets slice i of the features."""
        return x.unflatten(-1, (self.nhead, width)).transpose(1, 2)
