"""Time to accuracy: how long training takes to reach 99% and 99.9% exact match.

    python -m aiayn.tools.time_to_accuracy               # reverse-repeats, seeds 0-2
    python -m aiayn.tools.time_to_accuracy --task copy --seeds 0
    python -m aiayn.tools.time_to_accuracy --set length_power=2 \\
        --set encoder_layers=3

Each seed trains the task's defaults (``task_config``, with that seed, and the fields
given with ``--set``, of the run or of its model) and, every ``--every`` steps (a hook
of ``train``), greedy-decodes the
same ``--n`` test sources of every length of the task (``held_out_sources``: no
validation source is among them) with the model that training evaluates (the mean of
the last weight snapshots). A target counts as reached when the exact match at every
length has reached it. Only training is timed, not these evaluations. For each target
the report gives the first evaluation that reached it, per seed and as the median over
the seeds, and the sequences seen by then against the seed tutorial's 100,000 steps of
32.
"""

import argparse
import ast
import dataclasses
import json
import math
import os
import statistics
import sys
import time

import torch

from aiayn.evaluation import evaluate
from aiayn.tasks import TASK_NAMES, Task, held_out_sources
from aiayn.train.config import TrainConfig, changed_config, run_task, task_config
from aiayn.train.run import train_on_task
from aiayn.train.state import TrainState, new_run

TARGETS = (0.99, 0.999)
TUTORIAL_SEQUENCES = 100_000 * 32  # the seed tutorial: 100,000 steps at batch 32


@dataclasses.dataclass(frozen=True)
class Reached:
    """An evaluation: its step, the training seconds by then, and the exact match at
    the length where it was lowest (and at each length; empty in older runs, which
    evaluated one length). A first evaluation at or above a target: inf if never."""

    step: float
    seconds: float
    exact_match: float
    by_length: tuple[float, ...] = ()


NOT_REACHED = Reached(math.inf, math.inf, math.nan)


def sources_by_length(task: Task, n: int) -> dict[int, list[str]]:
    """n test sources of each length the task draws."""
    return {
        length: held_out_sources(task, "test", n, length=length)
        for length in task.source_lengths
    }


def learning_curve(config: TrainConfig, every: int, n: int) -> list[Reached]:
    """Train ``config``, evaluating on n test sources of each length every ``every``
    steps.

    Stops when the last target is reached or ``config.steps`` are done; returns one
    ``Reached`` per evaluation.
    """
    state = new_run(config)
    tests = sources_by_length(state.task, n)
    curve: list[Reached] = []
    kind = torch.device(config.device).type
    clock = {"seconds": 0.0, "started": time.perf_counter()}  # of training alone

    def evaluate_lengths(state: TrainState) -> bool:
        if kind in ("cuda", "mps"):  # the steps only queued their work
            getattr(torch, kind).synchronize()
        clock["seconds"] += time.perf_counter() - clock["started"]
        model = state.averaged_model()
        by_length = tuple(
            evaluate(model, state.task, sources)["exact_match"]
            for sources in tests.values()
        )
        curve.append(Reached(state.step, clock["seconds"], min(by_length), by_length))
        clock["started"] = time.perf_counter()
        return curve[-1].exact_match >= TARGETS[-1]

    train_on_task(
        state, progress=False, validate=False, hook=evaluate_lengths, hook_every=every
    )
    return curve


def first_reached(curve: list[Reached], target: float) -> Reached:
    return next((point for point in curve if point.exact_match >= target), NOT_REACHED)


def median_reached(per_seed: list[Reached]) -> Reached:
    """Median step and median seconds over seeds (a seed that never got there: inf)."""
    return Reached(
        statistics.median(r.step for r in per_seed),
        statistics.median(r.seconds for r in per_seed),
        statistics.median(r.exact_match for r in per_seed),
    )


def report(curves: dict[int, list[Reached]], batch_size: int) -> str:
    lines = []
    for target in TARGETS:
        per_seed = [first_reached(curve, target) for curve in curves.values()]
        lines.append(f"exact match >= {target:.1%} at every length:")
        for seed, reached in zip(curves, per_seed, strict=True):
            lines.append(f"  seed {seed}: {describe(reached)}")
        median = median_reached(per_seed)
        lines.append(f"  median: {describe(median)}")
        if math.isfinite(median.step):
            seen = median.step * batch_size
            lines.append(
                f"  sequences seen: {seen:,.0f}, {TUTORIAL_SEQUENCES / seen:.1f}x "
                "fewer than the "
                f"tutorial's {TUTORIAL_SEQUENCES:,}"
            )
    return "\n".join(lines)


def describe(reached: Reached) -> str:
    if not math.isfinite(reached.step):
        return "not reached"
    return f"step {reached.step:.0f}, {reached.seconds:.1f} s of training"


def configured(
    task: str, seed: int, steps: int, device: str, changes: dict
) -> TrainConfig:
    """The task's defaults (``task_config``), with ``changes`` to them or to the
    model."""
    config = task_config(task, seed=seed, steps=steps, device=device)
    return changed_config(config, changes)


def parse_change(text: str) -> tuple[str, object]:
    """'length_power=2' -> ('length_power', 2): a field and a Python literal."""
    name, _, value = text.partition("=")
    try:
        return name, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise argparse.ArgumentTypeError(f"{text!r} is not FIELD=VALUE") from None


def benchmark_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aiayn.tools.time_to_accuracy",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--task", default=TrainConfig.task, choices=TASK_NAMES)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--every", type=int, default=50, help="steps between evaluations"
    )
    parser.add_argument(
        "--n", type=int, default=1000, help="test sources of each length"
    )
    parser.add_argument("--steps", type=int, default=TrainConfig.steps, help="at most")
    parser.add_argument(
        "--set",
        type=parse_change,
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a field of TrainConfig, of its TransformerConfig, or a training "
        "option of the task (batch_size, few_digits_share, ...)",
    )
    parser.add_argument("--device", default=TrainConfig().device)
    parser.add_argument(
        "--threads", type=int, default=os.cpu_count(), help="torch threads"
    )
    parser.add_argument("--json", help="also write the configuration and curves here")
    return parser


def benchmark_cli() -> None:
    parser = benchmark_parser()
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    changes = dict(args.set)
    try:
        configs = {
            seed: configured(args.task, seed, args.steps, args.device, changes)
            for seed in args.seeds
        }
    except (TypeError, ValueError) as error:
        parser.error(str(error))
    curves = {}
    for seed, config in configs.items():
        curves[seed] = learning_curve(config, args.every, args.n)
        last = curves[seed][-1]
        reached = ", ".join(
            f"{target:.1%}: {describe(first_reached(curves[seed], target))}"
            for target in TARGETS
        )
        print(
            f"seed {seed}: stopped at step {last.step} with exact match "
            f"{last.exact_match:.4f} "
            f"({reached})",
            flush=True,
        )
    print(
        f"{args.task}, {args.device}, {torch.get_num_threads()} threads, "
        f"defaults of TrainConfig, changed: {changes or 'nothing'}"
    )
    config = next(iter(configs.values()))
    batch_size = run_task(config).batch_size
    print(report(curves, batch_size))
    if args.json:
        write_curves(args.json, changes, args.device, curves)


def write_curves(
    path: str, changes: dict, device: str, curves: dict[int, list[Reached]]
) -> None:
    """The command, configuration and learning curves, as JSON."""
    with open(path, "w") as file:
        json.dump(
            {
                "command": " ".join(sys.argv),
                "changes": changes,
                "device": device,
                "threads": torch.get_num_threads(),
                "curves": {
                    seed: [dataclasses.astuple(point) for point in curve]
                    for seed, curve in curves.items()
                },
            },
            file,
            indent=1,
        )


if __name__ == "__main__":
    benchmark_cli()
