"""English constituency parsing in miniature (§6.3): sentences of a toy grammar
(``aiayn.tasks.grammar``) into their parse trees, scored by labelled-bracket F1.

A tree is written as a bracketed sequence, as in "Grammar as a foreign language"
(Vinyals, Kaiser et al., 2014): depth first, every constituent opened by ``(X`` and
closed by ``)X``, every word replaced by its part-of-speech tag::

    the dog saw a cat  ->  (S (NP Det N )NP (VP V (NP Det N )NP )VP )S

The sentences are split between training and held-out by a hash of their text
(``is_held_out``): no held-out sentence is ever a training sentence.
"""

import random
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar

import torch

from aiayn.tasks.base import (
    Batch,
    Decoding,
    Task,
    Tokenizer,
    TrainingDefaults,
    make_batch,
)
from aiayn.tasks.grammar import (
    PHRASES,
    TAG_OF,
    TAGS,
    Tree,
    is_leaf,
    linearize,
    longest_target,
    parse,
    sample_tree,
    tree_words,
)
from aiayn.tasks.training_data import check_length_options, draw_lengths

SPECIALS = ("<pad>", "<s>", "</s>")
WORD_TOKENIZER = Tokenizer((*SPECIALS, *sorted(TAG_OF)))
TREE_TOKENIZER = Tokenizer(
    (*SPECIALS, *(f"({x}" for x in PHRASES), *(f"){x}" for x in PHRASES), *TAGS)
)


EXTRA_LENGTH = 300  # §6.3: "maximum output length to input length + 300"
LONGEST_SENTENCE = 15  # words

TRAIN_DEFAULTS = TrainingDefaults(
    # positions for the longest output: the longest sentence + 300, + <s>
    max_positions=LONGEST_SENTENCE + EXTRA_LENGTH + 1,
    steps=520,
    warmup_steps=100,
    lr_factor=1.0,
    snapshot_every=20,  # the mean of 5 snapshots 20 steps apart
    average_last=5,
    eval_every=520,
    eval_size=200,
)


def is_held_out(sentence: str) -> bool:
    """One sentence in 8, fixed by a hash of its text, is never trained on."""
    return zlib.crc32(b"parse held out: " + sentence.encode()) % 8 == 0


@dataclass(frozen=True)
class ParseTask(Task):
    """Sentences of the toy grammar -> their linearized parse trees."""

    name: str = "parse"
    description: str = (
        "a sentence of a toy English grammar -> its parse tree as brackets and tags"
    )
    src_tokenizer: Tokenizer = WORD_TOKENIZER
    tgt_tokenizer: Tokenizer = TREE_TOKENIZER
    source_lengths: range = range(3, LONGEST_SENTENCE + 1)
    held_out_length: int | None = None  # lengths drawn as ``sample`` draws them
    # §6.3: "maximum output length to input length + 300"
    decoding = Decoding(extra_length=EXTRA_LENGTH)
    train_defaults = TRAIN_DEFAULTS
    # a training batch: 64 sentences, a length L with probability ∝ L
    batch_size: int = 64
    length_power: float = 1.0
    TRAINING_OPTIONS: ClassVar[tuple[str, ...]] = ("batch_size", "length_power")

    def __post_init__(self):
        check_length_options(self.length_power, 0.0)
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size} is not a positive number")

    @property
    def longest_sequence(self) -> int:
        """The longest linearized tree of ``source_lengths[-1]`` words, + </s>."""
        return longest_target(self.source_lengths[-1]) + 1

    def target(self, source: str) -> str:
        return linearize(parse(source))

    def check_source(self, source: str) -> None:
        parse(source)

    def scores(self, sources: list[str], predictions: list[str]) -> dict[str, float]:
        """Exact match and token accuracy, then labelled-bracket precision, recall and
        F1 and the share of well-formed trees (``bracket_scores``)."""
        expected = [self.target(s) for s in sources]
        return super().scores(sources, predictions) | bracket_scores(
            sources, expected, predictions
        )

    def sample(
        self, n: int, generator: torch.Generator, length: int | None = None
    ) -> list[str]:
        """n training sentences (never held-out ones): lengths uniform in
        ``source_lengths`` unless given; given its length, a sentence is drawn with
        the grammar's probabilities."""
        return self._sample(n, generator, length, held_out=False)

    def training_batch(self, generator: torch.Generator) -> Batch:
        """``batch_size`` training sentences, their lengths drawn by
        ``length_power``, then the sentences of each length."""
        lengths = draw_lengths(
            self.source_lengths, self.batch_size, generator, self.length_power
        )
        drawn, counts = lengths.unique(return_counts=True)
        sentences = []
        for length, count in zip(drawn.tolist(), counts.tolist(), strict=True):
            sentences += self.sample(count, generator, length=length)
        return make_batch(self, sentences)

    def sample_held_out(
        self, n: int, generator: torch.Generator, length: int | None = None
    ) -> list[str]:
        """n held-out sentences (``is_held_out``), drawn as ``sample`` draws."""
        return self._sample(n, generator, length, held_out=True)

    def _sample(
        self, n: int, generator: torch.Generator, length: int | None, held_out: bool
    ) -> list[str]:
        seed = int(torch.randint(0, 2**62, (1,), generator=generator))
        rng = random.Random(seed)
        sentences: list[str] = []
        while len(sentences) < n:
            k = length if length is not None else rng.choice(self.source_lengths)
            sentence = " ".join(tree_words(sample_tree("S", k, rng)))
            if is_held_out(sentence) == held_out:
                sentences.append(sentence)
        return sentences


# --- reading the model's output, and scoring it ----------------------------------


def read_tree(text: str) -> Tree | None:
    """A linearized tree back as a tree of tags, or None if it is not well formed:
    unbalanced or mismatched brackets, not one root, a tag outside any bracket."""
    stack: list[tuple[str, list]] = []
    root = None
    for token in text.split():
        if root is not None:
            return None  # something after the root closed
        if token.startswith("("):
            stack.append((token[1:], []))
        elif token.startswith(")"):
            if not stack or stack[-1][0] != token[1:]:
                return None
            label, children = stack.pop()
            node = (label, tuple(children))
            if stack:
                stack[-1][1].append(node)
            else:
                root = node
        elif stack:
            stack[-1][1].append((token, ""))  # a tag; the word is not written
        else:
            return None
    return root if not stack else None


def tree_tags(tree: Tree) -> list[str]:
    """The part-of-speech tags of a tree, left to right."""
    if is_leaf(tree):
        return [tree[0]]
    return [t for child in tree[1] for t in tree_tags(child)]


def is_well_formed(prediction: str, source: str) -> bool:
    """Balanced, matching brackets around one root, and one tag per source word."""
    tree = read_tree(prediction)
    return tree is not None and len(tree_tags(tree)) == len(source.split())


def labelled_spans(tree: Tree) -> Counter[tuple[str, int, int]]:
    """Every constituent as (label, first word, one past its last word), as EVALB
    counts them: pre-terminals (tags) excluded, repeats counted."""
    spans: Counter[tuple[str, int, int]] = Counter()

    def visit(node: Tree, start: int) -> int:
        if is_leaf(node):
            return start + 1
        end = start
        for child in node[1]:
            end = visit(child, end)
        spans[(node[0], start, end)] += 1
        return end

    visit(tree, 0)
    return spans


def bracket_scores(
    sources: list[str], expected: list[str], predicted: list[str]
) -> dict[str, float]:
    """Labelled bracket precision, recall and F1 over a corpus (EVALB's sums), and
    the share of well-formed predictions.

    A prediction that is not well formed counts as no bracket at all: its sentence's
    gold brackets count as missed.
    """
    matched = n_gold = n_predicted = well_formed = 0
    for source, gold_text, text in zip(sources, expected, predicted, strict=True):
        gold = labelled_spans(read_tree(gold_text))
        n_gold += gold.total()
        if not is_well_formed(text, source):
            continue
        well_formed += 1
        guess = labelled_spans(read_tree(text))
        n_predicted += guess.total()
        matched += (gold & guess).total()
    precision = matched / n_predicted if n_predicted else 0.0
    recall = matched / n_gold
    f1 = 2 * precision * recall / (precision + recall) if matched else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "well_formed": well_formed / len(sources),
    }


PARSE = ParseTask()
TASKS = {PARSE.name: PARSE}
