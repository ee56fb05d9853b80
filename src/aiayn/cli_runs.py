"""What the command line does around its commands: the checks of what the user
gave, and the operations around a training run.

The checks and files that keep runs from harming each other, made before anything is
created (``check_train_options``): a known task, an --out that this user can write
(``check_writable``), a lock that lets one run at a time write it
(``output_locked``; under torchrun rank 0 holds it, ``locked_by_rank_0``), a device
this machine has (``check_device``) and torchrun's processes that can train on it
(``check_processes``); a checkpoint opened or refused in one line
(``open_checkpoint``); a sequence the model cannot read (``check_sequence``). Each
refusal is a ``UsageError``: one line, exit status 2.
"""

import argparse
import contextlib
import os
import shlex
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from filelock import FileLock, Timeout

from aiayn.tasks import Task, get_task
from aiayn.train import distributed
from aiayn.train.checkpoints import VocabularyMismatch, load_checkpoint
from aiayn.train.config import device_available
from aiayn.train.state import TrainState


class UsageError(Exception):
    """A problem with what the user asked for: reported in one line, exit status 2."""


def check_train_options(args: argparse.Namespace) -> None:
    """The checks that need no checkpoint, before anything is created."""
    if args.task is not None:
        known_task(args.task)
    if args.device is not None:
        check_device(args.device)
    check_writable(args.out)
    if args.resume and not args.out.is_file():
        raise UsageError(f"--resume: there is no checkpoint {args.out} to continue")


def known_task(name: str) -> Task:
    """The task of that name, or a one-line UsageError naming the tasks there are."""
    try:
        return get_task(name)
    except ValueError as error:
        raise UsageError(str(error)) from None


def check_device(name: str) -> None:
    """Refuse a device that is not one, or that this machine does not have."""
    try:
        torch.device(name)  # a name that is no device raises
    except RuntimeError:
        raise UsageError(f"--device {name!r} is not cpu, cuda, cuda:N or mps") from None
    if not device_available(name):
        raise UsageError(f"--device {name} is not available on this machine")


def check_writable(path: Path) -> None:
    """Refuse an --out that cannot become a file this user writes."""
    if path.is_dir():
        raise UsageError(f"--out {path} is a directory; give a file name")
    directory = path.parent
    while not directory.exists():  # the directories that do not exist yet will be made
        directory = directory.parent
    if not directory.is_dir():
        raise UsageError(f"--out {path} lies under {directory}, which is a file")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(f"--out {path}: directory {directory} is not writable")


@contextlib.contextmanager
def output_locked(path: Path) -> Iterator[None]:
    """Hold ``<path>.lock`` while this run writes ``path``: a second run on the same
    path fails at once, naming this one (written in ``<path>.writer``).

    The lock is the operating system's (``filelock``: flock where there is one, the
    Windows API on Windows), so a run that dies releases it. Both files are removed
    at the end, while the lock is still held.
    """
    lock_path = path.with_name(f"{path.name}.lock")
    writer = path.with_name(f"{path.name}.writer")
    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        holder = writer.read_text().strip() if writer.is_file() else "starting"
        raise UsageError(f"{path} is being written by another run ({holder})") from None
    try:
        command = shlex.join(sys.argv[1:])
        writer.write_text(f"pid {os.getpid()}: python -m aiayn {command}\n")
        yield
    finally:
        writer.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # Windows removes it on release instead
            lock_path.unlink()
        lock.release()


@contextlib.contextmanager
def locked_by_rank_0(path: Path) -> Iterator[None]:
    """``output_locked(path)`` in rank 0, the one that writes; every process fails
    alike when the lock is refused. Outside torchrun, just ``output_locked``."""
    with contextlib.ExitStack() as stack:

        def lock() -> str | None:
            try:
                stack.enter_context(output_locked(path))
            except UsageError as error:
                return str(error)
            return None

        refused = distributed.on_rank_0(lock)
        if refused:
            raise UsageError(refused)
        yield


def check_processes(device: str) -> None:
    """Under torchrun: refuse what would fail later, in every process alike."""
    try:
        world = distributed.world_from_environment()
    except ValueError as error:
        raise UsageError(str(error)) from None
    if not distributed.launched_by_torchrun():
        return
    kind = torch.device(device)
    if kind.type not in ("cpu", "cuda"):
        raise UsageError(f"--device {device}: torchrun trains on cpu or cuda")
    if kind.type == "cuda" and kind.index is not None:
        raise UsageError(
            f"--device {device}: under torchrun each process uses the GPU of its "
            "LOCAL_RANK; give --device cuda"
        )
    here = int(os.environ.get("LOCAL_WORLD_SIZE", world.size))  # on this machine
    if kind.type == "cuda" and here > torch.cuda.device_count():
        raise UsageError(
            f"{here} processes on this machine but {torch.cuda.device_count()} GPUs: "
            "NCCL needs a GPU per process; use fewer processes or --device cpu"
        )


def global_batch(state: TrainState) -> str:
    """'2 processes (gloo), a global batch of 2 x 8 = 16 sources'."""
    n, task = state.world_size, state.task
    backend = distributed.backend_for(state.config.device)
    if "batch_size" not in task.TRAINING_OPTIONS:  # a token budget per process
        return f"{n} processes ({backend}), a global batch of {n} of the task's"
    b = task.batch_size
    return f"{n} processes ({backend}), a global batch of {n} x {b} = {n * b} sources"


def open_checkpoint(path: Path) -> TrainState:
    """The run saved at ``path``, its snapshots included, or a one-line UsageError."""
    if not path.is_file():
        raise UsageError(f"checkpoint {path} not found")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the error below says all there is to say
            state = load_checkpoint(path)
            state.averaged_model()  # a snapshot that does not fit the model fails here
    except (distributed.WorldSizeError, VocabularyMismatch) as error:
        raise UsageError(str(error)) from None
    except Exception as error:  # a truncated or foreign file fails in many ways
        reason = type(error).__name__
        message = f"{path} is not a readable aiayn checkpoint ({reason})"
        raise UsageError(message) from None
    return state


def standard_input_lines() -> list[str]:
    """The non-blank lines of standard input."""
    try:
        text = sys.stdin.read()
    except UnicodeDecodeError as error:
        raise UsageError(f"standard input is not {error.encoding} text") from None
    return [line for line in text.splitlines() if line.strip()]


def check_sequence(sequence: str, task: Task) -> None:
    """Refuse a sequence the model cannot read: empty, not the task's, or too long."""
    try:
        task.check_source(sequence)
        length = len(task.src_tokenizer.encode(sequence))
    except ValueError as error:
        raise UsageError(f"{error} in {sequence!r}") from None
    if length == 0:
        raise UsageError(f"{sequence!r} is an empty sequence: give at least one token")
    longest = task.source_lengths[-1]
    if length > longest:
        raise UsageError(
            f"{sequence!r} has {length} tokens; {task.name} was trained on at most "
            f"{longest}"
        )
