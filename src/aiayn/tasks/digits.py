"""The toy tasks of Part II: rules from digit sequences to digit sequences."""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

import torch
from torch import Tensor

from aiayn.tasks.base import Batch, Decoding, Task, Tokenizer, TrainingDefaults
from aiayn.tasks.digit_batches import (
    copied,
    digit_batch,
    reverse_repeats_numbers,
    reversed_within,
)
from aiayn.tasks.training_data import check_length_options, draw_lengths


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


FEW_DIGITS_MAX = 5  # a few-digit training source uses 1 to this many digits


@dataclass(frozen=True)
class DigitTask(Task):
    """A toy task: a rule from digit sequences to target sequences; one vocabulary.

    Held-out sources have every length, all equally likely, as ``sample`` draws them.
    A training batch has ``batch_size`` sources whose lengths L are drawn with
    probability ∝ L**length_power, but for a share ``uniform_length_share`` that draws
    every length equally likely (``aiayn.tasks.training_data``): short sources, all
    but absent under L**4, are learned too. A share ``few_digits_share`` of them draws
    its digits from a random set of 1 to FEW_DIGITS_MAX digits instead of all ten, so
    that long chains of one digit are common too. The batch is drawn as numbers and
    its targets computed by ``numbers_rule``, the rule on a whole batch of digits at
    once (``aiayn.tasks.digit_batches``): the batch ``make_batch`` builds from
    ``training_sources``, id for id.
    """

    name: str
    rule: Callable[[list[str]], list[str]]
    numbers_rule: Callable[[Tensor, Tensor], Tensor] = field(compare=False)
    description: str
    source_lengths: range = range(1, 11)
    src_tokenizer: Tokenizer = DIGIT_TOKENIZER
    tgt_tokenizer: Tokenizer = DIGIT_TOKENIZER
    held_out_length: int | None = None
    train_defaults: TrainingDefaults = field(
        default=TrainingDefaults(), compare=False
    )
    # a target is as long as its source: room for its end token, and one more
    decoding: Decoding = Decoding(extra_length=2)
    # 128 sources: a step about 0.6 of one of 256, more steps, sooner at 99.9%
    batch_size: int = 128
    length_power: float = 4.0
    uniform_length_share: float = 0.05
    few_digits_share: float = 0.5
    TRAINING_OPTIONS: ClassVar[tuple[str, ...]] = (
        "batch_size",
        "length_power",
        "uniform_length_share",
        "few_digits_share",
    )

    def __post_init__(self):
        check_length_options(self.length_power, self.uniform_length_share)
        if not 0.0 <= self.few_digits_share <= 1.0:
            raise ValueError(
                f"few_digits_share={self.few_digits_share} is not a share in [0, 1]"
            )
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size} is not a positive number")

    @property
    def longest_sequence(self) -> int:
        """A target is as long as its source; either ends with </s>."""
        return self.source_lengths[-1] + 1

    def target(self, source: str) -> str:
        """The expected output for a source, e.g. '0 1 5' -> '5 1 0' for reverse."""
        self.check_source(source)
        return " ".join(self.rule(source.split()))

    def training_batch(self, generator: torch.Generator) -> Batch:
        """``make_batch(self, self.training_sources(generator))``, drawn as numbers."""
        return digit_batch(self, self.training_groups(generator), generator)

    def training_sources(self, generator: torch.Generator) -> list[str]:
        """The sources of ``training_batch``, as text, from the same draws."""
        sources = []
        for length, k, count in self.training_groups(generator):
            sources += self.sample(count, generator, length=length, digits=k)
        return sources

    def training_groups(
        self, generator: torch.Generator
    ) -> list[tuple[int, int, int]]:
        """A training batch's first draws: how many of its sources have each length
        and number of digits, as sorted (length, digits, count) (10 digits: all)."""
        n = self.batch_size
        lengths = draw_lengths(
            self.source_lengths,
            n,
            generator,
            self.length_power,
            self.uniform_length_share,
        )
        digits = torch.full((n,), 10)
        if self.few_digits_share > 0:
            few = torch.rand(n, generator=generator) < self.few_digits_share
            fewer = torch.randint(1, FEW_DIGITS_MAX + 1, (n,), generator=generator)
            digits = torch.where(few, fewer, digits)
        kinds, counts = torch.stack([lengths, digits], dim=1).unique(
            dim=0, return_counts=True
        )
        return [
            (*kind, count)
            for kind, count in zip(kinds.tolist(), counts.tolist(), strict=True)
        ]

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
    encoder_layers=1, decoder_layers=1, steps=1000
)

TASKS = {
    task.name: task
    for task in [
        DigitTask(
            "reverse-repeats",
            reverse_repeats,
            reverse_repeats_numbers,
            "every even-numbered occurrence of a digit becomes X, then the sequence is "
            "reversed",
        ),
        DigitTask(
            "copy",
            lambda digits: list(digits),
            copied,
            "the output is the input",
            train_defaults=MOVING_DIGITS_DEFAULTS,
        ),
        DigitTask(
            "reverse",
            lambda digits: digits[::-1],
            reversed_within,
            "the output is the input reversed",
            train_defaults=MOVING_DIGITS_DEFAULTS,
        ),
    ]
}
