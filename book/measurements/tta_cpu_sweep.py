"""A second sweep (issue #11), on this book's 2-core CPU: steps to 99% and 99.9%.

Each variant changes fields of ``BASE`` (or of its model): the defaults that
``tta_sweep.py`` chose, TrainConfig()'s when this sweep ran; seeds 0 and 1 each. A run trains with the library's
``train_step`` and, from step 500 on, every 50 steps greedy-decodes the 10,000
length-10 test sources with the averaged model; it stops at 99.9% or after 1,600
steps of 256 sources (as many sources at another batch size). Two runs at a time,
one thread each, so the seconds are not comparable with ``time_to_accuracy``'s; the
steps are. The results are ``tta_cpu_sweep.jsonl`` among the book's measurements
(``aiayn.book.models.MEASUREMENTS``), and what ran, the variants and settings below, is
``tta_cpu_sweep_plan.json`` beside it, which the appendix reads (a test checks that it
is this file's):

    M=src/aiayn/book/measurements
    PYTHONPATH=src python book/measurements/tta_cpu_sweep.py $M/tta_cpu_sweep.jsonl \
        [VARIANT ...]     # every variant of VARIANTS if none is named

What a step of each variant costs is measured apart, on two threads and with nothing
else running: a few steps of every variant in turn, in a new order each round, each
round's times divided by the defaults' of the same round, and the median over the
rounds kept (``tta_cpu_step_cost.json``):

    PYTHONPATH=src python book/measurements/tta_cpu_sweep.py \
        --step-cost $M/tta_cpu_step_cost.json
"""
import json
import multiprocessing as mp
import random
import statistics
import sys
import time

import torch

from aiayn.train.presets import PRESETS

# TrainConfig()'s defaults when this sweep ran, what every variant changes (the row
# "defaults"); since then the defaults are snap-wu-b128's
BASE = PRESETS["no-short-sources-batch-256"].changes
# the two variants of this sweep's first round that beat the defaults with both seeds
SNAP_WU = dict(snapshot_every=10, average_last=10, warmup_steps=150, lr_factor=0.354)
VARIANTS = {
    "defaults": {},
    "ls0": dict(label_smoothing=0.0),
    "h2": dict(h=2),
    "h1": dict(h=1),
    "lp6": dict(length_power=6.0),
    "wu150-lr035": dict(warmup_steps=150, lr_factor=0.354),  # the same peak rate
    "D1": dict(decoder_layers=1),
    "snap10x10": dict(snapshot_every=10, average_last=10),
    # cheaper steps: a narrower feed-forward layer, one encoder layer, smaller batches
    "ff128": dict(d_ff=128),
    "E1": dict(encoder_layers=1),
    "b192": dict(batch_size=192),
    "b128": dict(batch_size=128),
    # the two together, then with cheaper steps
    "snap-wu": SNAP_WU,
    "snap-wu-ff128-b192": SNAP_WU | dict(d_ff=128, batch_size=192),
    "snap-wu-b192": SNAP_WU | dict(batch_size=192),
    "snap-wu-b128": SNAP_WU | dict(batch_size=128),
    "snap-wu-b96": SNAP_WU | dict(batch_size=96),
    "snap-wu-b128-lr025": SNAP_WU | dict(batch_size=128, lr_factor=0.25),
    # around snap-wu: the averaging window, the warm-up, the peak rate
    "snap-wu-5x20": SNAP_WU | dict(snapshot_every=5, average_last=20),
    "snap-wu-10x5": SNAP_WU | dict(average_last=5),
    "snap-wu-10x20": SNAP_WU | dict(average_last=20),
    "snap-wu-wu75": SNAP_WU | dict(warmup_steps=75, lr_factor=0.25),
    "snap-wu-lr05": SNAP_WU | dict(lr_factor=0.5),
    "snap-wu-b128-lr05": SNAP_WU | dict(batch_size=128, lr_factor=0.5),
}
SEEDS = (0, 1)
STEPS = 1600  # of batches of 256 sources
SOURCES = STEPS * 256
FIRST_EVALUATION, EVALUATE_EVERY = 500, 50  # steps
THREADS_PER_RUN = 1  # two runs at a time, on two cores
STEP_COST_THREADS = 2  # the step costs: one process, on both cores


def run(job):
    name, seed = job
    torch.set_num_threads(THREADS_PER_RUN)
    from aiayn.evaluation import evaluate
    from aiayn.tasks import held_out_sources
    from aiayn.tools.time_to_accuracy import configured
    from aiayn.train.loop import train_step
    from aiayn.train.state import new_run

    config = configured("reverse-repeats", seed, STEPS, "cpu", BASE | VARIANTS[name])
    state = new_run(config)
    steps = SOURCES // state.task.batch_size
    batches = state.task.training_batches(state.data_rng)
    test = held_out_sources(state.task, "test", 10_000, length=10)
    curve, started = [], time.time()
    while state.step < steps:
        train_step(state, next(batches))
        if state.step % config.snapshot_every == 0:
            state.take_snapshot()
        if state.step >= FIRST_EVALUATION and state.step % EVALUATE_EVERY == 0:
            exact = evaluate(state.averaged_model(), state.task, test)["exact_match"]
            curve.append((state.step, exact))
            if exact >= 0.999:
                break
    wall = time.time() - started
    return {"variant": name, "seed": seed, "curve": curve, "wall": wall}


def step_costs(rounds: int = 25, steps: int = 4) -> dict:
    """Each variant's seconds per training step, as a multiple of the defaults'."""
    from aiayn.tools.time_to_accuracy import configured
    from aiayn.train.loop import train_step
    from aiayn.train.state import new_run

    torch.set_num_threads(STEP_COST_THREADS)
    runs = {
        name: new_run(configured("reverse-repeats", 0, STEPS, "cpu", BASE | changes))
        for name, changes in VARIANTS.items()
    }
    batches = {name: state.task.training_batches(state.data_rng)
               for name, state in runs.items()}  # fmt: skip
    for name, state in runs.items():  # past the first, slower steps
        for _ in range(3):
            train_step(state, next(batches[name]))
    ratios = {name: [] for name in runs}
    defaults_ms = []
    order = list(runs)
    for round_ in range(rounds):
        random.Random(round_).shuffle(order)  # no variant always first, or last
        seconds = {}
        for name in order:
            started = time.perf_counter()
            for _ in range(steps):
                train_step(runs[name], next(batches[name]))
            seconds[name] = time.perf_counter() - started
        for name in runs:
            ratios[name].append(seconds[name] / seconds["defaults"])
        defaults_ms.append(1000 * seconds["defaults"] / steps)
    return {
        "threads": STEP_COST_THREADS, "rounds": rounds, "steps_per_round": steps,
        "defaults_ms_per_step": statistics.median(defaults_ms),
        "relative": {name: statistics.median(r) for name, r in ratios.items()},
    }


if __name__ == "__main__" and sys.argv[1] == "--step-cost":
    with open(sys.argv[2], "w") as out:
        json.dump(step_costs(), out, indent=1)
elif __name__ == "__main__":
    jobs = [(name, seed) for name in sys.argv[2:] or VARIANTS for seed in SEEDS]
    with mp.get_context("spawn").Pool(2) as pool, open(sys.argv[1], "a") as out:
        for result in pool.imap_unordered(run, jobs):
            out.write(json.dumps(result) + "\n")
            out.flush()
