"""Numbers in words: num2words' English, German and French, read back, drawn.

    spell(121_000, "en")  ->  'one hundred and twenty-one thousand'
    spell(121_000, "de")  ->  'einhunderteinundzwanzigtausend'
    spell(121_000, "fr")  ->  'cent vingt et un mille'

The numbers run from 0 to LARGEST (999,999,999,999). The words are the ``num2words``
package's: it spells each three-digit group, once, and ``spell`` puts the groups
together with the scale words as num2words does (tests check that the two agree), far
faster than a num2words call. ``read_english`` reads the English back;
``number_split`` puts every number in one split, fixed by hashes; ``draw_numbers``
draws numbers whose number of digits is uniform, so that short and long numbers both
occur.
"""

import re
import zlib
from functools import cache

import torch
from num2words import num2words

from aiayn.tasks.base import held_out_split

LARGEST = 10**12 - 1  # the largest number of the tasks: 999,999,999,999
MAX_DIGITS = len(str(LARGEST))
SCALES = (10**9, 10**6, 10**3, 1)  # billions, millions, thousands, units


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
