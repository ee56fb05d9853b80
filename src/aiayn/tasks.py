"""Toy sequence-to-sequence tasks (the data of Part II): digit strings in, strings out.

Every task shares one small vocabulary, so the source and target embeddings and the
pre-softmax linear layer can share one weight matrix, as in §3.4:

    id  0      1      2      3 ... 12    13
        <pad>  <s>    </s>   0 ... 9     X

``<pad>`` fills the end of shorter sequences in a batch; ``<s>`` starts the decoder's
input (the outputs "shifted right" of Figure 1); ``</s>`` ends every target, so the
model learns when to stop, and every source, so that the last digit is easy to find (the
reversal starts there).
"""

import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
VOCABULARY = [PAD, BOS, EOS, *"0123456789", "X"]
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
DIGIT_IDS = range(VOCABULARY.index("0"), VOCABULARY.index("9") + 1)
TOKEN_ID = {symbol: i for i, symbol in enumerate(VOCABULARY)}


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


@dataclass(frozen=True)
class Task:
    """A toy task: a rule from digit sequences to target sequences; its vocabulary."""

    name: str
    rule: Callable[[list[str]], list[str]]
    description: str
    min_len: int = 1
    max_len: int = 10

    @property
    def vocab_size(self) -> int:
        return len(VOCABULARY)

    def target(self, source: str) -> str:
        """The expected output for a source, e.g. '0 1 5' -> '5 1 0' for reverse."""
        return " ".join(self.rule(self.tokenize(source)))

    def tokenize(self, text: str) -> list[str]:
        """Split a source string into digits; reject anything else, saying what."""
        symbols = text.split()
        unknown = sorted({s for s in symbols if s not in "0123456789" or len(s) != 1})
        if unknown:
            raise ValueError(f"{self.name}: tokens {unknown} are not digits 0-9")
        return symbols

    def encode(self, text: str) -> list[int]:
        """'0 1 5' -> [3, 4, 8]: token ids, without start or end tokens."""
        return [TOKEN_ID[s] for s in self.tokenize(text)]

    def decode(self, ids: list[int]) -> str:
        """Token ids -> string: stop at the first end token, skip special tokens."""
        symbols = []
        for i in ids:
            if i == EOS_ID:
                break
            if i not in (PAD_ID, BOS_ID):
                symbols.append(VOCABULARY[i])
        return " ".join(symbols)

    def sample(
        self, n: int, generator: torch.Generator, length: int | None = None
    ) -> list[str]:
        """n random sources: lengths uniform in [min_len, max_len] unless given."""
        if length is None:
            lengths = torch.randint(
                self.min_len, self.max_len + 1, (n,), generator=generator
            )
        else:
            lengths = torch.full((n,), length)
        digits = torch.randint(0, 10, (n, int(lengths.max())), generator=generator)
        rows = zip(digits.tolist(), lengths.tolist(), strict=True)
        return [" ".join(str(d) for d in row[:k]) for row, k in rows]


TASKS = {
    task.name: task
    for task in [
        Task(
            "reverse-repeats",
            reverse_repeats,
            "every even-numbered occurrence of a digit becomes X, then the sequence is "
            "reversed",
        ),
        Task("copy", lambda digits: list(digits), "the output is the input"),
        Task(
            "reverse", lambda digits: digits[::-1], "the output is the input reversed"
        ),
    ]
}


def get_task(name: str) -> Task:
    """The task called ``name``; a ValueError lists the known ones otherwise."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}: choose one of {', '.join(TASKS)}")
    return TASKS[name]


VALIDATION_SEED = 1001  # the validation sources: what training evaluates and stops on
TEST_SEED = 2002  # the test sources: the number a finished run reports
HELD_OUT_SEEDS = {"validation": VALIDATION_SEED, "test": TEST_SEED}


def held_out_split(source: str) -> str:
    """The held-out split a source belongs to, fixed by a hash of its text."""
    return "validation" if zlib.crc32(source.encode()) % 2 == 0 else "test"


def held_out_sources(task: Task, split: str, n: int, length: int = 10) -> list[str]:
    """n random sources of one length from the "validation" or the "test" split.

    Every possible source belongs to exactly one split (``held_out_split``), so the two
    never share a sequence, at any length. Each split draws from its own seeded
    generator and keeps the sources of its half; a smaller n gives a prefix of a
    larger one.
    """
    if split not in HELD_OUT_SEEDS:
        choices = ", ".join(HELD_OUT_SEEDS)
        raise ValueError(f"unknown split {split!r}: choose one of {choices}")
    generator = torch.Generator().manual_seed(HELD_OUT_SEEDS[split])
    sources: list[str] = []
    while len(sources) < n:
        drawn = task.sample(1024, generator, length=length)  # rejection sampling
        sources += [source for source in drawn if held_out_split(source) == split]
    return sources[:n]


@dataclass
class Batch:
    """A padded batch of examples, ready for teacher forcing.

    src:     (B, S) source ids + </s>, padded with PAD_ID
    tgt_in:  (B, T) <s> + target ids: the decoder's input, the outputs "shifted right"
    tgt_out: (B, T) target ids + </s>: what the decoder must predict at each position
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(
            self.src.to(device), self.tgt_in.to(device), self.tgt_out.to(device)
        )

    @property
    def num_tokens(self) -> int:
        """Target tokens that count in the loss (padding excluded)."""
        return int((self.tgt_out != PAD_ID).sum())


def pad(sequences: list[list[int]]) -> Tensor:
    """Right-pad lists of ids with PAD_ID into a (len(sequences), longest) tensor."""
    longest = max(len(s) for s in sequences)
    return torch.tensor([s + [PAD_ID] * (longest - len(s)) for s in sequences])


def make_batch(task: Task, sources: list[str]) -> Batch:
    """Encode source strings and their targets into one padded Batch."""
    src = [
        [*task.encode(s), EOS_ID] for s in sources
    ]  # </s> marks where the source ends
    tgt = [[TOKEN_ID[sym] for sym in task.target(s).split()] for s in sources]
    return Batch(
        src=pad(src),
        tgt_in=pad([[BOS_ID, *t] for t in tgt]),
        tgt_out=pad([[*t, EOS_ID] for t in tgt]),
    )
