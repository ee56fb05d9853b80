"""Data parallelism: training on several processes with torch.distributed.

    torchrun --nproc_per_node=2 -m aiayn train --device cpu --out runs/two.pt

torchrun starts N copies of the program and tells each its place in environment
variables: RANK (0 .. N-1), WORLD_SIZE (N) and LOCAL_RANK (its number on this machine).
``process_group`` joins them into one group: gloo for a model on the CPU, NCCL (with
gloo beside it, for the few numbers the host exchanges) for a model on a GPU, one GPU
per process. Every process builds the same model, draws its own batch (its data
generator is seeded by its rank), and ``DistributedDataParallel`` averages the
gradients, so that every process takes the same optimizer step: the step of one
process on the union of the N batches, a global batch of N x batch_size sequences.

Rank 0 does what must happen once: it shows the progress bar, evaluates, and writes
the checkpoints. The decisions that end the loop (the last step, early stopping, a
signal) are taken identically by every process, so that none waits forever for a
collective that the others have left.

Outside torchrun (no WORLD_SIZE in the environment) none of this happens: rank 0 of
a world of one, no process group, and training as in a single process, bit for bit.
"""

import contextlib
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """Where this process stands among those torchrun started."""

    rank: int = 0  # 0 .. size - 1, over every machine
    size: int = 1  # WORLD_SIZE: the number of processes
    local_rank: int = 0  # its number on this machine: which GPU it uses


def world_from_environment(environ: dict | None = None) -> World:
    """The World that torchrun's RANK, WORLD_SIZE and LOCAL_RANK describe.

    Without them, rank 0 of a world of one. A ValueError names a variable that is not
    a whole number, or a rank outside the world.
    """
    environ = os.environ if environ is None else environ
    numbers = {}
    for field, variable, default in (
        ("rank", "RANK", 0),
        ("size", "WORLD_SIZE", 1),
        ("local_rank", "LOCAL_RANK", 0),
    ):
        text = environ.get(variable, str(default))
        if not text.strip().isdigit():
            raise ValueError(f"{variable}={text!r} is not a whole number")
        numbers[field] = int(text)
    world = World(**numbers)
    if world.size < 1 or not world.rank < world.size:
        raise ValueError(f"RANK={world.rank} is outside WORLD_SIZE={world.size}")
    return world


def launched_by_torchrun(environ: dict | None = None) -> bool:
    """Whether the environment holds torchrun's WORLD_SIZE."""
    return "WORLD_SIZE" in (os.environ if environ is None else environ)


def backend_for(device: str) -> str:
    """The process group's backend: gloo on the CPU; NCCL for a GPU's tensors, with
    gloo for the CPU ones (a flag or a random state the hosts exchange)."""
    if torch.device(device).type == "cuda":
        return "cpu:gloo,cuda:nccl"
    return "gloo"


@contextlib.contextmanager
def process_group(device: str) -> Iterator[World]:
    """Within the block, this process is part of torchrun's process group.

    Under torchrun it selects the GPU of its LOCAL_RANK (``device`` "cuda" then means
    that one), joins the group (``backend_for(device)``), and leaves it at the end.
    Without torchrun it does nothing and yields the world of one.
    """
    world = world_from_environment()
    if not launched_by_torchrun():
        yield world
        return
    if torch.device(device).type == "cuda":
        torch.cuda.set_device(world.local_rank)
    dist.init_process_group(backend=backend_for(device))
    try:
        yield world
        dist.barrier()  # no process leaves the group while another still talks to it
    finally:
        dist.destroy_process_group()


def in_process_group() -> bool:
    """Whether this process trains as one of a group (``process_group``)."""
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    """This process's rank: in a process group, its rank there; before it joins one
    (``process_group``), the RANK torchrun gave it; 0 without torchrun, or where RANK
    is not a whole number (``world_from_environment`` says why)."""
    if in_process_group():
        return dist.get_rank()
    text = os.environ.get("RANK", "0")
    return int(text) if text.strip().isdigit() else 0


def world_size() -> int:
    """The number of processes that train together: 1 outside a process group."""
    return dist.get_world_size() if in_process_group() else 1


class WorldSizeError(ValueError):
    """A run saved by N processes, resumed by another number of them."""


def world_size_error(path: object, saved: int) -> str:
    """Why a run of ``saved`` processes cannot resume in this world."""
    processes = f"{saved} process" + "es" * (saved != 1)
    return (
        f"{path} was trained by {processes}, this run has {world_size()}: resume it "
        f"with torchrun --nproc_per_node={saved}"
        if saved > 1
        else f"{path} was trained by {processes}, this run has {world_size()}: resume "
        "it without torchrun"
    )


def process_seed(seed: int, rank: int) -> int:
    """The seed of the data (and dropout) of the process of this ``rank``: ``seed``
    itself on rank 0, so that a single process draws what it always drew, and one of
    its own on every other rank."""
    if rank == 0:
        return seed
    return zlib.crc32(f"seed {seed} rank {rank}".encode())


def data_parallel(model: nn.Module) -> DistributedDataParallel | None:
    """``model`` wrapped to average its gradients over the processes; None outside a
    process group.

    Wrapping copies rank 0's weights to every process. The wrapper's forward pass
    is the model's; its backward pass all-reduces the gradients (their mean over the
    processes) in buckets, while the rest of the backward pass runs.
    """
    if not in_process_group():
        return None
    on_gpu = next(model.parameters()).device.type == "cuda"
    return DistributedDataParallel(
        model,
        device_ids=[torch.cuda.current_device()] if on_gpu else None,
    )


def global_batch_loss(
    loss: Tensor, correct: Tensor, real: Tensor
) -> tuple[Tensor, dict[str, Tensor]]:
    """The loss for this process to back-propagate, and the global batch's metrics.

    ``loss`` is this process's mean over its own real target tokens, ``real`` and
    ``correct`` mark those tokens and the ones predicted right. DDP averages the
    gradients of the N processes, which is the gradient of the global batch's loss
    only when every process holds as many real tokens: the batches are random, so
    they do not. With n_r real tokens on rank r and G = n_0 + ... + n_(N-1) (one
    all-reduce), each rank back-propagates its loss times N n_r / G, and the mean
    of the gradients is

        1/N sum_r (N n_r / G) grad(loss_r) = grad(sum_r n_r loss_r) / G,

    the gradient of the mean over all G tokens: the single process's on the union of
    the batches. The loss and accuracy returned are that union's too. Nothing is read
    back to the host: on a GPU the all-reduce is queued like any other kernel.
    """
    tokens = real.sum()
    totals = torch.stack(
        [tokens.float(), correct.sum().float(), loss.detach() * tokens]
    )
    dist.all_reduce(totals)  # (G, correct tokens, summed loss) of the global batch
    share = tokens * world_size() / totals[0]
    metrics = {
        "loss": totals[2] / totals[0],
        "train_token_accuracy": totals[1] / totals[0],
    }
    return loss * share, metrics


def agreed_signal(arrived: list[int]) -> int:
    """The signal that stops the run, the same on every process: 0 for none.

    ``arrived`` is this process's list from ``signals_deferred``. Ctrl-C reaches every
    process, SIGTERM perhaps only some: a signal on any one stops them all, after the
    same step (the largest signal number wins, SIGTERM over SIGINT). Outside a
    process group it is this process's first signal. A collective: every process
    calls it at the same point of the loop (a gloo all-reduce of one number, on the
    CPU: the host never waits for a GPU).
    """
    mine = arrived[0] if arrived else 0
    if not in_process_group():
        return mine
    number = torch.tensor([mine])
    dist.all_reduce(number, op=dist.ReduceOp.MAX)
    return int(number)


def on_rank_0(compute: Callable[[], T]) -> T:
    """``compute()`` on rank 0 only, its result on every process (one broadcast).

    The others wait for it: an evaluation, say, that only rank 0 runs, and whose
    score every process needs to decide whether to stop.
    """
    if not in_process_group():
        return compute()
    result = [compute() if rank() == 0 else None]
    dist.broadcast_object_list(result, src=0)
    return result[0]


def gathered(value: T) -> list[T]:
    """Every process's ``value``, by rank, on every process; [value] outside a group."""
    if not in_process_group():
        return [value]
    values = [None] * world_size()
    dist.all_gather_object(values, value)
    return values
