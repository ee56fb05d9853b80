"""The trained models of the book's final chapters, made once before any chapter runs.

    python -m aiayn.book.models            # trains what is missing (in RUNS)
    python -m aiayn.book.models --jobs 2   # two at a time, one thread each
    python -m aiayn.book.models --publish _build/html/models   # beside the site

`make models` runs this before the chapters are executed (by nbval or by the book
build), so that no chapter trains, whatever the order in which the chapters run and
however slow the machine. The publishing workflow puts the trained models on the site
(``--publish``). A chapter gets its model with ``book_model(name)``, which loads the
finished run; where the file is missing (a reader who opens one chapter on Colab or
Binder), it downloads the published one, or else trains it.
"""

import argparse
import dataclasses
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

import torch
from filelock import FileLock

from aiayn.book.published import NotDownloaded, fetch_model, publish_models
from aiayn.book.site import book_site, source_checkout
from aiayn.train.checkpoints import load_checkpoint
from aiayn.train.config import TrainConfig
from aiayn.train.presets import preset_config
from aiayn.train.run import train_on_task
from aiayn.train.state import TrainState, new_run

# Benchmarks too slow for a build, run once: their results, which the chapters read
# (the harnesses that made them are scripts in the repository's book/measurements/).
# They ship inside the package (pyproject.toml's package-data), so a chapter finds them
# wherever aiayn is installed, not only in the repository.
MEASUREMENTS = Path(__file__).resolve().parent / "measurements"


def runs_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """Where the book models are kept, and where ``book_model`` trains a missing one.

    ``$AIAYN_RUNS`` if set (made absolute: a notebook's kernel runs in the notebook's
    folder). Otherwise, run from the repository (aiayn installed from its ``src/`` in
    editable mode, as ``make`` does), its ``_build/runs``, which ``make models`` fills;
    installed from a wheel (pip, Binder, Colab), a folder of the user's cache:
    ``$XDG_CACHE_HOME/aiayn/runs``, or ``~/.cache/aiayn/runs``.
    """
    if environ.get("AIAYN_RUNS"):
        return Path(environ["AIAYN_RUNS"]).absolute()
    checkout = source_checkout()
    if checkout is not None:
        return checkout / "_build" / "runs"
    cache = Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache.absolute() / "aiayn" / "runs"


RUNS = runs_folder()


def book_seed() -> int:
    """The seed of every book model: $AIAYN_BOOK_SEED, or 0. The chapters' claims
    about a trained model must hold for any seed (and kernel path): `make
    portability` trains them again with another one and runs those chapters."""
    text = os.environ.get("AIAYN_BOOK_SEED", "0")
    if not text.strip().lstrip("-").isdigit():
        raise ValueError(f"AIAYN_BOOK_SEED={text!r} is not a whole number")
    return int(text)


class BookConfigs(Mapping[str, TrainConfig]):
    """The configurations of named runs with one seed, each made when first read.

    A translation run's configuration learns its task's vocabulary (its model's
    positions cover the longest tokenized sentence), which a chapter that loads only a
    digit model need not wait for; asking whether a name is one makes nothing.
    """

    def __init__(self, names: tuple[str, ...], seed: int):
        self.names, self.seed = names, seed
        self.made: dict[str, TrainConfig] = {}

    def __getitem__(self, name: str) -> TrainConfig:
        if name not in self.names:
            raise KeyError(name)
        if name not in self.made:
            self.made[name] = preset_config(name, seed=self.seed)
        return self.made[name]

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)


BOOK_SEED = book_seed()
# the named runs of aiayn.train.presets that are the book's models, the longest first
# (`--jobs` hands them out in this order): each task with its own defaults
BOOK_RUNS = ("reverse-repeats", "en-fr", "en-de", "parse", "copy", "reverse")
BOOK_MODELS = BookConfigs(BOOK_RUNS, BOOK_SEED)


def load_or_train(
    config: TrainConfig,
    path: str | Path,
    progress: bool = True,
    fetch: Callable[[Path], None] | None = None,
) -> TrainState:
    """The run of ``config`` checkpointed at ``path``.

    Reused if finished, resumed if not, trained from scratch if the file is missing or
    holds another configuration (``same_run``: the device may differ). ``fetch``, if
    given, is called first when the file is missing: it may put it there (a download).
    One process at a time: another that asks for the same file (a chapter while `make`
    trains its model, two notebooks open at once) waits for this one's run and then
    loads it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(path.with_name(path.name + ".lock")):
        if fetch is not None and not path.is_file():
            fetch(path)
        state = load_checkpoint(path) if path.is_file() else None
        if state is None or not same_run(state.config, config):
            state = new_run(config)
        if state.finished:  # loaded as it is: nothing to train, nothing rewritten
            return state
        return train_on_task(state, checkpoint=path, progress=progress)


def same_run(saved: TrainConfig, wanted: TrainConfig) -> bool:
    """Whether a saved run is the one asked for: every setting equal but where and
    how its steps run (a run trained on a GPU, with a CUDA graph or not, is the same
    run on a CPU)."""
    where = dict(device=wanted.device, cuda_graph=wanted.cuda_graph)
    return dataclasses.replace(saved, **where) == wanted


def book_model(name: str, runs: Path = RUNS, progress: bool = True) -> TrainState:
    """The finished run ``name`` of BOOK_MODELS: loaded from ``runs``; if missing,
    downloaded from the published book (``book_site``), checked; else trained, with a
    line saying why and a progress bar (if ``progress``) that shows the time left."""
    config = BOOK_MODELS[name]

    def download(path: Path) -> None:
        site = book_site()
        try:
            if site is None:
                raise NotDownloaded("no published book known (AIAYN_SITE)")
            say(f"{name}: downloading the book's trained model from {site} to {path}")
            fetch_model(site, path, config, same_run, progress)
            say(f"{name}: downloaded, size and SHA-256 checked")
        except NotDownloaded as why:
            say(f"{name}: not downloaded: {why}; training it here instead")

    return load_or_train(config, runs / f"{name}.pt", progress, fetch=download)


def say(line: str) -> None:
    """One line for the reader, beside the progress bars (stderr)."""
    print(line, file=sys.stderr, flush=True)


def train_book_model(name: str, config: TrainConfig, runs: Path, threads: int) -> str:
    """Load or train one book model (in a worker process when --jobs > 1); a line
    saying how long it took."""
    if threads:
        torch.set_num_threads(threads)
    started = time.perf_counter()
    state = load_or_train(config, runs / f"{name}.pt", progress=sys.stderr.isatty())
    return (
        f"{name}: {state.step} steps ({state.seconds:.0f} s of training), "
        f"ready in {time.perf_counter() - started:.0f} s: {runs / name}.pt"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aiayn.book.models", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=Path, default=RUNS, help=f"default {RUNS}")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="models trained at once, each in its own process on one thread "
        "(small models train faster side by side than one after another on "
        "several threads); default 1, in this process",
    )
    parser.add_argument(
        "--publish",
        type=Path,
        metavar="FOLDER",
        help="copy the trained models and their manifest (sizes and SHA-256) into "
        "FOLDER, the published site's models/, instead of training",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    if args.publish is not None:
        return publish(args.runs, args.publish, parser)
    if args.jobs == 1:
        for name, config in BOOK_MODELS.items():
            print(train_book_model(name, config, args.runs, threads=0), flush=True)
        return 0
    # the longest first (BOOK_MODELS's order), each to the next free process
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
        runs = [
            pool.submit(train_book_model, name, config, args.runs, 1)
            for name, config in BOOK_MODELS.items()
        ]
        for finished in as_completed(runs):
            print(finished.result(), flush=True)
    return 0


def publish(runs: Path, folder: Path, parser: argparse.ArgumentParser) -> int:
    """--publish: every book model of ``runs``, with its manifest, into ``folder``."""
    missing = [name for name in BOOK_MODELS if not (runs / f"{name}.pt").is_file()]
    if missing:
        parser.error(f"no {', '.join(missing)} in {runs}: train them first")
    manifest = publish_models(runs, list(BOOK_MODELS), folder)
    megabytes = sum(entry["size"] for entry in manifest.values()) / 1e6
    print(f"{len(manifest)} book models ({megabytes:.0f} MB), their manifest: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
