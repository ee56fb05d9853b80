"""The fast paths (aiayn.fast) compute the reference model's functions (aiayn.model).

Every fast path is checked against the reference, forward and backward, on the same
weights. Tolerance: torch.testing.assert_close's for float32 (relative 1.3e-6,
absolute 1e-5): the paths add the same numbers in another order, so they agree to
rounding, not bit for bit.
"""

import pytest
import torch
import torch.nn.functional as F
from test_packing import CONFIGS as SHAPES
from test_packing import SMALL, batch
from torch.testing import assert_close

from aiayn import (
    DecoderLayer,
    EncoderLayer,
    MultiHeadAttention,
    Transformer,
    TransformerConfig,
    attention_maps,
    padding_mask,
    scaled_dot_product_attention,
    subsequent_mask,
)
from aiayn.fast.attention import (
    Kernels,
    attend,
    project,
    project_key_value,
    project_query,
    short_sequence_attention,
)
from aiayn.fast.cache import DecoderCache
from aiayn.fast.layers import decoder_layer, encoder_layer
from aiayn.fast.transformer import FastTransformer, decode, encode

FUSED, SHORT = Kernels(short_sequence=0), Kernels(short_sequence=32)
KERNELS = {"fused kernel": FUSED, "short-sequence path": SHORT}


def random_qkv(batch=2, heads=3, t=4, s=5, d_k=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, n, d_k, generator=generator) for n in (t, s, s)]


def random_mask(shape, seed=0):
    generator = torch.Generator().manual_seed(seed)
    mask = torch.rand(shape, generator=generator) > 0.3
    mask[..., 0] = True  # every query sees at least one key
    return mask


def gradients(module, output) -> list[torch.Tensor]:
    """d(sum of squares of output)/d(every parameter of module)."""
    return torch.autograd.grad(output.square().sum(), list(module.parameters()))


# --- Eq. (1) with one masking ---


def fully_masked_query_mask():
    mask = random_mask((2, 1, 4, 5))
    mask[1, 0, 2] = False  # query 2 of example 1 may attend to nothing
    return mask


@pytest.mark.parametrize(
    "mask",
    [
        None,
        random_mask((2, 1, 4, 5)),
        torch.ones(1, 1, 4, 5, dtype=torch.bool).tril(1),  # causal, one key ahead
        fully_masked_query_mask(),
    ],
    ids=["none", "random", "causal", "a query without keys"],
)
def test_short_sequence_attention_is_eq1_forward_and_backward(mask):
    inputs = [x.requires_grad_() for x in random_qkv()]
    copies = [x.detach().clone().requires_grad_() for x in inputs]
    short = short_sequence_attention(*inputs, mask)
    explicit, _ = scaled_dot_product_attention(*copies, mask)
    assert_close(short, explicit)
    grad = torch.randn_like(short)
    short.backward(grad)
    explicit.backward(grad)
    for ours, theirs in zip(inputs, copies, strict=True):
        assert_close(ours.grad, theirs.grad)
    if mask is not None and not mask.any(-1).all():  # zeros, not NaN or a mean
        assert (short[1, :, 2] == 0).all()


def test_short_sequence_attention_applies_dropout_module_to_weights():
    q, k, v = random_qkv()
    torch.manual_seed(0)
    dropped = short_sequence_attention(q, k, v, dropout=torch.nn.Dropout(0.5))
    torch.manual_seed(0)
    _, weights = scaled_dot_product_attention(q, k, v, dropout=torch.nn.Dropout(0.5))
    assert (weights == 0).any()
    assert_close(dropped, weights @ v)  # the same mask from the same generator


# --- multi-head attention ---


def make_mha(**kwargs) -> MultiHeadAttention:
    torch.manual_seed(0)
    return MultiHeadAttention(16, 4, **kwargs).eval()


def fast_mha(mha, query, key, value, mask, kernels):
    return attend(mha, *project(mha, query, key, value), mask, kernels)


@pytest.mark.parametrize("kernels", KERNELS.values(), ids=KERNELS)
@pytest.mark.parametrize("kind", ["self", "cross", "value not key", "no key seen"])
def test_fast_attention_is_the_reference_forward_and_backward(kernels, kind):
    mha = make_mha(d_k=3, d_v=5)
    x, memory, value = (
        torch.randn(3, 6, 16),
        torch.randn(3, 7, 16),
        torch.randn(3, 7, 16),
    )
    if kind == "self":
        inputs = (x, x, x, padding_mask(torch.tensor([[1] * 6, [1, 1, 0, 0, 0, 0],
                                                      [1] * 5 + [0]]), 0)
                  & subsequent_mask(6))  # fmt: skip
    elif kind == "no key seen":
        mask = torch.ones(3, 6, 6, dtype=torch.bool)
        mask[1, 2] = False
        inputs = (x, x, x, mask)
    else:
        inputs = (
            x,
            memory,
            memory if kind == "cross" else value,
            random_mask((3, 1, 7)),
        )
    reference, fast = mha(*inputs), fast_mha(mha, *inputs, kernels)
    assert_close(fast, reference)
    for ours, theirs in zip(
        gradients(mha, fast), gradients(mha, reference), strict=True
    ):
        assert_close(ours, theirs)


def test_fast_attention_takes_the_short_path_on_a_cpu_for_short_sequences_only(
    monkeypatch,
):
    fused_calls = []
    fused = F.scaled_dot_product_attention

    def counted(*args, **kwargs):
        fused_calls.append(args[1].size(-2))  # the number of keys
        return fused(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counted)
    mha, short = make_mha(), SHORT.short_sequence
    for length in (1, short, short + 1):
        x = torch.randn(2, length, 16)
        fast_mha(mha, x, x, x, None, SHORT)
    assert fused_calls == [short + 1]
    fast_mha(mha, x[:, :1], x[:, :1], x[:, :1], None, FUSED)
    assert fused_calls == [short + 1, 1]  # short_sequence=0: the fused kernel always


def test_projections_in_parts_are_the_projections_at_once():
    """The halves a key/value cache uses: the query alone, the keys and values alone."""
    mha = make_mha(d_k=3, d_v=5)
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 6, 16)
    q, k, v = project(mha, x, memory, memory)
    assert (q.shape, k.shape, v.shape) == ((2, 4, 3, 3), (2, 4, 6, 3), (2, 4, 6, 5))
    assert_close(project_query(mha, x), q)
    assert_close(torch.cat(project_key_value(mha, memory, memory), -1),
                 torch.cat([k, v], -1))  # fmt: skip
    q, k, v = project(mha, x, x, x)  # one product for all three
    assert_close(q, project_query(mha, x))
    assert_close(project_key_value(mha, x, x.clone())[1], v)


# --- the layers ---


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("kernels", KERNELS.values(), ids=KERNELS)
def test_fast_layers_are_the_reference_layers(norm_first, kernels):
    torch.manual_seed(0)
    options = dict(d_ff=32, dropout=0.0, norm_first=norm_first)
    encoder, decoder = EncoderLayer(16, 4, **options), DecoderLayer(16, 4, **options)
    x, y = torch.randn(3, 7, 16), torch.randn(3, 5, 16)
    src_mask = random_mask((3, 1, 7))
    tgt_mask = random_mask((3, 5, 5)) & subsequent_mask(5)
    fast = encoder_layer(encoder, x, src_mask, kernels)
    assert_close(fast, encoder(x, src_mask))
    for ours, theirs in zip(
        gradients(encoder, fast), gradients(encoder, encoder(x, src_mask)), strict=True
    ):
        assert_close(ours, theirs)
    fast, cache = decoder_layer(decoder, y, x, (src_mask, tgt_mask), kernels)
    assert cache is None
    assert_close(fast, decoder(y, x, src_mask, tgt_mask))


# --- the whole model ---


def test_fast_transformer_has_the_reference_parameters_and_initial_weights():
    torch.manual_seed(5)
    reference = Transformer(TransformerConfig(**SMALL))
    torch.manual_seed(5)
    fast = FastTransformer(TransformerConfig(**SMALL))
    ours, theirs = fast.state_dict(), reference.state_dict()
    assert list(ours) == list(theirs)
    assert all(torch.equal(ours[name], theirs[name]) for name in ours)
    assert FastTransformer(TransformerConfig(**SMALL)).load_state_dict(
        theirs
    )  # checkpoints go either way


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["eval", "training (packed)"])
def test_fast_transformer_is_the_reference_forward_and_backward(shape, mode):
    fields = SMALL | SHAPES[shape]
    torch.manual_seed(0)
    model = FastTransformer(TransformerConfig(**fields)).train(mode != "eval")
    src, tgt_in, tgt_out, src_mask, tgt_mask = batch(tgt_vocab=fields["tgt_vocab"])
    fast = model(src, tgt_in, src_mask, tgt_mask)
    reference = Transformer.forward(model, src, tgt_in, src_mask, tgt_mask)
    real = tgt_out != 0  # packing leaves 0 at the padding, which the loss ignores
    assert_close(fast[real], reference[real])
    losses = [F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=0)
              for logits in (fast, reference)]  # fmt: skip
    parameters = list(model.parameters())
    for ours, theirs in zip(*(torch.autograd.grad(loss, parameters) for loss in losses),
                            strict=True):  # fmt: skip
        assert_close(ours, theirs)


def test_decoding_with_a_cache_is_the_reference_decoder_and_leaves_the_cache_alone():
    torch.manual_seed(0)
    model = Transformer(TransformerConfig(**SMALL)).eval()
    src, tgt_in, _, src_mask, _ = batch()
    memory = encode(model, src, src_mask)
    assert_close(memory, model.encode(src, src_mask))
    reference = model.decode(memory, src_mask, tgt_in)  # causal
    cache, steps = DecoderCache(), []
    for t in range(tgt_in.size(1)):
        before = cache
        hidden, cache = decode(
            model, memory, src_mask, tgt_in[:, t : t + 1], cache=cache
        )
        assert before.length == (t if t else 0) and cache.length == t + 1
        steps.append(hidden)
    assert_close(torch.cat(steps, dim=1), reference)


def test_kernels_are_a_setting_of_the_model():
    model = FastTransformer(TransformerConfig(**SMALL), FUSED).eval()
    assert (
        model.kernels == FUSED
        and FastTransformer(TransformerConfig(**SMALL)).kernels == SHORT
    )
    src, tgt_in, _, src_mask, tgt_mask = batch()
    fused = model(src, tgt_in, src_mask, tgt_mask)
    model.kernels = SHORT
    assert_close(model(src, tgt_in, src_mask, tgt_mask), fused)


def test_attention_maps_are_the_reference_maps_and_leave_no_hooks():
    torch.manual_seed(0)
    model = FastTransformer(TransformerConfig(**SMALL)).eval()
    src, tgt_in, _, src_mask, tgt_mask = batch()
    maps = attention_maps(model, src, tgt_in, src_mask, tgt_mask)
    assert [len(maps[kind]) for kind in ("encoder_self", "decoder_self", "cross")] == [
        2, 2, 2,
    ]  # fmt: skip
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks
    # the hooks asked for weights without changing the output
    assert_close(Transformer.forward(model, src, tgt_in, src_mask, tgt_mask),
                 model(src, tgt_in, src_mask, tgt_mask))  # fmt: skip
