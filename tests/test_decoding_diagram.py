"""aiayn.book.decoding_diagram: one row per decoding step, the argmax of each step's
probabilities carried into the next row's prefix; inconsistent steps fail clearly."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from aiayn.book.decoding_diagram import draw_decoding_steps  # noqa: E402

VOCABULARY = ["<pad>", "<s>", "</s>", "a", "b"]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def steps(chosen):
    """Probabilities that put 0.7 on each chosen token and 0.1 on three others."""
    probabilities = torch.full((len(chosen), len(VOCABULARY)), 0.1)
    probabilities[:, 0] = 0.0
    for t, token in enumerate(chosen):
        probabilities[t, VOCABULARY.index(token)] = 0.7
    return probabilities


def test_every_step_reads_the_prefix_so_far_and_chooses_its_argmax():
    chosen = ["a", "b", "</s>"]
    fig = draw_decoding_steps(chosen, steps(chosen), VOCABULARY, title="t")
    (ax,) = fig.axes
    texts = [t.get_text() for t in ax.texts]
    # prefixes <s>; <s> a; <s> a b, and the chosen tokens a, b, </s>
    assert texts.count("<s>") == 3 and texts.count("a") == 3
    assert texts.count("b") == 2 and texts.count("</s>") == 1
    assert texts.count("p = 0.70") == 3 and "stop" in texts
    assert len(ax.patches) >= 3 * len(VOCABULARY)  # a bar per token and step
    assert [t.get_text() for t in ax.get_xticklabels()] == VOCABULARY
    assert min(t.get_fontsize() for t in ax.texts) >= 8  # readable in the column


def test_a_strip_without_the_end_token_stopped_at_the_length_limit():
    chosen = ["a", "a"]
    (ax,) = draw_decoding_steps(chosen, steps(chosen), VOCABULARY).axes
    assert "stop: length limit" in [t.get_text() for t in ax.texts]


def test_steps_that_do_not_fit_the_probabilities_fail_clearly():
    with pytest.raises(ValueError, match=r"need \(steps, vocabulary\)"):
        draw_decoding_steps(["a"], steps(["a", "b"]), VOCABULARY)
    with pytest.raises(ValueError, match="step 2 chose 'a', but its argmax is 'b'"):
        draw_decoding_steps(["a", "a"], steps(["a", "b"]), VOCABULARY)
