"""The digit tasks' training batches drawn as numbers: make_batch without the text.

``make_batch(task, task.training_sources(generator))`` writes every source as text,
works out its target with the task's rule on lists of digit strings, and reads both
back as token ids: some tens of microseconds of Python per source. That is little
beside a training step on a CPU, but on a GPU, once the step is one CUDA-graph replay
(``aiayn.train.cuda_graph``), it was most of the step. Here the same draws
(``DigitTask.sample_digits``) stay a tensor, the rules work on the whole batch of
digits at once (a task's ``numbers_rule``), and the batch is the one ``make_batch``
builds, id for id (``tests/test_digit_batches.py``).
"""

from typing import TYPE_CHECKING

import torch
from torch import Tensor
from torch.nn import functional as F

from aiayn.tasks.base import Batch

if TYPE_CHECKING:  # digit_batch's annotation only: aiayn.tasks.digits imports this
    from aiayn.tasks.digits import DigitTask

# symbols: the digits 0-9, X (a target's marked repeat), and PAD_SYMBOL beyond a
# sequence's end (not a token id: ``digit_batch`` maps symbols to token ids)
X_SYMBOL, PAD_SYMBOL = 10, 11


def reverse_repeats_numbers(digits: Tensor, lengths: Tensor) -> Tensor:
    """``reverse_repeats`` on (n, L) digits (PAD_SYMBOL beyond each row's length): X
    for an even-numbered occurrence, then each row reversed within its length."""
    occurrences = F.one_hot(digits, PAD_SYMBOL + 1).cumsum(dim=1)  # (n, L, symbols)
    seen = occurrences.gather(2, digits[..., None]).squeeze(2)  # (n, L): this one's
    return reversed_within(torch.where(seen % 2 == 0, X_SYMBOL, digits), lengths)


def reversed_within(symbols: Tensor, lengths: Tensor) -> Tensor:
    """Each row of (n, L) symbols reversed within its length; PAD_SYMBOL stays beyond
    it."""
    positions = torch.arange(symbols.size(1))  # (L,)
    mirrored = (lengths[:, None] - 1 - positions).clamp(min=0)  # (n, L)
    reversed_rows = symbols.gather(1, mirrored)
    return torch.where(positions < lengths[:, None], reversed_rows, PAD_SYMBOL)


def copied(digits: Tensor, lengths: Tensor) -> Tensor:
    """``copy`` on (n, L) digits: the digits themselves."""
    return digits


def digit_batch(
    task: "DigitTask", groups: list[tuple[int, int, int]], generator: torch.Generator
) -> Batch:
    """The batch of ``task.training_sources``' sources in these (length, digits,
    count) groups (``task.training_groups``), drawn as it draws them, one group after
    the other; the targets by the task's ``numbers_rule``."""
    tokenizer = task.src_tokenizer  # the targets' too: one vocabulary
    longest = max(length for length, _, _ in groups)
    digits = torch.cat(
        [
            F.pad(
                task.sample_digits(count, generator, length=length, digits=k)[0],
                (0, longest - length),
                value=PAD_SYMBOL,
            )
            for length, k, count in groups
        ]
    )  # (n, longest)
    lengths = torch.tensor(
        [length for length, _, count in groups for _ in range(count)]
    )
    target = task.numbers_rule(digits, lengths)  # (n, longest) symbols
    # symbol -> token id
    ids = torch.tensor([tokenizer.ids[s] for s in "0123456789X"] + [tokenizer.pad_id])
    bos = torch.full((len(lengths), 1), tokenizer.bos_id)  # (n, 1)
    return Batch(
        src=ended(ids[digits], lengths, tokenizer.eos_id, tokenizer.pad_id),
        tgt_in=torch.cat([bos, ids[target]], dim=1),
        tgt_out=ended(ids[target], lengths, tokenizer.eos_id, tokenizer.pad_id),
        src_pad_id=tokenizer.pad_id,
        tgt_pad_id=tokenizer.pad_id,
    )


def ended(ids: Tensor, lengths: Tensor, end_id: int, pad_id: int) -> Tensor:
    """(n, L) ids -> (n, L + 1): one more column, and end_id after each row's end."""
    with_end = F.pad(ids, (0, 1), value=pad_id)
    with_end[torch.arange(len(lengths)), lengths] = end_id
    return with_end
