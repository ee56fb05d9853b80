"""Beam search (§6.1): greedy decoding at one beam, exhaustive search with a beam wide
enough to keep every prefix, batching, length limits, scores, bad input."""

import itertools

import pytest
import torch
from torch import Tensor, nn
from torch.testing import assert_close

from aiayn import Transformer, TransformerConfig, padding_mask
from aiayn.decoding import beam_search, greedy_decode, length_penalty

PAD, BOS, EOS = 0, 1, 2


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def random_model(seed: int, vocab: int = 11) -> Transformer:
    """An untrained model: arbitrary distributions, which is the point. (Untied
    weights: a tied one mostly repeats a token forever and never ends.)"""
    torch.manual_seed(seed)
    config = TransformerConfig(
        src_vocab=vocab,
        tgt_vocab=vocab,
        d_model=16,
        h=4,
        encoder_layers=2,
        decoder_layers=2,
        d_ff=32,
        dropout=0.0,
        tie_weights=False,
    )
    return Transformer(config).eval()


def random_sources(seed: int, vocab: int = 11, batch: int = 6, length: int = 7):
    """(batch, length) sources without special ids; every other one padded shorter."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (batch, length), generator=generator)
    for row in range(1, batch, 2):
        src[row, length - row :] = PAD
    return src


def tokens_of(row: Tensor) -> list[int]:
    """An output row in greedy_decode's format -> its tokens, up to the end token."""
    tokens = row.tolist()
    return tokens[: tokens.index(EOS) + 1] if EOS in tokens else tokens


@torch.no_grad()
def sequence_scores(model, src: Tensor, outputs: list[list[int]], alpha: float):
    """log P(Y | X) / lp(|Y|) of each output Y for one source src (1, S), from one
    teacher-forced pass: independent of the search."""
    width = max(len(y) for y in outputs)
    tgt_in = torch.full((len(outputs), width), PAD)
    tgt_out = torch.full((len(outputs), width), PAD)
    real = torch.zeros(len(outputs), width, dtype=torch.bool)
    for i, y in enumerate(outputs):
        tgt_in[i, : len(y)] = torch.tensor([BOS, *y[:-1]])
        tgt_out[i, : len(y)] = torch.tensor(y)
        real[i, : len(y)] = True
    src = src.expand(len(outputs), -1)
    log_probs = model(src, tgt_in, padding_mask(src, PAD)).log_softmax(-1)
    log_p = (log_probs.gather(-1, tgt_out[..., None])[..., 0] * real).sum(dim=1)
    return log_p / length_penalty(real.sum(dim=1), alpha)


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
def test_one_beam_is_greedy_decoding(alpha):
    lengths = set()
    for seed in range(16):
        model, src = random_model(seed), random_sources(seed)
        greedy = greedy_decode(model, src, PAD, BOS, EOS, max_len=12)
        beam = beam_search(
            model,
            src,
            PAD,
            BOS,
            EOS,
            12,
            beam_size=1,
            alpha=alpha,
            stop_at_k_finished=True,  # fairseq's rule: one beam is greedy
        )
        assert torch.equal(beam, greedy)
        lengths |= {len(tokens_of(row)) for row in greedy}
    # not a vacuous check: outputs that end at once, later, and never
    assert {1, 12} < lengths and len(lengths) > 5


@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0, -0.5])
@pytest.mark.parametrize("seed", range(4))
def test_a_beam_that_keeps_every_prefix_finds_the_best_sequence(seed, alpha):
    vocab, max_len = 5, 4  # outputs: 4 ** 4 without an end token, 85 with one
    model = random_model(seed, vocab)
    src = random_sources(seed, vocab, batch=1, length=5)
    # every output up to max_len that ends with the end token, and every one of
    # max_len tokens that does not
    outputs = [
        [*body, EOS]
        for n in range(max_len)
        for body in itertools.product(range(vocab), repeat=n)
        if EOS not in body
    ] + [
        list(body)
        for body in itertools.product(range(vocab), repeat=max_len)
        if EOS not in body
    ]
    scores = sequence_scores(model, src, outputs, alpha)
    # the beam holds every prefix, and every end token ranks within it
    wide = vocab * (vocab - 1) ** (max_len - 1)
    found, score = beam_search(
        model,
        src,
        PAD,
        BOS,
        EOS,
        max_len,
        beam_size=wide,
        alpha=alpha,
        return_scores=True,
    )
    assert tokens_of(found[0]) == outputs[scores.argmax()]
    assert_close(score[0], scores.max())


@pytest.mark.parametrize("beam_size", [1, 2, 4, 7])
@pytest.mark.parametrize("max_len", [3, 9, None])
def test_a_batch_gives_what_each_source_gives_alone(beam_size, max_len):
    model, src = random_model(beam_size), random_sources(beam_size)
    batched, scores = beam_search(
        model, src, PAD, BOS, EOS, max_len, beam_size=beam_size, return_scores=True
    )
    for row, source in enumerate(src):
        alone, score = beam_search(
            model,
            source[source != PAD][None],
            PAD,
            BOS,
            EOS,
            max_len,
            beam_size=beam_size,
            return_scores=True,
        )
        width = alone.size(1)
        assert torch.equal(batched[row, :width], alone[0])
        assert (batched[row, width:] == PAD).all()
        assert_close(scores[row], score[0])


@pytest.mark.parametrize("seed", range(4))
def test_outputs_fit_max_len_and_scores_are_the_outputs_scores(seed):
    model, src = random_model(seed), random_sources(seed)
    for max_len, alpha in [(1, 0.6), (2, 0.0), (5, 0.6), (12, 1.0)]:
        out, scores = beam_search(
            model, src, PAD, BOS, EOS, max_len, alpha=alpha, return_scores=True
        )
        assert out.size(1) <= max_len
        for row in range(src.size(0)):
            output = tokens_of(out[row])
            # the end token ends an output, and only padding follows
            assert EOS not in output[:-1]
            assert (out[row, len(output) :] == PAD).all()
            assert EOS in output or len(output) == max_len
            recomputed = sequence_scores(model, src[row : row + 1], [output], alpha)
            assert_close(scores[row], recomputed[0], atol=1e-5, rtol=1e-5)


class NeverEnds(nn.Module):
    """A stand-in model that always prefers token 3 and never the end token. (Without
    a key/value cache: decode with use_cache=False.)"""

    def __init__(self, vocab: int = 6):
        super().__init__()
        self.vocab = vocab
        self.output_projection = nn.Identity()

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, memory: Tensor, src_mask: Tensor, prefix: Tensor, cache=None):
        logits = torch.zeros(prefix.size(0), prefix.size(1), self.vocab)
        logits[..., 3] = 2.0
        logits[..., EOS] = -5.0
        return logits


def test_without_max_len_each_output_may_run_to_its_source_length_plus_50():
    src = torch.tensor([[4, 4, 4, 4, 4], [4, 4, 4, PAD, PAD]])
    out = beam_search(NeverEnds(), src, PAD, BOS, EOS, use_cache=False)
    assert out.shape == (2, 55)
    assert (out[0] == 3).all()  # never ended: the best beam, at the limit
    assert (out[1, :53] == 3).all() and (out[1, 53:] == PAD).all()


class ByStep(nn.Module):
    """A stand-in model whose next-token logits depend only on the step: step t uses
    logits[min(t, len - 1)]. It counts its decoding steps. (Without a key/value cache:
    decode with use_cache=False.)"""

    def __init__(self, logits: list[list[float]]):
        super().__init__()
        self.logits = torch.tensor(logits)
        self.output_projection = nn.Identity()
        self.steps = 0

    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, memory: Tensor, src_mask: Tensor, prefix: Tensor, cache=None):
        self.steps += 1
        t = min(prefix.size(1), len(self.logits)) - 1
        return self.logits[t].expand(prefix.size(0), prefix.size(1), -1)


@pytest.mark.parametrize("alpha", [0.6, 2.0])
def test_the_early_stop_never_drops_a_hypothesis_that_could_still_win(alpha):
    """Step 1: the end token with p = 0.9, token 3 with p = 0.1; then token 3, almost
    surely, and the end token last of all. Ending at once scores log 0.9; the long
    output scores about log 0.1 / lp(30), which wins when alpha is large: a bound
    that divided by lp(t + 1), the next length, would stop after step 1 and miss it."""
    rest = -30.0
    first = [rest, rest, 0.0, torch.tensor(1 / 9).log().item(), rest, rest]
    later = [rest, rest, -60.0, 0.0, rest, rest]
    model = ByStep([first, later])
    src = torch.tensor([[4, 4, 4]])
    out, score = beam_search(
        model, src, PAD, BOS, EOS, 30, alpha=alpha, return_scores=True, use_cache=False
    )
    log_probs = torch.tensor([first, later]).log_softmax(-1)
    end_now = log_probs[0, EOS] / length_penalty(1, alpha)
    run_on = (log_probs[0, 3] + 29 * log_probs[1, 3]) / length_penalty(30, alpha)
    if alpha == 2.0:
        assert run_on > end_now and out.tolist() == [[3] * 30]
        assert_close(score[0], run_on)
    else:  # the end token wins, and nothing can beat it after one step
        assert end_now > run_on and out.tolist() == [[EOS]]
        assert model.steps == 1


def test_bad_beam_size():
    model, src = random_model(0), random_sources(0)
    with pytest.raises(ValueError, match="beam_size=0 must be at least 1"):
        beam_search(model, src, PAD, BOS, EOS, 5, beam_size=0)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_the_key_value_cache_changes_nothing(alpha):
    """Reordered with the beams, the cache gives the tokens and scores of recomputing
    every prefix (scores to float32 rounding)."""
    for seed in range(4):
        model, src = random_model(seed), random_sources(seed)
        cached, cached_scores = beam_search(
            model, src, PAD, BOS, EOS, max_len=12, alpha=alpha, return_scores=True
        )
        recomputed, scores = beam_search(
            model, src, PAD, BOS, EOS, max_len=12, alpha=alpha, return_scores=True,
            use_cache=False,
        )  # fmt: skip
        assert torch.equal(cached, recomputed)
        assert_close(cached_scores, scores)
