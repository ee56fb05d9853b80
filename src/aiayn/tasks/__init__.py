"""The tasks a model learns: their data, tokenizers and rules, and the registry by name.

``aiayn.tasks.base`` says what a task is; ``digits`` holds the toy tasks of Part II,
``translation`` and ``parsing`` those of Part III. Each of those modules keeps its tasks
in a dict ``TASKS``; ``get_task(name)`` imports a task's module only when the task is
asked for, so that a digit task never loads the translation task's libraries.
"""

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


def get_task(name: str) -> Task:
    """The task called ``name``; a ValueError lists the known ones otherwise."""
    if name in ADDED_TASKS:
        return ADDED_TASKS[name]
    if name not in TASK_MODULES:
        known = ", ".join([*TASK_MODULES, *ADDED_TASKS])
        raise ValueError(f"unknown task {name!r}: choose one of {known}")
    return import_module(TASK_MODULES[name]).TASKS[name]


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
]
