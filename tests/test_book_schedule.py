"""The order in which `make notebooks` hands out the book models and the chapters."""

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from tests import book_schedule


@dataclass
class Item:
    nodeid: str
    path: Path


def config(seconds_file=None):
    return SimpleNamespace(getoption=lambda name: seconds_file)


def items_of(tmp_path: Path, cells: dict[str, int], loads_model: set[str]):
    items = [
        Item(f"tests/train_book_models.py::test_train_book_model[{name}]", tmp_path)
        for name in ("reverse-repeats", "copy")
    ]
    for name, count in cells.items():
        notebook = tmp_path / f"{name}.ipynb"
        notebook.write_text("book_model('copy')" if name in loads_model else "x = 1")
        items += [Item(f"nbval/{name}.ipynb::Cell {i}", notebook) for i in range(count)]
    return items


def order_of(items) -> list[str]:
    seen = []
    for item in items:
        unit = item.nodeid.split("::")[-1 if "train" in item.nodeid else 0]
        if unit not in seen:
            seen.append(unit)
    return seen


def test_models_first_then_chapters_without_a_model_longest_first(tmp_path):
    items = items_of(tmp_path, {"a": 2, "b": 5, "inside": 9, "c": 3}, {"inside"})
    book_schedule.pytest_collection_modifyitems(None, config(), items)
    assert order_of(items) == [
        "test_train_book_model[reverse-repeats]",
        "test_train_book_model[copy]",
        "nbval/b.ipynb",  # by cells: 5, 3, 2; the model's chapter last
        "nbval/c.ipynb",
        "nbval/a.ipynb",
        "nbval/inside.ipynb",
    ]
    cells = [item.nodeid for item in items if item.nodeid.startswith("nbval/b")]
    assert cells == [f"nbval/b.ipynb::Cell {i}" for i in range(5)]  # in order


def test_seconds_of_the_last_run_order_the_chapters(tmp_path):
    seconds = tmp_path / "seconds.json"
    seconds.write_text(json.dumps({"a.ipynb": 40.0, "b.ipynb": 1.0, "c.ipynb": 3.0}))
    items = items_of(tmp_path, {"a": 2, "b": 5, "c": 3}, set())
    book_schedule.pytest_collection_modifyitems(None, config(str(seconds)), items)
    assert order_of(items)[2:] == ["nbval/a.ipynb", "nbval/c.ipynb", "nbval/b.ipynb"]


def test_each_model_is_a_unit_of_its_own():
    scheduling = book_schedule.ModelsFirstScheduling.__new__(
        book_schedule.ModelsFirstScheduling
    )
    first = "tests/train_book_models.py::test_train_book_model[copy]"
    second = "tests/train_book_models.py::test_train_book_model[reverse]"
    assert scheduling._split_scope(first) != scheduling._split_scope(second)
    assert scheduling._split_scope("nbval/a.ipynb::Cell 3") == "nbval/a.ipynb"
