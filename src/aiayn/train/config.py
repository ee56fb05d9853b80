"""A training run's configuration: the model's shape and every setting of the run.

``TrainConfig`` is handed down to everything a run does; ``task_config`` starts it from
the task's own defaults (``Task.train_defaults``), ``changed_config`` changes fields of
it or of its model.
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from aiayn.model.transformer import TransformerConfig
from aiayn.tasks import Task, get_task


def toy_model_config(task: Task | str, **shape) -> TransformerConfig:
    """The book's small Transformer for ``task``; ``shape`` changes any field.

    d_model 64, h 4, N 2 in the encoder and in the decoder, d_ff 256, no dropout. The
    vocabulary sizes are the task's; the positional table covers twice the task's
    longest sequence, so that longer sources can be tried.
    """
    task = get_task(task) if isinstance(task, str) else task
    defaults = dict(
        d_model=64,
        h=4,
        encoder_layers=2,
        decoder_layers=2,
        d_ff=256,
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
    model_config: TransformerConfig | None = None
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
    # None: the task's own (its train_defaults), or 0
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
            self.few_digits_share = task.train_defaults.few_digits_share or 0.0
        if not 0.0 <= self.few_digits_share <= 1.0:
            raise ValueError(
                f"few_digits_share={self.few_digits_share} is not a share in [0, 1]"
            )
        if not 0.0 <= self.uniform_length_share < 1.0:
            raise ValueError(
                f"uniform_length_share={self.uniform_length_share} is not a share "
                "in [0, 1)"
            )
        if self.few_digits_share > 0 and not task.draws_few_digits:
            raise ValueError(
                f"task {self.task} has no digits: few_digits_share must be 0"
            )
        if self.max_tokens is not None and not task.draws_budget_batches:
            raise ValueError(f"task {self.task} has no token-budget batches")
        if self.cuda_graph and torch.device(self.device).type != "cuda":
            raise ValueError(f"cuda_graph needs a CUDA device, not {self.device}")
        if self.cuda_graph and self.max_tokens is not None:
            raise ValueError("cuda_graph needs batches of batch_size, not max_tokens")
        if self.model_config is None:
            self.model_config = toy_model_config(task)
        vocab = self.model_config.src_vocab, self.model_config.tgt_vocab
        sizes = len(task.src_tokenizer), len(task.tgt_tokenizer)
        if vocab != sizes:
            raise ValueError(
                f"model src_vocab={vocab[0]}, tgt_vocab={vocab[1]}, but task "
                f"{self.task} has {sizes[0]} source and {sizes[1]} target tokens"
            )


def task_config(task: str, **fields) -> TrainConfig:
    """A TrainConfig with the task's own defaults (``Task.train_defaults``), then
    ``fields``: what `python -m aiayn train --task NAME` trains."""
    defaults = get_task(task).train_defaults
    changes = defaults.run_changes()
    shape = defaults.model_changes()
    if shape:
        changes["model_config"] = toy_model_config(task, **shape)
    return TrainConfig(task=task, **changes | fields)


def changed_config(config: TrainConfig, changes: Mapping[str, object]) -> TrainConfig:
    """``config`` with ``changes`` to its fields or to its model's (TransformerConfig)
    fields; a ValueError names a field that is neither."""
    model_fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    run_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    unknown = sorted(set(changes) - model_fields - run_fields)
    if unknown:
        raise ValueError(
            f"no such field of TrainConfig or TransformerConfig: {unknown}"
        )
    model_changes = {k: v for k, v in changes.items() if k in model_fields}
    run_changes = {k: v for k, v in changes.items() if k not in model_fields}
    model_config = dataclasses.replace(config.model_config, **model_changes)
    return dataclasses.replace(config, model_config=model_config, **run_changes)


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
