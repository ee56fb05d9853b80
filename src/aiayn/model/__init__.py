"""The reference model: the paper's components, each as §3 describes it.

Nothing here imports the rest of the library. The fast paths that the trained models
use (aiayn.fast) compute the same functions, and tests check that they do.
"""

from aiayn.model.attention import MultiHeadAttention, scaled_dot_product_attention
from aiayn.model.embeddings import (
    LearnedPositionalEmbedding,
    PositionalEncoding,
    TokenEmbedding,
    sinusoidal_encoding,
)
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.layers import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LayerNorm,
    ResidualSublayer,
)
from aiayn.model.maps import attention_maps
from aiayn.model.masks import check_mask, padding_mask, subsequent_mask, target_mask
from aiayn.model.transformer import Transformer, TransformerConfig

__all__ = [
    "Decoder",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "LayerNorm",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "PositionalEncoding",
    "PositionwiseFeedForward",
    "ResidualSublayer",
    "TokenEmbedding",
    "Transformer",
    "TransformerConfig",
    "attention_maps",
    "check_mask",
    "padding_mask",
    "scaled_dot_product_attention",
    "sinusoidal_encoding",
    "subsequent_mask",
    "target_mask",
]
