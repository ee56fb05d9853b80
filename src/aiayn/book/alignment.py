"""Which source tokens of a translated number write the same part of it as a target
token: a rule-based alignment, drawn beside the model's attention in "Translation in
miniature". English and German only.

    source tokens  ▁twenty  -  one        target tokens  ▁ein  und  zwanzig
    rule_alignment("twenty-one", target, source, "de")  ->  [{2}, set(), {0}]
"""

from aiayn.tasks.number_words import groups, read_english, spell

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
