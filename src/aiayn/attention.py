"""Scaled dot-product attention (§3.2.1) and multi-head attention (§3.2.2)."""

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.masks import check_mask


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

    The h projections W^Q_i (d_model x d_k each) sit side by side in one (d_model x
    h d_k) matrix W^Q, and likewise W^K and W^V (h d_v wide); the three are stacked in
    one Linear ``in_proj`` (rows [0, h d_k) are W^Q, then W^K, then W^V), the layout of
    nn.MultiheadAttention. Head i uses rows [i * d_k, (i + 1) * d_k) of each. d_k and
    d_v default to the paper's d_model / h; Table 3 (row B) varies them.

    forward(query (B, T, d_model), key (B, S, d_model), value (B, S, d_model),
            mask broadcastable to (B, T, S)) -> (B, T, d_model)

    Set ``keep_weights = True`` to run the explicit Eq. (1) path and keep the attention
    weights (B, h, T, S) of the last call in ``last_weights``; otherwise the fused
    ``F.scaled_dot_product_attention`` computes the same result in one kernel without
    storing the weights (much faster for long sequences, about even for short ones). Its
    boolean attn_mask means what ours means (True = may attend), and for a query whose
    keys are all masked it returns zeros, as the explicit path does (PyTorch >= 2.5;
    tests/test_attention.py checks).

    Not in the paper: dropout on the attention weights (§5.4 drops only sub-layer
    outputs and embedding sums); nn.MultiheadAttention has it, so we do too. dropout=0.0
    removes it.
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
        self.keep_weights = False
        self.last_weights: Tensor | None = None

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, ...]:
        """Q W^Q, K W^K, V W^V for all heads at once, in the fewest matrix products."""
        q_end, k_end = self.nhead * self.d_k, 2 * self.nhead * self.d_k
        widths = [q_end, q_end, self.nhead * self.d_v]
        if query is key and key is value:  # self-attention: one product for all three
            # (B, T, h (2 d_k + d_v)) -> (B, T, h d_k), (B, T, h d_k), (B, T, h d_v)
            return self.in_proj(query).split(widths, dim=-1)
        q = self._in_proj_rows(query, slice(0, q_end))
        if key is value:  # encoder-decoder attention: keys and values in one product
            kv = self._in_proj_rows(key, slice(q_end, None))
            return q, *kv.split(widths[1:], dim=-1)
        return (
            q,
            self._in_proj_rows(key, slice(q_end, k_end)),
            self._in_proj_rows(value, slice(k_end, None)),
        )

    def _in_proj_rows(self, x: Tensor, rows: slice) -> Tensor:
        """Apply only some rows of ``in_proj`` (e.g. W^Q alone) to ``x``."""
        bias = self.in_proj.bias
        return F.linear(
            x, self.in_proj.weight[rows], None if bias is None else bias[rows]
        )

    def forward(
        self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None
    ) -> Tensor:
        B, T, _ = query.shape
        S = key.size(1)
        q, k, v = self._project(query, key, value)
        # (B, T, h d_k) -> (B, h, T, d_k)
        q = q.view(B, T, self.nhead, self.d_k).transpose(1, 2)
        # (B, S, h d_k) -> (B, h, S, d_k)
        k = k.view(B, S, self.nhead, self.d_k).transpose(1, 2)
        # (B, S, h d_v) -> (B, h, S, d_v)
        v = v.view(B, S, self.nhead, self.d_v).transpose(1, 2)
        if mask is not None:
            check_mask(mask, (B, T, S))
            # (B, T, S) -> (B, 1, T, S): the same mask for every head
            mask = mask.unsqueeze(-3)
        if self.keep_weights:
            out, weights = scaled_dot_product_attention(
                q, k, v, mask, self.attn_dropout
            )
            self.last_weights = weights.detach()  # (B, h, T, S)
        else:
            dropout_p = self.attn_dropout.p if self.training else 0.0
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p
            )
            self.last_weights = None
        # (B, h, T, d_v) -> (B, T, h d_v)
        out = out.transpose(1, 2).reshape(B, T, self.nhead * self.d_v)
        return self.out_proj(out)


@contextmanager
def recording_attention(model: nn.Module) -> Iterator[nn.Module]:
    """Within this block every MultiHeadAttention in ``model`` keeps its weights."""
    attentions = [m for m in model.modules() if isinstance(m, MultiHeadAttention)]
    previous = [m.keep_weights for m in attentions]
    for m in attentions:
        m.keep_weights = True
    try:
        yield model
    finally:
        for m, keep in zip(attentions, previous, strict=True):
            m.keep_weights = keep
