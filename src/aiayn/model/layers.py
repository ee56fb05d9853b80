"""Layer normalisation, residual sub-layers, the encoder and decoder stacks (§3.1)."""

from collections.abc import Callable

import torch
from torch import Tensor, nn

from aiayn.fast.cache import DecoderCache, LayerCache
from aiayn.fast.dropout import Dropout
from aiayn.fast.packing import Packing
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.feed_forward import PositionwiseFeedForward

# attention weights by kind ("encoder_self", "decoder_self", "cross"), one per layer
AttentionMaps = dict[str, list[Tensor]]


class LayerNorm(nn.Module):
    """Normalise each position's features to mean 0, variance 1, then scale and shift.

    y = weight * (x - mean) / sqrt(var + eps) + bias, with the biased variance (divide
    by d_model), exactly as nn.LayerNorm. Shape: (..., d_model) -> (..., d_model).

    The layers below use nn.LayerNorm, which computes the same in one fused kernel;
    written out op by op as here, forward + backward is several times slower.
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))  # gain
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        # (..., 1) each
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias


class ResidualSublayer(nn.Module):
    """A residual connection around a sub-layer, with dropout and layer normalisation.

    Post-LN (the paper, default): LayerNorm(x + Dropout(Sublayer(x))).
    Pre-LN (norm_first=True, not in the paper): x + Dropout(Sublayer(LayerNorm(x))).
    """

    def __init__(self, d_model: int, dropout: float = 0.1, norm_first: bool = False):
        super().__init__()
        self.norm_first = norm_first
        self.norm = nn.LayerNorm(d_model)  # = LayerNorm above, fused
        self.dropout = Dropout(dropout)  # nn.Dropout, with a cheaper mask on a CPU

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


def attend_and_record(
    attention: MultiHeadAttention,
    heads: tuple[Tensor, Tensor, Tensor],
    mask: Tensor | None,
    maps: AttentionMaps | None,
    kind: str,
    packing: Packing | None = None,
) -> Tensor:
    """attention.attend(q, k, v, mask); given a dict ``maps``, keep the weights there.

    The weights (B, h, T, S) are appended to ``maps[kind]``, one tensor per layer.
    """
    if maps is None:
        return attention.attend(*heads, mask, packing=packing)  # no weights: faster
    out, weights = attention.attend(*heads, mask, need_weights=True, packing=packing)
    maps.setdefault(kind, []).append(weights.detach())
    return out


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each in a ResidualSublayer.

    forward(x (B, S, d_model), mask broadcastable to (B, S, S)) -> (B, S, d_model)

    Given a dict ``maps``, the self-attention weights (B, h, S, S) are appended to
    ``maps["encoder_self"]`` (Transformer.attention_maps). Given a ``packing``
    (aiayn.fast.packing), x holds only the real positions (N, d_model), and so does the
    output: attention alone sees them padded.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout, d_k=d_k, d_v=d_v)
        self.feed_forward = PositionwiseFeedForward(d_model, dim_feedforward, dropout)
        self.self_attn_residual = ResidualSublayer(d_model, dropout, norm_first)
        self.feed_forward_residual = ResidualSublayer(d_model, dropout, norm_first)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        maps: AttentionMaps | None = None,
        packing: Packing | None = None,
    ) -> Tensor:
        x = self.self_attn_residual(
            x, lambda y: self._self_attention(y, mask, maps, packing)
        )
        return self.feed_forward_residual(x, self.feed_forward)

    def _self_attention(
        self,
        y: Tensor,
        mask: Tensor | None,
        maps: AttentionMaps | None,
        packing: Packing | None,
    ) -> Tensor:
        heads = self.self_attn.project(y, y, y, packing)
        return attend_and_record(
            self.self_attn, heads, mask, maps, "encoder_self", packing
        )


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention over ``memory``, then the FFN.

    forward(x (B, T, d_model), memory (B, S, d_model),
            src_mask broadcastable to (B, T, S), tgt_mask broadcastable to (B, T, T))
        -> (B, T, d_model)

    With a ``cache`` (see aiayn.fast.cache, and ``start_cache``), x holds only the new
    positions: self-attention reads the earlier positions' keys and values from the
    cache and appends the new ones; encoder-decoder attention reads the memory's keys
    and values from the cache instead of projecting ``memory`` again; tgt_mask then
    broadcasts to (B, T, t + T), over the t cached and T new positions. Given a dict
    ``maps``, the weights are appended to maps["decoder_self"] and maps["cross"]. Given
    a ``packing`` of the target positions, x and the output are packed (N, d_model), as
    in EncoderLayer; memory stays padded.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, nhead, dropout, d_k=d_k, d_v=d_v)
        # encoder-decoder attention
        self.cross_attn = MultiHeadAttention(d_model, nhead, dropout, d_k=d_k, d_v=d_v)
        self.feed_forward = PositionwiseFeedForward(d_model, dim_feedforward, dropout)
        self.self_attn_residual = ResidualSublayer(d_model, dropout, norm_first)
        self.cross_attn_residual = ResidualSublayer(d_model, dropout, norm_first)
        self.feed_forward_residual = ResidualSublayer(d_model, dropout, norm_first)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: LayerCache | None = None,
        maps: AttentionMaps | None = None,
        packing: Packing | None = None,
    ) -> Tensor:
        x = self.self_attn_residual(
            x, lambda y: self._self_attention(y, tgt_mask, cache, maps, packing)
        )
        x = self.cross_attn_residual(
            x,
            lambda y: self._cross_attention(y, memory, src_mask, cache, maps, packing),
        )
        return self.feed_forward_residual(x, self.feed_forward)

    def _self_attention(
        self,
        y: Tensor,
        tgt_mask: Tensor | None,
        cache: LayerCache | None,
        maps: AttentionMaps | None,
        packing: Packing | None,
    ) -> Tensor:
        # (B, h, T, d_k), (B, h, T, d_k), (B, h, T, d_v)
        q, k, v = self.self_attn.project(y, y, y, packing)
        if cache is not None:  # earlier positions first: (B, h, t + T, d_k or d_v)
            k = cache.keys = torch.cat([cache.keys, k], dim=-2)
            v = cache.values = torch.cat([cache.values, v], dim=-2)
        return attend_and_record(
            self.self_attn, (q, k, v), tgt_mask, maps, "decoder_self", packing
        )

    def _cross_attention(
        self,
        y: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        cache: LayerCache | None,
        maps: AttentionMaps | None,
        packing: Packing | None,
    ) -> Tensor:
        if cache is None:
            heads = self.cross_attn.project(y, memory, memory, packing)
        else:  # the memory was projected once, by start_cache
            q = self.cross_attn.project_query(y, packing)  # (B, h, T, d_k)
            heads = (q, cache.memory_keys, cache.memory_values)
        return attend_and_record(
            self.cross_attn, heads, src_mask, maps, "cross", packing
        )

    def start_cache(self, memory: Tensor) -> LayerCache:
        """A cache with no target positions yet, and the memory's keys and values."""
        # (B, S, d_model) -> (B, h, S, d_k), (B, h, S, d_v)
        memory_keys, memory_values = self.cross_attn.project_key_value(memory, memory)
        B, h = memory.size(0), self.self_attn.nhead
        keys = memory.new_empty(B, h, 0, self.self_attn.d_k)  # (B, h, 0, d_k)
        values = memory.new_empty(B, h, 0, self.self_attn.d_v)
        return LayerCache(keys, values, memory_keys, memory_values)


class Encoder(nn.Module):
    """``num_layers`` identical EncoderLayers: (B, S, d_model) -> (B, S, d_model).

    With norm_first=True a final LayerNorm follows the stack (not in the paper): pre-LN
    layers leave their output un-normalised, so the stack's output needs one last
    normalisation.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        num_layers: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, nhead, dim_feedforward, dropout, norm_first, d_k, d_v)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        maps: AttentionMaps | None = None,
        packing: Packing | None = None,
    ) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask, maps, packing)
        return self.norm(x)


class Decoder(nn.Module):
    """``num_layers`` identical DecoderLayers: (B, T, d_model) -> (B, T, d_model).

    With norm_first=True a final LayerNorm follows the stack (not in the paper), as in
    Encoder. A new (empty) ``cache`` is filled here: each layer's ``start_cache``.
    """

    def __init__(
        self,
        d_model: int,
        nhead: int,
        num_layers: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        d_k: int | None = None,
        d_v: int | None = None,
    ):
        super().__init__()
        self.layers = nn.ModuleList(
            DecoderLayer(d_model, nhead, dim_feedforward, dropout, norm_first, d_k, d_v)
            for _ in range(num_layers)
        )
        self.norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        maps: AttentionMaps | None = None,
        packing: Packing | None = None,
    ) -> Tensor:
        if cache is not None and not cache.layers:  # a new cache: project memory once
            cache.layers = [layer.start_cache(memory) for layer in self.layers]
        for i, layer in enumerate(self.layers):
            layer_cache = None if cache is None else cache.layers[i]
            x = layer(x, memory, src_mask, tgt_mask, layer_cache, maps, packing)
        return self.norm(x)
