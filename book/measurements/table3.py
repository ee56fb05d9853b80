"""Table 3 in miniature (§6.2): every row of ``aiayn.tools.variations.ROWS``, three seeds.

Run once, on a CPU, outside the book's build (16 CPU-minutes):

    nice -n 5 .venv/bin/python book/measurements/table3.py \
        --out src/aiayn/book/measurements/table3_cpu.jsonl

Two processes with one torch thread each run ``run_row`` for every (row, seed); the
results come out one line per run, in the order of ROWS and then of the seeds: row
(its group in Table 3), changes (to the base row), seed, steps, seconds (of training,
wall clock on a shared machine), cpu_seconds (of the whole run), params, perplexity,
token_accuracy, exact_match, and the CPU kernel path (``kernel``: what
``torch.backends.cpu.get_cpu_capability()`` says) and ``torch`` version that computed
them: a model trained on another kernel path or version differs in its last bits, and
the difference grows over a run. "Model variations" reads them, and trains one of the runs
again to compare.
"""

import argparse
import json
import multiprocessing
import platform

import torch

from aiayn.tools.variations import ROWS, STEPS, run_row


def run(job: tuple[str, dict, int, int]) -> dict:
    group, changes, seed, steps = job
    torch.set_num_threads(1)
    return (
        {"row": group, "changes": changes, "seed": seed}
        | run_row(changes, seed, steps)
        | {"kernel": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__}
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the JSON-lines file to write")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--jobs", type=int, default=2, help="processes")
    args = parser.parse_args()
    jobs = [
        (group, changes, seed, args.steps)
        for group, changes in ROWS
        for seed in args.seeds
    ]
    print(f"{len(jobs)} runs, torch {torch.__version__}, {platform.processor()}")
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.jobs) as pool, open(args.out, "w") as out:
        for result in pool.imap(run, jobs):
            out.write(json.dumps(result) + "\n")
            out.flush()
            print(result, flush=True)


if __name__ == "__main__":
    main()
