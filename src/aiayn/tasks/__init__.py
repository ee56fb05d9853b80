"""The tasks a model learns: their data, tokenizers and rules, and the registry by name.

``aiayn.tasks.base`` says what a task is; ``digits`` holds the toy tasks of Part II,
``translation`` and ``parsing`` those of Part III. Each of those modules keeps its tasks
in a dict ``TASKS``; ``get_task(name)`` imports a task's module only when the task is
asked for, so that a digit task never loads the translation task's libraries.
"""

from functools import cache
from importlib import import_module

from aiayn.tasks.base import (
    HELD_OUT_SEEDS,
    Batch,
    Decoding,
    Task,
    Tokenizer,
    TrainingDefaults,
    held_out_sources,
    held_out_split,
    make_batch,
    pad_sequences,
    source_ids,
)
from aiayn.tasks.digits import DIGIT_TOKENIZER, DigitTask, reverse_repeats

# the module that defines each task, by the task's name
TASK_MODULES = {
    "reverse-repeats": "aiayn.tasks.digits",
    "copy": "aiayn.tasks.digits",
    "reverse": "aiayn.tasks.digits",
    "en-de": "aiayn.tasks.translation",
    "en-fr": "aiayn.tasks.translation",
    "parse": "aiayn.tasks.parsing",
}
TASK_NAMES = tuple(TASK_MODULES)
# tasks of your own, by name (``ADDED_TASKS[task.name] = task``): get_task, and so
# training, evaluation and the CLI, find them before the tasks of TASK_MODULES
ADDED_TASKS: dict[str, Task] = {}


def get_task(name: str, **options: object) -> Task:
    """The task called ``name``, with these training options changed
    (``Task.with_options``); a ValueError lists the known tasks otherwise."""
    if name in ADDED_TASKS:
        return ADDED_TASKS[name].with_options(**options)
    if name not in TASK_MODULES:
        known = ", ".join([*TASK_MODULES, *ADDED_TASKS])
        raise ValueError(f"unknown task {name!r}: choose one of {known}")
    return task_with_options(name, tuple(sorted(options.items())))


@cache
def task_with_options(name: str, options: tuple[tuple[str, object], ...]) -> Task:
    """One object per task and options: what a task learns once (the translation
    tasks' vocabulary) is learnt once."""
    return import_module(TASK_MODULES[name]).TASKS[name].with_options(**dict(options))


__all__ = [
    "ADDED_TASKS",
    "DIGIT_TOKENIZER",
    "HELD_OUT_SEEDS",
    "TASK_MODULES",
    "TASK_NAMES",
    "Batch",
    "Decoding",
    "DigitTask",
    "Task",
    "Tokenizer",
    "TrainingDefaults",
    "get_task",
    "held_out_sources",
    "held_out_split",
    "make_batch",
    "pad_sequences",
    "reverse_repeats",
    "source_ids",
]
