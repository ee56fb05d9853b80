"""Tasks: where (source, target) text pairs come from, and how text becomes token ids.

A task owns its data: how sources are drawn, the expected target of each, and a
tokenizer per side (the same object when the two sides share one vocabulary). The
tokenizers hold the vocabularies and the special ids: padding, start and end.
Batching, the loss, training, evaluation and the command line read all of it from the
task.

The toy tasks of Part II read digit strings and write digit strings; they share one
small vocabulary, so the source and target embeddings and the pre-softmax linear layer
can share one weight matrix, as in §3.4:

    id  0      1      2      3 ... 12    13
        <pad>  <s>    </s>   0 ... 9     X

``<pad>`` fills the end of shorter sequences in a batch; ``<s>`` starts the decoder's
input (the outputs "shifted right" of Figure 1); ``</s>`` ends every target, so the
model learns when to stop, and every source, so that the last digit is easy to find (the
reversal starts there).
"""

import zlib
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType

import torch
from torch import Tensor


@dataclass(frozen=True)
class Tokenizer:
    """Text <-> token ids over a fixed list of tokens, the special ones included.

    A token's id is its position in ``tokens``. This tokenizer reads text as
    whitespace-separated tokens ('0 1 5' -> ['0', '1', '5']); a subword tokenizer
    (byte-pair encoding, say) overrides ``split`` and ``join`` and keeps the rest.
    """

    tokens: tuple[str, ...]
    pad: str = "<pad>"  # fills the end of shorter sequences in a batch
    bos: str = "<s>"  # starts the decoder's input
    eos: str = "</s>"  # ends every source and target

    def __post_init__(self):
        if len(set(self.tokens)) != len(self.tokens):
            raise ValueError("a token appears twice in the vocabulary")
        missing = [s for s in (self.pad, self.bos, self.eos) if s not in self.tokens]
        if missing:
            raise ValueError(f"special tokens {missing} are not in the vocabulary")

    def __len__(self) -> int:
        return len(self.tokens)

    @cached_property
    def ids(self) -> dict[str, int]:
        """Token -> id."""
        return {token: i for i, token in enumerate(self.tokens)}

    @property
    def pad_id(self) -> int:
        return self.ids[self.pad]

    @property
    def bos_id(self) -> int:
        return self.ids[self.bos]

    @property
    def eos_id(self) -> int:
        return self.ids[self.eos]

    def split(self, text: str) -> list[str]:
        """Text -> tokens: here, its whitespace-separated pieces."""
        return text.split()

    def join(self, tokens: list[str]) -> str:
        """Tokens -> text: the inverse of ``split``."""
        return " ".join(tokens)

    def encode(self, text: str) -> list[int]:
        """'0 1 5' -> [3, 4, 8]: token ids, without start or end tokens."""
        tokens = self.split(text)
        specials = {self.pad, self.bos, self.eos}
        unknown = sorted({t for t in tokens if t not in self.ids or t in specials})
        if unknown:
            raise ValueError(f"tokens {unknown} are not in the vocabulary")
        return [self.ids[t] for t in tokens]

    def decode(self, ids: list[int]) -> str:
        """Token ids -> text: stop at the first end token, skip pad and start tokens."""
        tokens = []
        for i in ids:
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                tokens.append(self.tokens[i])
        return self.join(tokens)


@dataclass(frozen=True)
class Decoding:
    """How a task's outputs are decoded, greedily or by beam search.

    ``extra_length``: an output may grow to its source's length + this many tokens, as
    the paper bounds its outputs (input + 50; input + 300 for parsing); None: one token
    more than the longest target of its batch. ``stop_at_k_finished``: beam search
    also stops a source once k of its hypotheses have ended (fairseq's rule) instead
    of only when no beam can still beat its best finished one (tensor2tensor's, the
    paper's authors'); see ``aiayn.decoding.beam_search``.
    """

    extra_length: int | None = None
    stop_at_k_finished: bool = False


class Task(ABC):
    """A source of (source, target) text pairs, with a tokenizer for each side, and
    the task's own rules: how to train on it, decode it and score it.

    ``src_tokenizer`` reads the sources, ``tgt_tokenizer`` the targets; they are one
    object when the two sides share a vocabulary. ``source_lengths`` are the lengths,
    in source tokens, that ``sample`` draws. ``held_out_length`` is the length of the
    validation and test sources (None: lengths as ``sample`` draws them), and
    ``longest_sequence`` the most token ids a source or target has, end token included.
    ``train_defaults`` are the TrainConfig fields a run of the task starts from
    (``training.task_config``; "model": TransformerConfig fields), ``decoding`` how its
    outputs are decoded, and ``scores`` what an evaluation reports.
    """

    name: str
    description: str
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    source_lengths: range
    held_out_length: int | None
    longest_sequence: int
    train_defaults: Mapping[str, object] = MappingProxyType({})
    decoding: Decoding = Decoding()

    @abstractmethod
    def target(self, source: str) -> str:
        """The expected output text for a source text."""

    @abstractmethod
    def sample(
        self, n: int, generator: torch.Generator, length: int | None = None
    ) -> list[str]:
        """n random sources, of ``length`` tokens if given, drawn from ``generator``."""

    def check_source(self, source: str) -> None:
        """Raise a ValueError, saying why, if ``source`` is not text the task reads."""
        self.src_tokenizer.encode(source)

    def sample_held_out(
        self, n: int, generator: torch.Generator, length: int | None = None
    ) -> list[str]:
        """n sources for the held-out splits: by default drawn as ``sample`` draws."""
        return self.sample(n, generator, length=length)

    def scores(self, sources: list[str], predictions: list[str]) -> dict[str, float]:
        """What an evaluation reports of these predictions: here exact match and token
        accuracy (the target tokenizer's tokens); a task may add its own scores."""
        if not sources or len(sources) != len(predictions):
            raise ValueError("give one prediction per source, at least one")
        exact = right_tokens = total_tokens = 0
        for source, predicted in zip(sources, predictions, strict=True):
            expected = self.tgt_tokenizer.split(self.target(source))
            got = self.tgt_tokenizer.split(predicted)
            exact += got == expected
            # the two may differ in length
            right_tokens += sum(e == g for e, g in zip(expected, got, strict=False))
            total_tokens += len(expected)
        return {
            "exact_match": exact / len(sources),
            "token_accuracy": right_tokens / total_tokens,
        }


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
    """

    name: str
    rule: Callable[[list[str]], list[str]]
    description: str
    source_lengths: range = range(1, 11)
    src_tokenizer: Tokenizer = DIGIT_TOKENIZER
    tgt_tokenizer: Tokenizer = DIGIT_TOKENIZER
    held_out_length: int | None = None
    train_defaults: Mapping[str, object] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )

    @property
    def longest_sequence(self) -> int:
        """A target is as long as its source; either ends with </s>."""
        return self.source_lengths[-1] + 1

    def target(self, source: str) -> str:
        """The expected output for a source, e.g. '0 1 5' -> '5 1 0' for reverse."""
        self.check_source(source)
        return " ".join(self.rule(source.split()))

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
MOVING_DIGITS_DEFAULTS = MappingProxyType(
    dict(model=dict(num_encoder_layers=1, num_decoder_layers=1), steps=1000)
)

TASKS = {
    task.name: task
    for task in [
        DigitTask(
            "reverse-repeats",
            reverse_repeats,
            "every even-numbered occurrence of a digit becomes X, then the sequence is "
            "reversed",
        ),
        DigitTask(
            "copy",
            lambda digits: list(digits),
            "the output is the input",
            train_defaults=MOVING_DIGITS_DEFAULTS,
        ),
        DigitTask(
            "reverse",
            lambda digits: digits[::-1],
            "the output is the input reversed",
            train_defaults=MOVING_DIGITS_DEFAULTS,
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


def held_out_sources(
    task: Task, split: str, n: int, length: int | None = None
) -> list[str]:
    """n random sources from the "validation" or the "test" split of a task.

    Of ``task.held_out_length`` tokens, unless ``length`` is given. Every possible
    source belongs to exactly one split (``held_out_split``), so the two never share a
    sequence, at any length. Each split draws from its own seeded generator and keeps
    the sources of its half; a smaller n gives a prefix of a larger one.
    """
    if split not in HELD_OUT_SEEDS:
        choices = ", ".join(HELD_OUT_SEEDS)
        raise ValueError(f"unknown split {split!r}: choose one of {choices}")
    if length is None:
        length = task.held_out_length
    generator = torch.Generator().manual_seed(HELD_OUT_SEEDS[split])
    sources: list[str] = []
    while len(sources) < n:
        # rejection sampling
        drawn = task.sample_held_out(1024, generator, length=length)
        sources += [source for source in drawn if held_out_split(source) == split]
    return sources[:n]


@dataclass
class Batch:
    """A padded batch of examples, ready for teacher forcing.

    src:     (B, S) source ids + </s>, padded with src_pad_id
    tgt_in:  (B, T) <s> + target ids: the decoder's input, the outputs "shifted right"
    tgt_out: (B, T) target ids + </s>: what the decoder must predict at each position
    tgt_in and tgt_out are padded with tgt_pad_id.
    """

    src: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    src_pad_id: int
    tgt_pad_id: int

    def to(self, device: torch.device | str) -> "Batch":
        """The batch on ``device``. To a GPU it goes from pinned (page-locked) memory,
        so that the copy does not make the host wait."""
        to_gpu = torch.device(device).type == "cuda"

        def move(ids: Tensor) -> Tensor:
            return ids.pin_memory().to(device, non_blocking=True) if to_gpu else ids

        return Batch(
            move(self.src),
            move(self.tgt_in),
            move(self.tgt_out),
            self.src_pad_id,
            self.tgt_pad_id,
        )

    def padded_to(self, src_length: int, tgt_length: int) -> "Batch":
        """The batch padded on the right to (B, src_length) and (B, tgt_length)."""

        def widen(ids: Tensor, length: int, pad_id: int) -> Tensor:
            if ids.size(1) > length:
                raise ValueError(f"a batch of length {ids.size(1)} > {length}")
            return torch.nn.functional.pad(ids, (0, length - ids.size(1)), value=pad_id)

        return Batch(
            widen(self.src, src_length, self.src_pad_id),
            widen(self.tgt_in, tgt_length, self.tgt_pad_id),
            widen(self.tgt_out, tgt_length, self.tgt_pad_id),
            self.src_pad_id,
            self.tgt_pad_id,
        )

    @property
    def num_tokens(self) -> int:
        """Target tokens that count in the loss (padding excluded)."""
        return int((self.tgt_out != self.tgt_pad_id).sum())


def pad(sequences: list[list[int]], pad_id: int) -> Tensor:
    """Right-pad lists of ids with pad_id into a (len(sequences), longest) tensor."""
    longest = max(len(s) for s in sequences)
    return torch.tensor([s + [pad_id] * (longest - len(s)) for s in sequences])


def make_batch(task: Task, sources: list[str]) -> Batch:
    """Encode source texts and their targets with the task's tokenizers: a Batch."""
    source, target = task.src_tokenizer, task.tgt_tokenizer
    # </s> marks where the source ends
    src = [[*source.encode(s), source.eos_id] for s in sources]
    tgt = [target.encode(task.target(s)) for s in sources]
    return Batch(
        src=pad(src, source.pad_id),
        tgt_in=pad([[target.bos_id, *t] for t in tgt], target.pad_id),
        tgt_out=pad([[*t, target.eos_id] for t in tgt], target.pad_id),
        src_pad_id=source.pad_id,
        tgt_pad_id=target.pad_id,
    )


# The tasks of Part III build on this module; importing them adds them to TASKS.
import aiayn.parsing  # noqa: E402, F401
import aiayn.translation  # noqa: E402, F401
