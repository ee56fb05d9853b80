"""English constituency parsing in miniature (§6.3): a toy grammar, bracketed trees,
labelled-bracket F1.

Sentences come from a small probabilistic context-free grammar (``GRAMMAR``, with
the words of ``LEXICON``). Their parse trees are written as bracketed sequences, as in
"Grammar as a foreign language" (Vinyals, Kaiser et al., 2014): depth first, every
constituent opened by ``(X`` and closed by ``)X``, every word replaced by its
part-of-speech tag::

    the dog saw a cat  ->  (S (NP Det N )NP (VP V (NP Det N )NP )VP )S

The grammar is ambiguous in the usual place, the attachment of a prepositional phrase
(PP) after a verb's object: "saw the man with the hat" (the man has the hat: the PP
belongs to the object's noun phrase) against "saw the man with the telescope" (the
seeing is done with it: the PP belongs to the verb phrase). A lexical cue decides:
a PP "with" + an instrument noun attaches to the verb phrase, any other PP to the noun
phrase before it. Noun phrases with several PPs branch to the right. With that rule
every sentence has exactly one tree (``parse``), which the model must learn to write.

The sentences are split between training and held-out by a hash of their text
(``is_held_out``): no held-out sentence is ever a training sentence.
"""

import random
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, ClassVar

import torch

if TYPE_CHECKING:  # draw_tree's annotation only: the task itself needs no matplotlib
    from matplotlib.axes import Axes

from aiayn.tasks.base import (
    Batch,
    Decoding,
    Task,
    Tokenizer,
    TrainingDefaults,
    make_batch,
)
from aiayn.tasks.training_data import check_length_options, draw_lengths

# A tree is (label, children); a leaf is (tag, word).
Tree = tuple[str, tuple]

# The grammar: symbol -> [(probability, right-hand side), ...]. NPB is a base noun
# phrase; PPI, NPI and NPBI are the instrument PP and its noun phrases, which only
# the verb phrase takes. All noun phrases are labelled NP in a tree, all PPs PP.
GRAMMAR: dict[str, list[tuple[float, tuple[str, ...]]]] = {
    "S": [(1.0, ("NP", "VP"))],
    "NP": [(0.7, ("NPB",)), (0.3, ("NPB", "PP"))],
    "NPB": [(0.6, ("Det", "N")), (0.4, ("Det", "Adj", "N"))],
    "PP": [(1.0, ("P", "NP"))],
    "VP": [(0.2, ("V",)), (0.5, ("V", "NP")), (0.3, ("V", "NP", "PPI"))],
    "PPI": [(1.0, ("With", "NPI"))],
    "NPI": [(0.7, ("NPBI",)), (0.3, ("NPBI", "PP"))],
    "NPBI": [(0.6, ("Det", "NI")), (0.4, ("Det", "Adj", "NI"))],
}
LABELS = {"NPB": "NP", "NPI": "NP", "NPBI": "NP", "PPI": "PP"}  # the others: as is

# Pre-terminal -> (its part-of-speech tag in a tree, its words, equally likely).
LEXICON: dict[str, tuple[str, tuple[str, ...]]] = {
    "Det": ("Det", ("the", "a")),
    "Adj": ("Adj", ("big", "small", "old", "red")),
    "N": ("N", ("dog", "cat", "man", "woman", "park", "hat", "box", "garden")),
    "NI": ("N", ("telescope", "spoon", "stick", "fork")),
    "V": ("V", ("saw", "chased", "found", "liked", "hit")),
    "P": ("P", ("in", "on", "near", "with")),
    "With": ("P", ("with",)),
}
INSTRUMENTS = frozenset(LEXICON["NI"][1])
TAG_OF = {w: tag for tag, words in LEXICON.values() for w in words}  # word -> tag
PHRASES = ("S", "NP", "VP", "PP")
TAGS = ("Det", "Adj", "N", "V", "P")

SPECIALS = ("<pad>", "<s>", "</s>")
WORD_TOKENIZER = Tokenizer((*SPECIALS, *sorted(TAG_OF)))
TREE_TOKENIZER = Tokenizer(
    (*SPECIALS, *(f"({x}" for x in PHRASES), *(f"){x}" for x in PHRASES), *TAGS)
)


@cache
def inside(symbol: str, length: int) -> float:
    """P(symbol yields a sentence of ``length`` words): the inside probability."""
    if symbol in LEXICON:
        return float(length == 1)
    return sum(p * sequence_inside(rhs, length) for p, rhs in GRAMMAR[symbol])


@cache
def sequence_inside(symbols: tuple[str, ...], length: int) -> float:
    """P(the symbols, side by side, yield ``length`` words)."""
    first, rest = symbols[0], symbols[1:]
    if not rest:
        return inside(first, length)
    return sum(
        inside(first, k) * sequence_inside(rest, length - k)
        for k in range(1, length - len(rest) + 1)
    )


def sample_tree(symbol: str, length: int, rng: random.Random) -> Tree:
    """A tree of ``symbol`` with ``length`` words, drawn from the grammar given its
    length: each rule, and each split of the words among its children, in proportion
    to its probability times the inside probabilities of the parts."""
    if symbol in LEXICON:
        tag, words = LEXICON[symbol]
        return (tag, rng.choice(words))
    rules = GRAMMAR[symbol]
    weights = [p * sequence_inside(rhs, length) for p, rhs in rules]
    rhs = rng.choices([rhs for _, rhs in rules], weights)[0]
    children = []
    for i, child in enumerate(rhs):
        rest = rhs[i + 1 :]
        if not rest:
            k = length
        else:
            ks = range(1, length - len(rest) + 1)
            w = [inside(child, k) * sequence_inside(rest, length - k) for k in ks]
            k = rng.choices(ks, w)[0]
        children.append(sample_tree(child, k, rng))
        length -= k
    if len(children) == 1 and not is_leaf(children[0]):
        return children[0]  # NP -> NPB writes one NP, not two
    return (LABELS.get(symbol, symbol), tuple(children))


def is_leaf(node: Tree) -> bool:
    return isinstance(node[1], str)


def tree_words(tree: Tree) -> list[str]:
    """The sentence of a tree, left to right."""
    if is_leaf(tree):
        return [tree[1]]
    return [w for child in tree[1] for w in tree_words(child)]


def linearize(tree: Tree) -> str:
    """'(S (NP Det N )NP (VP V )VP )S': depth first, words replaced by their tags."""
    if is_leaf(tree):
        return tree[0]
    inner = " ".join(linearize(child) for child in tree[1])
    return f"({tree[0]} {inner} ){tree[0]}"


def parse(sentence: str) -> Tree:
    """The one tree of a sentence of the grammar (a ValueError if there is none).

    Recursive descent: S = NP VP; a noun phrase takes a PP unless that PP is "with"
    + an instrument, which only a verb phrase takes, after its object.
    """
    tokens = sentence.split()
    unknown = sorted({w for w in tokens if w not in TAG_OF})
    if unknown:
        raise ValueError(f"parse: words {unknown} are not in the lexicon")
    reader = _Reader(tokens)
    tree = ("S", (reader.noun_phrase(), reader.verb_phrase()))
    if reader.at < len(tokens):
        raise ValueError(f"parse: {' '.join(tokens[reader.at :])!r} is left over")
    return tree


@dataclass
class _Reader:
    """The words of a sentence and the position reached, for ``parse``."""

    tokens: list[str]
    at: int = 0

    def peek(self, offset: int = 0) -> str | None:
        i = self.at + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self, *tags: str) -> Tree:
        word = self.peek()
        if word is None or TAG_OF[word] not in tags:
            found = "the end" if word is None else repr(word)
            raise ValueError(f"parse: expected {' or '.join(tags)}, found {found}")
        self.at += 1
        return (TAG_OF[word], word)

    def base_noun_phrase(self, instrument: bool) -> Tree:
        """Det (Adj) N, where N is an instrument exactly when ``instrument``."""
        children = [self.take("Det")]
        if self.peek() is not None and TAG_OF[self.peek()] == "Adj":
            children.append(self.take("Adj"))
        if (self.peek() in INSTRUMENTS) != instrument:
            kind = "an instrument" if instrument else "a noun that is no instrument"
            raise ValueError(f"parse: expected {kind}, found {self.peek()!r}")
        children.append(self.take("N"))
        return ("NP", tuple(children))

    def noun_head_after_preposition(self) -> str | None:
        """The noun of the base noun phrase after the preposition at ``at``."""
        offset = 2 if TAG_OF.get(self.peek(2) or "", "") == "Adj" else 1
        return self.peek(offset + 1)

    def takes_pp(self) -> bool:
        """A PP comes next, and it is not an instrument PP."""
        word = self.peek()
        if word is None or TAG_OF[word] != "P":
            return False
        return not (
            word == "with" and self.noun_head_after_preposition() in INSTRUMENTS
        )

    def noun_phrase(self, instrument: bool = False) -> Tree:
        base = self.base_noun_phrase(instrument)
        if not self.takes_pp():
            return base
        return ("NP", (base, self.prepositional_phrase()))

    def prepositional_phrase(self, instrument: bool = False) -> Tree:
        return ("PP", (self.take("P"), self.noun_phrase(instrument)))

    def verb_phrase(self) -> Tree:
        children = [self.take("V")]
        if self.peek() is not None:
            children.append(self.noun_phrase())
        if self.peek() == "with":  # only an instrument PP is left here
            children.append(self.prepositional_phrase(instrument=True))
        return ("VP", tuple(children))


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


@cache
def longest_target(length: int) -> int:
    """The most tokens a linearized tree of ``length`` words can have."""
    return _longest(("S",), length)


@cache
def _longest(symbols: tuple[str, ...], length: int) -> int:
    """The most tokens the symbols side by side write for ``length`` words, or -1."""
    first, rest = symbols[0], symbols[1:]
    if rest:
        splits = [
            (_longest((first,), k), _longest(rest, length - k))
            for k in range(1, length - len(rest) + 1)
        ]
        totals = [a + b for a, b in splits if a >= 0 and b >= 0]
        return max(totals, default=-1)
    if first in LEXICON:
        return 1 if length == 1 else -1
    best = -1
    for _, rhs in GRAMMAR[first]:
        inner = _longest(rhs, length)
        collapsed = len(rhs) == 1 and rhs[0] not in LEXICON  # NP -> NPB: one NP
        if inner >= 0:
            best = max(best, inner + (0 if collapsed else 2))  # + its brackets
    return best


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


# --- drawing a tree -----------------------------------------------------------------


def draw_tree(ax: "Axes", tree: Tree, sentence: str, title: str = "") -> None:
    """Draw a tree of tags over the words of ``sentence``, root at the top."""
    below = sentence.split()
    depth = _height(tree)

    def place(node: Tree, level: int, leaf: list[int]) -> tuple[float, float]:
        if is_leaf(node):
            x = float(leaf[0])
            leaf[0] += 1
            y_tag = -depth
            ax.text(x, y_tag, node[0], ha="center", va="center", fontsize=8)
            if x < len(below):
                word = below[int(x)]
                ax.text(x, y_tag - 0.8, word, ha="center", va="top", fontsize=8)
            return x, y_tag
        points = [place(child, level + 1, leaf) for child in node[1]]
        x, y = sum(p[0] for p in points) / len(points), -level
        for px, py in points:
            ax.plot([x, px], [y - 0.2, py + 0.2], color="0.5", linewidth=0.8)
        ax.text(x, y, node[0], ha="center", va="center", fontsize=8, weight="bold")
        return x, y

    n = len(tree_tags(tree))
    place(tree, 0, [0])
    ax.set_xlim(-0.7, max(n, len(below)) - 0.3)
    ax.set_ylim(-depth - 2.2, 0.6)
    ax.set_title(title)
    ax.axis("off")


def _height(tree: Tree) -> int:
    """Edges from the root to the deepest tag."""
    if is_leaf(tree):
        return 0
    return 1 + max(_height(child) for child in tree[1])


PARSE = ParseTask()
TASKS = {PARSE.name: PARSE}
