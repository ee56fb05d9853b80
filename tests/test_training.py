"""Training: the schedule, the loss, determinism, checkpoints, decoding."""

import dataclasses
import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from aiayn.evaluation import evaluate, predict
from aiayn.model.transformer import TransformerConfig
from aiayn.tasks import DIGIT_TOKENIZER, get_task, held_out_sources, make_batch
from aiayn.tasks.digits import FEW_DIGITS_MAX
from aiayn.train.checkpoints import load_checkpoint, save_checkpoint
from aiayn.train.config import (
    TrainConfig,
    changed_config,
    device_available,
    task_config,
    toy_model_config,
)
from aiayn.train.loop import forward_backward, read_metrics, train, train_step
from aiayn.train.loss import label_smoothed_loss
from aiayn.train.run import train_on_task
from aiayn.train.schedule import learning_rate
from aiayn.train.state import new_run

PAD_ID, EOS_ID = DIGIT_TOKENIZER.pad_id, DIGIT_TOKENIZER.eos_id
SHAPE = dict(
    d_model=32, h=2, encoder_layers=1, decoder_layers=1, d_ff=64
)
MOVING_DIGITS_SHAPE = dict(encoder_layers=1, decoder_layers=1)
TINY = dict(
    model_config=toy_model_config("reverse-repeats", **SHAPE),
    task_options={"batch_size": 16},
    eval_size=20,
)


def step(state):
    """One training step on the run's task's next batch."""
    return train_step(state, state.task.training_batch(state.data_rng))


def test_learning_rate_peaks_at_warmup_with_the_value_of_eq3():
    rates = [learning_rate(s, 512, 4000) for s in range(1, 20_001)]
    assert max(range(len(rates)), key=rates.__getitem__) + 1 == 4000
    assert max(rates) == pytest.approx(512**-0.5 * 4000**-0.5)


def test_loss_ignores_padding_and_matches_cross_entropy_without_smoothing():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 14)
    target = torch.randint(3, 14, (2, 5))
    target[1, 3:] = PAD_ID
    ours = label_smoothed_loss(logits, target, 0.0, PAD_ID)
    theirs = F.cross_entropy(
        logits.flatten(0, 1), target.flatten(), ignore_index=PAD_ID
    )
    torch.testing.assert_close(ours, theirs)


def test_smoothed_loss_equals_pytorch_over_the_non_padding_classes():
    torch.manual_seed(1)
    logits = torch.randn(3, 4, 14)
    logits[
        ..., PAD_ID
    ] = -1e4  # padding gets no probability, so both normalise over 13 classes
    target = torch.randint(1, 14, (3, 4))
    ours = label_smoothed_loss(logits, target, 0.1, PAD_ID)
    # PyTorch spreads the smoothing over every class it is given: all but padding.
    theirs = F.cross_entropy(
        logits[..., 1:].flatten(0, 1), target.flatten() - 1, label_smoothing=0.1
    )
    torch.testing.assert_close(ours, theirs)


def test_smoothed_loss_is_finite_even_for_certain_wrong_predictions():
    logits = torch.full((1, 1, 14), -1e4)
    logits[0, 0, 5] = 1e4  # certain of token 5 ...
    loss = label_smoothed_loss(
        logits, torch.tensor([[6]]), 0.1, PAD_ID
    )  # ... but 6 is right
    assert math.isfinite(loss.item())


def test_same_seed_same_losses():
    losses = []
    for _ in range(2):
        state = train_on_task(
            new_run(TrainConfig(steps=6, eval_every=6, **TINY)), progress=False
        )
        losses.append([r["loss"] for r in state.history])
    assert losses[0] == losses[1]


def test_fused_adam_agrees_with_the_per_parameter_loop_to_rounding():
    # train_step steps with Adam's fused kernel; the same run with PyTorch's loop over
    # the parameters must end on the same weights, to rounding: the fused kernel
    # orders Adam's arithmetic its own way (the clipping is exact: the test below)
    config = TrainConfig(steps=5, device="cpu", **TINY)
    fast, looped = new_run(config), new_run(config)
    looped.optimizer = torch.optim.Adam(
        looped.model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9, foreach=False
    )
    assert fast.optimizer.defaults["fused"] is True
    for _ in range(config.steps):
        step(fast)
        step(looped)
    start = dict(new_run(config).model.named_parameters())
    for (name, a), b in zip(
        fast.model.named_parameters(), looped.model.parameters(), strict=True
    ):
        if name.endswith("w_k.bias"):
            # its gradient is 0 but for rounding (the softmax ignores a shift shared by
            # every key), and Adam scales those rounding errors up to full steps
            continue
        moved = (b - start[name]).abs().max().item()  # about 5 steps of the rate
        assert moved > 1e-4
        torch.testing.assert_close(a, b, rtol=0, atol=1e-4 * moved)


def test_foreach_clipping_gives_the_per_parameter_loop_s_gradients_exactly():
    state = new_run(TrainConfig(device="cpu", **TINY))
    forward_backward(state, state.task.training_batch(state.data_rng))
    params = list(state.model.parameters())
    gradients = [p.grad.clone() for p in params]

    def clipped(foreach: bool) -> tuple[Tensor, list[Tensor]]:
        for p, g in zip(params, gradients, strict=True):
            p.grad = g.clone()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=foreach)
        return norm, [p.grad for p in params]

    (norm, looped), (foreach_norm, fast) = clipped(False), clipped(True)
    assert norm > 1.0  # the first step's gradients are scaled down
    assert torch.equal(norm, foreach_norm)
    assert all(torch.equal(a, b) for a, b in zip(fast, looped, strict=True))


def test_checkpoint_resume_continues_exactly(tmp_path):
    config = dict(steps=8, eval_every=4, **TINY)
    straight = train_on_task(new_run(TrainConfig(**config)), progress=False)
    half = new_run(TrainConfig(**{**config, "steps": 4}))
    train_on_task(half, checkpoint=tmp_path / "run.pt", progress=False)
    resumed = load_checkpoint(tmp_path / "run.pt")
    resumed.config.steps = 8
    train_on_task(resumed, progress=False)
    assert [r["loss"] for r in resumed.history] == [r["loss"] for r in straight.history]


def test_checkpoint_holds_what_prediction_needs(tmp_path):
    state = train_on_task(
        new_run(TrainConfig(steps=2, eval_every=2, **TINY)),
        tmp_path / "r.pt",
        progress=False,
    )
    saved = torch.load(tmp_path / "r.pt", weights_only=False)
    assert {
        "config",
        "model",
        "optimizer",
        "step",
        "torch_rng",
        "data_rng",
    } <= (saved.keys())
    assert saved["config"]["model_config"] == dataclasses.asdict(state.model.config)
    restored = load_checkpoint(tmp_path / "r.pt")
    assert restored.config == state.config
    assert isinstance(restored.config.model_config, TransformerConfig)
    for name, tensor in state.model.state_dict().items():
        assert torch.equal(restored.model.state_dict()[name], tensor)


class ScriptedModel(torch.nn.Module):
    """Stands in for a Transformer: sequence b emits 5 until step b + 1, then </s>.
    (Without a key/value cache, which needs a Transformer's layers: use_cache=False.)"""

    def encode(self, src, src_mask):
        return torch.zeros(src.size(0), src.size(1), 1)

    def decode(self, memory, src_mask, prefix):
        step = torch.full((prefix.size(0), prefix.size(1), 1), float(prefix.size(1)))
        return torch.cat(
            [
                step,
                torch.arange(prefix.size(0))
                .float()[:, None, None]
                .expand(-1, prefix.size(1), 1),
            ],
            dim=-1,
        )  # (B, t, 2): step, b

    def output_projection(self, hidden):
        step, b = hidden[:, 0], hidden[:, 1]
        logits = torch.zeros(hidden.size(0), 14)
        logits[:, 5] = 1.0
        logits[step > b, 5] = 0.0
        logits[step > b, EOS_ID] = 2.0
        return logits


def test_greedy_decoding_stops_each_sequence_at_its_end_token():
    from aiayn.decoding import greedy_decode

    src = torch.tensor([[3, 4, 5], [6, 7, PAD_ID], [8, PAD_ID, PAD_ID]])
    model = ScriptedModel()
    out = greedy_decode(model, src, PAD_ID, 1, EOS_ID, max_len=10, use_cache=False)
    assert out.tolist() == [
        [EOS_ID, PAD_ID, PAD_ID],
        [5, EOS_ID, PAD_ID],
        [5, 5, EOS_ID],
    ]  # three steps, then the loop stopped: every sequence had finished


def test_evaluate_reports_fractions():
    state = new_run(TrainConfig(**TINY))
    task = get_task("copy")
    scores = evaluate(state.model, task, held_out_sources(task, "test", 10, length=3))
    assert 0.0 <= scores["exact_match"] <= scores["token_accuracy"] <= 1.0


def test_training_records_keep_training_and_validation_scores_apart():
    config = TrainConfig(steps=4, eval_every=2, **TINY)
    history = train_on_task(new_run(config), progress=False).history
    assert set(history[0]) == {"step", "loss", "train_token_accuracy", "lr"}
    assert set(history[1]) == {
        "step",
        "loss",
        "train_token_accuracy",
        "lr",
        "val_exact_match",
        "val_token_accuracy",
        "seconds",
    }


def test_load_or_train_reuses_resumes_or_retrains(tmp_path):
    from aiayn.book.models import load_or_train

    path = tmp_path / "run.pt"
    config = TrainConfig(steps=6, eval_every=3, **TINY)
    first = load_or_train(config, path, progress=False)
    again = load_or_train(config, path, progress=False)  # finished: nothing more to do
    assert again.step == 6 and again.history == first.history
    other = load_or_train(
        TrainConfig(steps=6, eval_every=3, seed=1, **TINY), path, progress=False
    )
    assert (
        other.history[0]["loss"] != first.history[0]["loss"]
    )  # another seed: from scratch
    interrupted = new_run(config)
    for _ in range(3):
        interrupted.history.append(step(interrupted))
    interrupted.history[0]["loss"] = -1.0  # a mark that only a resumed run keeps
    save_checkpoint(interrupted, path)
    resumed = load_or_train(
        config, path, progress=False
    )  # same run, unfinished: resumed
    assert resumed.history[0]["loss"] == -1.0
    assert [r["loss"] for r in resumed.history[1:]] == [
        r["loss"] for r in first.history[1:]
    ]


def test_a_saved_run_is_the_same_run_on_another_device():
    from aiayn.book.models import same_run

    config = TrainConfig(device="cpu", **TINY)
    assert same_run(dataclasses.replace(config, device="cuda", cuda_graph=True), config)
    assert not same_run(dataclasses.replace(config, seed=1), config)


def test_training_stops_once_the_target_is_reached():
    config = TrainConfig(steps=50, eval_every=2, target_exact_match=0.0, **TINY)
    state = train_on_task(new_run(config), progress=False)
    assert state.step == 2 and state.finished


def test_snapshots_are_capped_and_averaged():
    config = TrainConfig(
        steps=12, eval_every=12, snapshot_every=2, average_last=3, **TINY
    )
    state = train_on_task(new_run(config), progress=False)
    assert len(state.snapshots) == 3  # snapshots at steps 8, 10 and 12
    averaged = state.averaged_model()
    name = "encoder.layers.0.feed_forward.linear1.weight"
    expected = sum(s[name] for s in state.snapshots) / 3
    torch.testing.assert_close(averaged.state_dict()[name], expected)
    assert torch.equal(
        state.model.state_dict()[name], state.snapshots[-1][name]
    )  # untouched
    assert averaged is not state.model


def test_no_snapshot_means_the_model_itself():
    state = new_run(TrainConfig(**TINY))
    assert state.averaged_model() is state.model


def test_a_checkpoint_rebuilds_the_whole_transformer_config(tmp_path):
    model = toy_model_config(
        "reverse-repeats", **SHAPE, norm_first=True, positional="learned", d_k=8
    )
    config = TrainConfig(
        model_config=model,
        task_options={"batch_size": 4},
        steps=2,
        eval_every=2,
        eval_size=4,
    )
    state = train_on_task(new_run(config), tmp_path / "r.pt", progress=False)
    restored = load_checkpoint(tmp_path / "r.pt")
    assert restored.model.config == model == state.model.config
    assert restored.config == config


def test_the_model_takes_its_vocabulary_sizes_from_the_task():
    config = task_config("reverse")
    task = get_task("reverse")
    assert config.model_config == toy_model_config(task, **MOVING_DIGITS_SHAPE)
    assert config.model_config.src_vocab == len(task.src_tokenizer) == 14
    assert config.model_config.max_positions == 2 * task.longest_sequence == 22
    wrong = dataclasses.replace(config, model_config=replace(config.model_config,
                                                             tgt_vocab=10))  # fmt: skip
    with pytest.raises(ValueError, match="tgt_vocab=10, but task reverse has 14"):
        new_run(wrong)


def test_a_config_is_plain_data_that_builds_nothing(monkeypatch):
    import aiayn.train.config as config_module

    monkeypatch.setattr(config_module, "get_task", lambda *_, **__: pytest.fail())
    config = TrainConfig(task="en-de", task_options={"max_tokens": 900})
    assert config.task_options == {"max_tokens": 900}


def test_each_concept_lives_in_its_own_module():
    from aiayn import evaluation
    from aiayn.book import models as book_models
    from aiayn.train import loss, schedule

    assert learning_rate.__module__ == schedule.__name__  # the optimizer chapter's
    assert label_smoothed_loss.__module__ == loss.__name__  # regularization's
    assert evaluate.__module__ == evaluation.predict.__module__ == evaluation.__name__
    assert book_models.load_or_train.__module__ == book_models.__name__


def test_few_digit_sources_use_few_digits_and_come_in_the_share_asked_for():
    def few_digit_share(task):
        drawn = task.training_sources(torch.Generator().manual_seed(0))
        ten_digits = [s for s in drawn if len(s.split()) == 10]
        few = sum(len(set(s.split())) <= FEW_DIGITS_MAX for s in ten_digits)
        return few / len(ten_digits)

    # ten uniform digits use at most 5 of them in about 14.5% of cases
    plain = few_digit_share(get_task("copy", batch_size=4000, few_digits_share=0.0))
    assert 0.10 < plain < 0.19
    # half drawn from a few digits, and 14.5% of the other half
    half = few_digit_share(get_task("copy", batch_size=4000, few_digits_share=0.5))
    assert abs(half - (0.5 + 0.5 * plain)) < 0.05


def test_digit_task_samples_from_a_random_set_of_digits():
    task = get_task("copy")
    for digits in (1, 3, 10):
        sources = task.sample(200, torch.Generator().manual_seed(1), 10, digits=digits)
        assert all(len(s.split()) == 10 for s in sources)
        assert max(len(set(s.split())) for s in sources) <= digits
    # each source has a set of its own: all ten digits occur across the sources
    ones = task.sample(200, torch.Generator().manual_seed(1), 10, digits=1)
    assert {s.split()[0] for s in ones} == set("0123456789")


def test_training_options_belong_to_the_task_and_are_checked():
    assert get_task("reverse-repeats").few_digits_share == 0.5
    with pytest.raises(ValueError, match="few_digits_share=1.5 is not a share"):
        changed_config(TrainConfig(), {"few_digits_share": 1.5})
    with pytest.raises(ValueError, match="nor training option of task copy"):
        changed_config(task_config("copy"), {"max_tokens": 100})
    with pytest.raises(ValueError, match="no training option max_tokens"):
        get_task("parse", max_tokens=100)


def test_the_loop_trains_on_any_batches_and_knows_no_task():
    """``train`` takes an iterator of batches: here one fixed batch, no validation."""
    state = new_run(TrainConfig(steps=3, **TINY))
    batch = make_batch(get_task("copy"), ["1 2 3", "4 5"])
    seen = []

    def batches():
        while True:
            seen.append(1)
            yield batch

    train(state, batches(), progress=False)
    assert state.step == 3 and len(seen) == 3
    assert all("val_exact_match" not in r for r in state.history)


def test_predict_reads_only_the_sources_and_restores_the_mode(monkeypatch):
    state = new_run(TrainConfig(**TINY))
    task = get_task("reverse-repeats")
    monkeypatch.setattr(type(task), "target", lambda *_: pytest.fail("read a target"))
    for mode in (True, False):
        state.model.train(mode)
        outputs = predict(state.model, task, ["1 2 3", "4 5 6 7 8 9 1 2 3 4"])
        assert state.model.training is mode
        # at most the source's length + extra_length tokens, the end token included
        lengths = [len(o.split()) for o in outputs]
        assert lengths[0] <= 3 + 2 - 1 and lengths[1] <= 10 + 2 - 1


def test_read_metrics_turns_a_step_s_tensors_into_floats():
    state = new_run(TrainConfig(**TINY))
    records = [step(state) for _ in range(2)]
    assert isinstance(records[0]["loss"], torch.Tensor)
    read_metrics(records)
    assert all(
        isinstance(r[name], float)
        for r in records
        for name in ("loss", "train_token_accuracy", "lr")
    )


def test_a_device_without_foreach_kernels_trains_as_the_cpu_does(monkeypatch):
    """Apple's MPS has no foreach kernels for clip_grad_norm_, which refuses
    foreach=True there; the step asks for them only where they exist. Simulated here
    by a CPU without them: the same weights, bit for bit."""
    import torch.nn.utils.clip_grad as clip_grad

    config = TrainConfig(steps=3, **TINY)
    with_kernels = new_run(config)
    for _ in range(config.steps):
        step(with_kernels)
    monkeypatch.setattr(clip_grad, "_device_has_foreach_support", lambda *_: False)
    monkeypatch.setattr(clip_grad, "_has_foreach_support", lambda *_: False)
    without = new_run(config)
    for _ in range(config.steps):
        step(without)
    pairs = zip(
        with_kernels.model.parameters(), without.model.parameters(), strict=True
    )
    assert all(torch.equal(a, b) for a, b in pairs)


@pytest.mark.parametrize("device", ["mps", "cuda:7"])
def test_a_checkpoint_from_a_device_this_machine_lacks_loads_on_the_cpu(
    tmp_path, device
):
    if device_available(device):
        pytest.skip(f"this machine has {device}")
    state = new_run(TrainConfig(steps=1, **TINY))
    step(state)
    save_checkpoint(state, tmp_path / "run.pt")
    saved = torch.load(tmp_path / "run.pt", weights_only=True)
    saved["config"]["device"] = device  # as if trained there
    torch.save(saved, tmp_path / "run.pt")
    loaded = load_checkpoint(tmp_path / "run.pt")
    assert loaded.config.device == "cpu" and loaded.step == 1
