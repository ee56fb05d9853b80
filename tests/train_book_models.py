"""The book models, trained as pytest items beside the chapters that load them.

`make notebooks` (and `make book`, `make portability`) give this file to pytest with
the chapters, and ``tests.book_schedule`` hands it out first: each model trains on a
worker of its own (one thread) while the other worker trains the next or executes a
chapter that needs none. A chapter that loads a model still training waits for it
(``load_or_train`` holds a lock on the model's file), and never trains it twice. The
models go where ``aiayn.book.models`` keeps them: ``$AIAYN_RUNS``, or ``_build/runs``.

Not a unit test (its name does not start with ``test_``): `pytest tests` skips it.
"""

import pytest

from aiayn.book.models import BOOK_MODELS, RUNS, train_book_model


@pytest.mark.parametrize("name", list(BOOK_MODELS))  # the longest first
def test_train_book_model(name):
    print(train_book_model(name, BOOK_MODELS[name], RUNS, threads=1))
    assert (RUNS / f"{name}.pt").is_file()
