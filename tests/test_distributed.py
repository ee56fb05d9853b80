"""Training on two processes (torch.distributed, gloo, on the CPU).

One pair of processes (``two_processes``, started once for the module) runs every
scenario and saves what it saw; the tests compare that with one process.
"""

import contextlib
import io
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch
import torch.multiprocessing

from aiayn.cli import main
from aiayn.tasks import make_batch
from aiayn.train import distributed
from aiayn.train import loop as training
from aiayn.train.checkpoints import load_checkpoint
from aiayn.train.config import TrainConfig, toy_model_config
from aiayn.train.loop import TrainingInterrupted, read_metrics, train_step
from aiayn.train.run import train_on_task
from aiayn.train.state import new_run

SHAPE = dict(d_model=16, h=2, encoder_layers=1, decoder_layers=1, d_ff=32)
# on the CPU, also where there is a GPU: two processes share no GPU
TINY = dict(
    model_config=toy_model_config("copy", **SHAPE),
    task="copy",
    eval_size=20,
    device="cpu",
)
PER_PROCESS = 4  # sources per process and step: a global batch of 8
RUN = dict(
    TINY,
    task_options={"batch_size": PER_PROCESS},
    steps=8,
    eval_every=4,
    snapshot_every=2,
    average_last=2,
    target_exact_match=None,
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def next_sources(state: training.TrainState) -> list[str]:
    """The sources the next train_step of ``state`` will draw (its generator kept)."""
    generator = torch.Generator()
    generator.set_state(state.data_rng.get_state())
    return state.task.training_sources(generator)


def gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad for name, p in model.named_parameters()}


def key_biases_apart(weights: dict[str, torch.Tensor]) -> tuple[dict, list]:
    """``weights`` without the biases of the key projections, and those biases.

    Softmax ignores a constant added to all the scores of a query, so the gradient of
    a key bias is 0, computed as rounding noise; and Adam's first step moves every
    weight by lr * g / |g|, about lr whatever the size of g: noise of either sign
    becomes a step of about lr either way.
    """
    kept, keys = dict(weights), []
    for name in weights:
        if name.endswith("w_k.bias"):  # (h d_k,): W^K's bias
            keys.append(kept.pop(name))
    return kept, keys


def scenarios(rank: int, size: int, port: int, folder: Path) -> None:
    """What each of the two processes does; results in ``folder/rank<R>.pt``."""
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        WORLD_SIZE=str(size),
        LOCAL_RANK=str(rank),
    )
    torch.set_num_threads(1)
    seen = {}
    with distributed.process_group("cpu"):
        # one step, and the sources each process drew for it
        state = new_run(TrainConfig(**RUN))
        sources = next_sources(state)
        record = train_step(state, state.task.training_batch(state.data_rng))
        read_metrics([record])
        seen["step"] = dict(
            sources=distributed.gathered(sources),
            record=record,
            weights=state.model.state_dict(),
            gradients=gradients(state.model),
        )
        # a run of 8 steps ...
        straight = train_on_task(new_run(TrainConfig(**RUN)), progress=False)
        seen["straight"] = (straight.history, straight.model.state_dict())
        # ... and the same run, SIGTERM reaching rank 1 alone during step 3 ...
        checkpoint = folder / "interrupted.pt"

        def step_then_signal(state, batch):
            record = train_step(state, batch)
            if state.step == 3 and rank == 1:
                os.kill(os.getpid(), signal.SIGTERM)
            return record

        interrupted = new_run(TrainConfig(**RUN))
        with mock.patch.object(training, "train_step", step_then_signal):
            try:
                train_on_task(interrupted, checkpoint=checkpoint, progress=False)
            except TrainingInterrupted as stop:
                seen["stopped"] = (stop.signal_number, interrupted.step)
        # ... resumed from its checkpoint
        resumed = train_on_task(load_checkpoint(checkpoint), checkpoint, progress=False)
        seen["resumed"] = (resumed.history, resumed.model.state_dict())
    torch.save(seen, folder / f"rank{rank}.pt")


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory) -> tuple[dict, dict]:
    """What rank 0 and rank 1 saw."""
    folder = tmp_path_factory.mktemp("two_processes")
    torch.multiprocessing.spawn(scenarios, args=(2, free_port(), folder), nprocs=2)
    return tuple(torch.load(folder / f"rank{r}.pt") for r in range(2))


def test_each_process_draws_its_own_sources_rank_0_those_of_one_process(
    two_processes,
):
    rank_0, rank_1 = two_processes[0]["step"]["sources"]
    assert rank_0 != rank_1
    assert rank_0 == next_sources(new_run(TrainConfig(**RUN)))


def test_a_step_on_two_processes_is_one_process_step_on_both_batches(two_processes):
    step = two_processes[0]["step"]
    single = new_run(TrainConfig(**RUN))
    both = make_batch(single.task, [s for ss in step["sources"] for s in ss])
    record = train_step(single, both)
    read_metrics([record])
    lr = record["lr"]
    expected, expected_keys = key_biases_apart(single.model.state_dict())
    for rank in range(2):  # the same gradients on both processes ...
        seen = two_processes[rank]["step"]
        torch.testing.assert_close(seen["gradients"], gradients(single.model))
        # ... and the same weights, but where Adam's first step turns noise into lr
        weights, keys = key_biases_apart(seen["weights"])
        torch.testing.assert_close(weights, expected)
        for key, expected_key in zip(keys, expected_keys, strict=True):
            torch.testing.assert_close(key, expected_key, atol=2.01 * lr, rtol=0)
    _, key_gradients = key_biases_apart(seen["gradients"])
    assert all(g.abs().max() < 1e-6 for g in key_gradients)
    for name in ("loss", "train_token_accuracy"):  # ... and the global batch's loss
        assert step["record"][name] == pytest.approx(record[name], rel=1e-6)


def test_sigterm_on_one_process_stops_both_after_the_same_step(two_processes):
    for seen in two_processes:
        assert seen["stopped"] == (signal.SIGTERM, 3)


def test_an_interrupted_run_resumes_to_the_run_that_never_stopped(two_processes):
    history, weights = two_processes[0]["straight"]
    for seen in two_processes:
        resumed_history, resumed_weights = seen["resumed"]
        losses = [r["loss"] for r in resumed_history]
        assert losses == [r["loss"] for r in history]
        evaluations = [r for r in resumed_history if "val_exact_match" in r]
        assert [r["step"] for r in evaluations] == [4, 8]
        for name, tensor in weights.items():
            assert torch.equal(resumed_weights[name], tensor), name


def test_torchrun_trains_on_two_processes_and_reports_the_global_batch(tmp_path):
    out = tmp_path / "two.pt"
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        + ["--nproc_per_node=2", "-m", "aiayn", "train", "--task", "copy"]
        + ["--batch-size", "4", "--steps", "3", "--eval-size", "10", "--device"]
        + ["cpu", "--quiet", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    # rank 0 alone prints
    assert done.stdout.count("copy: 3 steps") == 1
    assert "2 processes (gloo), a global batch of 2 x 4 = 8 sources" in done.stdout
    saved = torch.load(out, weights_only=True)
    assert len(saved["processes"]) == 2
    # one process cannot resume it: one line, exit status 2
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        status = main(["train", "--out", str(out), "--resume"])
    assert status == 2
    assert errors.getvalue().splitlines() == [
        f"python -m aiayn train: error: {out} was trained by 2 processes, this run "
        "has 1: resume it with torchrun --nproc_per_node=2"
    ]


def test_the_world_comes_from_torchruns_environment():
    assert distributed.world_from_environment({}) == distributed.World(0, 1, 0)
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}
    assert distributed.world_from_environment(env) == distributed.World(3, 4, 1)
    with pytest.raises(ValueError, match="RANK=4 is outside WORLD_SIZE=4"):
        distributed.world_from_environment(env | {"RANK": "4"})
    with pytest.raises(ValueError, match="WORLD_SIZE='two' is not a whole number"):
        distributed.world_from_environment({"WORLD_SIZE": "two"})


def test_gloo_on_the_cpu_nccl_on_a_gpu_and_one_seed_per_process():
    assert distributed.backend_for("cpu") == "gloo"
    assert distributed.backend_for("cuda") == "cpu:gloo,cuda:nccl"
    assert distributed.process_seed(7, 0) == 7  # one process draws what it always drew
    seeds = {distributed.process_seed(7, rank) for rank in range(8)}
    assert len(seeds) == 8


def test_outside_a_process_group_nothing_changes():
    assert not distributed.in_process_group()
    assert (distributed.rank(), distributed.world_size()) == (0, 1)
    state = new_run(TrainConfig(**RUN))
    assert state.data_parallel is None and state.world_size == 1
    assert distributed.agreed_signal([]) == 0
    assert distributed.agreed_signal([signal.SIGINT]) == signal.SIGINT
    assert distributed.on_rank_0(lambda: 42) == 42
    assert distributed.gathered("x") == ["x"]
