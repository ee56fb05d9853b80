"""The Transformer (Figure 1): embeddings, encoder, decoder, output layer."""

from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn

from aiayn.fast.cache import DecoderCache
from aiayn.fast.packing import Packing
from aiayn.model.embeddings import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    TokenEmbedding,
)
from aiayn.model.layers import AttentionMaps, Decoder, Encoder
from aiayn.model.masks import subsequent_mask


@dataclass(frozen=True)
class TransformerConfig:
    """Everything that fixes a Transformer's shape; names follow nn.Transformer.

    The defaults are the paper's base model (Table 3): d_model 512, h 8, N 6,
    d_ff 2048, dropout 0.1. ``Transformer(config)`` builds it; checkpoints store it.
    """

    src_vocab: int  # number of source token ids
    tgt_vocab: int  # number of target token ids
    d_model: int = 512
    nhead: int = 8  # the paper's h
    num_encoder_layers: int = 6  # the paper's N
    num_decoder_layers: int = 6
    dim_feedforward: int = 2048  # the paper's d_ff
    dropout: float = 0.1  # the paper's P_drop
    norm_first: bool = False  # True: pre-LN (not in the paper)
    # one matrix for the target embedding and the pre-softmax linear layer (and the
    # source embedding when src_vocab == tgt_vocab), as §3.4
    tie_weights: bool = True
    positional: str = "sinusoidal"  # or "learned" (Table 3, row E)
    d_k: int | None = None  # key and query width per head; None: d_model / nhead
    d_v: int | None = None  # value width per head; None: d_model / nhead
    max_positions: int = 5000  # the longest sequence the positional table covers

    def __post_init__(self):
        if self.positional not in POSITIONAL:
            choices = " or ".join(repr(name) for name in POSITIONAL)
            raise ValueError(f"positional={self.positional!r}: choose {choices}")


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


POSITIONAL = {
    "sinusoidal": PositionalEncoding,
    "learned": LearnedPositionalEmbedding,
}


class Transformer(nn.Module):
    """Encoder-decoder Transformer, built from a TransformerConfig.

    ``Transformer(config)``, or with the config's fields as keywords, e.g.
    ``Transformer(src_vocab=14, tgt_vocab=14, d_model=64, nhead=4)``; keywords next to
    a config change those fields: ``Transformer(model.config, dropout=0.0)``.

    forward(src (B, S) token ids, tgt (B, T) token ids,
            src_mask broadcastable to (B, 1, S), tgt_mask broadcastable to (B, T, T))
        -> logits (B, T, tgt_vocab); apply softmax (or cross-entropy) yourself.
    Without a tgt_mask the decoder still cannot look ahead (see decode).

    tie_weights=True shares one weight matrix between the target embedding and the
    pre-softmax linear layer, and also the source embedding when src_vocab == tgt_vocab
    (§3.4: the paper shares all three, with one vocabulary for both languages).

    Every weight matrix starts Xavier-uniform. ``model.attention_maps(src, tgt, ...)``
    runs a forward pass and returns every layer's attention weights.

    In training mode on a CPU, with (B, ., S) and (B, T, T) masks, forward computes the
    position-wise layers on the real positions only (aiayn.fast.packing): the same
    logits there, and 0 at the target's padding, which the loss ignores.
    """

    def __init__(self, config: TransformerConfig | None = None, **fields):
        super().__init__()
        if config is None:
            config = TransformerConfig(**fields)
        elif fields:
            config = replace(config, **fields)
        self.config = config
        c = config  # short, for the arguments below
        self.src_embed = TokenEmbedding(c.src_vocab, c.d_model)
        self.tgt_embed = TokenEmbedding(c.tgt_vocab, c.d_model)
        # one table, shared by both sides
        self.positional = POSITIONAL[c.positional](
            c.d_model, c.max_positions, c.dropout
        )
        layer_options = (c.dim_feedforward, c.dropout, c.norm_first, c.d_k, c.d_v)
        self.encoder = Encoder(c.d_model, c.nhead, c.num_encoder_layers, *layer_options)
        self.decoder = Decoder(c.d_model, c.nhead, c.num_decoder_layers, *layer_options)
        # pre-softmax linear
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab, bias=False)
        if c.tie_weights:
            # (tgt_vocab, d_model)
            self.output_projection.weight = self.tgt_embed.embedding.weight
            if c.src_vocab == c.tgt_vocab:
                self.src_embed.embedding.weight = self.tgt_embed.embedding.weight
        for p in self.parameters():  # each shared tensor appears once
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def encode(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        maps: AttentionMaps | None = None,
    ) -> Tensor:
        """(B, S) source ids -> memory (B, S, d_model)."""
        return self.encoder(self.positional(self.src_embed(src)), src_mask, maps)

    def decode(
        self,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt: Tensor,
        tgt_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
        maps: AttentionMaps | None = None,
    ) -> Tensor:
        """(B, T) target ids and memory (B, S, d_model) -> (B, T, d_model).

        Without a tgt_mask the decoder still may not look ahead: a causal mask is used.
        With a cache, ``tgt`` holds only the positions after the ``cache.length`` cached
        ones, and appends them to it (a tgt_mask is then (B or 1, T, length + T)).
        """
        offset = 0 if cache is None else cache.length
        if tgt_mask is None:  # position offset + i sees positions 0..offset + i
            causal = subsequent_mask(offset + tgt.size(1), device=tgt.device)
            tgt_mask = causal[None, offset:]  # (1, T, offset + T)
        x = self.positional(self.tgt_embed(tgt), offset)  # (B, T, d_model)
        return self.decoder(x, memory, src_mask, tgt_mask, cache, maps)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        if self.training and packs(src, tgt, src_mask, tgt_mask):
            return self.packed_forward(src, tgt, src_mask, tgt_mask)
        memory = self.encode(src, src_mask)  # (B, S, d_model)
        # (B, T, V)
        return self.output_projection(self.decode(memory, src_mask, tgt, tgt_mask))

    def packed_forward(
        self, src: Tensor, tgt: Tensor, src_mask: Tensor, tgt_mask: Tensor
    ) -> Tensor:
        """forward on the real positions only; logits 0 at the target's padding.

        A position is real if some query may attend to it (Packing.from_mask).
        """
        source, target = Packing.from_mask(src_mask), Packing.from_mask(tgt_mask)
        # (B, S) -> (N_src, d_model)
        x = source.pack(self.positional(self.src_embed(src)))
        memory = source.unpack(self.encoder(x, src_mask, packing=source))  # (B, S, .)
        # (B, T) -> (N_tgt, d_model)
        y = target.pack(self.positional(self.tgt_embed(tgt)))
        y = self.decoder(y, memory, src_mask, tgt_mask, packing=target)
        return target.unpack(self.output_projection(y))  # (B, T, tgt_vocab)

    @torch.no_grad()
    def attention_maps(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> AttentionMaps:
        """Run a forward pass and return the attention weights of every layer.

        One tensor per layer: "encoder_self" (B, h, S, S), "decoder_self" (B, h, T, T)
        and "cross" (B, h, T, S) (rows are queries, columns keys).
        """
        maps: AttentionMaps = {"encoder_self": [], "decoder_self": [], "cross": []}
        memory = self.encode(src, src_mask, maps)
        self.decode(memory, src_mask, tgt, tgt_mask, maps=maps)
        return maps
