"""A subword vocabulary: byte-pair encoding (§5.1), learnt by ``tokenizers``.

    learn_vocabulary(texts, 160).split("twenty-one")  ->  ['▁twenty', '-', 'one']
"""

import json
import re
from dataclasses import dataclass
from functools import cached_property

from tokenizers import Tokenizer as BPETokenizer
from tokenizers import models, pre_tokenizers, trainers

from aiayn.tasks.base import Tokenizer


@dataclass(frozen=True)
class SubwordTokenizer(Tokenizer):
    """A byte-pair-encoding tokenizer: the Tokenizer of aiayn.tasks with BPE's split.

    ``merges`` are BPE's merge rules, in the order they were learnt; with ``tokens``
    they fix how text is split. A space becomes '▁' at the start of the next piece,
    and punctuation (',' and '-') is a piece of its own, so ``join`` restores the text
    exactly: 'twenty-one' -> ['▁twenty', '-', 'one'] -> 'twenty-one'.
    """

    merges: tuple[tuple[str, str], ...] = ()

    @cached_property
    def bpe(self) -> BPETokenizer:
        """The tokenizers library's BPE with these tokens and merges."""
        vocab = {token: i for i, token in enumerate(self.tokens)}
        bpe = BPETokenizer(models.BPE(vocab, list(self.merges)))
        bpe.pre_tokenizer = PRE_TOKENIZER
        return bpe

    @cached_property
    def word_pieces(self) -> dict[str, list[str]]:
        """Each word split so far, and its pieces: the words of numbers recur."""
        return {}

    def split(self, text: str) -> list[str]:
        """'twenty-one' -> ['▁twenty', '-', 'one']; a character the vocabulary lacks
        raises a ValueError."""
        pieces = []
        for word in WORD.findall("▁" + text.replace(" ", "▁")):
            if word not in self.word_pieces:
                found = [token.value for token in self.bpe.model.tokenize(word)]
                if "".join(found) != word:  # BPE drops what it has no token for
                    missing = sorted(set(word) - set("".join(self.tokens)))
                    raise ValueError(f"characters {missing} are not in the vocabulary")
                self.word_pieces[word] = found
            pieces += self.word_pieces[word]
        return pieces

    def join(self, tokens: list[str]) -> str:
        """The inverse of ``split``."""
        return "".join(tokens).replace("▁", " ").removeprefix(" ")


PRE_TOKENIZER = pre_tokenizers.Sequence(
    [pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()]
)
# the words of the pre-tokenizer: a space joins the next word as '▁', and ',' and '-'
# are words of their own ('one thousand, twenty-one' -> ▁one ▁thousand , ▁twenty - one)
WORD = re.compile(r"[,-]|▁?[^▁,-]+")
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>")


def learn_vocabulary(texts: list[str], vocab_size: int) -> SubwordTokenizer:
    """BPE learnt from ``texts``: the special tokens, the characters, then merges until
    ``vocab_size`` tokens. Deterministic: the same texts give the same vocabulary."""
    bpe = BPETokenizer(models.BPE())
    bpe.pre_tokenizer = PRE_TOKENIZER
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS), show_progress=False
    )
    bpe.train_from_iterator(texts, trainer)
    vocab = bpe.get_vocab()
    merges = json.loads(bpe.to_str())["model"]["merges"]
    return SubwordTokenizer(
        tuple(sorted(vocab, key=vocab.get)), merges=tuple(map(tuple, merges))
    )
