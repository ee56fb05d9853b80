"""The book and the library show the same code (``make sync`` copies library → book).

Every top-level function or class that a chapter defines under the name of something in
``aiayn`` must be, character for character, the library's source (tests/book_code.py).
"""

import pytest

from tests.book_code import library_definitions, library_source, taught_definitions

LIBRARY = library_definitions()
TAUGHT = taught_definitions(LIBRARY)


def test_library_definitions_are_found():
    assert {"MultiHeadAttention", "Transformer", "make_batch", "greedy_decode"} <= set(
        LIBRARY
    )
    assert len(TAUGHT) >= 30


@pytest.mark.parametrize(
    "taught", TAUGHT, ids=[f"{t.chapter.name}:{t.name}" for t in TAUGHT]
)
def test_chapter_code_is_library_code(taught):
    assert taught.source == library_source(LIBRARY[taught.name]), (
        f"{taught.chapter.name} defines {taught.name} differently from src/aiayn: "
        "run `make sync` to copy the library's into the chapter"
    )
