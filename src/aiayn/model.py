"""The Transformer (Figure 1): embeddings, encoder, decoder, output layer."""

from torch import Tensor, nn

from aiayn.embeddings import PositionalEncoding, TokenEmbedding
from aiayn.layers import Decoder, Encoder
from aiayn.masks import subsequent_mask


class Transformer(nn.Module):
    """Encoder-decoder Transformer; argument names follow nn.Transformer.

    forward(src (B, S) token ids, tgt (B, T) token ids,
            src_mask broadcastable to (B, 1, S), tgt_mask broadcastable to (B, T, T))
        -> logits (B, T, tgt_vocab); apply softmax (or cross-entropy) yourself.
    Without a tgt_mask the decoder still cannot look ahead (see decode).

    tie_weights=True shares one weight matrix between the target embedding and the
    pre-softmax linear layer, and also the source embedding when src_vocab == tgt_vocab
    (§3.4: the paper shares all three, with one vocabulary for both languages).

    Every weight matrix starts Xavier-uniform. ``config`` holds the constructor
    arguments: ``Transformer(**model.config)`` rebuilds the model. For the attention
    maps, run it inside ``with recording_attention(model):`` and then call
    ``model.attention_maps()``.
    """

    def __init__(
        self,
        src_vocab: int,
        tgt_vocab: int,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        tie_weights: bool = True,
        max_len: int = 5000,
    ):
        super().__init__()
        self.config = dict(
            src_vocab=src_vocab,
            tgt_vocab=tgt_vocab,
            d_model=d_model,
            nhead=nhead,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            norm_first=norm_first,
            tie_weights=tie_weights,
            max_len=max_len,
        )
        self.src_embed = TokenEmbedding(src_vocab, d_model)
        self.tgt_embed = TokenEmbedding(tgt_vocab, d_model)
        # fixed: shared by both
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        self.encoder = Encoder(
            d_model, nhead, num_encoder_layers, dim_feedforward, dropout, norm_first
        )
        self.decoder = Decoder(
            d_model, nhead, num_decoder_layers, dim_feedforward, dropout, norm_first
        )
        # pre-softmax linear
        self.output_projection = nn.Linear(d_model, tgt_vocab, bias=False)
        if tie_weights:
            # (tgt_vocab, d_model)
            self.output_projection.weight = self.tgt_embed.embedding.weight
            if src_vocab == tgt_vocab:
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

        Without a tgt_mask the decoder still may not look ahead: subsequent_mask(T) is
        used.
        """
        if tgt_mask is None:
            tgt_mask = subsequent_mask(tgt.size(1), device=tgt.device)  # (T, T)
        return self.decoder(
            self.positional(self.tgt_embed(tgt)), memory, src_mask, tgt_mask
        )

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

    def attention_maps(self) -> dict[str, list[Tensor]]:
        """Attention weights of the last forward pass in ``recording_attention(model)``.

        Returns one tensor per layer: "encoder_self" (B, h, S, S), "decoder_self" (B, h,
        T, T) and "cross" (B, h, T, S) (rows are queries, columns keys).
        """
        maps = {
            "encoder_self": [
                layer.self_attn.last_weights for layer in self.encoder.layers
            ],
            "decoder_self": [
                layer.self_attn.last_weights for layer in self.decoder.layers
            ],
            "cross": [layer.cross_attn.last_weights for layer in self.decoder.layers],
        }
        if any(w is None for weights in maps.values() for w in weights):
            raise RuntimeError(
                "no attention weights recorded: run the model inside "
                "`with aiayn.recording_attention(model):` first"
            )
        return maps
