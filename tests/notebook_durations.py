"""A pytest plugin that prints how long each notebook took under nbval.

nbval reports one test per cell; this sums the cells (kernel start-up included) per
notebook. Any other test (the training of a book model) gets a line of its own. Load
it with ``python -m pytest -p tests.notebook_durations --nbval-lax NOTEBOOKS``.
"""

from collections import defaultdict

_seconds_per_notebook: dict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report):
    notebook, _, test = report.nodeid.partition("::")
    if not notebook.endswith(".ipynb"):  # a book model's training: a line of its own
        notebook = f"{notebook}::{test}"
    _seconds_per_notebook[notebook] += report.duration


def pytest_terminal_summary(terminalreporter):
    terminalreporter.section("time per notebook")
    for notebook, seconds in sorted(_seconds_per_notebook.items()):
        terminalreporter.write_line(f"{seconds:8.1f} s  {notebook}")
    total = sum(_seconds_per_notebook.values())
    terminalreporter.write_line(f"{total:8.1f} s  in all")
