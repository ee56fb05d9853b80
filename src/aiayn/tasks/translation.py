"""Translation in miniature (§6.1): English number words into German or French.

    en-de   one hundred and twenty-one thousand  ->  einhunderteinundzwanzigtausend
    en-fr   one hundred and twenty-one thousand  ->  cent vingt et un mille

The words are num2words' (``aiayn.tasks.number_words``). Every number belongs to one
split, fixed by hashes (``number_split``): the test and validation numbers never occur
in training. Both sides share one byte-pair-encoded vocabulary (§5.1,
``aiayn.tasks.subwords``), learnt from the first ``VOCABULARY_PAIRS`` pairs of the
training corpus; training batches are cut from that corpus by approximate length
within a token budget (``token_budget_batches``). The scores add sacrebleu's corpus
BLEU and chrF (``translation_scores``) to the exact match.
"""

from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import ClassVar

import torch

from aiayn.tasks.base import Batch, Task, TrainingDefaults, make_batch
from aiayn.tasks.number_words import (
    HELD_OUT_SHARE,
    draw_numbers,
    number_split,
    read_english,
    spell,
)
from aiayn.tasks.subwords import SubwordTokenizer, learn_vocabulary

# ----------------------------------------------------------- batching by a token budget


def token_budget_batches(
    src_lengths: list[int], tgt_lengths: list[int], max_tokens: int
) -> list[list[int]]:
    """Indices of pairs grouped into batches of similar length (§5.1).

    Pairs are sorted by source and then target length and cut in that order: a batch
    closes when one more pair would make its padded source (pairs x longest source) or
    its padded target exceed ``max_tokens``. Lengths count the end token.
    """
    if max(max(src_lengths), max(tgt_lengths)) > max_tokens:
        raise ValueError(f"a sequence is longer than max_tokens={max_tokens}")
    order = sorted(
        range(len(src_lengths)), key=lambda i: (src_lengths[i], tgt_lengths[i])
    )
    batches: list[list[int]] = [[]]
    longest_src = longest_tgt = 0
    for i in order:
        src, tgt = max(longest_src, src_lengths[i]), max(longest_tgt, tgt_lengths[i])
        if (len(batches[-1]) + 1) * max(src, tgt) > max_tokens:
            batches.append([])
            src, tgt = src_lengths[i], tgt_lengths[i]
        batches[-1].append(i)
        longest_src, longest_tgt = src, tgt
    return batches


# ------------------------------------------------------------------------- the tasks

CORPUS_SEED = 3003  # the training corpus's numbers
VOCABULARY_PAIRS = 4000  # the pairs the vocabulary is learnt from


@dataclass(frozen=True)
class NumberWordsTask(Task):
    """English number words -> ``language`` number words, one shared BPE vocabulary.

    A source is num2words' English for a number; the training sources are a fixed
    corpus of ``corpus_size`` numbers of the training split.
    """

    name: str
    language: str  # num2words' language of the targets: "de" or "fr"
    description: str
    vocab_size: int = 160
    corpus_size: int = 60_000
    held_out_length: None = None  # held-out sources are drawn as training draws them
    train_defaults: TrainingDefaults = field(
        default=TrainingDefaults(), compare=False
    )
    # a training batch: corpus pairs of similar length, at most this many padded
    # tokens a side (§5.1)
    max_tokens: int = 1500
    TRAINING_OPTIONS: ClassVar[tuple[str, ...]] = ("max_tokens",)

    def target(self, source: str) -> str:
        """'twenty-one' -> 'einundzwanzig' (en-de)."""
        return spell(read_english(source), self.language)

    def check_source(self, source: str) -> None:
        """Refuse text that is not num2words' English for a number of the task."""
        read_english(source)

    def scores(self, sources: list[str], predictions: list[str]) -> dict[str, float]:
        """Exact match and token accuracy, then sacrebleu's corpus BLEU and chrF."""
        references = [self.target(s) for s in sources]
        corpus = translation_scores(predictions, references)
        return super().scores(sources, predictions) | {
            "bleu": corpus["bleu"],
            "chrf": corpus["chrf"],
        }

    def sample(
        self, n: int, generator: torch.Generator, length: int | None = None
    ) -> list[str]:
        """n random held-out sources, English for validation and test numbers (training
        reads ``corpus`` instead); ``length`` is not supported."""
        if length is not None:
            raise ValueError(f"{self.name} draws numbers, not sources of a length")
        numbers: list[int] = []
        while len(numbers) < n:
            drawn = draw_numbers(4 * HELD_OUT_SHARE * n, generator)
            numbers += [k for k in drawn if number_split(k) != "train"]
        return [spell(number, "en") for number in numbers[:n]]

    def corpus_stream(self, n: int) -> list[int]:
        """The first n numbers of the training corpus: drawn, kept if in training."""
        generator = torch.Generator().manual_seed(CORPUS_SEED)
        numbers: list[int] = []
        while len(numbers) < n:
            drawn = draw_numbers(4096, generator)
            numbers += [k for k in drawn if number_split(k) == "train"]
        return numbers[:n]

    @cached_property
    def vocabulary(self) -> SubwordTokenizer:
        """One BPE vocabulary for both sides, learnt from the corpus's first pairs."""
        numbers = self.corpus_stream(VOCABULARY_PAIRS)
        texts = [spell(k, lang) for k in numbers for lang in ("en", self.language)]
        return learn_vocabulary(texts, self.vocab_size)

    @property
    def src_tokenizer(self) -> SubwordTokenizer:
        return self.vocabulary

    @property
    def tgt_tokenizer(self) -> SubwordTokenizer:
        return self.vocabulary

    @cached_property
    def longest_lengths(self) -> tuple[int, int]:
        """(source, target) tokens of the longest numbers: every group the same."""
        probes = [g * 1_001_001_001 for g in range(1, 1000)]
        split = self.vocabulary.split
        return (
            max(len(split(spell(k, "en"))) for k in probes),
            max(len(split(spell(k, self.language))) for k in probes),
        )

    @property
    def source_lengths(self) -> range:
        return range(1, self.longest_lengths[0] + 1)

    @property
    def longest_sequence(self) -> int:
        return max(self.longest_lengths) + 1

    @cached_property
    def corpus(self) -> tuple[list[str], list[str]]:
        """The training pairs, (sources, targets): ``corpus_size`` numbers in words."""
        numbers = self.corpus_stream(self.corpus_size)
        return (
            [spell(k, "en") for k in numbers],
            [spell(k, self.language) for k in numbers],
        )

    @cached_property
    def corpus_lengths(self) -> tuple[list[int], list[int]]:
        """Tokens of each training source and target, the end token included."""
        return tuple(
            [len(self.vocabulary.split(text)) + 1 for text in texts]
            for texts in self.corpus
        )

    @cache  # noqa: B019 (one task object per name, a budget or two each)
    def budget_batches(self, max_tokens: int) -> list[list[int]]:
        """The corpus cut into token-budget batches (``token_budget_batches``)."""
        return token_budget_batches(*self.corpus_lengths, max_tokens)

    def budget_batch_indices(
        self, max_tokens: int, generator: torch.Generator
    ) -> list[int]:
        """The corpus indices of one token-budget batch, drawn at random."""
        batches = self.budget_batches(max_tokens)
        return batches[int(torch.randint(len(batches), (1,), generator=generator))]

    def training_batch(self, generator: torch.Generator) -> Batch:
        """One of the corpus's token-budget batches, drawn at random."""
        sources = self.corpus[0]
        indices = self.budget_batch_indices(self.max_tokens, generator)
        return make_batch(self, [sources[i] for i in indices])


def translation_scores(predictions: list[str], references: list[str]) -> dict:
    """Exact match, sacrebleu's corpus BLEU and chrF (0-100), and their signatures."""
    # imported here: a digit task does not need sacrebleu (nor its file locking)
    from sacrebleu.metrics import BLEU, CHRF

    if len(predictions) != len(references) or not references:
        raise ValueError("give as many predictions as references, at least one")
    bleu, chrf = BLEU(), CHRF()
    exact = sum(p == r for p, r in zip(predictions, references, strict=True))
    return {
        "exact_match": exact / len(references),
        "bleu": bleu.corpus_score(predictions, [references]).score,
        "chrf": chrf.corpus_score(predictions, [references]).score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


# The translation chapter's training, `python -m aiayn train --task en-de`'s defaults
# (its batches are the task's, of at most max_tokens padded tokens a side): the
# learning rate of Eq. (3) halved; the averaged snapshots evaluated every 100 steps, and
# training stopped at the first evaluation that translates 98% of the validation numbers
# exactly (1,200 steps at most; the chapter reports the step each pair stopped at). The
# toy model's shape (toy_model_config), unchanged.
TRAIN_DEFAULTS = TrainingDefaults(
    steps=1200,
    warmup_steps=200,
    lr_factor=0.5,
    # the mean of 5 snapshots 20 steps apart (the digit tasks' defaults: 10, 10 apart)
    snapshot_every=20,
    average_last=5,
    eval_every=100,
    eval_size=300,
    target_exact_match=0.98,
)

TASKS = {
    task.name: task
    for task in [
        NumberWordsTask(
            "en-de",
            "de",
            "English number words into German ones (num2words)",
            train_defaults=TRAIN_DEFAULTS,
        ),
        NumberWordsTask(
            "en-fr",
            "fr",
            "English number words into French ones (num2words)",
            train_defaults=TRAIN_DEFAULTS,
        ),
    ]
}
