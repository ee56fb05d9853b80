"""A run in progress: its model, optimizer, data stream, step and history."""

import copy
from dataclasses import dataclass, field

import torch
from torch import Tensor, nn

from aiayn.fast.transformer import FastTransformer
from aiayn.model.transformer import TransformerConfig
from aiayn.tasks import Task
from aiayn.train import distributed
from aiayn.train.config import TrainConfig, run_task
from aiayn.train.cuda_graph import GraphedForwardBackward
from aiayn.train.loss import batch_loss


@dataclass
class TrainState:
    """A run in progress: what a checkpoint holds and what resuming restores."""

    config: TrainConfig
    model: FastTransformer
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
        """The run's task, with its training options."""
        return run_task(self.config)

    @property
    def finished(self) -> bool:
        """All steps done, or the last evaluation reached the target exact match."""
        target = self.config.target_exact_match
        evaluations = (r for r in reversed(self.history) if "val_exact_match" in r)
        newest = next(evaluations, None)  # at most eval_every records back
        last = None if newest is None else newest["val_exact_match"]
        reached = target is not None and last is not None and last >= target
        return self.step >= self.config.steps or reached

    def take_snapshot(self) -> None:
        """Keep a copy of the current weights; only the last ``average_last`` stay."""
        weights = {
            name: w.detach().clone() for name, w in self.model.state_dict().items()
        }
        self.snapshots = [*self.snapshots, weights][-self.config.average_last :]

    def averaged_model(self) -> FastTransformer:
        """A copy of the model whose weights are the mean of the snapshots (the model
        itself before the first snapshot).

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


def build_model(config: TransformerConfig) -> FastTransformer:
    """The model a run trains, built from its configuration (on the CPU)."""
    return FastTransformer(config)


def check_vocabulary(config: TrainConfig, task: Task) -> None:
    """Refuse a model whose vocabularies are not the task's, saying both sizes."""
    vocab = config.model_config.src_vocab, config.model_config.tgt_vocab
    sizes = len(task.src_tokenizer), len(task.tgt_tokenizer)
    if vocab != sizes:
        raise ValueError(
            f"model src_vocab={vocab[0]}, tgt_vocab={vocab[1]}, but task "
            f"{config.task} has {sizes[0]} source and {sizes[1]} target tokens"
        )


def new_run(config: TrainConfig) -> TrainState:
    """A fresh model, optimizer (Adam, the paper's betas and epsilon), data stream.

    Under torchrun (``aiayn.train.distributed``) every process builds the same model,
    and draws its data, and its dropout masks, from a seed of its own.
    """
    task = run_task(config)
    check_vocabulary(config, task)
    torch.manual_seed(config.seed)
    model = build_model(config.model_config).to(config.device)
    # fused: one kernel updates every parameter, instead of a Python loop over them
    # or a few calls per parameter (the weights agree with the loop's to rounding)
    optimizer = torch.optim.Adam(
        model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, fused=True
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
        state.graphed = GraphedForwardBackward(
            model,
            lambda model, batch: batch_loss(model, batch, config.label_smoothing),
            task.longest_sequence,
        )
    return state
