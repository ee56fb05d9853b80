"""The fast paths (aiayn.fast) compute the reference model's functions (aiayn.model).

Every fast path runs on a FastTransformer's modules and is checked, forward and
backward, against its reference twin (fast_reference.reference_twin): a Transformer
built separately and loaded with the same state_dict. Tolerance:
torch.testing.assert_close's for float32 (relative 1.3e-6, absolute 1e-5): the paths
add the same numbers in another order, so they agree to rounding, not bit for bit.
"""

import pytest
import torch
import torch.nn.functional as F
from fast_reference import (
    SHAPES,
    assert_same_gradients,
    batch,
    fast_model,
    loss,
    reference_twin,
    small_config,
)
from torch.testing import assert_close

from aiayn import (
    Transformer,
    attention_maps,
    padding_mask,
    scaled_dot_product_attention,
    subsequent_mask,
)
from aiayn.fast import attention as fast_attention
from aiayn.fast.attention import (
    DEFAULT_KERNELS,
    Kernels,
    attend,
    project,
    project_key_value,
    project_query,
    short_sequence_attention,
)
from aiayn.fast.cache import DecoderCache
from aiayn.fast.layers import decoder_layer, encoder_layer
from aiayn.fast.packing import Packing
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


def check_forward_and_backward(fast, run_fast, twin, run_twin, inputs):
    """run_fast(*inputs) (on fast's modules) = run_twin(*inputs) (on the twin's), and
    so are the gradients of a random projection of the output, for every parameter
    and every floating-point input."""
    leaves = [x.detach().requires_grad_() if x.is_floating_point() else x
              for x in inputs]  # fmt: skip
    ours, theirs = run_fast(*leaves), run_twin(*leaves)
    assert_close(ours, theirs)
    direction = torch.randn(ours.shape, generator=torch.Generator().manual_seed(9))
    ours, theirs = (ours * direction).sum(), (theirs * direction).sum()
    floats = [x for x in leaves if x.is_floating_point()]
    input_grads = [
        torch.autograd.grad(out, floats, retain_graph=True, allow_unused=True)
        for out in (ours, theirs)
    ]
    for our, their in zip(*input_grads, strict=True):
        assert_close(our, their)
    assert_same_gradients(fast, ours, twin, theirs)


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


def test_short_sequence_attention_drops_weights_as_nn_dropout_does():
    q, k, v = random_qkv()
    torch.manual_seed(0)
    dropped = short_sequence_attention(q, k, v, dropout_p=0.5)
    torch.manual_seed(0)
    _, weights = scaled_dot_product_attention(q, k, v, dropout=torch.nn.Dropout(0.5))
    assert (weights == 0).any()
    assert_close(dropped, weights @ v)  # the same mask from the same generator


# --- multi-head attention ---


def attention_inputs(kind: str):
    """query, key, value, mask of one kind of attention, for a (B, T=6, 16) query."""
    x, memory, value = (
        torch.randn(3, 6, 16),
        torch.randn(3, 7, 16),
        torch.randn(3, 7, 16),
    )
    if kind == "self":
        lengths = torch.tensor([[1] * 6, [1, 1, 0, 0, 0, 0], [1] * 5 + [0]])
        return x, x, x, padding_mask(lengths, 0) & subsequent_mask(6)
    if kind == "no key seen":
        mask = torch.ones(3, 6, 6, dtype=torch.bool)
        mask[1, 2] = False
        return x, x, x, mask
    return x, memory, memory if kind == "cross" else value, random_mask((3, 1, 7))


def fast_mha(mha, query, key, value, mask, kernels):
    return attend(mha, *project(mha, query, key, value), mask, kernels)


@pytest.mark.parametrize("kernels", KERNELS.values(), ids=KERNELS)
@pytest.mark.parametrize("kind", ["self", "cross", "value not key", "no key seen"])
def test_fast_attention_is_the_reference_forward_and_backward(kernels, kind):
    model = fast_model(small_config(d_k=3, d_v=5)).eval()
    mha = model.decoder.layers[0].cross_attn
    twin = reference_twin(model).decoder.layers[0].cross_attn
    query, key, value, mask = attention_inputs(kind)
    # self-attention: one input tensor, as the fast projection's one product needs
    inputs = [query] if key is query else [query, key, value]

    def as_qkv(leaves: tuple) -> tuple:
        return leaves * 3 if len(leaves) == 1 else leaves

    check_forward_and_backward(
        mha,
        lambda *leaves: fast_mha(mha, *as_qkv(leaves), mask, kernels),
        twin,
        lambda *leaves: twin(*as_qkv(leaves), mask),
        inputs,
    )


def test_fast_attention_takes_the_short_path_on_a_cpu_for_short_sequences_only(
    monkeypatch,
):
    fused_calls = []
    fused = F.scaled_dot_product_attention

    def counted(*args, **kwargs):
        fused_calls.append(args[1].size(-2))  # the number of keys
        return fused(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counted)
    mha, short = fast_model(small_config()).encoder.layers[0].self_attn, 32
    assert SHORT.short_sequence == DEFAULT_KERNELS.short_sequence == short
    for length in (1, short, short + 1):
        x = torch.randn(2, length, 16)
        fast_mha(mha, x, x, x, None, SHORT)
    assert fused_calls == [short + 1]
    fast_mha(mha, x[:, :1], x[:, :1], x[:, :1], None, FUSED)
    assert fused_calls == [short + 1, 1]  # short_sequence=0: the fused kernel always


def test_projections_in_parts_are_the_projections_at_once():
    """The halves a key/value cache uses: the query alone, the keys and values alone."""
    mha = fast_model(small_config(d_k=3, d_v=5)).encoder.layers[0].self_attn
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


def layer_inputs():
    """x (3, 7, 16) with its source mask, y (3, 5, 16) with its target mask."""
    x, y = torch.randn(3, 7, 16), torch.randn(3, 5, 16)
    src_mask = padding_mask(
        torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 6 + [0]]), 0
    )
    tgt_mask = padding_mask(torch.tensor([[1] * 5, [1, 1, 0, 0, 0], [1] * 4 + [0]]), 0)
    return x, src_mask, y, tgt_mask & subsequent_mask(5)


def packed_or_not(packing: Packing | None, x: torch.Tensor) -> torch.Tensor:
    return x if packing is None else packing.pack(x)


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("kernels", KERNELS.values(), ids=KERNELS)
def test_fast_encoder_layer_is_the_reference_forward_and_backward(
    norm_first, kernels, packed
):
    model = fast_model(small_config(norm_first=norm_first)).eval()
    layer, twin = model.encoder.layers[1], reference_twin(model).encoder.layers[1]
    x, src_mask, _, _ = layer_inputs()
    packing = Packing.from_mask(src_mask) if packed else None

    def fast(x):
        return encoder_layer(
            layer, packed_or_not(packing, x), src_mask, kernels, packing
        )

    def reference(x):
        return packed_or_not(packing, twin(x, src_mask))

    check_forward_and_backward(layer, fast, twin, reference, [x])


@pytest.mark.parametrize("packed", [False, True], ids=["padded", "packed"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("kernels", KERNELS.values(), ids=KERNELS)
def test_fast_decoder_layer_is_the_reference_forward_and_backward(
    norm_first, kernels, packed
):
    model = fast_model(small_config(norm_first=norm_first)).eval()
    layer, twin = model.decoder.layers[1], reference_twin(model).decoder.layers[1]
    memory, src_mask, y, tgt_mask = layer_inputs()
    packing = Packing.from_mask(tgt_mask) if packed else None
    masks = (src_mask, tgt_mask)

    def fast(y, memory):
        out, cache = decoder_layer(
            layer, packed_or_not(packing, y), memory, masks, kernels, packing=packing
        )
        assert cache is None
        return out

    def reference(y, memory):
        return packed_or_not(packing, twin(y, memory, *masks))

    check_forward_and_backward(layer, fast, twin, reference, [y, memory])


# --- the whole model ---


def test_fast_transformer_has_the_reference_parameters_and_initial_weights():
    config = small_config()
    torch.manual_seed(5)
    reference = Transformer(config)
    torch.manual_seed(5)
    fast = FastTransformer(config)
    ours, theirs = fast.state_dict(), reference.state_dict()
    assert list(ours) == list(theirs)
    assert all(torch.equal(ours[name], theirs[name]) for name in ours)
    assert FastTransformer(config).load_state_dict(theirs)  # checkpoints go either way


def check_model(model, twin, model_batch):
    """Logits at the real target positions and the loss's gradients, by parameter."""
    src, tgt_in, tgt_out, src_mask, tgt_mask = model_batch
    fast = model(src, tgt_in, src_mask, tgt_mask)
    reference = twin(src, tgt_in, src_mask, tgt_mask)
    real = tgt_out != 0  # packing leaves 0 at the padding, which the loss ignores
    assert_close(fast[real], reference[real])
    assert_same_gradients(model, loss(fast, tgt_out), twin, loss(reference, tgt_out))
    return fast


@pytest.mark.parametrize("kernels", KERNELS.values(), ids=KERNELS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["eval", "training, unpacked"])
def test_fast_transformer_is_the_reference_forward_and_backward(shape, mode, kernels):
    """Packed training: tests/test_packing.py."""
    config = small_config(**SHAPES[shape])
    model = fast_model(config, kernels=Kernels(kernels.short_sequence, pack=False))
    model.train(mode != "eval")
    model_batch = batch(vocab=(config.src_vocab, config.tgt_vocab))
    check_model(model, reference_twin(model), model_batch)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
@pytest.mark.parametrize("mode", ["eval", "training, packed"])
def test_fast_transformer_runs_the_fused_kernel_above_the_short_sequence_cut_off(
    norm_first, mode, monkeypatch
):
    """The default kernels on sequences longer than Kernels.short_sequence: every
    attention of the fast model runs the fused kernel, and still computes the
    reference's function."""
    keys_seen = []
    fused = F.scaled_dot_product_attention

    def counted(*args, **kwargs):
        keys_seen.append(args[1].size(-2))
        return fused(*args, **kwargs)

    def short_path(*args, **kwargs):
        raise AssertionError("the short-sequence path ran above the cut-off")

    monkeypatch.setattr(F, "scaled_dot_product_attention", counted)
    monkeypatch.setattr(fast_attention, "short_sequence_attention", short_path)
    cut_off = DEFAULT_KERNELS.short_sequence
    lengths = (cut_off + 8, cut_off + 5)  # S = 40 > 32, T = 36 > 32
    model_batch = batch((40, 33, 12), (37, 20, 35), lengths=lengths)
    model = fast_model(small_config(norm_first=norm_first)).train(mode != "eval")
    check_model(model, reference_twin(model), model_batch)
    assert len(keys_seen) == 6 and min(keys_seen) > cut_off  # 2 + 2 * 2 attentions


@pytest.mark.parametrize("kernels", KERNELS.values(), ids=KERNELS)
def test_decoding_with_a_cache_is_the_reference_decoder_forward_and_backward(kernels):
    model = fast_model(small_config(norm_first=True), kernels=kernels).eval()
    twin = reference_twin(model)
    src, tgt_in, _, src_mask, _ = batch()
    memory = model.encode(src, src_mask)
    reference_memory = twin.encode(src, src_mask)
    assert_close(memory, reference_memory)
    reference = twin.decode(reference_memory, src_mask, tgt_in)  # causal
    cache, steps = DecoderCache(), []
    for t in range(tgt_in.size(1)):
        before = cache
        hidden, cache = decode(
            model, memory, src_mask, tgt_in[:, t : t + 1], cache=cache, kernels=kernels
        )
        assert before.length == t and cache.length == t + 1  # a new cache each step
        steps.append(hidden)
    cached = torch.cat(steps, dim=1)
    assert_close(cached, reference)
    direction = torch.randn(cached.shape, generator=torch.Generator().manual_seed(3))
    assert_same_gradients(
        model, (cached * direction).sum(), twin, (reference * direction).sum()
    )


def test_the_fast_functions_compute_the_reference_on_a_reference_model():
    """Decoding calls encode and decode on any Transformer's weights."""
    model = fast_model(small_config())
    twin = reference_twin(model).eval()
    src, tgt_in, _, src_mask, tgt_mask = batch()
    memory = encode(twin, src, src_mask)
    assert_close(memory, twin.encode(src, src_mask))
    hidden, cache = decode(twin, memory, src_mask, tgt_in, tgt_mask)
    assert cache is None
    assert_close(hidden, twin.decode(memory, src_mask, tgt_in, tgt_mask))


def test_kernels_are_a_setting_of_the_model():
    model = FastTransformer(small_config(), kernels=FUSED).eval()
    assert model.kernels == FUSED and FastTransformer(small_config()).kernels == SHORT
    src, tgt_in, _, src_mask, tgt_mask = batch()
    fused = model(src, tgt_in, src_mask, tgt_mask)
    model.kernels = SHORT
    assert_close(model(src, tgt_in, src_mask, tgt_mask), fused)


def test_attention_maps_are_the_reference_maps_and_leave_no_hooks():
    model = fast_model(small_config()).eval()
    twin = reference_twin(model)
    src, tgt_in, _, src_mask, tgt_mask = batch()
    before = model(src, tgt_in, src_mask, tgt_mask)
    maps = attention_maps(model, src, tgt_in, src_mask, tgt_mask)
    reference = attention_maps(twin, src, tgt_in, src_mask, tgt_mask)
    assert list(maps) == ["encoder_self", "decoder_self", "cross"]
    for kind, weights in maps.items():
        assert len(weights) == 2
        for ours, theirs in zip(weights, reference[kind], strict=True):
            assert ours.shape[:2] == (4, 4)  # (B, h, ...)
            assert_close(ours, theirs)
    for module in model.modules():
        assert not module._forward_hooks and not module._forward_pre_hooks
    # the hooks asked for weights without changing what the model computes
    assert torch.equal(model(src, tgt_in, src_mask, tgt_mask), before)
