"""The toy tasks of Part II: rules, vocabulary, sampling and batching."""

import pytest
import torch

from aiayn.tasks import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    VOCABULARY,
    get_task,
    held_out_sources,
    held_out_split,
    make_batch,
)


def test_reverse_repeats_matches_the_seed_example():
    task = get_task("reverse-repeats")
    assert task.target("0 1 5 9 0 3 5 2 5") == "5 2 X 3 X 9 5 1 0"


def test_reverse_repeats_marks_every_even_occurrence():
    # 4th and 6th occurrences of 7 are even too; the 3rd and 5th stay.
    assert get_task("reverse-repeats").target("7 7 7 7 7 7") == "X 7 X 7 X 7"


@pytest.mark.parametrize(
    ("name", "source", "target"),
    [("copy", "3 1 4", "3 1 4"), ("reverse", "3 1 4", "4 1 3")],
)
def test_copy_and_reverse(name, source, target):
    assert get_task(name).target(source) == target


def test_unknown_task_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown task 'sort'.*reverse-repeats"):
        get_task("sort")


def test_tokens_outside_the_vocabulary_are_rejected():
    with pytest.raises(ValueError, match=r"\['12', 'a'\] are not digits"):
        get_task("copy").encode("1 12 a")


def test_encode_decode_round_trip_and_special_tokens():
    task = get_task("copy")
    ids = task.encode("0 9 5")
    assert ids == [VOCABULARY.index(d) for d in "095"]
    assert task.decode([BOS_ID, *ids, EOS_ID, 7, PAD_ID]) == "0 9 5"  # stops at </s>


def test_sampling_is_seeded_and_respects_lengths():
    task = get_task("reverse-repeats")
    first = task.sample(200, torch.Generator().manual_seed(3))
    again = task.sample(200, torch.Generator().manual_seed(3))
    assert first == again
    lengths = {len(s.split()) for s in first}
    assert min(lengths) == task.min_len and max(lengths) == task.max_len
    assert {len(s.split()) for s in task.sample(50, torch.Generator(), length=7)} == {7}


def test_batch_is_padded_and_shifted_for_teacher_forcing():
    task = get_task("reverse")
    batch = make_batch(task, ["1 2 3", "4"])
    assert batch.src.tolist()[1] == [VOCABULARY.index("4"), EOS_ID, PAD_ID, PAD_ID]
    assert batch.tgt_in[:, 0].tolist() == [BOS_ID, BOS_ID]
    # shifted right by one
    assert torch.equal(batch.tgt_in[0, 1:], batch.tgt_out[0, :-1])
    assert batch.tgt_out[1].tolist() == [VOCABULARY.index("4"), EOS_ID, PAD_ID, PAD_ID]
    assert batch.num_tokens == 4 + 2


@pytest.mark.parametrize("length", [1, 2, 3, 10])
def test_validation_and_test_sources_never_share_a_sequence(length):
    task = get_task("copy")
    validation = held_out_sources(task, "validation", 10_000, length=length)
    test = held_out_sources(task, "test", 10_000, length=length)
    assert not set(validation) & set(test)
    assert {len(s.split()) for s in validation + test} == {length}
    assert len(validation) == len(test) == 10_000
    assert {held_out_split(s) for s in validation} == {"validation"}


def test_held_out_sources_are_deterministic_and_prefixes_of_each_other():
    task = get_task("reverse")
    sources = held_out_sources(task, "test", 3000)
    assert sources == held_out_sources(task, "test", 3000)
    assert held_out_sources(task, "test", 100) == sources[:100]
    assert len(set(sources)) == len(sources)  # at length 10 repeats are rare: none here


def test_unknown_split_names_the_choices():
    expected = "unknown split 'train': choose one of validation, test"
    with pytest.raises(ValueError, match=expected):
        held_out_sources(get_task("copy"), "train", 10)
