"""Attention maps name their axes the same way on every page.

A query row is the token a decoder writes, or a source token in the encoder; a key
column is a source token, or a token the decoder read. A page that calls the same rows
"token read" in one figure and "token written" in the next confuses its reader: every
axis label or title of the book's code that names a query or a key uses these words.
"""

import pathlib
import re

BOOK = pathlib.Path(__file__).resolve().parents[1] / "book"
NAMES = {
    "token written (query)",
    "source token (query)",
    "source token (key)",
    "token read (key)",
}
# "<words> (query)" or "<words> (key)" inside a string of a chapter's code
NAMED_AXIS = re.compile(r"([A-Za-z][A-Za-z ]*?) \((query|key)\)")


def test_attention_axes_use_the_book_s_names():
    found = {}
    for chapter in sorted(BOOK.glob("*.md")):
        for line in chapter.read_text(encoding="utf-8").splitlines():
            for string in re.findall(r"\"([^\"]*)\"", line):
                for words, role in NAMED_AXIS.findall(string):
                    name = f"{words.split(': ')[-1].strip()} ({role})"
                    found.setdefault(name, set()).add(chapter.name)
    assert len(found) >= 3, found  # the check reads the figures' labels
    unknown = {name: pages for name, pages in found.items() if name not in NAMES}
    assert unknown == {}, f"axis names outside {sorted(NAMES)}: {unknown}"
