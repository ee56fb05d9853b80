"""Turning a trained model into output sequences: greedy decoding and beam search.

Every decoding strategy needs the same step: given the encoder's memory and the tokens
produced so far, the scores of the next token. ``next_token_logits`` is that step;
``greedy_decode`` picks the best token at each step; ``beam_search`` (§6.1) calls the
same step on the k best prefixes of each source. With a key/value cache
(aiayn.fast.cache) a step runs the decoder on the newest token only, with the fast
form of the model's decoder (aiayn.fast.transformer), on any Transformer's weights.
"""

import torch
from torch import Tensor

from aiayn.fast import transformer as fast
from aiayn.fast.attention import DEFAULT_KERNELS
from aiayn.fast.cache import DecoderCache
from aiayn.model.masks import padding_mask
from aiayn.model.transformer import Transformer


def next_token_logits(
    model: Transformer,
    memory: Tensor,
    src_mask: Tensor,
    prefix: Tensor,
    cache: DecoderCache | None = None,
) -> tuple[Tensor, DecoderCache | None]:
    """Scores of the next token: memory (B, S, d_model), prefix (B, t) -> (B, V).

    Without a cache the decoder runs over the whole prefix. With one it runs over the
    positions the cache does not hold yet (the newest token, in a decoding loop), and
    the cache returned holds them too (None without one). Without a cache, ``model``
    may be anything with ``decode`` and ``output_projection``, as a Transformer.
    """
    if cache is None:  # (B, t, d_model), causal by default
        hidden = model.decode(memory, src_mask, prefix)
    else:  # (B, 1, d_model): the others are cached
        new = prefix[:, cache.length :]
        # a FastTransformer's own kernels; a reference Transformer's: the defaults
        kernels = getattr(model, "kernels", DEFAULT_KERNELS)
        hidden, cache = fast.decode(
            model, memory, src_mask, new, cache=cache, kernels=kernels
        )
    # only the last position predicts what's next
    return model.output_projection(hidden[:, -1]), cache


@torch.no_grad()
def greedy_decode(
    model: Transformer,
    src: Tensor,
    pad_id: int,
    bos_id: int,
    eos_id: int,
    max_len: int,
    use_cache: bool = True,
) -> Tensor:
    """Decode a batch of sources a token at a time, always taking the likeliest token.

    src (B, S) -> (B, <= max_len) token ids, without the start token. Each sequence
    stops at its end token (kept in the output); positions after it hold ``pad_id``. The
    loop ends as soon as every sequence has finished. use_cache=False recomputes the
    whole prefix at every step, with the same result.
    """
    src_mask = padding_mask(src, pad_id)  # (B, 1, S)
    # (B, S, d_model): computed once, reused every step
    memory = model.encode(src, src_mask)
    cache = DecoderCache() if use_cache else None
    tokens = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    finished = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        # (B, V)
        logits, cache = next_token_logits(model, memory, src_mask, tokens, cache)
        next_token = logits.argmax(dim=-1).masked_fill(finished, pad_id)  # (B,)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t) -> (B, t + 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens[:, 1:]


def length_penalty(length: Tensor | int, alpha: float) -> Tensor | float:
    """GNMT's length penalty (Wu et al., 2016): lp(Y) = ((5 + |Y|) / 6) ** alpha.

    ``length`` counts every generated token, the end token included; the start token
    is not generated and does not count. A hypothesis Y scores log P(Y | X) / lp(Y).
    """
    return ((5 + length) / 6) ** alpha


def top_candidates(
    log_probs: Tensor, beam_scores: Tensor, beam_size: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The 2k best one-token extensions of each source's k beams, best first.

    log_probs (B, k, V) of the next token; beam_scores (B, k): log P of each beam's
    prefix (-inf for an empty beam) -> log P of each candidate, the beam it extends and
    its token, each (B, 2k). At most k of them end (one end token per beam), so at
    least k do not: enough to refill the beam.
    """
    vocab = log_probs.size(-1)
    # (B, k, V) -> (B, k·V): every continuation of every beam, one row per source
    scores = (beam_scores[..., None] + log_probs).flatten(1)
    scores, index = scores.topk(2 * beam_size, dim=1)  # (B, 2k)
    return scores, index // vocab, index % vocab


class Finished:
    """The best finished hypothesis of each source so far, and how many it has had.

    scores (B,) log P / lp (-inf while there is none), tokens (B, max_len) in
    ``greedy_decode``'s format, lengths (B,) and count (B,).
    """

    def __init__(self, batch: int, max_len: int, pad_id: int, device: torch.device):
        self.scores = torch.full((batch,), float("-inf"), device=device)
        self.tokens = torch.full((batch, max_len), pad_id, device=device)
        self.lengths = torch.zeros(batch, dtype=torch.long, device=device)
        self.count = torch.zeros(batch, dtype=torch.long, device=device)

    def add(
        self,
        sources: Tensor,
        log_p: Tensor,
        rows: Tensor,
        token: Tensor,
        finishing: Tensor,
        prefix: Tensor,
        alpha: float,
    ) -> None:
        """Offer the candidates where ``finishing`` (n, m) holds: each is the prefix
        ``prefix[rows]`` (R, t) without its start token, then ``token``; log_p, rows
        and token are (n, m), for the sources (n,). Each source keeps the best."""
        length = prefix.size(1)  # t - 1 tokens of the prefix, and the new one
        scores = log_p / length_penalty(length, alpha)
        scores = scores.masked_fill(~finishing, float("-inf"))  # (n, m)
        self.count[sources] += finishing.sum(dim=1)
        top, pick = scores.max(dim=1)  # (n,): each source's best candidate
        better = top > self.scores[sources]
        winners, pick = sources[better], pick[better, None]
        self.tokens[winners, : length - 1] = prefix[
            rows[better].gather(1, pick)[:, 0], 1:
        ]
        self.tokens[winners, length - 1] = token[better].gather(1, pick)[:, 0]
        self.scores[winners], self.lengths[winners] = top[better], length


def select_rows(
    rows: Tensor,
    memory: Tensor,
    src_mask: Tensor,
    prefix: Tensor,
    cache: DecoderCache | None,
) -> tuple[Tensor, Tensor, Tensor, DecoderCache | None]:
    """Keep and reorder the rows of everything the decoder reads: rows (R,) indices.

    The one place where per-row decoding state moves, the key/value cache included.
    """
    cache = None if cache is None else cache.select(rows)
    return memory[rows], src_mask[rows], prefix[rows], cache


def start_beams(
    model: Transformer, src: Tensor, pad_id: int, bos_id: int, k: int, use_cache: bool
) -> tuple[Tensor, Tensor, Tensor, DecoderCache | None, Tensor]:
    """What the decoder reads at the first step, k rows per source of src (B, S).

    memory (B·k, S, d_model), encoded once and copied per beam; src_mask (B·k, 1, S);
    prefixes (B·k, 1) of the start token; an empty cache (or None); and each beam's
    log P (B, k): 0 for one beam per source, -inf for the others, so that the first
    step extends one prefix only. A ValueError for k < 1.
    """
    if k < 1:
        raise ValueError(f"beam_size={k} must be at least 1")
    src_mask = padding_mask(src, pad_id)  # (B, 1, S)
    memory = model.encode(src, src_mask).repeat_interleave(k, dim=0)
    prefix = torch.full((src.size(0) * k, 1), bos_id, device=src.device)
    beam_scores = torch.full((src.size(0), k), float("-inf"), device=src.device)
    beam_scores[:, 0] = 0.0
    cache = DecoderCache() if use_cache else None
    return memory, src_mask.repeat_interleave(k, dim=0), prefix, cache, beam_scores


def length_limits(src: Tensor, pad_id: int, max_len: int | None) -> Tensor:
    """The most tokens each output may have, (B,) for src (B, S): ``max_len``, or by
    default the paper's bound, the source's length (its non-pad tokens) + 50."""
    if max_len is None:
        return (src != pad_id).sum(dim=1) + 50
    return torch.full((src.size(0),), max_len, device=src.device)


def split_candidates(
    token: Tensor, eos_id: int, beam_size: int, at_limit: Tensor
) -> tuple[Tensor, Tensor]:
    """Which of each source's 2k candidates are the next beams, and which finish.

    token (n, 2k) best first, at_limit (n,) -> kept (n, k): the k best that do not
    end; finishing (n, 2k): an end among the first k and, at the length limit, the
    next beams too.
    """
    ends = token == eos_id
    kept = ends.int().argsort(dim=1, stable=True)[:, :beam_size]
    in_beam = torch.arange(2 * beam_size, device=token.device) < beam_size
    next_beams = torch.zeros_like(ends).scatter(1, kept, True)
    return kept, (ends & in_beam) | (next_beams & at_limit[:, None])


def best_possible(
    beam_scores: Tensor, limit: Tensor, length: int, alpha: float
) -> Tensor:
    """The most any beam of each source can still score: beam_scores (n, k) -> (n,).

    log P only falls as a beam grows, and lp is largest at one of the ends of the
    lengths it can still have, length + 1 to its limit (n,).
    """
    longest = length_penalty(limit, alpha)
    return beam_scores[:, 0] / longest.clamp(min=length_penalty(length + 1, alpha))


@torch.no_grad()
def beam_search(
    model: Transformer, src: Tensor, pad_id: int, bos_id: int, eos_id: int,
    max_len: int | None = None, *, beam_size: int = 4, alpha: float = 0.6,
    return_scores: bool = False, use_cache: bool = True,
    stop_at_k_finished: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """Decode a batch of sources with beam search and GNMT's length penalty.

    src (B, S) -> (B, <= max_len) token ids in ``greedy_decode``'s format (no start
    token, the end token kept, ``pad_id`` after it); with ``return_scores`` also the
    (B,) scores log P(Y | X) / length_penalty(|Y|, alpha). ``max_len=None``: the
    paper's bound (``length_limits``). use_cache=False recomputes every prefix.

    Each step keeps each source's 2k best one-token extensions (split_candidates). A
    source is done when no beam can still beat its best finished hypothesis
    (tensor2tensor's rule), or at its length limit; stop_at_k_finished=True also after
    k finished hypotheses (fairseq's rule: cheaper, but k bad short ones can win).
    """
    batch, k, device = src.size(0), beam_size, src.device
    limit = length_limits(src, pad_id, max_len)  # (B,)
    memory, src_mask, prefix, cache, beam_scores = start_beams(
        model, src, pad_id, bos_id, k, use_cache
    )
    sources = torch.arange(batch, device=device)  # the sources still being decoded
    best = Finished(batch, int(limit.max()), pad_id, device)
    for length in range(1, int(limit.max()) + 1):
        logits, cache = next_token_logits(model, memory, src_mask, prefix, cache)
        log_probs = logits.log_softmax(dim=-1).view(sources.numel(), k, -1)
        # (n, 2k) each: log P, token, and the row of the beam each candidate extends
        scores, beam, token = top_candidates(log_probs, beam_scores, k)
        rows = torch.arange(beam.size(0), device=device)[:, None] * k + beam
        at_limit = limit[sources] == length
        kept, finishing = split_candidates(token, eos_id, k, at_limit)
        finishing &= scores.isfinite()
        best.add(sources, scores, rows, token, finishing, prefix, alpha)
        beam_scores, rows, token = (x.gather(1, kept) for x in (scores, rows, token))
        ceiling = best_possible(beam_scores, limit[sources], length, alpha)
        done = at_limit | (best.scores[sources] >= ceiling)
        done |= stop_at_k_finished & (best.count[sources] >= k)
        if done.all():
            break
        live = ~done
        memory, src_mask, prefix, cache = select_rows(
            rows[live].flatten(), memory, src_mask, prefix, cache
        )
        prefix = torch.cat([prefix, token[live].flatten()[:, None]], dim=1)  # (R, t+1)
        beam_scores, sources = beam_scores[live], sources[live]
    tokens = best.tokens[:, : int(best.lengths.max())]
    return (tokens, best.scores) if return_scores else tokens
