"""Model variations (§6.2, Table 3) in miniature: the rows, one run of a row, its
scores.

Every row trains the toy model of ``toy_model_config`` on reverse-repeats for the same
number of steps, with the settings of the named run "table3-base"
(``aiayn.train.presets``) and the row's changes, then scores the final
weights (no checkpoint averaging, as Table 3) on validation sources: perplexity per
target token under teacher forcing, and greedy decoding's token accuracy and exact
match. The repository's ``book/measurements/table3.py`` ran every row and seed;
"Model variations" renders the results.
"""

import math
import time

import torch
from torch import nn
from torch.nn import functional

from aiayn.evaluation import evaluate, evaluation_mode
from aiayn.fast.attention import DEFAULT_KERNELS, Kernels
from aiayn.tasks import Task, held_out_sources, make_batch
from aiayn.train.config import TrainConfig
from aiayn.train.loss import teacher_forced_logits
from aiayn.train.presets import preset_config
from aiayn.train.run import train_on_task
from aiayn.train.state import new_run

BASE_RUN = "table3-base"  # the base row: a named run of aiayn.train.presets
STEPS = 250  # the training budget of every row
EVAL_SIZE = 1000  # validation sources scored
# the validation sources' length: the longest, as when the sweep ran
EVAL_LENGTH = 10

# Table 3's rows that a CPU can afford: (group, changes to the base row). The toy
# model has d_model 64, h 4, N 2, d_ff 256, so d_k = d_v = 16.
ROWS: list[tuple[str, dict]] = [
    ("base", {}),
    # (A) heads at constant computation: d_k = d_v = d_model / h
    ("A", {"h": 1}),
    ("A", {"h": 2}),
    ("A", {"h": 8}),
    # (B) smaller keys only (d_v stays 16)
    ("B", {"d_k": 8}),
    ("B", {"d_k": 4}),
    # (C) depth and width (d_k = d_v = d_model / h follows d_model)
    ("C", {"encoder_layers": 1, "decoder_layers": 1}),
    ("C", {"encoder_layers": 3, "decoder_layers": 3}),
    ("C", {"d_model": 32}),
    ("C", {"d_model": 128}),
    ("C", {"d_ff": 128}),
    ("C", {"d_ff": 512}),
    # (D) regularization
    ("D", {"dropout": 0.0}),
    ("D", {"dropout": 0.2}),
    ("D", {"label_smoothing": 0.0}),
    ("D", {"label_smoothing": 0.3}),
    # (E) learned positional embeddings instead of sinusoids
    ("E", {"positional": "learned"}),
]


@torch.no_grad()
def perplexity(model: nn.Module, task: Task, sources: list[str]) -> float:
    """exp(mean cross-entropy per target token) under teacher forcing.

    Every target token counts, the end token included; padding does not. The loss is
    the plain one, without label smoothing: the model's own probability of the right
    token.
    """
    batch = make_batch(task, sources)  # src (B, S), tgt_in and tgt_out (B, T)
    with evaluation_mode(model):
        logits = teacher_forced_logits(model, batch)  # (B, T, V)
    loss = functional.cross_entropy(
        logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=batch.tgt_pad_id
    )
    return math.exp(loss.item())


def row_config(changes: dict, seed: int, steps: int = STEPS) -> TrainConfig:
    """The base row with ``changes``, for ``steps`` steps on the CPU."""
    return preset_config(BASE_RUN, changes, seed=seed, steps=steps, device="cpu")


def run_row(
    changes: dict, seed: int, steps: int = STEPS, kernels: Kernels = DEFAULT_KERNELS
) -> dict:
    """Train the base row with ``changes`` for ``steps`` steps on the CPU; score it.

    The model computes with ``kernels`` (aiayn.fast.attention.Kernels). Returns the
    steps, the seconds of training (wall clock) and of the whole run (this process's
    CPU time), the number of parameters (a shared matrix counts once), and perplexity,
    token accuracy and exact match on EVAL_SIZE validation sources.
    """
    cpu_started = time.process_time()
    state = new_run(row_config(changes, seed, steps))
    state.model.kernels = kernels
    started = time.perf_counter()
    train_on_task(state, progress=False, validate=False)
    seconds = time.perf_counter() - started
    validation = held_out_sources(
        state.task, "validation", EVAL_SIZE, length=EVAL_LENGTH
    )
    scores = evaluate(state.model, state.task, validation)
    return {
        "steps": steps,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(time.process_time() - cpu_started, 2),
        "params": sum(p.numel() for p in state.model.parameters()),
        "perplexity": perplexity(state.model, state.task, validation),
        "token_accuracy": scores["token_accuracy"],
        "exact_match": scores["exact_match"],
    }
