"""Throughput of data-parallel training: sequences per second on N processes.

    python -m aiayn.tools.bench_distributed --device cpu                # one process
    torchrun --standalone --nproc_per_node=2 -m aiayn.tools.bench_distributed \\
        --device cpu
    torchrun --standalone --nproc_per_node=2 -m aiayn.tools.bench_distributed \\
        --device cpu --global-batch 64        # the same global batch, split in two

Every process runs the training loop's work of a step: ``train_step`` on its own
batch of the toy configuration (``TrainConfig()``) and the loop's agreement on
signals. After ``--warmup`` steps, ``--steps`` steps are timed between two barriers;
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
from aiayn.train.loop import TrainConfig, new_run, train_step


def step_seconds(config: TrainConfig, steps: int, warmup: int) -> float:
    """Wall-clock seconds per step of ``train_step`` on every process, as ``train``
    runs it (with its agreement on signals), after ``warmup`` untimed steps."""

    def wait_for_everyone() -> None:
        if config.device.startswith("cuda"):
            torch.cuda.synchronize()
        if distributed.in_process_group():
            dist.barrier()

    state = new_run(config)
    for _ in range(warmup):
        train_step(state)
    wait_for_everyone()
    started = time.perf_counter()
    for _ in range(steps):
        train_step(state)
        distributed.agreed_signal([])
    wait_for_everyone()
    return (time.perf_counter() - started) / steps


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
        config = dataclasses.replace(
            TrainConfig(), device=args.device, batch_size=batch
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
