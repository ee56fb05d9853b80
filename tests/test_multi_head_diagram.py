"""aiayn.book.multi_head_diagram: the redrawing of the paper's Figure 2 (right) has its
boxes, labels and stacked copies."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from aiayn.book.multi_head_diagram import draw_multi_head_attention  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_multi_head_attention_has_the_papers_boxes():
    _, ax = plt.subplots(figsize=(6.7, 3.1))
    assert draw_multi_head_attention(ax) is ax and not ax.axison
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("Linear") == 4  # W^V, W^K, W^Q stacks and W^O
    assert texts.count("Scaled Dot-Product\nAttention") == 1
    assert texts.count("Concat") == 1
    for name in ["V", "K", "Q", "$h$"]:
        assert name in texts
    assert min(t.get_fontsize() for t in ax.texts) >= 9  # readable at the page's width


def test_copies_stack_the_boxes():
    _, one = plt.subplots()
    _, five = plt.subplots()
    draw_multi_head_attention(one, copies=1)
    draw_multi_head_attention(five, copies=5)
    assert len(five.patches) > len(one.patches)
