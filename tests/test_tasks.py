"""Tasks: rules, tokenizers and their special ids, sampling, held-out sets, batching."""

from collections import Counter
from dataclasses import dataclass

import pytest
import torch

from aiayn import tasks
from aiayn.evaluation import evaluate, predict
from aiayn.tasks import (
    DIGIT_TOKENIZER,
    Decoding,
    Task,
    Tokenizer,
    get_task,
    held_out_sources,
    held_out_split,
    make_batch,
)
from aiayn.train.config import TrainConfig, task_config, toy_model_config
from aiayn.train.loop import train_step
from aiayn.train.state import new_run

DIGITS = DIGIT_TOKENIZER


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


def test_the_digit_tasks_share_one_vocabulary_with_the_ids_of_part_ii():
    assert DIGITS.tokens == ("<pad>", "<s>", "</s>", *"0123456789", "X")
    assert (DIGITS.pad_id, DIGITS.bos_id, DIGITS.eos_id, len(DIGITS)) == (0, 1, 2, 14)
    digit_tasks = list(tasks.digits.TASKS.values())
    assert len(digit_tasks) == 3
    for task in digit_tasks:
        assert task.src_tokenizer is task.tgt_tokenizer is DIGITS
        assert task.source_lengths == range(1, 11) and task.held_out_length is None


def test_sources_that_are_not_digits_are_rejected():
    with pytest.raises(ValueError, match=r"\['12', 'a'\] are not digits"):
        get_task("copy").check_source("1 12 a")
    with pytest.raises(ValueError, match=r"\['X'\] are not digits"):
        get_task("copy").target("1 X")  # X is a target token, never a source one


def test_tokens_outside_the_vocabulary_are_rejected():
    with pytest.raises(ValueError, match=r"tokens \['12', '<s>', 'a'\] are not in"):
        DIGITS.encode("1 12 a <s>")  # special tokens are not text either


def test_encode_decode_round_trip_and_special_tokens():
    ids = DIGITS.encode("0 9 5")
    assert ids == [DIGITS.tokens.index(d) for d in "095"]
    assert DIGITS.decode([DIGITS.bos_id, *ids, DIGITS.eos_id, 7, 0]) == "0 9 5"


def test_a_vocabulary_needs_its_special_tokens_once():
    with pytest.raises(ValueError, match=r"special tokens \['</s>'\] are not"):
        Tokenizer(("<pad>", "<s>", "a"))
    with pytest.raises(ValueError, match="appears twice"):
        Tokenizer(("<pad>", "<s>", "</s>", "a", "a"))


def test_sampling_is_seeded_and_respects_lengths():
    task = get_task("reverse-repeats")
    first = task.sample(200, torch.Generator().manual_seed(3))
    again = task.sample(200, torch.Generator().manual_seed(3))
    assert first == again
    lengths = {len(s.split()) for s in first}
    assert min(lengths) == task.source_lengths[0]
    assert max(lengths) == task.source_lengths[-1]
    assert {len(s.split()) for s in task.sample(50, torch.Generator(), length=7)} == {7}


def test_batch_is_padded_and_shifted_for_teacher_forcing():
    batch = make_batch(get_task("reverse"), ["1 2 3", "4"])
    pad, bos, eos = DIGITS.pad_id, DIGITS.bos_id, DIGITS.eos_id
    four = DIGITS.ids["4"]
    assert batch.src.tolist()[1] == [four, eos, pad, pad]
    assert batch.tgt_in[:, 0].tolist() == [bos, bos]
    # shifted right by one
    assert torch.equal(batch.tgt_in[0, 1:], batch.tgt_out[0, :-1])
    assert batch.tgt_out[1].tolist() == [four, eos, pad, pad]
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
    # every length, equally likely
    lengths = Counter(len(s.split()) for s in sources)
    assert sorted(lengths) == list(task.source_lengths)
    assert all(abs(count - 300) < 4 * 300**0.5 for count in lengths.values())
    long = held_out_sources(task, "test", 3000, length=10)
    assert len(set(long)) == len(long)  # at length 10 repeats are rare: none here


def test_unknown_split_names_the_choices():
    expected = "unknown split 'train': choose one of validation, test"
    with pytest.raises(ValueError, match=expected):
        held_out_sources(get_task("copy"), "train", 10)


# A task that is not about digits: letters in, upper-case letters out, read one
# character at a time, with a source and a target vocabulary of different sizes and
# special ids at other places.


@dataclass(frozen=True)
class CharacterTokenizer(Tokenizer):
    """Every character is a token: 'abc' -> ['a', 'b', 'c']."""

    def split(self, text: str) -> list[str]:
        return list(text)

    def join(self, tokens: list[str]) -> str:
        return "".join(tokens)


class Uppercase(Task):
    name = "uppercase"
    description = "the source's letters in upper case"
    src_tokenizer = CharacterTokenizer(("<pad>", "<s>", "</s>", *"abc"))
    tgt_tokenizer = CharacterTokenizer(("A", "B", "C", "D", "</s>", "<s>", "<pad>"))
    source_lengths = range(1, 5)
    held_out_length = 4
    longest_sequence = 5

    def target(self, source: str) -> str:
        return source.upper()

    def training_batch(self, generator):
        return make_batch(self, self.sample(8, generator))

    def sample(self, n, generator, length=None):
        lengths = torch.randint(1, 5, (n,), generator=generator).tolist()
        letters = torch.randint(0, 3, (n, 4), generator=generator).tolist()
        return [
            "".join("abc"[i] for i in row[: length or k])
            for row, k in zip(letters, lengths, strict=True)
        ]


@pytest.fixture
def uppercase(monkeypatch):
    task = Uppercase()
    monkeypatch.setitem(tasks.ADDED_TASKS, task.name, task)
    return task


def test_a_task_with_its_own_vocabularies_batches_with_its_own_special_ids(uppercase):
    batch = make_batch(uppercase, ["cab", "a"])
    assert batch.src.tolist() == [[5, 3, 4, 2], [3, 2, 0, 0]]
    assert batch.tgt_in.tolist() == [[5, 2, 0, 1], [5, 0, 6, 6]]  # <s> is 5, pad 6
    assert batch.tgt_out.tolist() == [[2, 0, 1, 4], [0, 4, 6, 6]]  # </s> is 4
    assert (batch.src_pad_id, batch.tgt_pad_id) == (0, 6)
    assert batch.num_tokens == 4 + 2
    assert uppercase.tgt_tokenizer.decode(batch.tgt_out[0].tolist()) == "CAB"


def test_vocabularies_of_different_sizes_give_an_untied_source_embedding(uppercase):
    config = task_config("uppercase")
    assert (config.model_config.src_vocab, config.model_config.tgt_vocab) == (6, 7)
    model = new_run(config).model
    assert model.src_embed.embedding.weight is not model.tgt_embed.embedding.weight
    assert model.output_projection.weight is model.tgt_embed.embedding.weight
    with pytest.raises(ValueError, match="task uppercase has 6 source and 7 target"):
        new_run(TrainConfig(task="uppercase", model_config=toy_model_config("copy")))


def test_a_task_that_is_not_digits_trains_and_evaluates_end_to_end(uppercase):
    shape = dict(d_model=16, h=2, encoder_layers=1, decoder_layers=1)
    model = toy_model_config(uppercase, d_ff=32, **shape)
    config = TrainConfig(task="uppercase", model_config=model, device="cpu")
    state = new_run(config)
    batches = uppercase.training_batches(state.data_rng)
    records = [train_step(state, next(batches)) for _ in range(3)]
    assert all(torch.isfinite(r["loss"]) for r in records)
    sources = held_out_sources(uppercase, "test", 5)
    assert {len(s) for s in sources} == {uppercase.held_out_length}
    predictions = predict(state.model, uppercase, sources)
    assert all(set(p) <= set("ABCD") for p in predictions)  # text of the target side
    scores = evaluate(state.model, uppercase, sources)
    assert 0 <= scores["exact_match"] <= scores["token_accuracy"] <= 1


def test_a_task_takes_only_its_own_training_options(uppercase):
    assert uppercase.with_options() is uppercase
    with pytest.raises(ValueError, match="uppercase has no training option few_dig"):
        get_task("uppercase", few_digits_share=0.5)


def test_predict_decodes_as_the_task_says(monkeypatch):
    """Beam search stops by tensor2tensor's rule unless the task (or the caller) asks
    for fairseq's; the parse task lets outputs grow to input + 300."""
    import aiayn.evaluation

    calls = []

    def recording_beam_search(model, src, pad, bos, eos, max_len, **options):
        calls.append((src.size(1), max_len, options["stop_at_k_finished"]))
        return torch.full((src.size(0), 1), eos)

    monkeypatch.setattr(aiayn.evaluation, "beam_search", recording_beam_search)
    copy = get_task("copy")
    small = toy_model_config("copy", d_model=16, h=2, d_ff=32)
    model = new_run(TrainConfig(task="copy", model_config=small, device="cpu")).model
    predict(model, copy, ["1 2 3"], beam_size=4)
    fairseq = Decoding(extra_length=5, stop_at_k_finished=True)
    predict(model, copy, ["1 2 3"], beam_size=4, decoding=fairseq)
    # outputs bounded by the source's 3 tokens + the task's 2, or + 5 as asked
    assert calls == [(4, 3 + 2, False), (4, 3 + 5, True)]
    assert copy.decoding == Decoding(extra_length=2)
    assert get_task("parse").decoding.extra_length == 300
    assert get_task("en-de").decoding.extra_length == 50  # §6.1: input + 50


def test_the_registry_names_every_task_where_it_is_defined():
    """TASK_MODULES and the modules' own TASKS name the same tasks: none missing."""
    from importlib import import_module

    defined = {
        name: module
        for module in set(tasks.TASK_MODULES.values())
        for name in import_module(module).TASKS
    }
    assert defined == tasks.TASK_MODULES
    assert all(tasks.get_task(name).name == name for name in tasks.TASK_NAMES)
