"""Load weights from PyTorch's own Transformer modules into ours, and convert masks.

Boolean masks mean opposite things on the two sides: here True = "may attend"; in
nn.MultiheadAttention / nn.Transformer* a boolean attn_mask or key_padding_mask marks
with True the positions that may NOT be attended to. Convert at the boundary with
to_torch_mask.
"""

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model.attention import MultiHeadAttention
from aiayn.model.layers import DecoderLayer, EncoderLayer, ResidualSublayer


def to_torch_mask(mask: Tensor) -> Tensor:
    """Our mask (True = may attend) -> PyTorch's (True = masked): just ``~mask``."""
    return ~mask


def to_key_padding_mask(mask: Tensor) -> Tensor:
    """Our padding mask (B, 1, S) -> PyTorch's key_padding_mask (B, S): True = pad."""
    return ~mask.squeeze(-2)  # (B, 1, S) -> (B, S)


@torch.no_grad()
def load_multihead_attention(
    ours: MultiHeadAttention, theirs: nn.MultiheadAttention
) -> MultiHeadAttention:
    """Copy nn.MultiheadAttention's weights into ours (same [W^Q; W^K; W^V] layout)."""
    d_model = ours.out_proj.out_features
    if (d_model, ours.nhead) != (theirs.embed_dim, theirs.num_heads):
        raise ValueError(
            f"shape mismatch: ours has d_model={d_model}, nhead={ours.nhead}; "
            f"theirs has embed_dim={theirs.embed_dim}, num_heads={theirs.num_heads}"
        )
    if not theirs._qkv_same_embed_dim or theirs.in_proj_bias is None:
        raise ValueError(
            "theirs must use one in_proj_weight (kdim == vdim == embed_dim) and biases"
        )
    ours.in_proj.weight.copy_(theirs.in_proj_weight)
    ours.out_proj.weight.copy_(theirs.out_proj.weight)
    ours.in_proj.bias.copy_(theirs.in_proj_bias)
    ours.out_proj.bias.copy_(theirs.out_proj.bias)
    return ours


def _load_feed_forward(ours: EncoderLayer | DecoderLayer, theirs: nn.Module) -> None:
    ours.feed_forward.linear1.load_state_dict(theirs.linear1.state_dict())
    ours.feed_forward.linear2.load_state_dict(theirs.linear2.state_dict())


def _check_compatible(residual: ResidualSublayer, theirs: nn.Module) -> None:
    if residual.norm_first != theirs.norm_first:
        raise ValueError(
            f"norm_first differs: ours {residual.norm_first}, theirs "
            f"{theirs.norm_first}"
        )
    if theirs.activation is not F.relu:
        raise ValueError(f"theirs uses activation {theirs.activation}; ours is ReLU")


def load_encoder_layer(
    ours: EncoderLayer, theirs: nn.TransformerEncoderLayer
) -> EncoderLayer:
    """Copy an nn.TransformerEncoderLayer (ReLU activation) into our EncoderLayer."""
    _check_compatible(ours.self_attn_residual, theirs)
    load_multihead_attention(ours.self_attn, theirs.self_attn)
    _load_feed_forward(ours, theirs)
    ours.self_attn_residual.norm.load_state_dict(theirs.norm1.state_dict())
    ours.feed_forward_residual.norm.load_state_dict(theirs.norm2.state_dict())
    return ours


def load_decoder_layer(
    ours: DecoderLayer, theirs: nn.TransformerDecoderLayer
) -> DecoderLayer:
    """Copy an nn.TransformerDecoderLayer (ReLU activation) into our DecoderLayer."""
    _check_compatible(ours.self_attn_residual, theirs)
    load_multihead_attention(ours.self_attn, theirs.self_attn)
    load_multihead_attention(ours.cross_attn, theirs.multihead_attn)
    _load_feed_forward(ours, theirs)
    ours.self_attn_residual.norm.load_state_dict(theirs.norm1.state_dict())
    ours.cross_attn_residual.norm.load_state_dict(theirs.norm2.state_dict())
    ours.feed_forward_residual.norm.load_state_dict(theirs.norm3.state_dict())
    return ours
