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
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import ClassVar

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

    ``extra_length``: an output, its end token included, may grow to its source's
    length (in tokens, without the end token) + this many tokens, as the paper bounds
    its outputs: input + 50 for translation (§6.1, the default here), input + 300 for
    parsing (§6.3). The bound needs only the source, never the answer.
    ``stop_at_k_finished``: beam search also stops a source once k of its hypotheses
    have ended (fairseq's rule) instead of only when no beam can still beat its best
    finished one (tensor2tensor's, the paper's authors'); see
    ``aiayn.decoding.beam_search``.
    """

    extra_length: int = 50
    stop_at_k_finished: bool = False

    def __post_init__(self):
        if self.extra_length < 1:
            raise ValueError(
                f"extra_length={self.extra_length}: an output needs room for its "
                "end token"
            )


@dataclass(frozen=True)
class TrainingDefaults:
    """A task's own training settings: changes to TrainConfig's defaults, each None
    where the task keeps the default (``aiayn.train.config.task_config`` applies them).

    The last three change the toy model's shape (``toy_model_config``). How the
    task's training batches are drawn is not here: it is the task's own
    (``Task.training_batch`` and the task's ``TRAINING_OPTIONS``).
    """

    steps: int | None = None
    warmup_steps: int | None = None
    lr_factor: float | None = None
    snapshot_every: int | None = None
    average_last: int | None = None
    eval_every: int | None = None
    eval_size: int | None = None
    target_exact_match: float | None = None
    encoder_layers: int | None = None
    decoder_layers: int | None = None
    max_positions: int | None = None

    MODEL_FIELDS = ("encoder_layers", "decoder_layers", "max_positions")

    def run_changes(self) -> dict[str, object]:
        """The TrainConfig fields the task changes, and their values."""
        return {
            name: value
            for name, value in asdict(self).items()
            if value is not None and name not in self.MODEL_FIELDS
        }

    def model_changes(self) -> dict[str, object]:
        """The TransformerConfig fields the task changes, and their values."""
        return {
            name: value
            for name, value in asdict(self).items()
            if value is not None and name in self.MODEL_FIELDS
        }


class Task(ABC):
    """A source of (source, target) text pairs, with a tokenizer for each side, and
    the task's own rules: how to draw its training batches, decode it and score it.

    ``src_tokenizer`` reads the sources, ``tgt_tokenizer`` the targets; they are one
    object when the two sides share a vocabulary. ``source_lengths`` are the lengths,
    in source tokens, that ``sample`` draws. ``held_out_length`` is the length of the
    validation and test sources (None: lengths as ``sample`` draws them), and
    ``longest_sequence`` the most token ids a source or target has, end token included.

    ``training_batch`` draws one training batch; how (how many sources, of which
    lengths, by a token budget) is the task's own, set by its fields named in
    ``TRAINING_OPTIONS`` (``with_options`` changes them). ``train_defaults`` are the
    task's changes to TrainConfig's defaults (``aiayn.train.config.task_config``),
    ``decoding`` how its outputs are decoded, and ``scores`` what an evaluation
    reports.
    """

    name: str
    description: str
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    source_lengths: range
    held_out_length: int | None
    longest_sequence: int
    train_defaults: TrainingDefaults = TrainingDefaults()
    decoding: Decoding = Decoding()
    TRAINING_OPTIONS: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def target(self, source: str) -> str:
        """The expected output text for a source text."""

    @abstractmethod
    def sample(
        self, n: int, generator: torch.Generator, length: int | None = None
    ) -> list[str]:
        """n random sources, of ``length`` tokens if given, drawn from ``generator``."""

    @abstractmethod
    def training_batch(self, generator: torch.Generator) -> "Batch":
        """One random training batch, drawn from ``generator`` alone: the same
        generator state gives the same batch (so a saved run resumes exactly)."""

    def training_batches(self, generator: torch.Generator) -> Iterator["Batch"]:
        """Training batches without end, each drawn when it is asked for."""
        while True:
            yield self.training_batch(generator)

    def with_options(self, **options: object) -> "Task":
        """This task with other training options (fields named in TRAINING_OPTIONS);
        a ValueError names an option the task does not have."""
        unknown = sorted(set(options) - set(self.TRAINING_OPTIONS))
        if unknown:
            have = ", ".join(self.TRAINING_OPTIONS) or "none"
            raise ValueError(
                f"task {self.name} has no training option {', '.join(unknown)} "
                f"(its options: {have})"
            )
        return replace(self, **options) if options else self

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


def pad_sequences(sequences: list[list[int]], pad_id: int) -> Tensor:
    """Right-pad lists of ids with pad_id into a (len(sequences), longest) tensor."""
    longest = max(len(s) for s in sequences)
    return torch.tensor([s + [pad_id] * (longest - len(s)) for s in sequences])


def source_ids(task: Task, sources: list[str]) -> Tensor:
    """Source texts -> (len(sources), S) ids, each source ended by </s> (it marks
    where the source ends) and padded: what the encoder reads."""
    tokenizer = task.src_tokenizer
    ids = [[*tokenizer.encode(s), tokenizer.eos_id] for s in sources]
    return pad_sequences(ids, tokenizer.pad_id)


def make_batch(task: Task, sources: list[str]) -> Batch:
    """Encode source texts and their targets with the task's tokenizers: a Batch."""
    target = task.tgt_tokenizer
    tgt = [target.encode(task.target(s)) for s in sources]
    return Batch(
        src=source_ids(task, sources),
        tgt_in=pad_sequences([[target.bos_id, *t] for t in tgt], target.pad_id),
        tgt_out=pad_sequences([[*t, target.eos_id] for t in tgt], target.pad_id),
        src_pad_id=task.src_tokenizer.pad_id,
        tgt_pad_id=target.pad_id,
    )
