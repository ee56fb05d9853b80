"""Training data: the sources of a training batch, and the batch, drawn for a task.

Training asks for a batch (``training_batch``) with its configuration's settings; how
the sources are drawn (their lengths, their digits) is decided here, and how a batch is
built from them by the task (``make_batch``, or its ``number_batch_drawer``).
"""

import torch
from torch import Tensor

from aiayn.tasks.base import Batch, Task, make_batch

FEW_DIGITS_MAX = 5  # a few-digit training source uses 1 to this many digits


def training_sources(
    task: Task,
    n: int,
    generator: torch.Generator,
    length_power: float,
    few_digits_share: float = 0.0,
    uniform_length_share: float = 0.0,
) -> list[str]:
    """n random sources whose lengths L are drawn with probability ∝ L**length_power,
    but for a share ``uniform_length_share`` that draws every length equally likely
    (``length_weights``).

    Lengths range over ``task.source_lengths``. 0 gives every length the same chance;
    1 gives a source of 10 tokens ten times the chance of a source of 1, so that long
    sources, where a digit can occur many times, are common. A share
    ``few_digits_share`` of the sources (digit tasks only) draws its digits from a
    random set of 1 to FEW_DIGITS_MAX digits instead of all ten, so that long
    chains of one digit are common too.
    The sources come grouped by length; a batch does not depend on its order.
    """
    sources = []
    groups = source_groups(
        task, n, generator, length_power, few_digits_share, uniform_length_share
    )
    for length, k, count in groups:
        if k == 10:  # all ten digits: the task's own sampling
            sources += task.sample(count, generator, length=length)
        else:
            sources += task.sample(count, generator, length=length, digits=k)
    return sources


def source_groups(
    task: Task,
    n: int,
    generator: torch.Generator,
    length_power: float,
    few_digits_share: float = 0.0,
    uniform_length_share: float = 0.0,
) -> list[tuple[int, int, int]]:
    """``training_sources``' first draws: how many of the n sources have each length
    and number of digits, as (length, digits, count), sorted (10 digits: all)."""
    lengths = torch.tensor(task.source_lengths)
    weights = length_weights(lengths, length_power, uniform_length_share)
    drawn = lengths[
        torch.multinomial(weights, n, replacement=True, generator=generator)
    ]
    digits = torch.full((n,), 10)
    if few_digits_share > 0:
        few = torch.rand(n, generator=generator) < few_digits_share
        fewer = torch.randint(1, FEW_DIGITS_MAX + 1, (n,), generator=generator)
        digits = torch.where(few, fewer, digits)
    kinds, counts = torch.stack([drawn, digits], dim=1).unique(
        dim=0, return_counts=True
    )
    return [
        (*kind, count)
        for kind, count in zip(kinds.tolist(), counts.tolist(), strict=True)
    ]


def length_weights(
    lengths: Tensor, length_power: float, uniform_length_share: float = 0.0
) -> Tensor:
    """A weight per length: L**length_power, plus the same floor for every length, so
    that a share ``uniform_length_share`` of the draws has every length equally
    likely (none: the weights L**length_power themselves)."""
    powered = lengths.double() ** length_power
    share = uniform_length_share
    return powered + share / (1 - share) * powered.sum() / len(lengths)


def training_batch(
    task: Task,
    n: int,
    generator: torch.Generator,
    length_power: float,
    few_digits_share: float = 0.0,
    uniform_length_share: float = 0.0,
) -> Batch:
    """``make_batch(task, training_sources(task, n, generator, ...))``: the same batch
    from the same draws. A task with a ``number_batch_drawer`` (the digit tasks) draws
    it as numbers, without text (``aiayn.tasks.digit_batches``), about four times
    faster (tests/test_digit_batches.py checks it is the same batch)."""
    shares = few_digits_share, uniform_length_share
    draw_numbers = task.number_batch_drawer()
    if draw_numbers is None:
        sources = training_sources(task, n, generator, length_power, *shares)
        return make_batch(task, sources)
    groups = source_groups(task, n, generator, length_power, *shares)
    return draw_numbers(groups, generator)
