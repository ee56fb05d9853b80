"""The Transformer (Figure 1): embeddings, encoder, decoder, output layer."""

from dataclasses import dataclass, replace

from torch import Tensor, nn

from aiayn.model.embeddings import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    TokenEmbedding,
)
from aiayn.model.layers import Decoder, Encoder
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

    @property
    def layer_options(self) -> dict:
        """The keywords of every encoder and decoder layer."""
        return dict(
            dim_feedforward=self.dim_feedforward,
            dropout=self.dropout,
            norm_first=self.norm_first,
            d_k=self.d_k,
            d_v=self.d_v,
        )

    def __post_init__(self):
        if self.positional not in POSITIONAL:
            choices = " or ".join(repr(name) for name in POSITIONAL)
            raise ValueError(f"positional={self.positional!r}: choose {choices}")


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

    Every weight matrix starts Xavier-uniform. ``aiayn.model.maps.attention_maps``
    returns every layer's attention weights.

    This is the reference: the model as the paper describes it. FastTransformer
    (aiayn.fast.transformer) has the same parameters and computes the same function
    in fewer operations; the trained models use it.
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
        options = c.layer_options
        self.encoder = Encoder(c.d_model, c.nhead, c.num_encoder_layers, **options)
        self.decoder = Decoder(c.d_model, c.nhead, c.num_decoder_layers, **options)
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
