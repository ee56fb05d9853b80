"""Training batches drawn as numbers (aiayn.tasks.digit_batches): make_batch's ids."""

import pytest
import torch

from aiayn.tasks import TASK_NAMES, get_task, make_batch
from aiayn.tasks.digits import DigitTask, reverse_repeats
from aiayn.tasks.training_data import training_batch, training_sources

DIGIT_TASKS = ["reverse-repeats", "copy", "reverse"]


@pytest.mark.parametrize("name", DIGIT_TASKS)
@pytest.mark.parametrize("few_digits_share", [0.0, 0.5, 1.0])
@pytest.mark.parametrize("length_power", [0.0, 4.0])
def test_training_batch_is_make_batch_of_training_sources(
    name, few_digits_share, length_power
):
    task = get_task(name)
    for seed in range(3):
        by_text, by_numbers = (torch.Generator().manual_seed(seed) for _ in range(2))
        sources = training_sources(task, 300, by_text, length_power, few_digits_share)
        expected = make_batch(task, sources)
        batch = training_batch(task, 300, by_numbers, length_power, few_digits_share)
        for field in ("src", "tgt_in", "tgt_out"):
            assert torch.equal(getattr(batch, field), getattr(expected, field))
        assert (batch.src_pad_id, batch.tgt_pad_id) == (
            expected.src_pad_id,
            expected.tgt_pad_id,
        )
        # the same draws: the data stream goes on alike
        assert torch.equal(by_text.get_state(), by_numbers.get_state())


def test_a_task_without_a_rule_on_numbers_goes_through_text():
    drawn_as_numbers = [n for n in TASK_NAMES if get_task(n).number_batch_drawer()]
    assert drawn_as_numbers == DIGIT_TASKS
    # a digit task of one's own, without a rule on numbers: the text path
    own = DigitTask("reverse-repeats-again", reverse_repeats, "the same rule")
    assert own.number_batch_drawer() is None
    by_text, by_batch = (torch.Generator().manual_seed(0) for _ in range(2))
    expected = make_batch(own, training_sources(own, 8, by_text, 1.0, 0.5))
    batch = training_batch(own, 8, by_batch, 1.0, 0.5)
    assert torch.equal(batch.tgt_out, expected.tgt_out)
    task = get_task("parse")
    by_text, by_batch = (torch.Generator().manual_seed(0) for _ in range(2))
    expected = make_batch(task, training_sources(task, 8, by_text, 1.0))
    batch = training_batch(task, 8, by_batch, 1.0)
    assert torch.equal(batch.tgt_out, expected.tgt_out)
    assert set(TASK_NAMES) > set(DIGIT_TASKS)
