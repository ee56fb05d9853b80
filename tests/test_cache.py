"""Incremental decoding with a key/value cache: the tokens and logits of no cache."""

import pytest
import torch
from fast_reference import small_config
from torch.testing import assert_close

from aiayn import Transformer
from aiayn.decoding import greedy_decode, next_token_logits
from aiayn.fast.attention import Kernels
from aiayn.fast.cache import DecoderCache
from aiayn.fast.transformer import FastTransformer, decode
from aiayn.model.embeddings import LearnedPositionalEmbedding, PositionalEncoding
from aiayn.model.masks import padding_mask
from aiayn.tools.bench_decoding import decode_times

PAD, BOS, EOS = 0, 1, 2
VOCAB = 12

CONFIGS = {
    "paper": {},
    "d_k, d_v != d_model / h": {"d_k": 6, "d_v": 10},
    "learned positions": {"positional": "learned"},
    "pre-LN": {"norm_first": True},
}


def random_model(seed: int, **fields) -> Transformer:
    """An untrained model whose greedy outputs vary (tied weights would echo tokens)."""
    torch.manual_seed(seed)
    config = small_config(
        d_model=32, layers=(2, 3), d_ff=64, src_vocab=VOCAB, tgt_vocab=VOCAB,
        tie_weights=False, **fields,
    )  # fmt: skip
    return Transformer(config).eval()


def end_token(model: Transformer, src: torch.Tensor) -> int:
    """The token whose first appearance varies most between the sequences (or None)."""
    free = greedy_decode(model, src, PAD, BOS, eos_id=-1, max_len=15, use_cache=False)
    return max(range(2, VOCAB), key=lambda token: len(first_positions(free, token)))


def first_positions(tokens: torch.Tensor, token: int) -> set[int | None]:
    """Where each row of tokens (B, T) first has ``token`` (None: nowhere)."""
    return {row.index(token) if token in row else None for row in tokens.tolist()}


def padded_sources(seed: int, batch: int = 6, length: int = 9) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(3, VOCAB, (batch, length), generator=generator)
    lengths = torch.randint(1, length + 1, (batch, 1), generator=generator)
    return src.masked_fill(torch.arange(length) >= lengths, PAD)


def step_logits(model, src, use_cache, steps):
    """Logits (B, steps, V) of greedy decoding, step by step, and the tokens."""
    src_mask = padding_mask(src, PAD)
    memory = model.encode(src, src_mask)
    cache = DecoderCache() if use_cache else None
    tokens = torch.full((src.size(0), 1), BOS)
    logits = []
    for _ in range(steps):
        step, cache = next_token_logits(model, memory, src_mask, tokens, cache)
        logits.append(step)
        tokens = torch.cat([tokens, logits[-1].argmax(-1, keepdim=True)], dim=1)
    return torch.stack(logits, dim=1), tokens


SEEDS = [0, 1, 2]


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("seed", SEEDS)
def test_cached_greedy_decode_equals_recomputed(name, seed):
    model = random_model(seed, **CONFIGS[name])
    src = padded_sources(seed)
    eos = end_token(model, src)
    cached = greedy_decode(model, src, PAD, BOS, eos, max_len=15)
    recomputed = greedy_decode(model, src, PAD, BOS, eos, 15, use_cache=False)
    assert torch.equal(cached, recomputed)


def test_the_cases_above_end_sequences_at_different_steps():
    """Finished rows (padding fed back in) are where a cache could go wrong."""
    endings = []
    for name in CONFIGS:
        for seed in SEEDS:
            model = random_model(seed, **CONFIGS[name])
            src = padded_sources(seed)
            eos = end_token(model, src)
            cached = greedy_decode(model, src, PAD, BOS, eos, max_len=15)
            endings.append(first_positions(cached, eos))
    assert sum(len(ends) >= 2 for ends in endings) >= len(endings) * 2 // 3, endings
    assert any(len(ends - {None}) >= 3 for ends in endings), endings
    assert all(padded_sources(seed).eq(PAD).any() for seed in SEEDS)


@pytest.mark.parametrize("name", CONFIGS)
def test_cached_logits_equal_recomputed_to_float32_rounding(name):
    model = random_model(3, **CONFIGS[name])
    src = padded_sources(3)
    with torch.no_grad():
        cached, cached_tokens = step_logits(model, src, True, steps=12)
        recomputed, tokens = step_logits(model, src, False, steps=12)
    assert torch.equal(cached_tokens, tokens)
    assert_close(cached, recomputed)


def test_cache_fills_layer_by_layer_and_grows_one_position_a_step():
    model = random_model(0, d_k=6, d_v=10)
    src = padded_sources(0)
    src_mask = padding_mask(src, PAD)
    memory = model.encode(src, src_mask)
    cache = DecoderCache()
    assert cache.length == 0
    tokens = torch.full((src.size(0), 1), BOS)
    with torch.no_grad():
        for t in range(1, 4):
            before = cache
            _, cache = next_token_logits(model, memory, src_mask, tokens, cache)
            assert cache.length == t and before.length == t - 1  # a new cache
            tokens = torch.cat([tokens, tokens[:, -1:]], dim=1)
    assert len(cache.layers) == 3
    for layer in cache.layers:
        assert layer.keys.shape == (6, 4, 3, 6)
        assert layer.values.shape == (6, 4, 3, 10)
        assert layer.memory_keys.shape == (6, 4, 9, 6)
        assert layer.memory_values.shape == (6, 4, 9, 10)


def test_several_new_tokens_at_once_equal_one_at_a_time():
    model = random_model(4)
    src = padded_sources(4)
    src_mask = padding_mask(src, PAD)
    tgt = torch.randint(3, VOCAB, (src.size(0), 7))
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        whole = model.decode(memory, src_mask, tgt)
        cache, parts = DecoderCache(), []
        for new in (tgt[:, :3], tgt[:, 3:4], tgt[:, 4:]):
            part, cache = decode(model, memory, src_mask, new, cache=cache)
            parts.append(part)
    assert_close(torch.cat(parts, dim=1), whole)


@pytest.mark.parametrize("name", CONFIGS)
def test_select_reorders_the_cache_like_reordered_prefixes(name):
    """Beam search keeps some rows, repeats others: the cache must follow."""
    model = random_model(5, **CONFIGS[name])
    src = padded_sources(5)
    src_mask = padding_mask(src, PAD)
    prefix = torch.randint(3, VOCAB, (src.size(0), 4))
    rows = torch.tensor([3, 3, 0, 5, 1, 1, 1])  # repeats, drops 2 and 4
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        _, cache = next_token_logits(model, memory, src_mask, prefix, DecoderCache())
        cache = cache.select(rows)
        assert cache.length == 4
        longer = torch.cat([prefix[rows], torch.randint(3, VOCAB, (7, 1))], dim=1)
        memory, src_mask = memory[rows], src_mask[rows]
        cached, _ = next_token_logits(model, memory, src_mask, longer, cache)
        recomputed, _ = next_token_logits(model, memory, src_mask, longer)
    assert_close(cached, recomputed)


@pytest.mark.parametrize("positional", [PositionalEncoding, LearnedPositionalEmbedding])
def test_positional_offset_adds_the_later_positions(positional):
    torch.manual_seed(0)
    layer = positional(8, max_positions=10).eval()
    x = torch.randn(2, 6, 8)
    assert_close(
        torch.cat([layer(x[:, :4]), layer(x[:, 4:], offset=4)], dim=1), layer(x)
    )
    with pytest.raises(ValueError, match="max_positions=10"):
        layer(x, offset=5)


def test_decoding_keeps_no_autograd_graph_even_with_gradients_on():
    """greedy_decode runs under no_grad itself: called where gradients are on, on a
    model whose weights require them, its cache and output still hold no graph; the
    same step called directly, with gradients on, does hold one."""
    model = random_model(0)
    src = padded_sources(0)
    assert torch.is_grad_enabled() and next(model.parameters()).requires_grad
    output = greedy_decode(model, src, PAD, BOS, EOS, max_len=4)
    assert not output.requires_grad
    src_mask = padding_mask(src, PAD)
    first = torch.full((src.size(0), 1), BOS)
    memory = model.encode(src, src_mask)
    _, cache = next_token_logits(model, memory, src_mask, first, DecoderCache())
    assert cache.layers[0].keys.requires_grad  # outside no_grad: a graph


def test_decoding_benchmark_times_both_paths():
    config = small_config(h=2, layers=(1, 1), src_vocab=VOCAB, tgt_vocab=VOCAB)
    times = decode_times(config, batch_size=2, src_len=4, lengths=(3, 5), repeats=1)
    assert list(times) == [3, 5]
    assert all(set(t) == {"cached", "recomputed"} for t in times.values())
    assert all(s > 0 for t in times.values() for s in t.values())


def test_cached_decoding_runs_on_the_model_s_own_kernels(monkeypatch):
    """A FastTransformer set to the fused kernel decodes with it, cache or not."""
    import aiayn.fast.attention as attention

    model = FastTransformer(small_config(), kernels=Kernels(short_sequence=0)).eval()
    monkeypatch.setattr(
        attention, "short_sequence_attention", lambda *_, **__: pytest.fail("short")
    )
    src = torch.tensor([[3, 4, 5, 2], [6, 7, 2, 0]])
    output = greedy_decode(model, src, PAD, BOS, EOS, max_len=5)
    assert output.shape[0] == 2
