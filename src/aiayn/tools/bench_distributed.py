"""Throughput of data-parallel training: sequences per second on N processes.

    python -m aiayn.tools.bench_distributed --device cpu                # one process
    torchrun --standalone --nproc_per_node=2 -m aiayn.tools.bench_distributed \\
        --device cpu
    torchrun --standalone --nproc_per_node=2 -m aiayn.tools.bench_distributed \\
        --device cpu --global-batch 64        # the same global batch, split in two

Every process runs the training loop, ``train``, on its own batch of the toy
configuration (``TrainConfig()``), without validation. After ``--warmup`` steps,
``--steps`` steps are timed between two barriers (a hook of ``train``);
rank 0 prints one line: processes, backend, threads per process, the batch per
process and the global batch, milliseconds per step and sequences (sources) per
second of the global batch.

torchrun sets OMP_NUM_THREADS=1 in every process it starts when there are more than
one; give it explicitly to share the cores otherwise (2 processes on 16 cores: 8).
"""

import argparse
import dataclasses
import time

import torch
import torch.distributed as dist

from aiayn.train import distributed
from aiayn.train.config import TrainConfig, changed_config
from aiayn.train.run import train_on_task
from aiayn.train.state import TrainState, new_run


def step_seconds(config: TrainConfig, steps: int, warmup: int) -> float:
    """Wall-clock seconds per step of ``train`` on every process, after ``warmup``
    untimed steps."""
    marks: dict[int, float] = {}  # step -> when every process had done it

    def mark(state: TrainState) -> bool:
        if state.step in (warmup, warmup + steps):
            if config.device.startswith("cuda"):
                torch.cuda.synchronize()
            if distributed.in_process_group():
                dist.barrier()
            marks[state.step] = time.perf_counter()
        return False

    state = new_run(dataclasses.replace(config, steps=warmup + steps))
    if warmup == 0:
        mark(state)
    train_on_task(state, progress=False, validate=False, hook=mark)
    return (marks[warmup + steps] - marks[warmup]) / steps


def throughput_cli() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m aiayn.tools.bench_distributed",
        description=__doc__.split("\n")[0],
    )
    parser.add_argument("--device", default=TrainConfig().device)
    parser.add_argument(
        "--batch-size", type=int, default=64, help="sources per process (default 64)"
    )
    parser.add_argument(
        "--global-batch",
        type=int,
        help="sources per step over all processes (overrides --batch-size)",
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    with distributed.process_group(args.device):
        n = distributed.world_size()
        batch = args.global_batch // n if args.global_batch else args.batch_size
        config = changed_config(
            TrainConfig(device=args.device), {"batch_size": batch}
        )
        seconds = step_seconds(config, args.steps, args.warmup)
        if distributed.rank() == 0:
            backend = dist.get_backend() if distributed.in_process_group() else "none"
            print(
                f"{n} process{'es' * (n > 1)} ({backend}, {args.device}, "
                f"{torch.get_num_threads()} threads each), batch {n} x {batch} = "
                f"{n * batch}: {1000 * seconds:.1f} ms/step, "
                f"{n * batch / seconds:,.0f} sequences/s"
            )


if __name__ == "__main__":
    throughput_cli()
