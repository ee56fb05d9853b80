"""Training batches drawn as numbers (aiayn.tasks.digit_batches): make_batch's ids."""

import pytest
import torch

from aiayn.tasks import get_task, make_batch

DIGIT_TASKS = ["reverse-repeats", "copy", "reverse"]


@pytest.mark.parametrize("name", DIGIT_TASKS)
@pytest.mark.parametrize("few_digits_share", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("length_power", [0.0, 4.0])
def test_training_batch_is_make_batch_of_training_sources(
    name, few_digits_share, length_power
):
    options = dict(few_digits_share=few_digits_share, length_power=length_power)
    task = get_task(name, batch_size=300, **options)
    for seed in range(3):
        by_text, by_numbers = (torch.Generator().manual_seed(seed) for _ in range(2))
        expected = make_batch(task, task.training_sources(by_text))
        batch = task.training_batch(by_numbers)
        for field in ("src", "tgt_in", "tgt_out"):
            assert torch.equal(getattr(batch, field), getattr(expected, field))
        assert (batch.src_pad_id, batch.tgt_pad_id) == (
            expected.src_pad_id,
            expected.tgt_pad_id,
        )
        # the same draws: the data stream goes on alike
        assert torch.equal(by_text.get_state(), by_numbers.get_state())


def test_training_batches_come_in_the_task_s_size_and_lengths():
    task = get_task("reverse", batch_size=7, length_power=0.0)
    batches = task.training_batches(torch.Generator().manual_seed(0))
    for _ in range(3):
        batch = next(batches)
        assert batch.src.size(0) == 7
        lengths = (batch.src != batch.src_pad_id).sum(dim=1) - 1  # without </s>
        assert lengths.min() >= 1 and lengths.max() <= 10
