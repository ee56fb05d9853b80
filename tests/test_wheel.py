"""aiayn installed like any package, from its wheel, far from the repository.

Binder, Colab and a downloaded chapter's install cell install aiayn with pip; nothing of
the repository is there. This test builds the wheel offline, installs it into a fresh
virtual environment, and from another folder runs the command line and what a chapter
does first: read a stored measurement, load a book model.

The new environment sees the packages aiayn needs (torch, ...) through a ``.pth`` file
naming this environment's site-packages. Python adds a folder named there to sys.path
but does not read the ``.pth`` files inside it, so the editable install of aiayn (a
``.pth`` naming src/) stays invisible: ``import aiayn`` finds the installed wheel.
"""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# what the wheel is built from: the package's metadata and its source
SOURCES = ("pyproject.toml", "README.md", "LICENSE", "src")
TASK = "copy"  # a digit task: no translation libraries, quick to train
PIP = [sys.executable, "-m", "pip"]  # this environment's, offline
OFFLINE = {**os.environ, "PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull}


def run(command: list, *args, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run ``command ARGS`` in ``cwd``; its standard output (its error, if it fails)."""
    argv = [str(a) for a in [*command, *args]]
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"{argv}: {done.stderr}"
    return done.stdout


def build_wheel(tmp_path: Path) -> Path:
    """The wheel of aiayn, built offline from a copy of its sources (the build writes
    a build/ folder beside them, which the repository need not hold)."""
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    build = ["wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w", tmp_path]
    run(PIP, *build, ".", cwd=source, env=OFFLINE)
    (wheel,) = tmp_path.glob("aiayn-*.whl")
    return wheel


def new_environment(tmp_path: Path, wheel: Path) -> Path:
    """A fresh virtual environment with the wheel installed; its python."""
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip"], venv, cwd=tmp_path)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    install = ["--python", python, "install", "--no-deps", "--quiet", wheel]
    run(PIP, *install, cwd=tmp_path, env=OFFLINE)
    # the packages aiayn depends on: this environment's, without its .pth files
    paths = dict.fromkeys(sysconfig.get_path(kind) for kind in ("purelib", "platlib"))
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site_packages = Path(run([python, "-c"], where, cwd=tmp_path).strip())
    (site_packages / "aiayn_test_dependencies.pth").write_text("\n".join(paths) + "\n")
    return python


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The python of a fresh environment that holds aiayn's wheel."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    return new_environment(tmp_path, build_wheel(tmp_path))


def reader_environment(home: Path) -> dict[str, str]:
    """A reader's variables: one thread (the cores may be shared), no setting of the
    book's, nothing that points into the repository."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIAYN_", "XDG_"))}
    env.pop("PYTHONPATH", None)
    return {**env, "HOME": str(home), "OMP_NUM_THREADS": "1"}


def test_the_wheel_is_imported_not_the_repository(installed, tmp_path):
    where = (
        "import aiayn, aiayn.book.models as m; print(aiayn.__file__, m.MEASUREMENTS)"
    )
    printed = run(
        [installed, "-c"], where, cwd=tmp_path, env=reader_environment(tmp_path)
    )
    package, measurements = map(Path, printed.split())
    venv = installed.parents[1]
    assert package.is_relative_to(venv) and not package.is_relative_to(ROOT), package
    assert measurements == package.parent / "book" / "measurements"


@pytest.fixture(scope="module")
def trained(installed, tmp_path_factory) -> tuple[Path, str]:
    """A run the command line trained in a folder of its own: the checkpoint, and what
    the command printed."""
    runs = tmp_path_factory.mktemp("runs")
    train = [
        "train",
        "--task",
        TASK,
        "--steps",
        20,
        "--batch-size",
        8,
        "--eval-size",
        20,
    ]
    options = ["--device", "cpu", "--quiet", "--out", f"{TASK}.pt"]
    env = reader_environment(runs)
    printed = run([installed, "-m", "aiayn"], *train, *options, cwd=runs, env=env)
    return runs / f"{TASK}.pt", printed


def test_the_command_line_trains_predicts_and_evaluates(installed, trained, tmp_path):
    checkpoint, printed = trained
    assert f"{TASK}: 20 steps" in printed and checkpoint.is_file()
    aiayn = [installed, "-m", "aiayn"]
    env = reader_environment(tmp_path)
    predict = ["predict", "--checkpoint", checkpoint, "1 2 3", "4 5"]
    predicted = run(aiayn, *predict, cwd=tmp_path, env=env)
    assert len(predicted.splitlines()) == 2  # one output per sequence
    evaluate = ["evaluate", "--checkpoint", checkpoint, "--n", 20]
    evaluated = run(aiayn, *evaluate, cwd=tmp_path, env=env)
    assert "exact match:" in evaluated and "token accuracy:" in evaluated


# A chapter's first cells, as a reader runs them where aiayn came from a wheel: a stored
# measurement read through MEASUREMENTS; where the book models are kept without
# AIAYN_RUNS; and book_model loading a finished run from AIAYN_RUNS instead of training
# one (a run the command line trained stands in for the book's, which take minutes).
CHAPTER = """
import json, sys
from pathlib import Path
from aiayn.book import models as book

bench = json.loads((book.MEASUREMENTS / "bench_cpu.json").read_text())
sweep = sorted(book.MEASUREMENTS.glob("tta_sweep*.jsonl"))
home = Path(sys.argv[1])
trained = book.RUNS / "copy.pt"
book.BOOK_MODELS = {"copy": book.load_checkpoint(trained).config}
state = book.book_model("copy")
print(json.dumps({
    "bench": sorted(bench),
    "sweeps": [path.name for path in sweep],
    "runs": str(book.RUNS),
    "home": str(book.runs_folder({})),
    "xdg": str(book.runs_folder({"XDG_CACHE_HOME": str(home / "xdg")})),
    "step": state.step,
    "finished": state.finished,
    "models": sorted(path.name for path in book.RUNS.glob("*.pt")),
}))
"""


def test_a_chapter_finds_the_measurements_and_the_book_models(
    installed, trained, tmp_path
):
    runs = trained[0].parent
    home = tmp_path / "home"
    env = {**reader_environment(home), "AIAYN_RUNS": str(runs)}
    found = json.loads(run([installed, "-c"], CHAPTER, home, cwd=tmp_path, env=env))
    assert found["bench"] and found["sweeps"][0] == "tta_sweep1.jsonl"
    assert found["runs"] == str(runs)
    # without AIAYN_RUNS, far from the repository: the user's cache folder
    assert found["home"] == str(home / ".cache" / "aiayn" / "runs")
    assert found["xdg"] == str(home / "xdg" / "aiayn" / "runs")
    # the finished run was loaded where AIAYN_RUNS says, not trained again elsewhere
    assert (
        found["step"] == 20 and found["finished"] and found["models"] == [f"{TASK}.pt"]
    )


def test_in_the_repository_the_book_models_are_in_build_runs():
    """Run from a source checkout (the editable install of `make`), RUNS is the
    repository's _build/runs, where `make models` trains them."""
    from aiayn.book import models as book

    assert book.runs_folder({}) == ROOT / "_build" / "runs"
    assert book.runs_folder({"AIAYN_RUNS": "elsewhere"}) == Path("elsewhere").absolute()
    assert book.MEASUREMENTS == ROOT / "src" / "aiayn" / "book" / "measurements"
