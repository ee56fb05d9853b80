"""The CUDA-graph training step (aiayn.train.cuda_graph): the eager step, replayed.

The tests that replay need a GPU and are skipped without one; the configuration's
checks and the padding run everywhere.
"""

import dataclasses

import pytest
import torch

from aiayn.tasks import get_task, make_batch
from aiayn.train.checkpoints import load_checkpoint, save_checkpoint
from aiayn.train.config import TrainConfig
from aiayn.train.loop import train_step
from aiayn.train.state import new_run

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="no CUDA device")
TASK = get_task("reverse-repeats")


def test_padded_batch_keeps_ids_and_pads_the_rest():
    batch = make_batch(TASK, ["1 2", "3 4 5"])  # src (2, 4), tgt (2, 4)
    wide = batch.padded_to(6, 5)
    assert wide.src.shape == (2, 6)
    assert wide.tgt_in.shape == wide.tgt_out.shape == (2, 5)
    assert torch.equal(wide.src[:, :4], batch.src)
    assert torch.equal(wide.tgt_out[:, :4], batch.tgt_out)
    assert (wide.src[:, 4:] == batch.src_pad_id).all()
    assert (wide.tgt_in[:, 4:] == batch.tgt_pad_id).all()
    with pytest.raises(ValueError, match="length 4 > 3"):
        batch.padded_to(3, 5)


def test_cuda_graph_refuses_a_device_that_is_not_a_gpu():
    with pytest.raises(ValueError, match="needs a CUDA device, not cpu"):
        TrainConfig(cuda_graph=True, device="cpu")


def small_config(**fields) -> TrainConfig:
    return TrainConfig(
        task_options={"batch_size": 32}, device="cuda", snapshot_every=5, **fields
    )


def step(state):
    """One training step on the run's task's next batch."""
    return train_step(state, state.task.training_batch(state.data_rng))


@needs_cuda
def test_a_graph_refuses_a_batch_of_another_size():
    state = new_run(small_config(cuda_graph=True))
    step(state)
    other = make_batch(TASK, ["1 2 3"])
    with pytest.raises(ValueError, match="made for batches of 32 sources, not 1"):
        train_step(state, other)


@needs_cuda
def test_graphed_steps_equal_eager_steps():
    """Ten steps on the same batches: the same losses and weights, to rounding."""
    eager, graphed = new_run(small_config()), new_run(small_config(cuda_graph=True))
    for seed in range(10):
        batch = eager.task.training_batch(torch.Generator().manual_seed(seed))
        a, b = train_step(eager, batch), train_step(graphed, batch)
        torch.testing.assert_close(a["loss"], b["loss"], rtol=1e-4, atol=1e-5)
        assert a["train_token_accuracy"] == b["train_token_accuracy"]
    for name, weight in eager.model.state_dict().items():
        other = graphed.model.state_dict()[name]
        torch.testing.assert_close(weight, other, rtol=1e-4, atol=1e-5, msg=name)


@needs_cuda
@pytest.mark.parametrize("cuda_graph", [False, True])
def test_training_step_never_waits_for_the_gpu(cuda_graph):
    """No host-device synchronisation in a step (after the graph is recorded)."""
    state = new_run(small_config(cuda_graph=cuda_graph))
    step(state)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            step(state)
    finally:
        torch.cuda.set_sync_debug_mode("default")


@needs_cuda
def test_graphed_run_resumes_on_the_cpu(tmp_path):
    state = new_run(small_config(cuda_graph=True))
    for _ in range(3):
        step(state)
    save_checkpoint(state, tmp_path / "run.pt")
    resumed = load_checkpoint(tmp_path / "run.pt", device="cpu")
    assert resumed.config.cuda_graph is False and resumed.graphed is None
    assert dataclasses.replace(resumed.config, device="cuda", cuda_graph=True) == (
        state.config
    )
    step(resumed)
    assert resumed.step == 4
