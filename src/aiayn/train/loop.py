"""Training (§5): a run's configuration and state, the training step and loop,
checkpoints."""

import contextlib
import copy
import hashlib
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from torch import Tensor, nn
from tqdm import tqdm

from aiayn.evaluation import evaluate
from aiayn.model.masks import padding_mask, target_mask
from aiayn.model.transformer import Transformer, TransformerConfig
from aiayn.tasks import (
    Batch,
    DigitTask,
    Task,
    digit_batches,
    get_task,
    held_out_sources,
    make_batch,
)
from aiayn.train import distributed
from aiayn.train.cuda_graph import GraphedForwardBackward
from aiayn.train.loss import label_smoothed_loss
from aiayn.train.schedule import learning_rate


def toy_model_config(task: Task | str, **shape) -> TransformerConfig:
    """The book's small Transformer for ``task``; ``shape`` changes any field.

    d_model 64, h 4, N 2 in the encoder and in the decoder, d_ff 256, no dropout. The
    vocabulary sizes are the task's; the positional table covers twice the task's
    longest sequence, so that longer sources can be tried.
    """
    task = get_task(task) if isinstance(task, str) else task
    defaults = dict(
        d_model=64,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=256,
        dropout=0.0,
        max_positions=2 * task.longest_sequence,
    )
    return TransformerConfig(
        src_vocab=len(task.src_tokenizer),
        tgt_vocab=len(task.tgt_tokenizer),
        **(defaults | shape),
    )


@dataclass
class TrainConfig:
    """Everything a training run depends on; saved in every checkpoint."""

    task: str = "reverse-repeats"
    # the model to train; None: toy_model_config(task)
    model: TransformerConfig | None = None
    # 128 sources: a step about 0.6 of one of 256, more steps, sooner at 99.9% on a CPU
    batch_size: int = 128
    # a token budget instead: each batch is one of the task's batches of pairs of
    # similar length, with at most max_tokens padded tokens a side (§5.1); None:
    # batch_size sources
    max_tokens: int | None = None
    # a training source of L tokens has probability ∝ L**length_power, except for a
    # share uniform_length_share of them whose lengths are all equally likely: short
    # sources, all but absent under L**4, are learned too
    length_power: float = 4.0
    uniform_length_share: float = 0.05
    # the share of training sources drawn from a few digits (training_sources);
    # None: 0.5 for a digit task, 0 for any other
    few_digits_share: float | None = None
    steps: int = 2000
    # the peak rate of warm-up 300 with factor 0.5, reached in half the steps
    # (the peak scales as lr_factor / sqrt(warmup_steps): 0.5 / sqrt(2) = 0.354)
    warmup_steps: int = 150
    lr_factor: float = 0.354
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    eval_every: int = 250
    eval_size: int = 1000
    # stop early once an evaluation reaches this exact match; None: run every step
    target_exact_match: float | None = None
    # evaluate and predict with the mean of the last weight snapshots
    average_last: int = 10
    snapshot_every: int = 10  # steps between two snapshots
    seed: int = 0
    device: str = field(
        default_factory=lambda: "cuda" if torch.cuda.is_available() else "cpu"
    )
    # on a GPU: replay each step's forward and backward pass from a CUDA graph
    # (aiayn.train.cuda_graph); batches of batch_size sources only, one process
    cuda_graph: bool = False

    def __post_init__(self):
        task = get_task(self.task)
        if self.few_digits_share is None:
            self.few_digits_share = 0.5 if isinstance(task, DigitTask) else 0.0
        if not 0.0 <= self.few_digits_share <= 1.0:
            raise ValueError(
                f"few_digits_share={self.few_digits_share} is not a share in [0, 1]"
            )
        if not 0.0 <= self.uniform_length_share < 1.0:
            raise ValueError(
                f"uniform_length_share={self.uniform_length_share} is not a share "
                "in [0, 1)"
            )
        if self.few_digits_share > 0 and not isinstance(task, DigitTask):
            raise ValueError(
                f"task {self.task} has no digits: few_digits_share must be 0"
            )
        if self.max_tokens is not None and not hasattr(task, "budget_batch"):
            raise ValueError(f"task {self.task} has no token-budget batches")
        if self.cuda_graph and torch.device(self.device).type != "cuda":
            raise ValueError(f"cuda_graph needs a CUDA device, not {self.device}")
        if self.cuda_graph and self.max_tokens is not None:
            raise ValueError("cuda_graph needs batches of batch_size, not max_tokens")
        if self.model is None:
            self.model = toy_model_config(task)
        sizes = len(task.src_tokenizer), len(task.tgt_tokenizer)
        if (self.model.src_vocab, self.model.tgt_vocab) != sizes:
            raise ValueError(
                f"model src_vocab={self.model.src_vocab}, tgt_vocab="
                f"{self.model.tgt_vocab}, but task {self.task} has {sizes[0]} source "
                f"and {sizes[1]} target tokens"
            )


def task_config(task: str, **fields) -> TrainConfig:
    """A TrainConfig with the task's own defaults (``Task.train_defaults``), then
    ``fields``: what `python -m aiayn train --task NAME` trains."""
    defaults = dict(get_task(task).train_defaults)
    shape = defaults.pop("model", None)
    if shape is not None:
        defaults["model"] = toy_model_config(task, **shape)
    return TrainConfig(task=task, **defaults | fields)


@dataclass
class TrainState:
    """A run in progress: what a checkpoint holds and what resuming restores."""

    config: TrainConfig
    model: Transformer
    optimizer: torch.optim.Optimizer
    data_rng: torch.Generator
    step: int = 0
    history: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    # the last weights kept, for averaging
    snapshots: list[dict[str, Tensor]] = field(default_factory=list)
    # under torchrun, the model wrapped to average the processes' gradients
    data_parallel: nn.Module | None = None
    world_size: int = 1  # the processes that train it, each on batch_size sources
    # with config.cuda_graph: the step's forward and backward pass, replayed
    graphed: GraphedForwardBackward | None = None

    @property
    def task(self) -> Task:
        return get_task(self.config.task)

    @property
    def finished(self) -> bool:
        """All steps done, or the last evaluation reached the target exact match."""
        target = self.config.target_exact_match
        scores = [r["val_exact_match"] for r in self.history if "val_exact_match" in r]
        reached = target is not None and bool(scores) and scores[-1] >= target
        return self.step >= self.config.steps or reached

    def take_snapshot(self) -> None:
        """Keep a copy of the current weights; only the last ``average_last`` stay."""
        weights = {
            name: w.detach().clone() for name, w in self.model.state_dict().items()
        }
        self.snapshots = [*self.snapshots, weights][-self.config.average_last :]

    def averaged_model(self) -> Transformer:
        """A copy of the model whose weights are the mean of the snapshots.

        As §6.1 averages its last checkpoints: the model to evaluate and predict with.
        """
        if not self.snapshots:
            return self.model
        averaged = copy.deepcopy(self.model)
        names = self.snapshots[0].keys()
        mean = {
            name: torch.stack([s[name] for s in self.snapshots]).mean(0)
            for name in names
        }
        averaged.load_state_dict(mean)
        return averaged


def device_available(name: str) -> bool:
    """Whether this machine has the device ``name`` ("cpu", "cuda:1", "mps", ...)."""
    device = torch.device(name)
    if device.type == "cuda":
        return torch.cuda.is_available() and (device.index or 0) < (
            torch.cuda.device_count()
        )
    if device.type == "mps":
        return torch.backends.mps.is_available()
    return device.type == "cpu"


def new_run(config: TrainConfig) -> TrainState:
    """A fresh model, optimizer (Adam, the paper's betas and epsilon), data stream.

    Under torchrun (``aiayn.train.distributed``) every process builds the same model,
    and draws its data, and its dropout masks, from a seed of its own.
    """
    torch.manual_seed(config.seed)
    model = Transformer(config.model).to(config.device)
    # foreach: one call over all the parameters instead of a Python loop over them;
    # on a CPU the same operations in the same order (the same weights, bit for bit)
    optimizer = torch.optim.Adam(
        model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, foreach=True
    )
    seed = distributed.process_seed(config.seed, distributed.rank())
    if seed != config.seed:  # another process: its own dropout masks too
        torch.manual_seed(seed)
    data_rng = torch.Generator().manual_seed(seed)
    state = TrainState(
        config,
        model,
        optimizer,
        data_rng,
        data_parallel=distributed.data_parallel(model),
        world_size=distributed.world_size(),
    )
    if config.cuda_graph:
        if state.data_parallel is not None:
            raise ValueError("cuda_graph trains in one process, not under torchrun")
        task = state.task
        state.graphed = GraphedForwardBackward(
            model,
            lambda model, batch: batch_loss(model, batch, config.label_smoothing),
            config.batch_size,
            task.longest_sequence,
            (task.src_tokenizer.pad_id, task.tgt_tokenizer.pad_id),
        )
    return state


FEW_DIGITS_MAX = 5  # a few-digit training source uses 1 to this many digits


def training_sources(
    task: Task,
    n: int,
    generator: torch.Generator,
    length_power: float,
    few_digits_share: float = 0.0,
    uniform_length_share: float = 0.0,
) -> list[str]:
    """n random sources whose lengths L are drawn with probability ∝ L**length_power,
    but for a share ``uniform_length_share`` that draws every length equally likely
    (``length_weights``).

    Lengths range over ``task.source_lengths``. 0 gives every length the same chance;
    1 gives a source of 10 tokens ten times the chance of a source of 1, so that long
    sources, where a digit can occur many times, are common. A share
    ``few_digits_share`` of the sources (digit tasks only) draws its digits from a
    random set of 1 to FEW_DIGITS_MAX digits instead of all ten, so that long
    chains of one digit are common too.
    The sources come grouped by length; a batch does not depend on its order.
    """
    sources = []
    groups = source_groups(
        task, n, generator, length_power, few_digits_share, uniform_length_share
    )
    for length, k, count in groups:
        if k == 10:  # all ten digits: the task's own sampling
            sources += task.sample(count, generator, length=length)
        else:
            sources += task.sample(count, generator, length=length, digits=k)
    return sources


def source_groups(
    task: Task,
    n: int,
    generator: torch.Generator,
    length_power: float,
    few_digits_share: float = 0.0,
    uniform_length_share: float = 0.0,
) -> list[tuple[int, int, int]]:
    """``training_sources``' first draws: how many of the n sources have each length
    and number of digits, as (length, digits, count), sorted (10 digits: all)."""
    lengths = torch.tensor(task.source_lengths)
    weights = length_weights(lengths, length_power, uniform_length_share)
    drawn = lengths[
        torch.multinomial(weights, n, replacement=True, generator=generator)
    ]
    digits = torch.full((n,), 10)
    if few_digits_share > 0:
        few = torch.rand(n, generator=generator) < few_digits_share
        fewer = torch.randint(1, FEW_DIGITS_MAX + 1, (n,), generator=generator)
        digits = torch.where(few, fewer, digits)
    kinds, counts = torch.stack([drawn, digits], dim=1).unique(
        dim=0, return_counts=True
    )
    return [
        (*kind, count)
        for kind, count in zip(kinds.tolist(), counts.tolist(), strict=True)
    ]


def length_weights(
    lengths: Tensor, length_power: float, uniform_length_share: float = 0.0
) -> Tensor:
    """A weight per length: L**length_power, plus the same floor for every length, so
    that a share ``uniform_length_share`` of the draws has every length equally
    likely (none: the weights L**length_power themselves)."""
    powered = lengths.double() ** length_power
    share = uniform_length_share
    return powered + share / (1 - share) * powered.sum() / len(lengths)


def training_batch(
    task: Task,
    n: int,
    generator: torch.Generator,
    length_power: float,
    few_digits_share: float = 0.0,
    uniform_length_share: float = 0.0,
) -> Batch:
    """``make_batch(task, training_sources(task, n, generator, ...))``: the same batch
    from the same draws. For the digit tasks it is drawn as numbers, without text
    (``aiayn.tasks.digit_batches``), about four times faster
    (tests/test_digit_batches.py checks it is the same batch)."""
    shares = few_digits_share, uniform_length_share
    if not digit_batches.drawn_as_numbers(task):
        sources = training_sources(task, n, generator, length_power, *shares)
        return make_batch(task, sources)
    groups = source_groups(task, n, generator, length_power, *shares)
    return digit_batches.digit_batch(task, groups, generator)


def teacher_forced_logits(model: nn.Module, batch: Batch) -> Tensor:
    """The decoder reads the true target shifted right (``tgt_in``) under the padding
    and causal masks: logits (B, T, V) for every target position at once."""
    return model(
        batch.src,
        batch.tgt_in,
        padding_mask(batch.src, batch.src_pad_id),
        target_mask(batch.tgt_in, batch.tgt_pad_id),
    )


def batch_loss(
    model: nn.Module, batch: Batch, smoothing: float
) -> tuple[Tensor, Tensor, Tensor]:
    """The label-smoothed loss of a batch under teacher forcing (in training mode).

    Returns the loss, and two (B, T) masks: the target positions the model predicts
    right, and the real (not padding) ones. ``model`` may be the DDP-wrapped model.
    """
    model.train()
    logits = teacher_forced_logits(model, batch)  # (B, T, V)
    loss = label_smoothed_loss(logits, batch.tgt_out, smoothing, batch.tgt_pad_id)
    real = batch.tgt_out != batch.tgt_pad_id
    correct = (logits.argmax(dim=-1) == batch.tgt_out) & real
    return loss, correct, real


def train_step(state: TrainState, sources: list[str] | None = None) -> dict:
    """One optimizer step on a fresh batch; returns the step's loss, accuracy and rate.

    The batch holds ``sources``, or by default ``config.batch_size`` new ones. Its
    accuracy, ``train_token_accuracy``, is the batch's under teacher forcing. The
    loss and the accuracy are 0-dimensional tensors on the model's device: reading
    them (``read_metrics``) would make the host wait for the device, so nothing in
    the step does. Under torchrun they are those of the global batch, the union of
    the processes' batches (``distributed.global_batch_loss``). With
    ``config.cuda_graph`` the forward and backward pass is replayed from a CUDA graph
    (``aiayn.train.cuda_graph``): the same loss and gradients, to rounding.
    """
    config, model = state.config, state.model
    if sources is None and config.max_tokens is not None:
        sources = state.task.budget_batch(config.max_tokens, state.data_rng)
    if sources is not None:
        batch = make_batch(state.task, sources)
    else:  # make_batch(task, training_sources(...)), drawn faster
        batch = training_batch(
            state.task,
            config.batch_size,
            state.data_rng,
            config.length_power,
            config.few_digits_share,
            config.uniform_length_share,
        )
    state.step += 1
    rate = learning_rate(
        state.step, config.model.d_model, config.warmup_steps, config.lr_factor
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


def train(
    state: TrainState,
    checkpoint: str | Path | None = None,
    progress: bool = True,
) -> TrainState:
    """Train until ``config.steps`` or the target exact match, evaluating periodically.

    Evaluations decode the validation sources, never the test ones. The checkpoint, if
    given, is written after every evaluation and at the end. Ctrl-C (SIGINT) or SIGTERM
    ends the run after the step in progress: the checkpoint is saved between two whole
    steps, so resuming it gives the run that never stopped; then TrainingInterrupted is
    raised. Under torchrun, rank 0 shows the bar, evaluates and saves, and every
    process stops after the same step (``distributed.agreed_signal``).
    """
    config = state.config
    validation = held_out_sources(state.task, "validation", config.eval_size)
    started = time.perf_counter() - state.seconds
    shown = progress and distributed.rank() == 0
    bar = tqdm(total=config.steps, initial=state.step, disable=not shown, unit="step")
    unread = len(state.history)  # the first record that may still hold tensors
    with bar, signals_deferred(signal.SIGINT, signal.SIGTERM) as arrived:
        while not state.finished and not distributed.agreed_signal(arrived):
            record = train_step(state)
            state.history.append(record)
            bar.update(1)
            if state.step % config.snapshot_every == 0:
                state.take_snapshot()
            evaluating = (
                state.step % config.eval_every == 0 or state.step == config.steps
            )
            if evaluating or state.step % READ_EVERY == 0:
                read_metrics(state.history[unread:])
                unread = len(state.history)
                bar.set_postfix(
                    loss=f"{record['loss']:.3f}",
                    acc=f"{record['train_token_accuracy']:.3f}",
                    lr=f"{record['lr']:.1e}",
                )
            if evaluating:  # on rank 0; every process gets the scores
                scores = distributed.on_rank_0(
                    lambda: evaluate(state.averaged_model(), state.task, validation)
                )
                record |= {f"val_{name}": value for name, value in scores.items()}
                state.seconds = record["seconds"] = time.perf_counter() - started
                if checkpoint is not None:
                    save_checkpoint(state, checkpoint)
        read_metrics(state.history[unread:])
        state.seconds = time.perf_counter() - started
        if checkpoint is not None:
            save_checkpoint(state, checkpoint)
    stop = distributed.agreed_signal(arrived)
    if stop:
        raise TrainingInterrupted(stop)
    return state


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
    processes = saved.get("processes", [saved])  # one, in older checkpoints
    if distributed.in_process_group() and len(processes) != distributed.world_size():
        message = distributed.world_size_error(path, len(processes))
        raise distributed.WorldSizeError(message)
    fields = saved["config"]  # the TransformerConfig in it is a dict: rebuild it
    config = TrainConfig(**fields | {"model": TransformerConfig(**fields["model"])})
    saved_vocabulary = saved.get("vocabulary")  # absent in older checkpoints
    if saved_vocabulary not in (None, vocabulary_fingerprints(get_task(config.task))):
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
