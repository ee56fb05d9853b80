"""The Transformer (Figure 1): embeddings, encoder, decoder, output layer."""

import math
from dataclasses import dataclass

from torch import Tensor, nn

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.embeddings import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    TokenEmbedding,
)
from aiayn.model.layers import Decoder, Encoder
from aiayn.model.masks import subsequent_mask


@dataclass(frozen=True)
class TransformerConfig:
    """Everything that fixes a Transformer's shape, in the paper's symbols.

    The defaults are the paper's base model (Table 3): d_model 512, h 8, N 6,
    d_ff 2048, P_drop 0.1. ``Transformer(config)`` builds it; checkpoints store it.
    """

    src_vocab: int  # number of source token ids
    tgt_vocab: int  # number of target token ids
    d_model: int = 512
    h: int = 8  # attention heads
    encoder_layers: int = 6  # the paper's N, for the encoder
    decoder_layers: int = 6  # and for the decoder
    d_ff: int = 2048  # the feed-forward network's inner width
    dropout: float = 0.1  # the paper's P_drop
    norm_first: bool = False  # True: pre-LN (not in the paper)
    # one matrix for the target embedding and the pre-softmax linear layer (and the
    # source embedding when src_vocab == tgt_vocab), as §3.4
    tie_weights: bool = True
    positional: str = "sinusoidal"  # or "learned" (Table 3, row E)
    d_k: int | None = None  # key and query width per head; None: d_model / h
    d_v: int | None = None  # value width per head; None: d_model / h
    max_positions: int = 5000  # the longest sequence the positional table covers

    def __post_init__(self):
        if self.positional not in POSITIONAL:
            choices = " or ".join(repr(name) for name in POSITIONAL)
            raise ValueError(f"positional={self.positional!r}: choose {choices}")


POSITIONAL = {
    "sinusoidal": PositionalEncoding,
    "learned": LearnedPositionalEmbedding,
}


class Transformer(nn.Module):
    """Encoder-decoder Transformer of a TransformerConfig: ``Transformer(config)``.

    forward(src (B, S) token ids, tgt (B, T) token ids,
            src_mask broadcastable to (B, 1, S), tgt_mask broadcastable to (B, T, T))
        -> logits (B, T, tgt_vocab); apply softmax (or cross-entropy) yourself.
    Without a tgt_mask the decoder still cannot look ahead (see decode).

    tie_weights=True shares one weight matrix between the target embedding and the
    pre-softmax linear layer, and also the source embedding when src_vocab == tgt_vocab
    (§3.4 shares all three; §5.1 uses one vocabulary for both languages).

    Every weight matrix starts Xavier-uniform (``xavier_initialise``).
    ``aiayn.model.maps.attention_maps`` returns every layer's attention weights.

    This is the reference: the model as the paper describes it. FastTransformer
    (aiayn.fast.transformer) has the same parameters and computes the same function
    in fewer operations; the trained models use it.
    """

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = c = config
        self.src_embed = TokenEmbedding(c.src_vocab, c.d_model)
        self.tgt_embed = TokenEmbedding(c.tgt_vocab, c.d_model)
        # one table, shared by both sides
        self.positional = POSITIONAL[c.positional](
            c.d_model, c.max_positions, c.dropout
        )
        self.encoder = Encoder(c.d_model, c.h, c.encoder_layers, d_ff=c.d_ff,
                               dropout=c.dropout, norm_first=c.norm_first,
                               d_k=c.d_k, d_v=c.d_v)  # fmt: skip
        self.decoder = Decoder(c.d_model, c.h, c.decoder_layers, d_ff=c.d_ff,
                               dropout=c.dropout, norm_first=c.norm_first,
                               d_k=c.d_k, d_v=c.d_v)  # fmt: skip
        # pre-softmax linear
        self.output_projection = nn.Linear(c.d_model, c.tgt_vocab, bias=False)
        if c.tie_weights:
            # (tgt_vocab, d_model)
            self.output_projection.weight = self.tgt_embed.embedding.weight
            if c.src_vocab == c.tgt_vocab:
                self.src_embed.embedding.weight = self.tgt_embed.embedding.weight
        xavier_initialise(self)

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """(B, S) source ids -> memory (B, S, d_model)."""
        return self.encoder(self.positional(self.src_embed(src)), src_mask)

    def decode(
        self,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt: Tensor,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        """(B, T) target ids and memory (B, S, d_model) -> (B, T, d_model).

        Without a tgt_mask the decoder still may not look ahead: a causal mask is used.
        """
        if tgt_mask is None:
            tgt_mask = subsequent_mask(tgt.size(1), device=tgt.device)  # (T, T)
        x = self.positional(self.tgt_embed(tgt))  # (B, T, d_model)
        return self.decoder(x, memory, src_mask, tgt_mask)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
    ) -> Tensor:
        memory = self.encode(src, src_mask)  # (B, S, d_model)
        # (B, T, V)
        return self.output_projection(self.decode(memory, src_mask, tgt, tgt_mask))


def xavier_initialise(model: nn.Module) -> None:
    """Every weight matrix of ``model`` Xavier-uniform, each shared one once: U(-a, a)
    with a = sqrt(6 / (fan_in + fan_out)).

    Not in the paper, which says nothing of initialisation; The Annotated Transformer
    and nn.Transformer start so. An attention's W^Q, W^K and W^V take the bound of the
    three side by side, sqrt(6 / (d_model + 2 h d_k + h d_v)), as nn.MultiheadAttention
    initialises them: one stacked matrix there, so with one bound; each alone would
    get a bound about sqrt(2) larger, and the toy tasks learn more slowly from it.
    """
    for p in model.parameters():  # each shared tensor appears once
        if p.dim() > 1:
            nn.init.xavier_uniform_(p)
    for attention in model.modules():
        if isinstance(attention, MultiHeadAttention):
            projections = (attention.w_q, attention.w_k, attention.w_v)
            fan_out = sum(w.out_features for w in projections)
            bound = math.sqrt(6 / (attention.w_q.in_features + fan_out))
            for w in projections:
                nn.init.uniform_(w.weight, -bound, bound)
