"""Dropout on the fast paths is the reference's: exact at p = 0 and p = 1, the same
random masks under the same seed where both draw them alike, the rate p and the scale
1 / (1 - p) at every site where they do not.

The fast model drops the embeddings with the reference's own nn.Dropout modules; the
residual connections and the feed-forward network at the modules' rates with the
cheaper mask of aiayn.fast.dropout; the attention weights with F.dropout on the
short-sequence path or the fused kernel's dropout_p, at the module's rate. A
statistical check allows 5 binomial standard deviations, sqrt(p (1 - p) / n) for n
elements: a wrong rate (p / 2) lies dozens of them away.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from fast_reference import (
    D_MODEL,
    HEADS,
    PAD,
    assert_same_gradients,
    batch,
    fast_model,
    loss,
    reference_twin,
    small_config,
)
from torch import nn
from torch.testing import assert_close

import aiayn.fast.layers as fast_layers
from aiayn import MultiHeadAttention, PositionwiseFeedForward, ResidualSublayer
from aiayn.fast.attention import Kernels, attend
from aiayn.fast.dropout import MASK_BITS, dropout, random_bits

PATHS = {  # how the fast model computes a training step on a CPU
    "fused, packed": Kernels(short_sequence=0, pack=True),
    "fused, padded": Kernels(short_sequence=0, pack=False),
    "short, packed": Kernels(short_sequence=32, pack=True),
    "short, padded": Kernels(short_sequence=32, pack=False),
}
LAYER_NORMS = {"post-LN": False, "pre-LN": True}


def assert_rate(dropped: torch.Tensor, p: float) -> None:
    """The share of True in ``dropped`` is p, to 5 binomial standard deviations."""
    n = dropped.numel()
    share = dropped.float().mean().item()
    assert abs(share - p) <= 5 * math.sqrt(p * (1 - p) / n), (share, p, n)


def many_sequences(count: int = 32, seed: int = 0):
    """A training batch of ``count`` pairs of random lengths, and their masks."""
    generator = torch.Generator().manual_seed(seed)
    src_lengths = torch.randint(0, 8, (count,), generator=generator).tolist()
    tgt_lengths = torch.randint(1, 7, (count,), generator=generator).tolist()
    return batch(src_lengths, tgt_lengths)


# --- p = 0 and p = 1: exact ---


@pytest.mark.parametrize("path", PATHS)
def test_at_p_0_a_training_step_is_the_reference_in_eval_mode(path):
    model = fast_model(small_config(dropout=0.0), kernels=PATHS[path]).train()
    twin = reference_twin(model).eval()
    src, tgt_in, tgt_out, src_mask, tgt_mask = batch()
    logits = model(src, tgt_in, src_mask, tgt_mask)
    reference = twin(src, tgt_in, src_mask, tgt_mask)
    real = tgt_in != PAD
    assert_close(logits[real], reference[real])
    assert_same_gradients(model, loss(logits, tgt_out), twin, loss(reference, tgt_out))


def output_when_everything_is_dropped(model: nn.Module) -> torch.Tensor:
    """The logits (tgt_vocab,) of every target position when p = 1.

    The embeddings are dropped to 0 and so is every sub-layer's output: a residual
    sub-layer computes LayerNorm(x + 0) (post-LN) or x + 0 (pre-LN). So the decoder
    passes a zero vector through its post-LN norms alone, then its final norm
    (pre-LN): the same logits at every position, whatever the input.
    """
    x = torch.zeros(model.config.d_model)
    for layer in model.decoder.layers:
        for residual in (m for m in layer.modules() if isinstance(m, ResidualSublayer)):
            if not residual.norm_first:
                x = residual.norm(x)
    return model.output_projection(model.decoder.norm(x))


def dropped_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The parameters that p = 1 cuts off from the output: those of the encoder, of
    every attention and feed-forward network, of the embeddings (untied) and of the
    positional table."""
    cut_off = {
        id(p)
        for module in model.modules()
        if isinstance(module, MultiHeadAttention | PositionwiseFeedForward)
        for p in module.parameters()
    }
    for part in (model.encoder, model.positional, model.src_embed, model.tgt_embed):
        cut_off |= {id(p) for p in part.parameters()}
    return [(name, p) for name, p in model.named_parameters() if id(p) in cut_off]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("norm", LAYER_NORMS)
def test_at_p_1_the_output_is_the_norms_alone_and_nothing_else_learns(norm, path):
    config = small_config(dropout=1.0, norm_first=LAYER_NORMS[norm], tie_weights=False)
    model = fast_model(config, kernels=PATHS[path]).train()
    twin = reference_twin(model)
    src, tgt_in, tgt_out, src_mask, tgt_mask = batch()
    logits = model(src, tgt_in, src_mask, tgt_mask)
    real = tgt_in != PAD
    with torch.no_grad():
        expected = output_when_everything_is_dropped(twin).expand_as(logits[real])
        assert_close(twin(src, tgt_in, src_mask, tgt_mask)[real], expected)
    assert_close(logits[real], expected)
    cut_off = dropped_parameters(model)
    gradients = torch.autograd.grad(
        loss(logits, tgt_out), [p for _, p in cut_off], allow_unused=True
    )
    for (name, _), gradient in zip(cut_off, gradients, strict=True):
        assert gradient is None or not gradient.any(), name


# --- 0 < p < 1 ---


@pytest.mark.parametrize("p", [0.1, 0.5])
@pytest.mark.parametrize("path", ["short, padded", "short, packed"])
@pytest.mark.parametrize("norm", LAYER_NORMS)
def test_the_same_seed_drops_what_the_reference_drops(norm, path, p, monkeypatch):
    """Where the fast model draws its masks as the reference does, in the same order
    and for as many elements, both drop the same elements: the short path's weights
    are the reference's, a packed batch without padding has as many positions as the
    padded one, and the cheaper mask is replaced by F.dropout (it is checked on its
    own below). Every dropout site is then checked exactly."""
    monkeypatch.setattr(fast_layers, "dropout", F.dropout)
    config = small_config(dropout=p, norm_first=LAYER_NORMS[norm])
    model = fast_model(config, kernels=PATHS[path]).train()
    twin = reference_twin(model)
    lengths = (7, 3, 5, 1), (6, 2, 4, 3)  # padding
    if path == "short, packed":
        lengths = (7,) * 4, (6,) * 4  # no padding: packing keeps every position
    src, tgt_in, tgt_out, src_mask, tgt_mask = batch(*lengths)
    torch.manual_seed(1)
    logits = model(src, tgt_in, src_mask, tgt_mask)
    torch.manual_seed(1)
    reference = twin(src, tgt_in, src_mask, tgt_mask)
    assert_close(logits, reference)
    assert_same_gradients(model, loss(logits, tgt_out), twin, loss(reference, tgt_out))
    undropped = reference_twin(model).eval()(src, tgt_in, src_mask, tgt_mask)
    assert not torch.allclose(logits, undropped)  # dropout acted


@pytest.mark.parametrize("p", [0.1, 0.5, 1.0])
@pytest.mark.parametrize(
    "kernels", [PATHS["fused, padded"], PATHS["short, padded"]], ids=["fused", "short"]
)
def test_attention_drops_a_share_p_of_its_weights_and_scales_the_rest(kernels, p):
    """One key per query: its weight, 1, is dropped with probability p, and then the
    query's output is W^O 0 + b; else it is W^O v / (1 - p) + b. Only head 0 has a
    value, so each query shows one draw; 10000 queries."""
    attention = fast_model(small_config(dropout=p)).encoder.layers[0].self_attn
    d_head = D_MODEL // HEADS
    generator = torch.Generator().manual_seed(0)
    q, k = (
        torch.randn(100, HEADS, 100, d_head, generator=generator),
        torch.randn(100, HEADS, 1, d_head, generator=generator),
    )
    v = torch.zeros(100, HEADS, 1, d_head)
    v[:, 0] = torch.randn(100, 1, d_head, generator=generator)
    with torch.no_grad():
        bias = attend(attention.eval(), q, k, torch.zeros_like(v), None, kernels)
        undropped = attend(attention, q, k, v, None, kernels) - bias  # (B, T, d_model)
        torch.manual_seed(2)
        out = attend(attention.train(), q, k, v, None, kernels) - bias
    assert undropped.abs().amax(-1).min() > 1e-3  # no query's output is b to begin with
    dropped = out.abs().amax(-1) < 1e-6  # (B, T): the query's one weight dropped
    assert_rate(dropped, p)
    if p < 1:
        assert_close(out[~dropped], undropped[~dropped] / (1 - p))


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_every_dropout_site_of_a_packed_step_drops_a_share_p(p, monkeypatch):
    """In a packed training step with padding (masks not drawn as the reference's),
    every dropout site acts once on its sub-layer's output: the positional table's
    nn.Dropout (for the source, then the target) and the cheaper mask of every
    residual connection and feed-forward network. Each drops a share p and scales the
    rest by 1 / (1 - p). Attention's rate acts inside the kernel."""
    model = fast_model(small_config(dropout=p)).train()
    calls = []  # (input, output) of every site, in order

    def recorded_dropout(x, rate, training):
        calls.append((x, dropout(x, rate, training)))
        assert rate == p and training
        return calls[-1][1]

    monkeypatch.setattr(fast_layers, "dropout", recorded_dropout)
    hook = model.positional.dropout.register_forward_hook(
        lambda _, inputs, output: calls.append((inputs[0], output))
    )
    src, tgt_in, _, src_mask, tgt_mask = many_sequences()
    assert (src == PAD).any() and (tgt_in == PAD).any()
    try:
        model(src, tgt_in, src_mask, tgt_mask)
    finally:
        hook.remove()
    # the positional table twice; 2 + 1 in each encoder layer, 3 + 1 in each decoder's
    assert len(calls) == 2 + 2 * (2 + 1) + 2 * (3 + 1)
    rounded = round(p * 2**MASK_BITS) / 2**MASK_BITS  # the cheaper mask's rate
    for before, after in calls:
        nonzero = before != 0
        dropped = after[nonzero] == 0
        assert_rate(dropped, p)
        kept = after[nonzero][~dropped] / before[nonzero][~dropped]
        assert torch.all((kept - 1 / (1 - p)).abs() < 1e-5) or torch.all(
            (kept - 1 / (1 - rounded)).abs() < 1e-5
        )


def test_random_bits_are_uniform_15_bit_integers():
    torch.manual_seed(0)
    bits = random_bits(torch.Size([1000, 999]))  # an odd count: half a word unused
    assert bits.dtype == torch.int16 and bits.shape == (1000, 999)
    assert bits.min() == 0 and bits.max() == 2**MASK_BITS - 1
    for bit in range(MASK_BITS):  # every bit is set half of the time
        assert abs(((bits >> bit) & 1).float().mean() - 0.5) < 0.005


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_the_cheaper_mask_drops_at_rate_p_and_keeps_the_mean(p):
    torch.manual_seed(0)
    x = torch.ones(2000, 1000)
    y = dropout(x, p, training=True)
    rounded = round(p * 2**MASK_BITS) / 2**MASK_BITS
    assert abs(rounded - p) <= 2 ** -(MASK_BITS + 1)
    assert_rate(y == 0, p)
    assert_close(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - rounded)))
    assert abs(y.mean() - 1) < 0.003


def test_the_cheaper_mask_s_gradient_uses_the_same_mask():
    torch.manual_seed(0)
    x = torch.randn(300, 40, requires_grad=True)
    y = dropout(x, 0.25, training=True)
    y.sum().backward()
    assert_close(x.grad, (y != 0).float() / (1 - round(0.25 * 2**15) / 2**15))


def test_the_cheaper_mask_is_f_dropout_in_eval_and_at_p_0_and_1():
    x = torch.randn(50, 20)
    assert torch.equal(dropout(x, 0.3, training=False), x)
    assert torch.equal(dropout(x, 0.0, training=True), x)
    assert (dropout(x, 1.0, training=True) == 0).all()
    # rounds to 1: F.dropout's own mask
    assert (dropout(x, 1 - 2**-17, training=True) == 0).all()
    torch.manual_seed(3)
    first = dropout(x, 0.3, training=True)
    torch.manual_seed(3)
    # seeded like the rest of torch
    assert torch.equal(dropout(x, 0.3, training=True), first)
