"""The packed training forward equals the reference one; packing and unpacking."""

import pytest
import torch
from fast_reference import (
    PAD,
    SHAPES,
    assert_same_gradients,
    batch,
    fast_model,
    loss,
    reference_twin,
    small_config,
)

from aiayn import padding_mask, target_mask
from aiayn.fast.packing import Packing
from aiayn.fast.transformer import packs


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize(
    "src_lengths, tgt_lengths",
    [
        ([7, 3, 5, 1], [6, 2, 4, 3]),  # padding of different lengths
        ([7, 0, 5, 2], [6, 4, 0, 1]),  # an all-padding source, an all-padding target
    ],
)
def test_packed_forward_equals_the_reference_one(name, src_lengths, tgt_lengths):
    """Same logits at the real positions, 0 at the padding; same loss and gradients."""
    config = small_config(**SHAPES[name])
    model = fast_model(config).train()
    twin = reference_twin(model)
    vocab = (config.src_vocab, config.tgt_vocab)
    src, tgt_in, tgt_out, src_mask, tgt_mask = batch(src_lengths, tgt_lengths, vocab)
    assert packs(src, tgt_in, src_mask, tgt_mask)
    packed = model(src, tgt_in, src_mask, tgt_mask)  # training mode, CPU: packed
    reference = twin(src, tgt_in, src_mask, tgt_mask)
    real = tgt_in != PAD
    torch.testing.assert_close(packed[real], reference[real])
    assert (packed[~real] == 0).all()
    packed_loss, reference_loss = loss(packed, tgt_out), loss(reference, tgt_out)
    torch.testing.assert_close(packed_loss, reference_loss)
    assert_same_gradients(model, packed_loss, twin, reference_loss)


def test_a_batch_of_padding_only():
    model = fast_model(small_config()).train()
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
    model = fast_model(small_config()).eval()
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
