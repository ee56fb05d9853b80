import pytest
import torch
from torch import nn
from torch.testing import assert_close

from aiayn import (
    Decoder,
    DecoderLayer,
    Encoder,
    EncoderLayer,
    LayerNorm,
    ResidualSublayer,
    load_decoder_layer,
    load_encoder_layer,
    padding_mask,
    subsequent_mask,
    target_mask,
    to_key_padding_mask,
    to_torch_mask,
)

D_MODEL, H, D_FF = 16, 4, 32
SRC = torch.tensor([[3, 4, 5, 6, 7], [3, 4, 5, 0, 0], [3, 0, 0, 0, 0]])  # 0 = padding
TGT = torch.tensor([[1, 2, 3, 4], [1, 2, 0, 0], [1, 2, 3, 0]])


def test_layer_norm_equals_pytorch():
    torch.manual_seed(0)
    ours, theirs = LayerNorm(D_MODEL), nn.LayerNorm(D_MODEL)
    with torch.no_grad():
        for p in (*ours.parameters(), *theirs.parameters()):
            p.normal_()  # not the trivial ones and zeros
        theirs.load_state_dict(ours.state_dict())
    x = torch.randn(3, 5, D_MODEL) * 10 + 3
    assert_close(ours(x), theirs(x))
    out = LayerNorm(D_MODEL)(x)
    assert_close(out.mean(-1), torch.zeros(3, 5), atol=1e-5, rtol=0)
    assert_close(out.var(-1, correction=0), torch.ones(3, 5), atol=1e-3, rtol=0)


def test_residual_sublayer_post_ln_and_pre_ln():
    torch.manual_seed(0)
    x = torch.randn(2, 3, D_MODEL)
    double = lambda y: 2 * y  # noqa: E731
    post = ResidualSublayer(D_MODEL, dropout=0.0).eval()
    pre = ResidualSublayer(D_MODEL, dropout=0.0, norm_first=True).eval()
    assert_close(post(x, double), post.norm(x + 2 * x))
    assert_close(pre(x, double), x + 2 * pre.norm(x))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_matches_pytorch(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, H, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    ours = load_encoder_layer(
        EncoderLayer(D_MODEL, H, d_ff=D_FF, dropout=0.0, norm_first=norm_first),
        theirs,
    ).eval()
    x = torch.randn(3, 5, D_MODEL)
    mask = padding_mask(SRC, 0)
    expected = theirs(x, src_key_padding_mask=to_key_padding_mask(mask))
    # PyTorch's fast path may zero the padded positions; compare the rest
    real = mask.squeeze(1)
    assert_close(ours(x, mask)[real], expected[real])


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_pytorch(norm_first):
    torch.manual_seed(0)
    theirs = nn.TransformerDecoderLayer(
        D_MODEL, H, D_FF, dropout=0.0, batch_first=True, norm_first=norm_first
    ).eval()
    ours = load_decoder_layer(
        DecoderLayer(D_MODEL, H, d_ff=D_FF, dropout=0.0, norm_first=norm_first),
        theirs,
    ).eval()
    x, memory = torch.randn(3, 4, D_MODEL), torch.randn(3, 5, D_MODEL)
    src_mask, tgt_mask = padding_mask(SRC, 0), target_mask(TGT, 0)
    expected = theirs(
        x,
        memory,
        tgt_mask=to_torch_mask(subsequent_mask(4)),
        tgt_key_padding_mask=to_key_padding_mask(padding_mask(TGT, 0)),
        memory_key_padding_mask=to_key_padding_mask(src_mask),
    )
    assert_close(ours(x, memory, src_mask, tgt_mask), expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_stacks_match_pytorch(norm_first):
    torch.manual_seed(0)
    kwargs = dict(dropout=0.0, batch_first=True, norm_first=norm_first)
    encoder_layer = nn.TransformerEncoderLayer(D_MODEL, H, D_FF, **kwargs)
    decoder_layer = nn.TransformerDecoderLayer(D_MODEL, H, D_FF, **kwargs)
    # pre-LN needs one; post-LN none
    final_norm = nn.LayerNorm(D_MODEL) if norm_first else None
    their_encoder = nn.TransformerEncoder(
        encoder_layer, 2, norm=final_norm, enable_nested_tensor=False
    ).eval()
    their_decoder = nn.TransformerDecoder(decoder_layer, 2, norm=final_norm).eval()
    encoder = Encoder(
        D_MODEL, H, 2, d_ff=D_FF, dropout=0.0, norm_first=norm_first
    ).eval()
    decoder = Decoder(
        D_MODEL, H, 2, d_ff=D_FF, dropout=0.0, norm_first=norm_first
    ).eval()
    for ours, theirs in zip(encoder.layers, their_encoder.layers, strict=True):
        load_encoder_layer(ours, theirs)
    for ours, theirs in zip(decoder.layers, their_decoder.layers, strict=True):
        load_decoder_layer(ours, theirs)
    if norm_first:
        encoder.norm.load_state_dict(final_norm.state_dict())
        decoder.norm.load_state_dict(final_norm.state_dict())
    else:
        assert isinstance(encoder.norm, nn.Identity) and isinstance(
            decoder.norm, nn.Identity
        )
    src, tgt = torch.randn(3, 5, D_MODEL), torch.randn(3, 4, D_MODEL)
    src_mask = padding_mask(SRC, 0)
    memory = encoder(src, src_mask)
    assert_close(
        memory, their_encoder(src, src_key_padding_mask=to_key_padding_mask(src_mask))
    )
    expected = their_decoder(
        tgt,
        memory,
        tgt_mask=to_torch_mask(subsequent_mask(4)),
        tgt_key_padding_mask=to_key_padding_mask(padding_mask(TGT, 0)),
        memory_key_padding_mask=to_key_padding_mask(src_mask),
    )
    assert_close(decoder(tgt, memory, src_mask, target_mask(TGT, 0)), expected)


def test_interop_refuses_mismatched_layers():
    theirs = nn.TransformerEncoderLayer(
        D_MODEL, H, D_FF, batch_first=True, norm_first=True
    )
    with pytest.raises(ValueError, match="norm_first"):
        load_encoder_layer(EncoderLayer(D_MODEL, H, d_ff=D_FF), theirs)
    theirs = nn.TransformerDecoderLayer(
        D_MODEL, H, D_FF, batch_first=True, activation="gelu"
    )
    with pytest.raises(ValueError, match="activation"):
        load_decoder_layer(DecoderLayer(D_MODEL, H, d_ff=D_FF), theirs)


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_is_causal(norm_first):
    """Changing the target at position t leaves every output before t unchanged."""
    torch.manual_seed(0)
    decoder = Decoder(
        D_MODEL, H, 2, d_ff=D_FF, dropout=0.0, norm_first=norm_first
    ).eval()
    x, memory = torch.randn(2, 6, D_MODEL), torch.randn(2, 5, D_MODEL)
    before = decoder(x, memory, None, subsequent_mask(6))
    for t in range(6):
        changed = x.clone()
        changed[:, t] = torch.randn(2, D_MODEL)
        after = decoder(changed, memory, None, subsequent_mask(6))
        assert_close(after[:, :t], before[:, :t])
        assert not torch.allclose(after[:, t], before[:, t])


def test_encoder_padding_invariance():
    """Appending padding (masked out) leaves the real positions' outputs unchanged."""
    torch.manual_seed(0)
    encoder = Encoder(D_MODEL, H, 2, d_ff=D_FF, dropout=0.0).eval()
    x = torch.randn(2, 4, D_MODEL)
    # 3 positions of "padding"
    padded = torch.cat([x, torch.randn(2, 3, D_MODEL)], dim=1)
    mask = torch.tensor([True] * 4 + [False] * 3).expand(2, 1, 7)
    assert_close(encoder(padded, mask)[:, :4], encoder(x))
