"""Translation in miniature (§6.1): English number words into German or French.

    en-de   one hundred and twenty-one thousand  ->  einhunderteinundzwanzigtausend
    en-fr   one hundred and twenty-one thousand  ->  cent vingt et un mille

The numbers run from 0 to 999,999,999,999; a source draws its number of digits
uniformly, then the number, so that short and long numbers both occur. Every number
belongs to one split, fixed by hashes (``number_split``): the test and validation
numbers never occur in training. The words are the ``num2words`` package's:
it spells each three-digit group, once, and ``spell`` puts the groups together with
the scale words as num2words does (tests check that the two agree), far faster than
a num2words call.

Both sides share one byte-pair-encoded vocabulary (§5.1), learnt by ``tokenizers``
from the first ``VOCABULARY_PAIRS`` pairs of the training corpus; training batches are
cut from that corpus by approximate length within a token budget
(``token_budget_batches``).
"""

import json
import re
import zlib
from dataclasses import dataclass, field
from functools import cache, cached_property

import torch
from num2words import num2words
from tokenizers import Tokenizer as BPETokenizer
from tokenizers import models, pre_tokenizers, trainers
from torch import nn

from aiayn.tasks.base import Task, Tokenizer, TrainingDefaults, held_out_split

LARGEST = 10**12 - 1  # the largest number of the tasks: 999,999,999,999
MAX_DIGITS = len(str(LARGEST))
SCALES = (10**9, 10**6, 10**3, 1)  # billions, millions, thousands, units

# ------------------------------------------------------------------ the number words


@cache
def group_words(group: int, language: str) -> str:
    """num2words' words for a three-digit group 0..999 (cached: num2words is slow)."""
    return num2words(group, lang=language)


def groups(number: int) -> tuple[int, int, int, int]:
    """123456789012 -> (123, 456, 789, 12): billions, millions, thousands, units."""
    return tuple((number // scale) % 1000 for scale in SCALES)


def spell(number: int, language: str) -> str:
    """num2words(number, lang=language), 0 <= number <= LARGEST; language en, de, fr."""
    if not 0 <= number <= LARGEST:
        raise ValueError(f"{number} is outside 0..{LARGEST:,}")
    if number < 1000:
        return group_words(number, language)
    return SPELLERS[language](*groups(number))


def spell_english(billions: int, millions: int, thousands: int, units: int) -> str:
    """'one million, two thousand and three': groups joined by commas, the last by
    'and' when it is below a hundred."""
    named = zip(
        (billions, millions, thousands), ("billion", "million", "thousand"), strict=True
    )
    parts = [f"{group_words(g, 'en')} {name}" for g, name in named if g]
    text = ", ".join(parts)
    if units:
        joint = " and " if units < 100 else ", "
        text += joint + group_words(units, "en")
    return text


def spell_german(billions: int, millions: int, thousands: int, units: int) -> str:
    """'zwei Millionen eintausenddrei': Million(en) and Milliarde(n) are words of their
    own, tausend is glued to its group (num2words writes 101,000 as
    'einhunderteinstausend'), and the units to the thousands."""
    parts = []
    for g, one, many in (
        (billions, "Milliarde", "Milliarden"),
        (millions, "Million", "Millionen"),
    ):
        if g:
            parts.append(f"eine {one}" if g == 1 else f"{group_words(g, 'de')} {many}")
    low = ""
    if thousands:
        low = (
            "eintausend" if thousands == 1 else group_words(thousands, "de") + "tausend"
        )
    if units:
        low += group_words(units, "de")
    return " ".join(parts + ([low] if low else []))


def spell_french(billions: int, millions: int, thousands: int, units: int) -> str:
    """'deux millions mille trois': milliard(s) and million(s) take a plural s, mille
    does not, and before it cents and quatre-vingts lose theirs."""
    parts = []
    for g, name in ((billions, "milliard"), (millions, "million")):
        if g:
            plural = "s" if g > 1 else ""
            parts.append(f"{group_words(g, 'fr')} {name}{plural}")
    if thousands:
        words = group_words(thousands, "fr")
        words = re.sub(r"(cent|vingt)s$", r"\1", words)
        parts.append("mille" if thousands == 1 else f"{words} mille")
    if units:
        parts.append(group_words(units, "fr"))
    return " ".join(parts)


SPELLERS = {"en": spell_english, "de": spell_german, "fr": spell_french}

ENGLISH_VALUES = {
    word: value
    for value, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )
} | {
    word: 10 * tens
    for tens, word in enumerate(
        "twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2
    )
}
ENGLISH_SCALES = {"billion": 10**9, "million": 10**6, "thousand": 10**3}


def read_english(text: str) -> int:
    """The number that num2words writes as ``text`` in English, e.g. 'twenty-one' -> 21.

    A ValueError, saying why, for text that is not exactly num2words' English for a
    number of 0..LARGEST.
    """
    total = current = 0
    for word in re.split(r"[ ,-]+", text.strip()):
        if word in ENGLISH_VALUES:
            current += ENGLISH_VALUES[word]
        elif word == "hundred":
            current *= 100
        elif word in ENGLISH_SCALES:
            total, current = total + current * ENGLISH_SCALES[word], 0
        elif word != "and":
            raise ValueError(f"{word!r} is not an English number word")
    number = total + current
    if number > LARGEST or spell(number, "en") != text:
        raise ValueError(f"not num2words' English for a number of 0..{LARGEST:,}")
    return number


HELD_OUT_SHARE = 10  # one number in 10 is held out: a validation or a test number


def number_split(number: int) -> str:
    """'train', 'validation' or 'test': a hash of the number decides whether it is held
    out, and a hash of its English words which held-out split (``held_out_split``).

    The numbers below 1000, the words every other number is made of, are all training
    numbers (held out, each would fill a test set with copies of itself)."""
    if number < 1000 or zlib.crc32(str(number).encode()) % HELD_OUT_SHARE:
        return "train"
    return held_out_split(spell(number, "en"))


def draw_numbers(n: int, generator: torch.Generator) -> list[int]:
    """n numbers: the number of digits uniform in 1..12, then the number uniformly."""
    digits = torch.randint(1, MAX_DIGITS + 1, (n,), generator=generator)
    low = torch.where(digits == 1, 0, 10 ** (digits - 1))
    high = 10**digits  # exclusive
    drawn = torch.rand(n, generator=generator, dtype=torch.float64)
    return (low + (drawn * (high - low)).long().clamp(max=high - 1 - low)).tolist()


# ------------------------------------------------------------- the subword vocabulary


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
    draws_budget_batches = True

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

    def budget_batch(self, max_tokens: int, generator: torch.Generator) -> list[str]:
        """The sources of one token-budget batch, drawn at random: a training step's."""
        sources = self.corpus[0]
        return [sources[i] for i in self.budget_batch_indices(max_tokens, generator)]


# ------------------------------------------------------------- a rule-based alignment

UNITS = {
    "en": "one two three four five six seven eight nine".split(),
    "de": "ein zwei drei vier fünf sechs sieben acht neun".split(),
}
TEENS = {
    "en": "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen "
    "nineteen".split(),
    "de": "zehn elf zwölf dreizehn vierzehn fünfzehn sechzehn siebzehn achtzehn "
    "neunzehn".split(),
}
TENS = {
    "en": "twenty thirty forty fifty sixty seventy eighty ninety".split(),
    "de": "zwanzig dreißig vierzig fünfzig sechzig siebzig achtzig neunzig".split(),
}
HUNDRED = {"en": "hundred", "de": "hundert"}
SCALE_WORDS = {
    "en": ("billion", "million", "thousand"),
    "de": ("Milliarde", "Million", "tausend"),
}
PLACES = ("units", "tens", "hundreds", "scale")


def group_pieces(value: int, scale: int, language: str) -> list[tuple[str, set]]:
    """The words of a group, in the order written, each with the places it names:
    {(scale, 'tens')}, ... English writes the tens first, German the units."""
    hundreds, rest = divmod(value, 100)
    pieces = []
    if hundreds:
        place = {(scale, "hundreds")}
        pieces += [(UNITS[language][hundreds - 1], place), (HUNDRED[language], place)]
    units = [(UNITS[language][rest % 10 - 1], {(scale, "units")})] if rest % 10 else []
    if 10 <= rest < 20:
        return pieces + [
            (TEENS[language][rest - 10], {(scale, "tens"), (scale, "units")})
        ]
    tens = [(TENS[language][rest // 10 - 2], {(scale, "tens")})] if rest >= 20 else []
    return pieces + (tens + units if language == "en" else units + tens)


def place_labels(number: int, language: str) -> list[set]:
    """For each character of ``spell(number, language)``, the places of the number it
    writes: a set of (group, place), group 0 for the units to 3 for the billions,
    place 'units', 'tens', 'hundreds' or 'scale'. Joining words ('and', 'und', commas,
    hyphens, spaces) name no place: an empty set. English and German only.
    """
    text = spell(number, language)
    labels: list[set] = [set() for _ in text]
    if number == 0:
        return [{(0, "units")} for _ in text]
    cursor = 0
    for scale, value in zip((3, 2, 1, 0), groups(number), strict=True):
        if not value:
            continue
        pieces = group_pieces(value, scale, language)
        if scale:
            pieces.append((SCALE_WORDS[language][3 - scale], {(scale, "scale")}))
        for word, places in pieces:
            start = text.index(word, cursor)  # the next occurrence: words in order
            for i in range(start, start + len(word)):
                labels[i] = places
            cursor = start + len(word)
    return labels


def rule_alignment(
    source: str, target_tokens: list[str], source_tokens: list[str], language: str
) -> list[set[int]]:
    """For each target token, the source tokens that write the same places of the
    number (empty for a token of joining letters only, such as 'und')."""

    def token_places(tokens: list[str], number: int, lang: str) -> list[set]:
        chars = place_labels(number, lang)
        places, start = [], -1  # -1: the '▁' that the first token starts with
        for token in tokens:
            end = start + len(token)
            places.append(set().union(*chars[max(start, 0) : end]))
            start = end
        return places

    number = read_english(source)
    src = token_places(source_tokens, number, "en")
    tgt = token_places(target_tokens, number, language)
    return [{j for j, s in enumerate(src) if s & t} for t in tgt]


# ----------------------------------------------------------------- scores and cost


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


def linear_weights(module: nn.Module) -> int:
    """The weights of a module's linear layers (biases excluded)."""
    return sum(m.weight.numel() for m in module.modules() if isinstance(m, nn.Linear))


def training_flops(
    model: nn.Module, task: NumberWordsTask, max_tokens: int, seed: int, steps: int
) -> float:
    """FLOPs of the matrix products of ``steps`` training steps: 6 per weight and
    position it reads, as the chapter "Hardware and schedule" counts them.

    The steps' batches are drawn again, as ``new_run`` seeds its data generator: the
    encoder's weights read the real source tokens, the encoder-decoder attention's W^K
    and W^V the padded memory, the rest of the decoder and the output layer the real
    target tokens. The attention scores themselves are left out.
    """
    cross = sum(
        layer.cross_attn.w_k.weight.numel() + layer.cross_attn.w_v.weight.numel()
        for layer in model.decoder.layers
    )
    source_side = linear_weights(model.encoder)
    target_side = linear_weights(model.decoder) - cross
    target_side += model.output_projection.weight.numel()
    src_lengths, tgt_lengths = task.corpus_lengths
    generator = torch.Generator().manual_seed(seed)
    flops = 0.0
    for _ in range(steps):
        batch = task.budget_batch_indices(max_tokens, generator)
        source = sum(src_lengths[i] for i in batch)
        memory = len(batch) * max(src_lengths[i] for i in batch)
        target = sum(tgt_lengths[i] for i in batch)
        flops += 6.0 * (source_side * source + cross * memory + target_side * target)
    return flops


# The translation chapter's training, `python -m aiayn train --task en-de`'s defaults:
# batches of at most max_tokens padded tokens a side, the learning rate of Eq. (3)
# halved, one evaluation of the averaged snapshots at the end.
# The toy model's shape (toy_model_config), unchanged.
TRAIN_DEFAULTS = TrainingDefaults(
    max_tokens=1500,
    uniform_length_share=0.0,  # batches come from the corpus, not drawn by length
    steps=1200,
    warmup_steps=200,
    lr_factor=0.5,
    # the mean of 5 snapshots 20 steps apart (the digit tasks' defaults: 10, 10 apart)
    snapshot_every=20,
    average_last=5,
    eval_every=1200,
    eval_size=300,
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
