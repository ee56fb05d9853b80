"""The parsing task (§6.3): grammar, trees, held-out split, bracket F1, decoding."""

import contextlib
import io
import random

import pytest
import torch

from aiayn.cli import main
from aiayn.decoding import beam_search
from aiayn.evaluation import evaluate, predict
from aiayn.model.transformer import Transformer
from aiayn.tasks import get_task, held_out_sources, make_batch
from aiayn.tasks.grammar import (
    linearize,
    longest_target,
    parse,
    sample_tree,
    tree_words,
)
from aiayn.tasks.parsing import (
    EXTRA_LENGTH,
    LONGEST_SENTENCE,
    PARSE,
    bracket_scores,
    is_held_out,
    is_well_formed,
    labelled_spans,
    read_tree,
)
from aiayn.train.checkpoints import load_checkpoint
from aiayn.train.config import toy_model_config


def small_model_config(**changes):
    """A model of the parse task small enough to build in milliseconds."""
    return toy_model_config(
        PARSE,
        d_model=16,
        h=2,
        encoder_layers=1,
        decoder_layers=1,
        d_ff=32,
        **changes,
    )


NP_ATTACHED = "the man saw the dog with the hat"
VP_ATTACHED = "the man saw the dog with the telescope"
# the dog has the hat
NP_TREE = "(S (NP Det N )NP (VP V (NP (NP Det N )NP (PP P (NP Det N )NP )PP )NP )VP )S"
# the telescope is what the man saw with
VP_TREE = "(S (NP Det N )NP (VP V (NP Det N )NP (PP P (NP Det N )NP )PP )VP )S"


def test_parse_is_registered_with_its_own_vocabularies():
    assert get_task("parse") is PARSE
    assert "telescope" in PARSE.src_tokenizer.ids
    assert "(NP" in PARSE.tgt_tokenizer.ids and ")NP" in PARSE.tgt_tokenizer.ids
    assert "telescope" not in PARSE.tgt_tokenizer.ids
    assert "(NP" not in PARSE.src_tokenizer.ids


def test_the_noun_after_with_decides_the_attachment():
    assert PARSE.target(NP_ATTACHED) == NP_TREE
    assert PARSE.target(VP_ATTACHED) == VP_TREE
    assert PARSE.target("a cat hit") == "(S (NP Det N )NP (VP V )VP )S"


def test_noun_phrases_with_several_pps_branch_right():
    assert PARSE.target("the dog in the park near a box hit") == (
        "(S (NP (NP Det N )NP (PP P (NP (NP Det N )NP (PP P (NP Det N )NP )PP )NP "
        ")PP )NP (VP V )VP )S"
    )


@pytest.mark.parametrize(
    "sentence", ["", "the dog", "the dog saw the", "a telescope saw", "dog the saw"]
)
def test_sentences_outside_the_grammar_are_refused(sentence):
    with pytest.raises(ValueError, match="parse"):
        PARSE.check_source(sentence)


def test_words_outside_the_lexicon_are_refused():
    with pytest.raises(ValueError, match="lexicon"):
        PARSE.target("the unicorn saw a dog")


def test_every_sampled_tree_is_the_one_parse_of_its_sentence():
    rng = random.Random(0)
    for length in PARSE.source_lengths:
        for _ in range(30):
            tree = sample_tree("S", length, rng)
            assert len(tree_words(tree)) == length
            assert parse(" ".join(tree_words(tree))) == tree
            assert len(linearize(tree).split()) <= longest_target(length)


def test_longest_target_is_reached():
    assert longest_target(3) == len("(S (NP Det N )NP (VP V )VP )S".split())
    assert PARSE.longest_sequence == longest_target(PARSE.source_lengths[-1]) + 1


def test_held_out_sentences_are_never_training_sentences():
    generator = torch.Generator().manual_seed(0)
    training = PARSE.sample(600, generator)
    assert not any(is_held_out(s) for s in training)
    validation = held_out_sources(PARSE, "validation", 200)
    test = held_out_sources(PARSE, "test", 200)
    assert all(is_held_out(s) for s in validation + test)
    assert not set(validation) & set(test)
    assert not set(training) & set(validation + test)
    lengths = {len(s.split()) for s in training}
    assert lengths == set(PARSE.source_lengths)


def test_read_tree_inverts_linearize_and_refuses_malformed_output():
    tree = read_tree(NP_TREE)
    assert tree is not None and linearize(tree) == NP_TREE
    for bad in [
        "(S (NP Det N )NP (VP V )VP",  # unclosed
        "(S (NP Det N )VP )S",  # mismatched
        "(S (NP Det N )NP )S (S V )S",  # two roots
        "Det (S V )S",  # a tag outside the root
        ")S",
        "",
    ]:
        assert read_tree(bad) is None, bad


def test_well_formed_needs_one_tag_per_word():
    assert is_well_formed(NP_TREE, NP_ATTACHED)
    assert not is_well_formed(NP_TREE, "the man saw the dog with the big hat")


def test_labelled_spans_count_constituents_not_tags():
    assert labelled_spans(read_tree(VP_TREE)) == {
        ("S", 0, 8): 1,
        ("NP", 0, 2): 1,
        ("VP", 2, 8): 1,
        ("NP", 3, 5): 1,
        ("PP", 5, 8): 1,
        ("NP", 6, 8): 1,
    }


def test_bracket_f1_of_a_known_pair():
    # gold: 7 brackets, NP(3, 8) among them; prediction: 6, all in the gold tree
    scores = bracket_scores([NP_ATTACHED], [NP_TREE], [VP_TREE])
    assert scores["precision"] == 1.0
    assert scores["recall"] == pytest.approx(6 / 7)
    assert scores["f1"] == pytest.approx(12 / 13)  # 2 * 1 * 6/7 / (1 + 6/7)
    assert scores["well_formed"] == 1.0


def test_a_malformed_prediction_counts_as_no_brackets():
    sources = [NP_ATTACHED, "a cat hit"]
    gold = [NP_TREE, "(S (NP Det N )NP (VP V )VP )S"]
    predicted = [VP_TREE, "(S (NP Det N )NP (VP V )VP"]
    scores = bracket_scores(sources, gold, predicted)
    # 6 matched of 6 predicted; 7 + 3 gold brackets
    assert scores["precision"] == 1.0
    assert scores["recall"] == pytest.approx(6 / 10)
    assert scores["f1"] == pytest.approx(0.75)
    assert scores["well_formed"] == 0.5


class NoEnd(torch.nn.Module):
    """An output projection that never lets a special token (end included) win."""

    def __init__(self, projection: torch.nn.Module):
        super().__init__()
        self.projection = projection

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.projection(hidden)
        target = PARSE.tgt_tokenizer
        logits[..., [target.pad_id, target.bos_id, target.eos_id]] = -1e4
        return logits


def test_the_task_decodes_up_to_input_length_plus_300():
    torch.manual_seed(0)
    config = small_model_config(
        max_positions=PARSE.source_lengths[-1] + EXTRA_LENGTH + 1
    )
    model = Transformer(config)
    # the end token never wins: every output runs to the limit
    model.output_projection = NoEnd(model.output_projection)
    sentences = ["a cat hit", "the dog saw a cat", "a man liked the hat"]
    for beam_size in (1, 2):
        predictions = predict(model, PARSE, sentences, beam_size=beam_size)
        assert [len(p.split()) for p in predictions] == [
            len(s.split()) + EXTRA_LENGTH for s in sentences
        ]
    batch = make_batch(PARSE, sentences)
    assert batch.src.size(1) == 6  # the longest, 5 words, and </s>


def test_the_command_line_trains_and_evaluates_the_parse_task_as_its_chapter(tmp_path):
    """The command line trains with the task's defaults (positions for input + 300)
    and evaluates as the chapter does: outputs up to input + 300, bracket F1, the
    numbers the library computes."""
    out = tmp_path / "parse.pt"
    train = [
        "train",
        "--task",
        "parse",
        "--steps",
        "2",
        "--batch-size",
        "4",
        "--eval-size",
        "4",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        str(out),
    ]
    status, printed = run_cli(train)
    assert status == 0 and "parse: 2 steps" in printed
    state = load_checkpoint(out)
    assert (
        state.config.model_config.max_positions == LONGEST_SENTENCE + EXTRA_LENGTH + 1
    )
    status, printed = run_cli(["evaluate", "--checkpoint", str(out), "--n", "6"])
    assert status == 0, printed
    assert f"outputs up to input length + {EXTRA_LENGTH}" in printed
    sentences = held_out_sources(PARSE, "test", 6)
    expected = evaluate(state.averaged_model(), PARSE, sentences)
    for name in ("exact_match", "f1", "precision", "recall", "well_formed"):
        line = f"{name.replace('_', ' ') + ':':16}{expected[name]:.4f}"
        assert line in printed.splitlines(), (line, printed)


def run_cli(args: list[str]) -> tuple[int, str]:
    """``python -m aiayn ARGS`` in this process: exit status, what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        status = main(args)
    return status, printed.getvalue()


def test_beam_search_without_the_k_finished_rule_never_scores_worse():
    """Same beams until the rule would stop; after that, only more candidates."""
    torch.manual_seed(1)
    config = small_model_config()
    model = Transformer(config).eval()
    batch = make_batch(PARSE, ["a cat hit", "the dog saw a cat", "a man liked the hat"])
    target = PARSE.tgt_tokenizer
    scores = {}
    for rule in (True, False):
        _, scores[rule] = beam_search(
            model,
            batch.src,
            batch.src_pad_id,
            target.bos_id,
            target.eos_id,
            30,
            beam_size=21,
            alpha=0.3,
            return_scores=True,
            stop_at_k_finished=rule,
        )
    assert (scores[False] >= scores[True] - 1e-6).all()
