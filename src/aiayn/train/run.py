"""A run on its task: the task's training batches and validation, handed to the loop.

    state = new_run(task_config("reverse-repeats", steps=500))
    train_on_task(state, checkpoint="run.pt")
"""

from pathlib import Path

from torch import nn

from aiayn.evaluation import evaluate
from aiayn.tasks import held_out_sources
from aiayn.train.loop import Hook, train
from aiayn.train.state import TrainState


def train_on_task(
    state: TrainState,
    checkpoint: str | Path | None = None,
    progress: bool = True,
    *,
    validate: bool = True,
    hook: Hook | None = None,
    hook_every: int = 1,
) -> TrainState:
    """``train`` on the run's task: its training batches (``Task.training_batch``),
    drawn from the run's data generator, and, if ``validate``, its scores on
    ``config.eval_size`` validation sources (never test ones). The other arguments
    are ``train``'s."""
    task = state.task
    scores = None
    if validate:
        validation = held_out_sources(task, "validation", state.config.eval_size)

        def scores(model: nn.Module) -> dict[str, float]:
            return evaluate(model, task, validation)

    return train(
        state,
        task.training_batches(state.data_rng),
        validate=scores,
        checkpoint=checkpoint,
        progress=progress,
        hook=hook,
        hook_every=hook_every,
    )
