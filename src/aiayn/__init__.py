"""The Transformer of *Attention Is All You Need*, built bottom-up."""

from aiayn.fast.cache import DecoderCache, LayerCache
from aiayn.model import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LayerNorm,
    LearnedPositionalEmbedding,
    MultiHeadAttention,
    PositionalEncoding,
    PositionwiseFeedForward,
    ResidualSublayer,
    TokenEmbedding,
    Transformer,
    TransformerConfig,
    check_mask,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_encoding,
    subsequent_mask,
    target_mask,
)
from aiayn.model.interop import (
    load_decoder_layer,
    load_encoder_layer,
    load_multihead_attention,
    to_key_padding_mask,
    to_torch_mask,
)

__version__ = "0.1.0"

__all__ = [
    "Decoder",
    "DecoderCache",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "LayerCache",
    "LayerNorm",
    "LearnedPositionalEmbedding",
    "MultiHeadAttention",
    "PositionalEncoding",
    "PositionwiseFeedForward",
    "ResidualSublayer",
    "TokenEmbedding",
    "Transformer",
    "TransformerConfig",
    "check_mask",
    "load_decoder_layer",
    "load_encoder_layer",
    "load_multihead_attention",
    "padding_mask",
    "scaled_dot_product_attention",
    "sinusoidal_encoding",
    "subsequent_mask",
    "target_mask",
    "to_key_padding_mask",
    "to_torch_mask",
]
