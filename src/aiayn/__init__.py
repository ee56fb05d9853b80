"""The Transformer of *Attention Is All You Need*, built bottom-up.

``aiayn`` holds the reference model (aiayn.model) and the helpers that load its layers
from PyTorch's (aiayn.model.interop). The model the book trains is its fast form,
aiayn.fast.transformer.FastTransformer; tasks, training and decoding live in
aiayn.tasks, aiayn.train and aiayn.decoding.
"""

from aiayn.model import *  # noqa: F403 (the names aiayn.model lists)
from aiayn.model import __all__ as _reference_model
from aiayn.model.interop import (
    load_decoder_layer,
    load_encoder_layer,
    load_multihead_attention,
    store_multihead_attention,
    to_key_padding_mask,
    to_torch_mask,
)

__version__ = "0.1.0"

__all__ = [
    *_reference_model,
    "load_decoder_layer",
    "load_encoder_layer",
    "load_multihead_attention",
    "store_multihead_attention",
    "to_key_padding_mask",
    "to_torch_mask",
]
