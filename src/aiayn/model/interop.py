"""Load weights from PyTorch's own Transformer modules into ours, and convert masks.

The names map as: h = nhead, d_ff = dim_feedforward, N = num_encoder_layers (and
num_decoder_layers). nn.MultiheadAttention stacks W^Q, W^K and W^V in one
in_proj_weight (rows [0, h d_k) are W^Q, then W^K, then W^V) and calls W^O out_proj;
ours keeps them apart, as w_q, w_k, w_v and w_o.

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


def check_same_shape(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    """Raise a ValueError unless the two attentions have the same shapes and biases."""
    d_model = ours.w_o.out_features
    ours_shape = (d_model, ours.h, ours.d_k, ours.d_v)
    theirs_shape = (theirs.embed_dim, theirs.num_heads, *[theirs.head_dim] * 2)
    if ours_shape != theirs_shape:
        raise ValueError(
            f"shape mismatch: ours has d_model={d_model}, h={ours.h}, d_k={ours.d_k}, "
            f"d_v={ours.d_v}; theirs has embed_dim={theirs.embed_dim}, "
            f"num_heads={theirs.num_heads}"
        )
    if not theirs._qkv_same_embed_dim or theirs.in_proj_bias is None:
        raise ValueError(
            "theirs must use one in_proj_weight (kdim == vdim == embed_dim) and biases"
        )


@torch.no_grad()
def load_multihead_attention(
    ours: MultiHeadAttention, theirs: nn.MultiheadAttention
) -> MultiHeadAttention:
    """Copy nn.MultiheadAttention's weights into ours: in_proj's three blocks of rows
    into W^Q, W^K, W^V, out_proj into W^O."""
    check_same_shape(ours, theirs)
    projections = (ours.w_q, ours.w_k, ours.w_v)
    weights = theirs.in_proj_weight.chunk(3)  # W^Q, W^K, W^V: (h d_k, d_model) each
    for projection, weight, bias in zip(
        projections, weights, theirs.in_proj_bias.chunk(3), strict=True
    ):
        projection.weight.copy_(weight)
        projection.bias.copy_(bias)
    ours.w_o.load_state_dict(theirs.out_proj.state_dict())
    return ours


@torch.no_grad()
def store_multihead_attention(
    ours: MultiHeadAttention, theirs: nn.MultiheadAttention
) -> nn.MultiheadAttention:
    """The other way: W^Q, W^K, W^V stacked into in_proj, W^O into out_proj."""
    check_same_shape(ours, theirs)
    projections = (ours.w_q, ours.w_k, ours.w_v)
    theirs.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))
    theirs.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
    theirs.out_proj.load_state_dict(ours.w_o.state_dict())
    return theirs


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
