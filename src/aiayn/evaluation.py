"""Evaluation: predictions as text, decoded and scored as their task says."""

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from aiayn.decoding import beam_search, greedy_decode
from aiayn.model.transformer import Transformer
from aiayn.tasks import Decoding, Task, source_ids


@contextlib.contextmanager
def evaluation_mode(model: nn.Module) -> Iterator[None]:
    """The model in eval mode (no dropout) within the block, then back in the mode
    it was in."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


@torch.no_grad()
def predict(
    model: Transformer,
    task: Task,
    sources: list[str],
    batch_size: int = 1000,
    *,
    beam_size: int = 1,
    alpha: float = 0.6,
    decoding: Decoding | None = None,
) -> list[str]:
    """Predictions for source texts, as target texts: greedy, or with ``beam_size`` > 1
    beam search with length penalty ``alpha``. Only the sources are read: no answer
    is needed. The model decodes in eval mode, and is left in the mode it was in.

    ``decoding`` (by default the task's own, ``task.decoding``) bounds the outputs and
    chooses beam search's stopping rule: each output, its end token included, may
    grow to its source's length + ``extra_length`` tokens, and never past the
    model's positional table (``max_positions``). Greedy decoding decodes a
    batch to its longest source's bound and cuts each output at its own (each row is
    decoded alone, so that is the same output). Beam search decodes sources of one
    length together, so that one bound fits the batch.
    """
    decoding = task.decoding if decoding is None else decoding
    device = next(model.parameters()).device
    target = task.tgt_tokenizer
    ids = (task.src_tokenizer.pad_id, target.bos_id, target.eos_id)
    positions = model.config.max_positions  # the decoder reads <s> + what it wrote
    predictions = [""] * len(sources)
    with evaluation_mode(model):
        for chunk in decoding_batches(task, sources, batch_size, beam_size > 1):
            src = source_ids(task, [sources[i] for i in chunk]).to(device)  # (B, S)
            lengths = (src != ids[0]).sum(dim=1) - 1  # (B,) tokens, </s> not counted
            limits = (lengths + decoding.extra_length).clamp(max=positions)  # (B,)
            max_len = int(limits.max())
            if beam_size == 1:
                output = greedy_decode(model, src, *ids, max_len)
            else:
                output = beam_search(
                    model,
                    src,
                    *ids,
                    max_len,
                    beam_size=beam_size,
                    alpha=alpha,
                    stop_at_k_finished=decoding.stop_at_k_finished,
                )
            rows = zip(chunk, output.tolist(), limits.tolist(), strict=True)
            for i, row, limit in rows:
                predictions[i] = target.decode(row[:limit])
    return predictions


def decoding_batches(
    task: Task, sources: list[str], batch_size: int, by_length: bool
) -> list[list[int]]:
    """Indices of ``sources`` in batches of at most ``batch_size``: in order, or,
    with ``by_length``, each batch of sources of one length."""
    groups: dict[int, list[int]] = {}
    for i, source in enumerate(sources):
        length = len(task.src_tokenizer.encode(source)) if by_length else 0
        groups.setdefault(length, []).append(i)
    return [
        group[start : start + batch_size]
        for group in groups.values()
        for start in range(0, len(group), batch_size)
    ]


@torch.no_grad()
def evaluate(
    model: Transformer,
    task: Task,
    sources: list[str],
    *,
    beam_size: int = 1,
    alpha: float = 0.6,
    decoding: Decoding | None = None,
) -> dict[str, float]:
    """The task's scores (``task.scores``: exact match and token accuracy, and the
    task's own) of decoding ``sources`` as ``predict`` does.

    Pass held-out sources: ``held_out_sources(task, "validation", n)`` for every
    decision (when to stop, which settings are best), ``"test"`` only for the number a
    run reports.
    """
    if not sources:
        raise ValueError("evaluate needs at least one source")
    predictions = predict(
        model, task, sources, beam_size=beam_size, alpha=alpha, decoding=decoding
    )
    return task.scores(sources, predictions)
