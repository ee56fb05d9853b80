"""Training (§5): the training step and loop.

The loop knows no task: it takes batches, and optionally a function that scores the
model. ``aiayn.train.run.train_on_task`` hands it a task's batches and validation.
"""

import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
from torch import Tensor, nn
from tqdm import tqdm

from aiayn.tasks import Batch
from aiayn.train import distributed
from aiayn.train.checkpoints import save_checkpoint
from aiayn.train.loss import batch_loss
from aiayn.train.schedule import learning_rate
from aiayn.train.state import TrainState


def train_step(state: TrainState, batch: Batch) -> dict:
    """One optimizer step on ``batch``; returns the step's loss, accuracy and rate.

    Its accuracy, ``train_token_accuracy``, is the batch's under teacher forcing. The
    loss and the accuracy are 0-dimensional tensors on the model's device: reading
    them (``read_metrics``) would make the host wait for the device, so nothing in
    the step does. Under torchrun they are those of the global batch, the union of
    the processes' batches (``distributed.global_batch_loss``). With
    ``config.cuda_graph`` the forward and backward pass is replayed from a CUDA graph
    (``aiayn.train.cuda_graph``): the same loss and gradients, to rounding.
    """
    config, model = state.config, state.model
    state.step += 1
    rate = learning_rate(
        state.step, model.config.d_model, config.warmup_steps, config.lr_factor
    )
    for group in state.optimizer.param_groups:
        group["lr"] = rate
    if state.graphed is not None:  # on a GPU, replayed (aiayn.train.cuda_graph)
        metrics = state.graphed(batch)
    else:
        metrics = forward_backward(state, batch.to(config.device))
    # one call over all the gradients where the device has foreach kernels (a CPU, a
    # GPU); a loop over them elsewhere (Apple's MPS)
    nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm, foreach=None)
    state.optimizer.step()
    return {"step": state.step, **metrics, "lr": rate}


def forward_backward(state: TrainState, batch: Batch) -> dict[str, Tensor]:
    """The batch's loss and accuracy; its gradients in the model's ``.grad``."""
    trained = state.data_parallel or state.model  # the same forward pass
    loss, correct, real = batch_loss(trained, batch, state.config.label_smoothing)
    metrics = {
        "loss": loss.detach(),
        "train_token_accuracy": correct.sum() / real.sum(),
    }
    if state.data_parallel is not None:
        loss, metrics = distributed.global_batch_loss(loss, correct, real)
    state.optimizer.zero_grad(set_to_none=True)
    loss.backward()
    return metrics


def read_metrics(records: list[dict]) -> None:
    """Replace the tensors in these records by Python floats, in one transfer."""
    slots = [
        (record, name)
        for record in records
        for name, value in record.items()
        if isinstance(value, Tensor)
    ]
    if slots:
        values = torch.stack([record[name] for record, name in slots]).tolist()
        for (record, name), value in zip(slots, values, strict=True):
            record[name] = value


class TrainingInterrupted(KeyboardInterrupt):
    """``train`` stopped on SIGINT (Ctrl-C) or SIGTERM, after saving a whole step."""

    def __init__(self, signal_number: int):
        super().__init__(signal.Signals(signal_number).name)
        self.signal_number = signal_number


@contextlib.contextmanager
def signals_deferred(*signal_numbers: int) -> Iterator[list[int]]:
    """Within the block, these signals only append their number to the list it yields.

    A loop reads the list between two whole steps, so a signal never stops a step
    halfway. Signals that were ignored stay ignored; outside the main thread, where
    Python cannot set handlers, nothing changes.
    """
    arrived: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield arrived
        return
    previous = {
        number: signal.signal(number, lambda received, frame: arrived.append(received))
        for number in signal_numbers
        if signal.getsignal(number) is not signal.SIG_IGN
    }
    try:
        yield arrived
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


# steps between two readings of the loss and accuracy (each makes the host wait for
# the device)
READ_EVERY = 25


# a hook on a run in progress: given the run, it returns whether the run stops here
Hook = Callable[[TrainState], bool]
# scores a model (the run's averaged one): {"exact_match": ..., ...}
Validation = Callable[[nn.Module], dict[str, float]]


def train(
    state: TrainState,
    batches: Iterator[Batch],
    *,
    validate: Validation | None = None,
    checkpoint: str | Path | None = None,
    progress: bool = True,
    hook: Hook | None = None,
    hook_every: int = 1,
) -> TrainState:
    """Train on ``batches`` until ``config.steps`` or the target exact match.

    Every ``config.eval_every`` steps and after the last, ``validate``, if given,
    scores the averaged model (``TrainState.averaged_model``): "val_<score>" in the
    history; then the checkpoint, if given, is saved (and at the end). ``hook``, if
    given, runs after every ``hook_every``-th step and the last; True stops the run.
    Ctrl-C (SIGINT) or SIGTERM ends the run after the step in progress, saved between
    two whole steps (resuming gives the run that never stopped), and raises
    TrainingInterrupted. Under torchrun, rank 0 shows the bar, validates and saves,
    and every process stops after the same step (``distributed.agreed_signal``).
    """
    config = state.config
    started = time.perf_counter() - state.seconds
    (state.data_parallel or state.model).train()
    bar = progress_bar(state, progress)
    unread = len(state.history)  # the first record that may still hold tensors
    with bar, signals_deferred(signal.SIGINT, signal.SIGTERM) as arrived:
        while not state.finished and not distributed.agreed_signal(arrived):
            record = train_step(state, next(batches))
            state.history.append(record)
            bar.update(1)
            if state.step % config.snapshot_every == 0:
                state.take_snapshot()
            if hook is not None and due(state, hook_every) and hook(state):
                break
            evaluating = validate is not None and due(state, config.eval_every)
            if evaluating or state.step % READ_EVERY == 0:
                read_metrics(state.history[unread:])
                unread = len(state.history)
                show_metrics(bar, record)
            if evaluating:  # on rank 0; every process gets the scores
                record |= validation_scores(state, validate)
                record["seconds"] = time.perf_counter() - started
                save_run(state, record["seconds"], checkpoint)
        read_metrics(state.history[unread:])
        save_run(state, time.perf_counter() - started, checkpoint)
    if stop := distributed.agreed_signal(arrived):
        raise TrainingInterrupted(stop)
    return state


def due(state: TrainState, every: int) -> bool:
    """Whether the step just done is an ``every``-th one, or the run's last."""
    return state.step % every == 0 or state.step == state.config.steps


def progress_bar(state: TrainState, progress: bool) -> tqdm:
    """A bar from the run's step to its last, shown if ``progress`` and on rank 0."""
    shown = progress and distributed.rank() == 0
    return tqdm(
        total=state.config.steps, initial=state.step, disable=not shown, unit="step"
    )


def save_run(state: TrainState, seconds: float, checkpoint: str | Path | None) -> None:
    """The run's training time so far, and its checkpoint, if one is asked for."""
    state.seconds = seconds
    if checkpoint is not None:
        save_checkpoint(state, checkpoint)


def show_metrics(bar: tqdm, record: dict) -> None:
    """The step's loss, accuracy and learning rate beside the progress bar."""
    bar.set_postfix(
        loss=f"{record['loss']:.3f}",
        acc=f"{record['train_token_accuracy']:.3f}",
        lr=f"{record['lr']:.1e}",
    )


def validation_scores(state: TrainState, validate: Validation) -> dict[str, float]:
    """The averaged model's scores, as "val_<score>": computed on rank 0, received by
    every process."""
    scores = distributed.on_rank_0(lambda: validate(state.averaged_model()))
    return {f"val_{name}": value for name, value in scores.items()}
