"""Turning a trained model into output sequences: greedy decoding, batched.

Every decoding strategy needs the same step: given the encoder's memory and the tokens
produced so far, the scores of the next token. ``next_token_logits`` is that step;
``greedy_decode`` picks the best token at each step. A beam search would call the same
step and keep several prefixes. With a key/value cache (aiayn.cache) a step runs the
decoder on the newest token only.
"""

import torch
from torch import Tensor

from aiayn.cache import DecoderCache
from aiayn.masks import padding_mask
from aiayn.model import Transformer


def next_token_logits(
    model: Transformer,
    memory: Tensor,
    src_mask: Tensor,
    prefix: Tensor,
    cache: DecoderCache | None = None,
) -> Tensor:
    """Scores of the next token: memory (B, S, d_model), prefix (B, t) -> (B, V).

    Without a cache the decoder runs over the whole prefix. With one it runs over the
    positions the cache does not hold yet (the newest token, in a decoding loop) and
    adds them to the cache.
    """
    if cache is not None:
        prefix = prefix[:, cache.length :]  # the others are cached
    # (B, T, d_model), causal by default
    hidden = model.decode(memory, src_mask, prefix, cache=cache)
    # only the last position predicts what's next
    return model.output_projection(hidden[:, -1])


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
        logits = next_token_logits(model, memory, src_mask, tokens, cache)  # (B, V)
        next_token = logits.argmax(dim=-1).masked_fill(finished, pad_id)  # (B,)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (B, t) -> (B, t + 1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return tokens[:, 1:]
