"""FastTransformer: the reference Transformer's parameters, computed in fewer steps.

``FastTransformer(config)`` is a ``Transformer`` (aiayn.model.transformer): the same
modules, the same parameters in the same order, so the same initial weights for a
seed, and checkpoints that load into either. Only how it computes differs:

- ``forward`` in training mode on a CPU, with one mask row per sequence on each side,
  computes the position-wise layers on the real positions only (aiayn.fast.packing):
  the same logits there, and 0 at the target's padding, which the loss ignores;
- attention runs the fused or the short-sequence kernel (aiayn.fast.attention),
  chosen by ``model.kernels``;
- ``decode`` takes and returns a key/value cache (aiayn.fast.cache), so that a decoding
  step runs the decoder on its newest token only (aiayn.decoding).

The functions ``encode``, ``decode`` and ``packed_forward`` compute, on any
Transformer's weights, what its methods compute (decoding uses them on reference models
too); tests/test_fast.py checks them against the reference, forward and backward.
"""

from torch import Tensor

from aiayn.fast.attention import DEFAULT_KERNELS, Kernels
from aiayn.fast.cache import DecoderCache
from aiayn.fast.layers import decoder_layer, encoder_layer, layer_norm, start_cache
from aiayn.fast.packing import Packing
from aiayn.model.masks import subsequent_mask
from aiayn.model.transformer import Transformer, TransformerConfig


def encode(
    model: Transformer,
    src: Tensor,
    src_mask: Tensor | None = None,
    kernels: Kernels = DEFAULT_KERNELS,
    packing: Packing | None = None,
) -> Tensor:
    """model.encode(src, src_mask), fast: (B, S) ids -> memory (B, S, d_model).

    With a ``packing`` of the source, the memory's real positions only, (N, d_model).
    """
    x = model.positional(model.src_embed(src))
    if packing is not None:
        x = packing.pack(x)
    for layer in model.encoder.layers:
        x = encoder_layer(layer, x, src_mask, kernels, packing)
    return layer_norm(model.encoder.norm, x)


def decode(
    model: Transformer,
    memory: Tensor,
    src_mask: Tensor | None,
    tgt: Tensor,
    tgt_mask: Tensor | None = None,
    cache: DecoderCache | None = None,
    kernels: Kernels = DEFAULT_KERNELS,
) -> tuple[Tensor, DecoderCache | None]:
    """model.decode(memory, src_mask, tgt, tgt_mask), fast, and a key/value cache.

    (B, T) target ids and memory (B, S, d_model) -> (B, T, d_model). With a cache,
    ``tgt`` holds only the positions after the ``cache.length`` cached ones (a tgt_mask
    is then (B or 1, T, length + T)), and the cache returned holds them too; without
    one, None is returned. Without a tgt_mask a causal mask is used.
    """
    offset = 0 if cache is None else cache.length
    if tgt_mask is None:  # position offset + i sees positions 0..offset + i
        causal = subsequent_mask(offset + tgt.size(1), device=tgt.device)
        tgt_mask = causal[None, offset:]  # (1, T, offset + T)
    layers = model.decoder.layers
    if cache is not None and not cache.layers:  # a new cache: project memory once
        cache = DecoderCache([start_cache(layer, memory) for layer in layers])
    x = model.positional(model.tgt_embed(tgt), offset)  # (B, T, d_model)
    layer_caches = []
    for i, layer in enumerate(layers):
        layer_cache = None if cache is None else cache.layers[i]
        x, layer_cache = decoder_layer(
            layer, x, memory, (src_mask, tgt_mask), kernels, layer_cache
        )
        layer_caches.append(layer_cache)
    new_cache = None if cache is None else DecoderCache(layer_caches)
    return layer_norm(model.decoder.norm, x), new_cache


def packed_forward(
    model: Transformer,
    src: Tensor,
    tgt: Tensor,
    masks: tuple[Tensor, Tensor],
    kernels: Kernels = DEFAULT_KERNELS,
) -> Tensor:
    """model(src, tgt, *masks) on the real positions only; logits 0 at the target's
    padding. A position is real if some query may attend to it (Packing.from_mask)."""
    src_mask, tgt_mask = masks
    source, target = Packing.from_mask(src_mask), Packing.from_mask(tgt_mask)
    # (B, S) -> (N_src, d_model) -> (B, S, d_model)
    memory = source.unpack(encode(model, src, src_mask, kernels, source))
    y = target.pack(model.positional(model.tgt_embed(tgt)))  # (N_tgt, d_model)
    for layer in model.decoder.layers:
        y, _ = decoder_layer(layer, y, memory, masks, kernels, packing=target)
    y = layer_norm(model.decoder.norm, y)
    return target.unpack(model.output_projection(y))  # (B, T, tgt_vocab)


class FastTransformer(Transformer):
    """The Transformer of ``config``, computed fast: ``FastTransformer(config)``.

    ``encode``, ``decode`` and ``forward`` compute the reference's functions with the
    fast paths; ``aiayn.model.maps.attention_maps`` runs the reference stacks. One
    difference: in training mode on a CPU, ``forward`` computes the real positions
    alone (packed) and returns 0 for the logits of a padded target position, which
    no loss reads; it stays ``forward`` so that DistributedDataParallel, which wraps
    ``forward``, averages the gradients of packed steps too.
    ``kernels`` chooses the attention kernels and whether training packs
    (aiayn.fast.attention.Kernels); ``model.kernels = Kernels(short_sequence=0)``
    changes them.
    """

    def __init__(self, config: TransformerConfig, kernels: Kernels = DEFAULT_KERNELS):
        super().__init__(config)
        self.kernels = kernels

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        return encode(self, src, src_mask, self.kernels)

    def decode(
        self,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt: Tensor,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        return decode(self, memory, src_mask, tgt, tgt_mask, kernels=self.kernels)[0]

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        if self.training and self.kernels.pack and packs(src, tgt, src_mask, tgt_mask):
            return packed_forward(self, src, tgt, (src_mask, tgt_mask), self.kernels)
        memory = self.encode(src, src_mask)  # (B, S, d_model)
        return self.output_projection(self.decode(memory, src_mask, tgt, tgt_mask))


def packs(
    src: Tensor, tgt: Tensor, src_mask: Tensor | None, tgt_mask: Tensor | None
) -> bool:
    """Whether forward may pack: on a CPU, with one mask per sequence on both sides.

    The masks must be (B, ., S) and (B, ., T): one row of keys per sequence.
    """
    return (
        src.device.type == "cpu"
        and src_mask is not None
        and tgt_mask is not None
        and src_mask.dim() == tgt_mask.dim() == 3
        and src_mask.size(0) == tgt_mask.size(0) == src.size(0)
        and (src_mask.size(-1), tgt_mask.size(-1)) == (src.size(1), tgt.size(1))
    )
