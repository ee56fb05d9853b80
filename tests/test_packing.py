"""The packed training forward equals the reference one; the cheaper dropout mask."""

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

from aiayn import Transformer, TransformerConfig, padding_mask, target_mask
from aiayn.fast.dropout import MASK_BITS, dropout, random_bits
from aiayn.fast.packing import Packing
from aiayn.fast.transformer import FastTransformer, packs

PAD = 0
SMALL = dict(
    src_vocab=11, tgt_vocab=11, d_model=16, h=4, encoder_layers=2,
    decoder_layers=2, d_ff=32, dropout=0.0,
)  # fmt: skip
CONFIGS = {
    "post-LN": {},
    "pre-LN": {"norm_first": True},
    "d_k != d_v": {"d_k": 3, "d_v": 5},
    "learned positions": {"positional": "learned"},
    "untied, two vocabularies": {"tie_weights": False, "tgt_vocab": 9},
}


def padded(lengths: list[int], length: int, vocab: int, seed: int) -> torch.Tensor:
    """(B, length) random ids in [1, vocab), padding after each row's length."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, vocab, (len(lengths), length), generator=generator)
    return tokens.masked_fill(torch.arange(length) >= torch.tensor(lengths)[:, None], 0)


def batch(src_lengths=(7, 3, 5, 1), tgt_lengths=(6, 2, 4, 3), tgt_vocab=11):
    src = padded(src_lengths, 7, 11, seed=1)
    tgt = padded(tgt_lengths, 6, tgt_vocab, seed=2)  # (B, T + 1)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    return src, tgt_in, tgt_out, padding_mask(src, PAD), target_mask(tgt_in, PAD)


def loss_and_grads(model, logits, tgt_out):
    loss = F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)
    names = [name for name, p in model.named_parameters()]
    grads = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    return loss, dict(zip(names, grads, strict=True))


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize(
    "src_lengths, tgt_lengths",
    [
        ([7, 3, 5, 1], [6, 2, 4, 3]),  # padding of different lengths
        ([7, 0, 5, 2], [6, 4, 0, 1]),  # an all-padding source, an all-padding target
    ],
)
def test_packed_forward_equals_the_reference_one(name, src_lengths, tgt_lengths):
    """Same logits at the real positions, 0 at the padding; same loss and gradients."""
    fields = SMALL | CONFIGS[name]
    torch.manual_seed(0)
    model = FastTransformer(TransformerConfig(**fields)).train()
    src, tgt_in, tgt_out, src_mask, tgt_mask = batch(
        src_lengths, tgt_lengths, fields["tgt_vocab"]
    )
    assert packs(src, tgt_in, src_mask, tgt_mask)
    packed = model(src, tgt_in, src_mask, tgt_mask)  # training mode, CPU: packed
    reference = Transformer.forward(model, src, tgt_in, src_mask, tgt_mask)  # reference
    real = tgt_in != PAD
    assert_close(packed[real], reference[real])
    assert (packed[~real] == 0).all()
    packed_loss, packed_grads = loss_and_grads(model, packed, tgt_out)
    taught_loss, taught_grads = loss_and_grads(model, reference, tgt_out)
    assert_close(packed_loss, taught_loss)
    for name, grad in taught_grads.items():
        if grad is None:  # a parameter the batch does not reach
            assert packed_grads[name] is None or not packed_grads[name].any(), name
        else:
            assert_close(packed_grads[name], grad, msg=name)


def test_a_batch_of_padding_only():
    torch.manual_seed(0)
    model = FastTransformer(TransformerConfig(**SMALL)).train()
    src, tgt_in, _, src_mask, tgt_mask = batch([0, 0], [0, 0])
    logits = model(src, tgt_in, src_mask, tgt_mask)
    assert logits.shape == (2, 5, 11) and (logits == 0).all()


def test_eval_mode_and_other_masks_do_not_pack():
    """Packing needs training mode, a CPU and one mask per sequence on both sides."""
    src, tgt_in, _, src_mask, tgt_mask = batch([7, 3], [6, 2])
    assert packs(src, tgt_in, src_mask, tgt_mask)
    assert not packs(src, tgt_in, None, tgt_mask)
    assert not packs(src, tgt_in, src_mask, tgt_mask[0])  # (T, T): no batch axis
    assert not packs(src, tgt_in[:, :4], src_mask, tgt_mask)  # a mask that does not fit
    meta = [x.to("meta") for x in (src, tgt_in, src_mask, tgt_mask)]
    assert not packs(*meta)  # any device but the CPU: no host-device sync
    torch.manual_seed(0)
    model = FastTransformer(TransformerConfig(**SMALL)).eval()
    logits = model(src, tgt_in, src_mask, tgt_mask)
    assert (logits[tgt_in == PAD] != 0).all()  # every position computed


def test_pack_then_unpack_puts_zeros_at_the_padding():
    mask = padding_mask(torch.tensor([[5, 6, 0], [7, 0, 0]]), PAD)  # (B, 1, T)
    packing = Packing.from_mask(mask)
    x = torch.arange(1.0, 7.0).reshape(2, 3, 1)  # (B, T, 1)
    packed = packing.pack(x)
    assert packed.flatten().tolist() == [1.0, 2.0, 4.0]
    assert packing.unpack(packed).flatten().tolist() == [1, 2, 0, 4, 0, 0]


def test_target_packing_keeps_the_positions_some_query_sees():
    tgt = torch.tensor([[1, 5, 6, 0], [1, 0, 0, 0]])
    packing = Packing.from_mask(target_mask(tgt, PAD))
    assert packing.index.tolist() == [0, 1, 2, 4]


def test_random_bits_are_uniform_15_bit_integers():
    torch.manual_seed(0)
    bits = random_bits(torch.Size([1000, 999]))  # an odd count: half a word unused
    assert bits.dtype == torch.int16 and bits.shape == (1000, 999)
    assert bits.min() == 0 and bits.max() == 2**MASK_BITS - 1
    for bit in range(MASK_BITS):  # every bit is set half of the time
        assert abs(((bits >> bit) & 1).float().mean() - 0.5) < 0.005


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_dropout_drops_at_rate_p_and_keeps_the_mean(p):
    torch.manual_seed(0)
    x = torch.ones(2000, 1000)
    y = dropout(x, p, training=True)
    rounded = round(p * 2**MASK_BITS) / 2**MASK_BITS
    assert abs(rounded - p) <= 2 ** -(MASK_BITS + 1)
    assert abs((y == 0).float().mean() - p) < 0.002
    assert_close(y[y != 0], torch.full_like(y[y != 0], 1 / (1 - rounded)))
    assert abs(y.mean() - 1) < 0.003


def test_dropout_gradient_uses_the_same_mask():
    torch.manual_seed(0)
    x = torch.randn(300, 40, requires_grad=True)
    y = dropout(x, 0.25, training=True)
    y.sum().backward()
    assert_close(x.grad, (y != 0).float() / (1 - round(0.25 * 2**15) / 2**15))


def test_dropout_is_f_dropout_in_eval_and_at_p_0_and_1():
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
