"""A training run's configuration: the task, the model's shape and every setting of
the run, as plain data.

``TrainConfig`` is saved in every checkpoint; ``task_config`` starts it from the task's
own defaults (``Task.train_defaults``), ``changed_config`` changes fields of it, of its
model or of its task's training options.
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


DEFAULT_TASK = "reverse-repeats"
# the toy model of the default task: TrainConfig's model unless given
DEFAULT_MODEL = toy_model_config(DEFAULT_TASK)


@dataclass
class TrainConfig:
    """Everything a training run depends on; saved in every checkpoint.

    Plain data: nothing is built from it here. ``aiayn.train.state.new_run`` builds
    the run (the task with ``task_options``, the model, the optimizer).
    """

    task: str = DEFAULT_TASK
    # changes to the task's training options (Task.TRAINING_OPTIONS: the digit tasks'
    # batch_size, length_power, few_digits_share, ...; the translation tasks'
    # max_tokens)
    task_options: dict[str, object] = field(default_factory=dict)
    # the model to train: the toy model of the default task unless given
    # (task_config gives every task its own)
    model_config: TransformerConfig = DEFAULT_MODEL
    steps: int = 2000
    # the peak rate of warm-up 300 with factor 0.5, reached in half the steps
    # (the peak scales as lr_factor / sqrt(warmup_steps): 0.5 / sqrt(2) = 0.354)
    warmup_steps: int = 150
    lr_factor: float = 0.354
    label_smoothing: float = 0.1
    clip_norm: float = 1.0
    eval_every: int = 250
    eval_size: int = 1000
    # stop early once an evaluation reaches this exact match (1.0: at the first that
    # decodes every validation source right, which `steps` may then not need); None:
    # run every step
    target_exact_match: float | None = 1.0
    # evaluate and predict with the mean of the last weight snapshots
    average_last: int = 10
    snapshot_every: int = 10  # steps between two snapshots
    seed: int = 0
    device: str = field(
        default_factory=lambda: "cuda" if torch.cuda.is_available() else "cpu"
    )
    # on a GPU: replay each step's forward and backward pass from a CUDA graph
    # (aiayn.train.cuda_graph); batches of one size only, one process
    cuda_graph: bool = False

    def __post_init__(self):
        if self.cuda_graph and torch.device(self.device).type != "cuda":
            raise ValueError(f"cuda_graph needs a CUDA device, not {self.device}")


def run_task(config: TrainConfig) -> Task:
    """The task a run of ``config`` trains on: its task, with its training options."""
    return get_task(config.task, **config.task_options)


def task_config(task: str, **fields) -> TrainConfig:
    """A TrainConfig with the task's own defaults (``Task.train_defaults``) and its
    toy model, then ``fields``: what `python -m aiayn train --task NAME` trains."""
    defaults = get_task(task).train_defaults
    changes = defaults.run_changes()
    changes["model_config"] = toy_model_config(task, **defaults.model_changes())
    return TrainConfig(task=task, **changes | fields)


def changed_config(config: TrainConfig, changes: Mapping[str, object]) -> TrainConfig:
    """``config`` with ``changes`` to its fields, to its model's (TransformerConfig)
    fields or to its task's training options; a ValueError names a name that is none
    of these."""
    model_fields = {f.name for f in dataclasses.fields(TransformerConfig)}
    run_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    task_options = set(get_task(config.task).TRAINING_OPTIONS)
    unknown = sorted(set(changes) - model_fields - run_fields - task_options)
    if unknown:
        raise ValueError(
            f"no such field of TrainConfig or TransformerConfig, nor training option "
            f"of task {config.task}: {unknown}"
        )
    model_changes = {k: v for k, v in changes.items() if k in model_fields}
    option_changes = {k: v for k, v in changes.items() if k in task_options}
    run_changes = {
        k: v for k, v in changes.items() if k in run_fields and k not in model_fields
    }
    options = config.task_options | option_changes
    get_task(config.task, **options)  # refuses a value the task cannot take
    task = get_task(config.task)
    # only what differs from the task's own: configurations that train alike are equal
    changed = {k: v for k, v in options.items() if getattr(task, k) != v}
    return dataclasses.replace(
        config,
        model_config=dataclasses.replace(config.model_config, **model_changes),
        task_options=changed,
        **run_changes,
    )


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
