"""Checkpoints: a run saved whole, and read back to resume it or predict with it."""

import hashlib
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from aiayn.model.transformer import TransformerConfig
from aiayn.tasks import Task, get_task
from aiayn.train import distributed
from aiayn.train.config import TrainConfig, device_available
from aiayn.train.state import TrainState, new_run


def save_checkpoint(state: TrainState, path: str | Path) -> None:
    """Configuration, weights, optimizer, step, history and random state, in one file.

    It is written to a temporary file of its own beside ``path``, then renamed: ``path``
    is always a whole checkpoint, the old or the new one, whoever else writes beside it.
    Under torchrun every process calls it: rank 0 writes, with the random state of
    every process, so that each resumes its own data stream.
    """
    random_state = {
        "torch_rng": torch.get_rng_state(),
        "data_rng": state.data_rng.get_state(),
    }
    processes = distributed.gathered(random_state)  # [random_state] in one process
    if distributed.rank() > 0:
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    contents = {
        "config": asdict(state.config),  # the model's TransformerConfig included
        "model": state.model.state_dict(),
        "optimizer": state.optimizer.state_dict(),
        "step": state.step,
        "history": state.history,
        "seconds": state.seconds,
        "snapshots": state.snapshots,
        "vocabulary": vocabulary_fingerprints(state.task),
        **random_state,  # rank 0's
        "processes": processes,  # each rank's, by rank
    }
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    # mkstemp makes the file private; a checkpoint is not (no fchmod on Windows
    # before Python 3.13, where the mode means little)
    if hasattr(os, "fchmod"):
        os.fchmod(descriptor, 0o644)
    try:
        with os.fdopen(descriptor, "wb") as file:
            torch.save(contents, file)
    except BaseException:
        os.unlink(temporary)  # a failed save leaves nothing behind
        raise
    os.replace(temporary, path)


class VocabularyMismatch(ValueError):
    """A checkpoint whose token ids mean other tokens than its task's today."""


def vocabulary_fingerprints(task: Task) -> list[str]:
    """Hashes of a task's source and target tokenizers (their tokens, special tokens
    and, for a subword tokenizer, merges): equal only for the same vocabularies."""
    return [
        hashlib.sha256(repr(tokenizer).encode()).hexdigest()[:16]
        for tokenizer in (task.src_tokenizer, task.tgt_tokenizer)
    ]


def load_checkpoint(path: str | Path, device: str | None = None) -> TrainState:
    """Rebuild a run from a checkpoint: to resume training, or to predict with it.

    Under torchrun, each process takes its own random state, and the processes must
    be as many as those that saved it (a ValueError otherwise).
    """
    # tensors and plain data only: a checkpoint cannot run code when it is loaded
    saved = torch.load(path, map_location="cpu", weights_only=True)
    processes = saved["processes"]
    if distributed.in_process_group() and len(processes) != distributed.world_size():
        message = distributed.world_size_error(path, len(processes))
        raise distributed.WorldSizeError(message)
    config = saved_config(saved["config"])
    if saved["vocabulary"] != vocabulary_fingerprints(get_task(config.task)):
        raise VocabularyMismatch(
            f"{path} was trained with another vocabulary than task {config.task}'s"
        )
    if device is not None:
        config.device = device
    elif not device_available(config.device):  # trained on a GPU, read without one
        config.device = "cpu"
    if torch.device(config.device).type != "cuda":
        config.cuda_graph = False  # how a step runs, not what it computes
    state = new_run(config)
    state.model.load_state_dict(saved["model"])
    state.optimizer.load_state_dict(saved["optimizer"])
    state.step, state.history, state.seconds = (
        saved["step"],
        saved["history"],
        saved["seconds"],
    )
    state.snapshots = saved["snapshots"]
    state.world_size = len(processes)
    random_state = processes[distributed.rank()]
    torch.set_rng_state(random_state["torch_rng"])
    state.data_rng.set_state(random_state["data_rng"])
    return state


def saved_config(fields: dict) -> TrainConfig:
    """The TrainConfig of a checkpoint's fields, whose TransformerConfig is a dict."""
    fields = dict(fields)
    model_fields = fields.pop("model_config")
    return TrainConfig(**fields, model_config=TransformerConfig(**model_fields))
