"""The toy tasks of Part II: rules from digit sequences to digit sequences."""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
from torch import Tensor

from aiayn.tasks.base import NumberBatchDrawer, Task, Tokenizer, TrainingDefaults
from aiayn.tasks.digit_batches import (
    copied,
    digit_batch,
    reverse_repeats_numbers,
    reversed_within,
)


def reverse_repeats(digits: list[str]) -> list[str]:
    """Even-numbered occurrences of a digit become X; then the sequence is reversed.

    >>> " ".join(reverse_repeats("0 1 5 9 0 3 5 2 5".split()))
    '5 2 X 3 X 9 5 1 0'
    """
    seen: Counter[str] = Counter()
    marked = []
    for digit in digits:
        seen[digit] += 1
        marked.append("X" if seen[digit] % 2 == 0 else digit)
    return marked[::-1]


DIGIT_TOKENIZER = Tokenizer(("<pad>", "<s>", "</s>", *"0123456789", "X"))


@dataclass(frozen=True)
class DigitTask(Task):
    """A toy task: a rule from digit sequences to target sequences; one vocabulary.

    Held-out sources have every length, all equally likely, as ``sample`` draws them.
    Half the training sources are drawn from a few digits (``draws_few_digits``). With
    ``numbers_rule``, the rule on a batch of digits as numbers, training batches are
    drawn without text (``aiayn.tasks.digit_batches``).
    """

    name: str
    rule: Callable[[list[str]], list[str]]
    description: str
    source_lengths: range = range(1, 11)
    src_tokenizer: Tokenizer = DIGIT_TOKENIZER
    tgt_tokenizer: Tokenizer = DIGIT_TOKENIZER
    held_out_length: int | None = None
    train_defaults: TrainingDefaults = field(
        default=TrainingDefaults(few_digits_share=0.5), compare=False
    )
    numbers_rule: Callable[[Tensor, Tensor], Tensor] | None = field(
        default=None, compare=False
    )
    draws_few_digits = True

    @property
    def longest_sequence(self) -> int:
        """A target is as long as its source; either ends with </s>."""
        return self.source_lengths[-1] + 1

    def target(self, source: str) -> str:
        """The expected output for a source, e.g. '0 1 5' -> '5 1 0' for reverse."""
        self.check_source(source)
        return " ".join(self.rule(source.split()))

    def number_batch_drawer(self) -> NumberBatchDrawer | None:
        """``digit_batch`` for this task, if it has a ``numbers_rule``."""
        return None if self.numbers_rule is None else partial(digit_batch, self)

    def check_source(self, source: str) -> None:
        """Reject anything but digits 0-9, saying what."""
        symbols = source.split()
        unknown = sorted({s for s in symbols if s not in "0123456789" or len(s) != 1})
        if unknown:
            raise ValueError(f"{self.name}: tokens {unknown} are not digits 0-9")

    def sample(
        self,
        n: int,
        generator: torch.Generator,
        length: int | None = None,
        digits: int = 10,
    ) -> list[str]:
        """n random sources: lengths uniform in ``source_lengths`` unless given.

        With ``digits`` < 10, each source draws its digits from a random set of that
        many (its own set), so that the same digit recurs often.
        """
        drawn, lengths = self.sample_digits(n, generator, length, digits)
        rows = zip(drawn.tolist(), lengths.tolist(), strict=True)
        return [" ".join(str(d) for d in row[:k]) for row, k in rows]

    def sample_digits(
        self,
        n: int,
        generator: torch.Generator,
        length: int | None = None,
        digits: int = 10,
    ) -> tuple[Tensor, Tensor]:
        """``sample``'s draws, as numbers: digits (n, longest) and lengths (n,).

        Source i is the first lengths[i] digits of row i.
        """
        if length is None:
            low, high = self.source_lengths.start, self.source_lengths.stop
            lengths = torch.randint(low, high, (n,), generator=generator)
        else:
            lengths = torch.full((n,), length)
        drawn = torch.randint(0, digits, (n, int(lengths.max())), generator=generator)
        if digits < 10:  # 0, 1, ... stand for the first digits of a random order
            orders = torch.rand(n, 10, generator=generator).argsort(dim=1)
            drawn = orders.gather(1, drawn)
        return drawn, lengths


# Moving digits by position needs one layer a side, and half the steps.
MOVING_DIGITS_DEFAULTS = TrainingDefaults(
    few_digits_share=0.5, encoder_layers=1, decoder_layers=1, steps=1000
)

TASKS = {
    task.name: task
    for task in [
        DigitTask(
            "reverse-repeats",
            reverse_repeats,
            "every even-numbered occurrence of a digit becomes X, then the sequence is "
            "reversed",
            numbers_rule=reverse_repeats_numbers,
        ),
        DigitTask(
            "copy",
            lambda digits: list(digits),
            "the output is the input",
            train_defaults=MOVING_DIGITS_DEFAULTS,
            numbers_rule=copied,
        ),
        DigitTask(
            "reverse",
            lambda digits: digits[::-1],
            "the output is the input reversed",
            train_defaults=MOVING_DIGITS_DEFAULTS,
            numbers_rule=reversed_within,
        ),
    ]
}
