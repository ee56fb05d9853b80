"""Layer normalisation, residual sub-layers, the encoder and decoder stacks (§3.1)."""

from collections.abc import Callable

import torch
from torch import Tensor, nn

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.feed_forward import PositionwiseFeedForward


class LayerNorm(nn.Module):
    """Normalise each position's features to mean 0, variance 1, then scale and shift.

    y = weight * (x - mean) / sqrt(var + eps) + bias, with the biased variance (divide
    by d_model), as nn.LayerNorm computes it, with the same parameters ``weight`` and
    ``bias``. Shape: (..., d_model) -> (..., d_model).

    Every layer below normalises with it. The fast model (aiayn.fast) calls
    F.layer_norm on the same weight and bias: one fused kernel instead of the few
    operations here.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gain
        self.bias = nn.Parameter(torch.zeros(d_model))  # shift

    def forward(self, x: Tensor) -> Tensor:
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1): broadcasts over the features
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class ResidualSublayer(nn.Module):
    """A residual connection around a sub-layer, with dropout and layer normalisation.

    Post-LN (the paper, default): LayerNorm(x + Dropout(Sublayer(x))).
    Pre-LN (norm_first=True, not in the paper): x + Dropout(Sublayer(LayerNorm(x))).
    """

    def __init__(self, d_model: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.norm = LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each in a ResidualSublayer.

    forward(x (B, S, d_model), mask broadcastable to (B, S, S)) -> (B, S, d_model)
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        *,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, d_k, d_v)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.self_attn_residual = ResidualSublayer(d_model, dropout, norm_first)
        self.feed_forward_residual = ResidualSublayer(d_model, dropout, norm_first)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.self_attn_residual(x, lambda y: self.self_attn(y, y, y, mask))
        return self.feed_forward_residual(x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention over ``memory``, then the FFN.

    forward(x (B, T, d_model), memory (B, S, d_model),
            src_mask broadcastable to (B, T, S), tgt_mask broadcastable to (B, T, T))
        -> (B, T, d_model)
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        *,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, h, dropout, d_k, d_v)
        # encoder-decoder attention: queries from the decoder, keys and values memory
        self.cross_attn = MultiHeadAttention(d_model, h, dropout, d_k, d_v)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.self_attn_residual = ResidualSublayer(d_model, dropout, norm_first)
        self.cross_attn_residual = ResidualSublayer(d_model, dropout, norm_first)
        self.feed_forward_residual = ResidualSublayer(d_model, dropout, norm_first)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        x = self.self_attn_residual(x, lambda y: self.self_attn(y, y, y, tgt_mask))
        x = self.cross_attn_residual(
            x, lambda y: self.cross_attn(y, memory, memory, src_mask)
        )
        return self.feed_forward_residual(x, self.feed_forward)


class Encoder(nn.Module):
    """N identical EncoderLayers: (B, S, d_model) -> (B, S, d_model).

    The layer arguments are EncoderLayer's. With norm_first=True a final LayerNorm
    follows the stack (not in the paper): pre-LN layers leave their output
    un-normalised, so the stack's output needs one last normalisation.
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        N: int,
        *,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, h, d_ff=d_ff, dropout=dropout, norm_first=norm_first,
                         d_k=d_k, d_v=d_v)
            for _ in range(N)
        )  # fmt: skip
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)
        return self.norm(x)


class Decoder(nn.Module):
    """N identical DecoderLayers: (B, T, d_model) -> (B, T, d_model).

    The layer arguments are DecoderLayer's. With norm_first=True a final LayerNorm
    follows the stack (not in the paper), as in Encoder.
    """

    def __init__(
        self,
        d_model: int,
        h: int,
        N: int,
        *,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, h, d_ff=d_ff, dropout=dropout, norm_first=norm_first,
                         d_k=d_k, d_v=d_v)
            for _ in range(N)
        )  # fmt: skip
        self.norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        for layer in self.layers:
            x = layer(x, memory, src_mask, tgt_mask)
        return self.norm(x)
