"""Translation in miniature: number words, the subword vocabulary, token-budget
batches, the held-out split, the scores, the command line."""

import dataclasses

import pytest
import torch
from num2words import num2words

from aiayn.book.alignment import place_labels, rule_alignment
from aiayn.book.flops import training_flops
from aiayn.cli import main
from aiayn.tasks import ADDED_TASKS, get_task, held_out_sources
from aiayn.tasks.number_words import (
    LARGEST,
    draw_numbers,
    number_split,
    read_english,
    spell,
)
from aiayn.tasks.subwords import learn_vocabulary
from aiayn.tasks.translation import (
    NumberWordsTask,
    token_budget_batches,
    translation_scores,
)
from aiayn.train.checkpoints import load_checkpoint, save_checkpoint
from aiayn.train.config import (
    TrainConfig,
    changed_config,
    task_config,
    toy_model_config,
)
from aiayn.train.loop import train_step
from aiayn.train.state import new_run


def small_model_config(task):
    """A model of ``task`` small enough to build and step in milliseconds."""
    return toy_model_config(
        task,
        d_model=16,
        h=2,
        encoder_layers=1,
        decoder_layers=1,
        d_ff=32,
    )


EDGES = [
    0,
    1,
    21,
    101,
    1000,
    1001,
    1100,
    21000,
    101101,
    200000,
    80000,
    1000001,
    2000000,
    80000000,
    1000000050,
    101101101101,
    LARGEST,
]


@pytest.fixture(scope="module")
def tiny():
    """A small en-de task: a corpus of 2,000 numbers, 100 tokens."""
    task = NumberWordsTask("tiny-en-de", "de", "test", vocab_size=100, corpus_size=2000)
    ADDED_TASKS[task.name] = task
    yield task
    del ADDED_TASKS[task.name]


def test_spell_is_num2words_on_edges_and_random_numbers():
    numbers = EDGES + draw_numbers(300, torch.Generator().manual_seed(0))
    for number in numbers:
        for language in ("en", "de", "fr"):
            assert spell(number, language) == num2words(number, lang=language)
    assert spell(101101, "de") == "einhunderteinstausendeinhunderteins"  # num2words'
    with pytest.raises(ValueError, match="outside"):
        spell(10**12, "en")


def test_numbers_mix_magnitudes_and_stay_in_range():
    numbers = draw_numbers(12_000, torch.Generator().manual_seed(1))
    digits = torch.tensor([len(str(k)) for k in numbers])
    assert 0 <= min(numbers) and max(numbers) <= LARGEST
    counts = torch.bincount(digits, minlength=13)[1:]
    assert counts.min() > 800 and counts.max() < 1200  # 1000 per number of digits


def test_read_english_inverts_spell_and_refuses_anything_else():
    for number in EDGES:
        assert read_english(spell(number, "en")) == number
    for bad in [
        "twentyone",
        "one hundred one",
        "twenty-one ",
        "one trillion",
        "one thousand billion",
        "",
        "one hundred and",
    ]:
        with pytest.raises(ValueError):
            read_english(bad)


def test_the_test_split_is_disjoint_from_training_and_validation():
    task = get_task("en-de")
    test = held_out_sources(task, "test", 200)
    validation = held_out_sources(task, "validation", 200)
    assert {number_split(read_english(s)) for s in test} == {"test"}
    assert not set(test) & set(validation)
    assert min(read_english(s) for s in test) >= 1000  # the words stay in training
    assert {number_split(k) for k in range(1000)} == {"train"}
    corpus_numbers = task.corpus_stream(5000)
    assert {number_split(k) for k in corpus_numbers} == {"train"}
    assert not {read_english(s) for s in test} & set(corpus_numbers)


def test_the_vocabulary_is_shared_deterministic_and_round_trips(tiny):
    vocabulary = tiny.vocabulary
    assert tiny.src_tokenizer is tiny.tgt_tokenizer is vocabulary
    assert vocabulary.tokens[:3] == ("<pad>", "<s>", "</s>") and len(vocabulary) == 100
    texts = [spell(k, lang) for k in tiny.corpus_stream(300) for lang in ("en", "de")]
    again = learn_vocabulary(texts, 100)
    assert learn_vocabulary(texts, 100) == again
    for text in texts[:50]:
        assert vocabulary.join(vocabulary.split(text)) == text
        assert vocabulary.split(text) == vocabulary.bpe.encode(text).tokens
    assert "-" in vocabulary.split("twenty-one")  # punctuation: a piece of its own
    with pytest.raises(ValueError, match=r"characters \['€'\]"):
        vocabulary.split("one €")
    config = toy_model_config(tiny)
    assert config.src_vocab == config.tgt_vocab == 100  # one vocabulary: tied thrice


def test_token_budget_batches_fill_the_budget_and_sort_by_length():
    src = [3, 9, 4, 8, 2, 7, 5, 5, 6, 1]
    tgt = [2, 6, 3, 9, 2, 5, 4, 4, 5, 1]
    batches = token_budget_batches(src, tgt, 12)
    assert sorted(i for b in batches for i in b) == list(range(10))
    for batch in batches:
        longest = max(max(src[i], tgt[i]) for i in batch)
        assert len(batch) * longest <= 12
    assert batches[0] == [9, 4, 0]  # the shortest first, in order of length
    with pytest.raises(ValueError, match="max_tokens=8"):
        token_budget_batches([9], [1], 8)


def test_a_training_step_takes_a_budget_batch(tiny):
    model = small_model_config(tiny)
    config = TrainConfig(
        task=tiny.name,
        task_options={"max_tokens": 200},
        model_config=model,
        device="cpu",
    )
    state = new_run(config)
    generator = torch.Generator().manual_seed(config.seed)
    expected = tiny.with_options(max_tokens=200).training_batch(generator)
    assert expected.src.numel() <= 200 and expected.tgt_out.numel() <= 200
    batch = state.task.training_batch(state.data_rng)
    assert torch.equal(batch.src, expected.src)
    record = train_step(state, batch)
    assert torch.isfinite(torch.as_tensor(record["loss"]))
    # the step drew what training_flops draws again: one batch from the data stream
    assert torch.equal(state.data_rng.get_state(), generator.get_state())
    flops = training_flops(state.model, tiny, 200, config.seed, 1)
    assert 0 < flops < 6 * sum(p.numel() for p in state.model.parameters()) * 400
    with pytest.raises(ValueError, match="task copy: .*'max_tokens'"):
        changed_config(task_config("copy"), {"max_tokens": 200})


def test_a_checkpoint_refuses_another_vocabulary(tiny, tmp_path, monkeypatch):
    model = small_model_config(tiny)
    state = new_run(TrainConfig(task=tiny.name, model_config=model, device="cpu"))
    save_checkpoint(state, tmp_path / "run.pt")
    assert load_checkpoint(tmp_path / "run.pt").step == 0
    other = dataclasses.replace(tiny)  # the same vocabulary, but for one merge
    vocabulary = tiny.vocabulary
    other.__dict__["vocabulary"] = dataclasses.replace(
        vocabulary, merges=vocabulary.merges[:-1]
    )
    monkeypatch.setitem(ADDED_TASKS, tiny.name, other)
    with pytest.raises(ValueError, match="another vocabulary"):
        load_checkpoint(tmp_path / "run.pt")


def test_scores_exact_match_bleu_and_chrf():
    references = ["zwei Millionen eins", "eine Milliarde drei Millionen zwei"]
    perfect = translation_scores(references, references)
    assert perfect["exact_match"] == 1 and perfect["bleu"] == pytest.approx(100)
    assert perfect["chrf"] == pytest.approx(100)
    assert "tok:13a" in perfect["bleu_signature"]
    one_word = translation_scores(["einundzwanzig"], ["einundzwanzig"])
    assert one_word["bleu"] == 0 and one_word["chrf"] == pytest.approx(100)
    near = translation_scores(["zweiundzwanzig"], ["einundzwanzig"])
    assert near["bleu"] == 0 and near["chrf"] > 50  # one word, wrong: no n-gram


def test_the_cli_defaults_are_the_tasks_own():
    config = task_config("en-de")
    defaults = get_task("en-de").train_defaults
    assert get_task("en-de").max_tokens == 1500 and config.task_options == {}
    assert config.steps == defaults.steps and config.lr_factor == defaults.lr_factor
    assert config.model_config == toy_model_config("en-de")  # the toy shape
    assert task_config("reverse-repeats") == TrainConfig(task="reverse-repeats")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A barely trained en-de model: enough for the command line's plumbing."""
    path = tmp_path_factory.mktemp("runs") / "en-de.pt"
    small = dataclasses.replace(get_task("en-de"), corpus_size=2000)  # same vocabulary
    args = [
        "train",
        "--task",
        "en-de",
        "--out",
        str(path),
        "--steps",
        "2",
        "--eval-size",
        "4",
        "--quiet",
        "--device",
        "cpu",
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(ADDED_TASKS, "en-de", small)
        assert main(args) == 0
    return path


def test_cli_evaluate_reports_bleu_chrf_and_exact_match(checkpoint, capsys):
    capsys.readouterr()
    assert main(["evaluate", "--checkpoint", str(checkpoint), "--n", "3"]) == 0
    out = capsys.readouterr().out
    for line in ("exact match:", "token accuracy:", "bleu:", "chrf:"):
        assert line in out
    assert main(["evaluate", "--checkpoint", str(checkpoint), "--length", "3"]) == 2


def test_cli_predict_reads_arguments_and_standard_input(
    checkpoint, capsys, monkeypatch
):
    capsys.readouterr()
    args = ["predict", "--checkpoint", str(checkpoint)]
    assert main([*args, "twenty-one", "one thousand and one"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("seven\n\nzero\n"))
    assert main(args) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2


@pytest.mark.parametrize("bad", ["twentyone", "one hundred one", "a <s>", "1 2"])
def test_cli_predict_refuses_what_is_not_a_number_in_one_line(checkpoint, capsys, bad):
    assert main(["predict", "--checkpoint", str(checkpoint), bad]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "error:" in error


def test_the_rule_alignment_swaps_units_and_tens_in_german():
    source = "twenty-one"
    labels = place_labels(21, "de")  # einundzwanzig
    assert labels[0] == {(0, "units")} and labels[3] == set()  # ein, und
    assert labels[-1] == {(0, "tens")}
    src_tokens = ["▁twenty", "-", "one"]
    aligned = rule_alignment(
        source, ["▁ein", "und", "zwanzig"], src_tokens, "de"
    )
    assert aligned == [{2}, set(), {0}]
    for number in draw_numbers(200, torch.Generator().manual_seed(3)):
        for language in ("en", "de"):  # every digit's place is written somewhere
            places = set().union(*place_labels(number, language))
            digits = {(g, p) for (g, p) in places if p != "scale"}
            assert len(digits) >= sum(d != "0" for d in str(number)) or number == 0
