"""What the tests of the fast tier share: a small config, batches, the reference twin.

Every fast-path test compares a FastTransformer (aiayn.fast) with its reference twin:
a Transformer (aiayn.model), the reference class, built separately and loaded with the
fast model's state_dict. Calling ``Transformer.forward`` on the fast model itself would
not do: it dispatches to the fast model's own ``encode`` and ``decode``.
"""

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.testing import assert_close

from aiayn import Transformer, TransformerConfig, padding_mask, target_mask
from aiayn.fast.attention import DEFAULT_KERNELS, Kernels
from aiayn.fast.transformer import FastTransformer

PAD = 0
D_MODEL, HEADS = 16, 4  # the small model's width and number of heads
# the shapes every fast path is checked in: small_config(**SHAPES[name])
SHAPES = {
    "post-LN": {},
    "pre-LN": {"norm_first": True},
    "d_k != d_v": {"d_k": 3, "d_v": 5},
    "learned positions": {"positional": "learned"},
    "untied, two vocabularies": {"tie_weights": False, "tgt_vocab": 9},
}


def small_config(
    d_model: int = D_MODEL,
    h: int = HEADS,
    layers: tuple[int, int] = (2, 2),
    d_ff: int = 32,
    **fields,
) -> TransformerConfig:
    """A small model's config; ``fields`` are any others of TransformerConfig.

    ``layers``: the encoder's and the decoder's N.
    """
    fields = dict(src_vocab=11, tgt_vocab=11, dropout=0.0) | fields
    return TransformerConfig(
        d_model=d_model,
        h=h,
        encoder_layers=layers[0],
        decoder_layers=layers[1],
        d_ff=d_ff,
        **fields,
    )


def fast_model(
    config: TransformerConfig, seed: int = 0, kernels: Kernels = DEFAULT_KERNELS
) -> FastTransformer:
    """A FastTransformer of ``config`` whose biases and norm gains are random too.

    At initialisation every bias is 0 and every LayerNorm gain 1: a fast path that
    dropped a bias or a gain would still agree with the reference.
    """
    torch.manual_seed(seed)
    model = FastTransformer(config, kernels=kernels)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(0.3 * torch.randn_like(parameter))
    return model


def reference_twin(fast: Transformer) -> Transformer:
    """The reference Transformer with ``fast``'s weights, in ``fast``'s mode."""
    twin = Transformer(fast.config)
    twin.load_state_dict(fast.state_dict())
    return twin.train(fast.training)


def padded(lengths, length: int, vocab: int, seed: int) -> Tensor:
    """(B, length) random ids in [1, vocab), padding after each row's length."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, vocab, (len(lengths), length), generator=generator)
    return tokens.masked_fill(torch.arange(length) >= torch.tensor(lengths)[:, None], 0)


def batch(
    src_lengths=(7, 3, 5, 1),
    tgt_lengths=(6, 2, 4, 3),
    vocab: tuple[int, int] = (11, 11),
    lengths: tuple[int, int] = (7, 6),
):
    """src (B, S), tgt_in and tgt_out (B, T), and their masks; tgt has T + 1 ids."""
    src = padded(src_lengths, lengths[0], vocab[0], seed=1)
    tgt = padded(tgt_lengths, lengths[1], vocab[1], seed=2)  # (B, T + 1)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    return src, tgt_in, tgt_out, padding_mask(src, PAD), target_mask(tgt_in, PAD)


def loss(logits: Tensor, tgt_out: Tensor) -> Tensor:
    """Cross-entropy of logits (B, T, V) against tgt_out (B, T), padding ignored."""
    return F.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD)


def assert_same_gradients(
    fast: torch.nn.Module, fast_out: Tensor, twin: torch.nn.Module, twin_out: Tensor
) -> None:
    """d(fast_out)/d(each parameter of fast) = d(twin_out)/d(the twin's), by name.

    fast_out and twin_out are scalars. A parameter the output does not reach has no
    gradient (None); on the other side it may then have None or zeros.
    """
    names = [name for name, _ in fast.named_parameters()]
    assert names == [name for name, _ in twin.named_parameters()]
    ours = torch.autograd.grad(fast_out, list(fast.parameters()), allow_unused=True)
    theirs = torch.autograd.grad(twin_out, list(twin.parameters()), allow_unused=True)
    for name, our, their in zip(names, ours, theirs, strict=True):
        if our is None or their is None:
            other = their if our is None else our
            assert other is None or not other.any(), name
        else:
            assert_close(
                our, their, msg=lambda message, name=name: f"{name}: {message}"
            )
