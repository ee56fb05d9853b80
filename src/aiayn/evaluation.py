"""Evaluation: predictions as text, decoded and scored as their task says."""

import torch

from aiayn.decoding import beam_search, greedy_decode
from aiayn.model.transformer import Transformer
from aiayn.tasks import Decoding, Task, make_batch


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
    beam search with length penalty ``alpha``.

    ``decoding`` (by default the task's own, ``task.decoding``) bounds the outputs and
    chooses beam search's stopping rule. Without an ``extra_length``, each batch
    decodes at most one token more than its longest target and end token. With one,
    each output may grow to its source's length + ``extra_length`` tokens: sources of
    one length are then decoded together, so that one limit fits the batch.
    """
    decoding = task.decoding if decoding is None else decoding
    extra_length = decoding.extra_length
    model.eval()
    device = next(model.parameters()).device
    target = task.tgt_tokenizer
    predictions = [""] * len(sources)
    for group in same_limit_groups(task, sources, extra_length is not None):
        for start in range(0, len(group), batch_size):
            chunk = group[start : start + batch_size]
            batch = make_batch(task, [sources[i] for i in chunk]).to(device)
            if extra_length is None:
                max_len = batch.tgt_out.size(1) + 1  # target length + end token, + 1
            else:
                max_len = batch.src.size(1) - 1 + extra_length  # </s> not counted
            ids = (batch.src_pad_id, target.bos_id, target.eos_id)
            if beam_size == 1:
                output = greedy_decode(model, batch.src, *ids, max_len)
            else:
                output = beam_search(
                    model,
                    batch.src,
                    *ids,
                    max_len,
                    beam_size=beam_size,
                    alpha=alpha,
                    stop_at_k_finished=decoding.stop_at_k_finished,
                )
            for i, row in zip(chunk, output.tolist(), strict=True):
                predictions[i] = target.decode(row)
    return predictions


def same_limit_groups(
    task: Task, sources: list[str], by_length: bool
) -> list[list[int]]:
    """Indices of ``sources`` in decoding groups: all of them in one group, or, with
    ``by_length``, one group per source length, in order of first appearance."""
    if not by_length:
        return [list(range(len(sources)))]
    groups: dict[int, list[int]] = {}
    for i, source in enumerate(sources):
        groups.setdefault(len(task.src_tokenizer.encode(source)), []).append(i)
    return list(groups.values())


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
