"""A toy English grammar (§6.3's task in miniature): its sentences, and the one
parse tree of each.

Sentences come from a small probabilistic context-free grammar (``GRAMMAR``, with
the words of ``LEXICON``); ``sample_tree`` draws a tree of a given number of words.
The grammar is ambiguous in the usual place, the attachment of a prepositional phrase
(PP) after a verb's object: "saw the man with the hat" (the man has the hat: the PP
belongs to the object's noun phrase) against "saw the man with the telescope" (the
seeing is done with it: the PP belongs to the verb phrase). A lexical cue decides:
a PP "with" + an instrument noun attaches to the verb phrase, any other PP to the noun
phrase before it. Noun phrases with several PPs branch to the right. With that rule
every sentence has exactly one tree (``parse``); ``linearize`` writes it as the
bracketed sequence a model learns to write::

    the dog saw a cat  ->  (S (NP Det N )NP (VP V (NP Det N )NP )VP )S
"""

import random
from dataclasses import dataclass
from functools import cache

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
