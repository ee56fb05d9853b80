"""The book models, trained as pytest items beside the chapters that load them, and
the explorer's models exported as soon as they are trained.

`make notebooks` (and `make book`, `make portability`) give this file to pytest with
the chapters, and ``tests.book_schedule`` hands it out first: each model trains on a
worker of its own (one thread) while the other worker trains the next or executes a
chapter that needs none. A chapter that loads a model still training waits for it
(``load_or_train`` holds a lock on the model's file), and never trains it twice. The
models go where ``aiayn.book.models`` keeps them: ``$AIAYN_RUNS``, or ``_build/runs``.

Then the explorer's models (``aiayn.book.explorer``): each exported to ONNX and
checked against PyTorch, into ``$AIAYN_EXPLORER`` (or ``_build/explorer``), where the
book's build finds them (book/_ext/explorer_assets.py); an export waits for its model
as a chapter does.

Not a unit test (its name does not start with ``test_``): `pytest tests` skips it.
"""

import os
from pathlib import Path

import pytest
import torch

from aiayn.book.explorer import EXPLORER_MODELS, export_book_model
from aiayn.book.models import BOOK_MODELS, RUNS, train_book_model

EXPLORER = Path(os.environ.get("AIAYN_EXPLORER") or "_build/explorer")


@pytest.mark.parametrize("name", list(BOOK_MODELS))  # the longest first
def test_train_book_model(name):
    print(train_book_model(name, BOOK_MODELS[name], RUNS, threads=1))
    assert (RUNS / f"{name}.pt").is_file()


@pytest.mark.parametrize("name", EXPLORER_MODELS)
def test_export_explorer_model(name):
    torch.set_num_threads(1)  # as a model trains: the other worker keeps its core
    print(export_book_model(name, EXPLORER))
    assert (EXPLORER / name / "model.json").is_file()
