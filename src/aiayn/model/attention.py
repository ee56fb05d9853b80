"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2)."""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.fast.packing import Packing
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


# The longest key sequence for which MultiHeadAttention, on a CPU, computes Eq. (1) with
# short_sequence_attention instead of the fused kernel, whose fixed cost per (example,
# head) outweighs there the memory it saves: forward and backward, the short path won or
# tied at 16 keys and fewer, the fused kernel won from 64 keys on, and at 32 two threads
# favoured the short path (book/appendix-fast-paths.md).
SHORT_SEQUENCE = 32


def short_sequence_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    mask: Tensor | None = None,
    dropout: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    """Eq. (1) as scaled_dot_product_attention computes it, in fewer operations.

    The same shapes and the same output; the weights are not returned. A masked score
    becomes the dtype's most negative number, whose exponential in the softmax is
    exactly 0, so the weights need no second masking, unless a query has no key at all:
    its weights would be equal instead, so its output is set to zero, as the other
    paths give. On a CPU, for a few dozen keys, forward and backward are faster than
    the fused kernel's.
    """
    d_k = query.size(-1)
    # (..., T, d_k) @ (..., d_k, S) -> (..., T, S)
    scores = query @ key.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if dropout is not None:
        weights = dropout(weights)
    out = weights @ value  # (..., T, d_v)
    if mask is not None:
        sees_a_key = mask.any(dim=-1, keepdim=True)  # (..., T, 1)
        if not sees_a_key.all():  # reads the mask on the host: meant for the CPU
            out = out.masked_fill(~sees_a_key, 0.0)
    return out


def unpacked(x: Tensor, packing: Packing | None) -> Tensor:
    """x itself; with a packing, (N, width) -> (B, T, width), zeros at the padding."""
    return x if packing is None else packing.unpack(x)


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, as in §3.2.2.

    The h projections W^Q_i (d_model x d_k each) sit side by side in one (d_model x
    h d_k) matrix W^Q, and likewise W^K and W^V (h d_v wide); the three are stacked in
    one Linear ``in_proj`` (rows [0, h d_k) are W^Q, then W^K, then W^V), the layout of
    nn.MultiheadAttention. Head i uses rows [i * d_k, (i + 1) * d_k) of each. d_k and
    d_v default to the paper's d_model / h; Table 3 (row B) varies them.

    forward(query (B, T, d_model), key (B, S, d_model), value (B, S, d_model),
            mask broadcastable to (B, T, S)) -> (B, T, d_model)

    The fused ``F.scaled_dot_product_attention`` computes it in one kernel without
    materialising the attention weights (much faster for long sequences). Its boolean
    attn_mask means what ours means (True = may attend), and for a query whose keys are
    all masked it returns zeros, as the explicit path does (PyTorch >= 2.5;
    tests/test_attention.py checks). On a CPU, for at most SHORT_SEQUENCE keys,
    ``short_sequence_attention`` runs instead: faster there, the same function. With
    ``need_weights=True`` the explicit Eq. (1) path runs and forward returns (output,
    weights (B, h, T, S)). The two halves, ``project`` (into heads) and ``attend``, are
    also methods of their own: a decoder with a key/value cache projects only the new
    positions.

    Given a ``packing`` (aiayn.fast.packing), the queries (and in self-attention the
    keys and values) hold only the real positions, (N, d_model), and so does the output:
    the projections skip the padding, the heads are unpacked for attention alone.

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
        bias: bool = True,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        if None in (d_k, d_v) and d_model % nhead != 0:
            raise ValueError(f"d_model={d_model} is not divisible by nhead={nhead}")
        self.d_model = d_model
        self.nhead = nhead
        self.d_k = d_k or d_model // nhead  # the paper's d_k = d_v = d_model / h
        self.d_v = d_v or d_model // nhead
        # [W^Q; W^K; W^V]: h d_k + h d_k + h d_v rows
        self.in_proj = nn.Linear(d_model, nhead * (2 * self.d_k + self.d_v), bias=bias)
        self.out_proj = nn.Linear(nhead * self.d_v, d_model, bias=bias)  # W^O
        # on the attention weights, as in PyTorch
        self.attn_dropout = nn.Dropout(dropout)

    def project(
        self, query: Tensor, key: Tensor, value: Tensor, packing: Packing | None = None
    ) -> tuple[Tensor, ...]:
        """Q W^Q, K W^K, V W^V for all heads at once, in the fewest matrix products.

        (B, T, d_model), (B, S, d_model), (B, S, d_model)
            -> heads (B, h, T, d_k), (B, h, S, d_k), (B, h, S, d_v)
        """
        if query is key and key is value:  # self-attention: one product for all three
            widths = [self.nhead * self.d_k] * 2 + [self.nhead * self.d_v]
            # (B, T, h (2 d_k + d_v)) -> (B, T, h d_k), (B, T, h d_k), (B, T, h d_v)
            q, k, v = unpacked(self.in_proj(query), packing).split(widths, dim=-1)
            return (
                self._heads(q, self.d_k),
                self._heads(k, self.d_k),
                self._heads(v, self.d_v),
            )
        return self.project_query(query, packing), *self.project_key_value(key, value)

    def project_query(self, query: Tensor, packing: Packing | None = None) -> Tensor:
        """Q W^Q alone: (B, T, d_model) -> (B, h, T, d_k)."""
        q = unpacked(self._in_proj_rows(query, 0, 1), packing)  # (B, T, h d_k)
        return self._heads(q, self.d_k)

    def project_key_value(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """K W^K and V W^V: (B, S, d_model) each -> (B, h, S, d_k), (B, h, S, d_v)."""
        if key is value:  # encoder-decoder attention: keys and values in one product
            k, v = self._in_proj_rows(key, 1, 3).split(
                [self.nhead * self.d_k, self.nhead * self.d_v], dim=-1
            )
        else:
            k, v = self._in_proj_rows(key, 1, 2), self._in_proj_rows(value, 2, 3)
        return self._heads(k, self.d_k), self._heads(v, self.d_v)

    def _in_proj_rows(self, x: Tensor, first: int, end: int) -> Tensor:
        """Apply matrices [first, end) of [W^Q; W^K; W^V] (numbered 0, 1, 2) to x."""
        bounds = [0, self.nhead * self.d_k, 2 * self.nhead * self.d_k, None]
        rows = slice(bounds[first], bounds[end])
        bias = self.in_proj.bias
        return F.linear(
            x, self.in_proj.weight[rows], None if bias is None else bias[rows]
        )

    def _heads(self, x: Tensor, width: int) -> Tensor:
        """(B, T, h width) -> (B, h, T, width): one slice of ``width`` per head.

        Contiguous: the fused kernel runs faster on heads laid out one after another.
        """
        return x.unflatten(-1, (self.nhead, width)).transpose(1, 2).contiguous()

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        packing: Packing | None = None,
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Attention in every head, then Concat and W^O.

        q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v), mask broadcastable to
        (B, T, S) -> (B, T, d_model); with need_weights, also the weights (B, h, T, S).
        """
        B, _, T, _ = q.shape
        if mask is not None:
            check_mask(mask, (B, T, k.size(-2)))
            # (B, T, S) -> (B, 1, T, S): the same mask for every head
            mask = mask.unsqueeze(-3)
        if need_weights:
            out, weights = scaled_dot_product_attention(
                q, k, v, mask, self.attn_dropout
            )
        elif q.device.type == "cpu" and k.size(-2) <= SHORT_SEQUENCE:
            out = short_sequence_attention(q, k, v, mask, self.attn_dropout)
        else:
            dropout_p = self.attn_dropout.p if self.training else 0.0
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p
            )
        # (B, h, T, d_v) -> (B, T, h d_v)
        out = out.transpose(1, 2).reshape(B, T, self.nhead * self.d_v)
        out = self.out_proj(out if packing is None else packing.pack(out))
        return (out, weights) if need_weights else out

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> Tensor | tuple[Tensor, Tensor]:
        q, k, v = self.project(query, key, value)
        return self.attend(q, k, v, mask, need_weights)
