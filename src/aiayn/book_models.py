"""The trained models of the book's final chapters, made once before any chapter runs.

    python -m aiayn.book_models            # trains what is missing in _build/runs

`make models` runs this before the chapters are executed (by nbval or by the book
build), so that no chapter trains, whatever the order in which the chapters run and
however slow the machine. A chapter gets its model with ``book_model(name)``, which
loads the finished run, and trains it only when the file is missing: a reader who
opens one chapter in JupyterLab.
"""

import argparse
import sys
import time
from pathlib import Path

from aiayn.training import (
    TrainConfig,
    TrainState,
    load_checkpoint,
    new_run,
    task_config,
    toy_model_config,
    train,
)

# The repository's _build/runs (aiayn is installed from src/ in editable mode).
RUNS = Path(__file__).resolve().parents[2] / "_build" / "runs"
# Benchmarks too slow for a build, run once and kept in the repository; chapters read
# them.
MEASUREMENTS = Path(__file__).resolve().parents[2] / "book" / "measurements"

BOOK_MODELS = {
    # the hardest toy task with the command line's defaults ("Training the toy tasks")
    "reverse-repeats": TrainConfig(),
    # moving digits by position needs one layer a side; short runs, evaluated more often
    "copy": TrainConfig(
        task="copy",
        model=toy_model_config("copy", num_encoder_layers=1, num_decoder_layers=1),
        eval_every=100,
    ),
    "reverse": TrainConfig(
        task="reverse",
        model=toy_model_config("reverse", num_encoder_layers=1, num_decoder_layers=1),
        eval_every=100,
    ),
    # number words into German and French ("Translation in miniature"), with the
    # command line's defaults for these tasks (their train_defaults)
    "en-de": task_config("en-de"),
    "en-fr": task_config("en-fr"),
}


def load_or_train(
    config: TrainConfig, path: str | Path, progress: bool = True
) -> TrainState:
    """The run of ``config`` checkpointed at ``path``.

    Reused if finished, resumed if not, trained from scratch if the file is missing or
    holds another configuration.
    """
    path = Path(path)
    state = load_checkpoint(path) if path.is_file() else None
    if state is None or state.config != config:
        state = new_run(config)
    return train(state, checkpoint=path, progress=progress)


def book_model(name: str, runs: Path = RUNS, progress: bool = False) -> TrainState:
    """The finished run ``name`` of BOOK_MODELS: loaded from ``runs``, or trained."""
    return load_or_train(BOOK_MODELS[name], runs / f"{name}.pt", progress=progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aiayn.book_models", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--runs", type=Path, default=RUNS, help=f"default {RUNS}")
    args = parser.parse_args(argv)
    for name in BOOK_MODELS:
        started = time.perf_counter()
        state = book_model(name, args.runs, progress=sys.stderr.isatty())
        print(
            f"{name}: {state.step} steps ({state.seconds:.0f} s of training), "
            f"ready in {time.perf_counter() - started:.0f} s: {args.runs / name}.pt",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
