"""A second sweep (issue #11), on this book's 2-core CPU: steps to 99% and 99.9%.

Each variant changes fields of ``TrainConfig()`` (or of its model), the defaults that
``tta_sweep.py`` chose; seeds 0 and 1 each. A run trains with the library's
``train_step`` and, from step 500 on, every 50 steps greedy-decodes the 10,000
length-10 test sources with the averaged model; it stops at 99.9% or after 1,600
steps. Two runs at a time, one thread each, so the seconds are not comparable with
``time_to_accuracy``'s; the steps are. The results are ``tta_cpu_sweep.jsonl``
beside this file:

    PYTHONPATH=src python book/measurements/tta_cpu_sweep.py tta_cpu_sweep.jsonl \
        defaults ls0 h2 h1 lp6 wu150-lr035 D1 snap10x10
"""
import json
import multiprocessing as mp
import sys
import time

import torch

VARIANTS = {
    "defaults": {},
    "ls0": dict(label_smoothing=0.0),
    "h2": dict(nhead=2),
    "h1": dict(nhead=1),
    "lp6": dict(length_power=6.0),
    "wu150-lr035": dict(warmup_steps=150, lr_factor=0.354),  # the same peak rate
    "D1": dict(num_decoder_layers=1),
    "snap10x10": dict(snapshot_every=10, average_last=10),
}
SEEDS = (0, 1)
STEPS = 1600


def run(job):
    name, seed = job
    torch.set_num_threads(1)
    from aiayn.evaluation import evaluate
    from aiayn.tasks import held_out_sources
    from aiayn.time_to_accuracy import configured
    from aiayn.training import new_run, train_step

    config = configured("reverse-repeats", seed, STEPS, "cpu", VARIANTS[name])
    state = new_run(config)
    test = held_out_sources(state.task, "test", 10_000)
    curve, started = [], time.time()
    while state.step < STEPS:
        train_step(state)
        if state.step % config.snapshot_every == 0:
            state.take_snapshot()
        if state.step >= 500 and state.step % 50 == 0:
            exact = evaluate(state.averaged_model(), state.task, test)["exact_match"]
            curve.append((state.step, exact))
            if exact >= 0.999:
                break
    return {"variant": name, "seed": seed, "curve": curve, "wall": time.time() - started}


if __name__ == "__main__":
    jobs = [(name, seed) for name in sys.argv[2:] or VARIANTS for seed in SEEDS]
    with mp.get_context("spawn").Pool(2) as pool, open(sys.argv[1], "a") as out:
        for result in pool.imap_unordered(run, jobs):
            out.write(json.dumps(result) + "\n")
            out.flush()
