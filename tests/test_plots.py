"""aiayn.book.plots and aiayn.book.architecture: pictures of the right size and
labels; bad input fails clearly."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from aiayn import sinusoidal_encoding  # noqa: E402
from aiayn.book.architecture import draw_transformer  # noqa: E402
from aiayn.book.plots import (  # noqa: E402
    draw_arrow,
    draw_box,
    plot_attention,
    plot_attention_grid,
    plot_positional_encoding,
)


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def labels(ax, axis):
    ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in ticks]


def test_attention_rows_are_queries_columns_are_keys():
    weights = torch.rand(3, 5).softmax(dim=-1)
    ax = plot_attention(weights, ["a", "b", "c"], ["1", "2", "3", "4", "5"], title="t")
    assert ax.images[0].get_array().shape == (3, 5)
    assert labels(ax, "y") == ["a", "b", "c"]
    assert labels(ax, "x") == ["1", "2", "3", "4", "5"]
    assert (
        ax.get_xlabel() == "key"
        and ax.get_ylabel() == "query"
        and ax.get_title() == "t"
    )
    assert ax.images[0].get_clim() == (0.0, 1.0)
    assert len(ax.figure.axes) == 2  # the map and its colorbar


def test_attention_draws_on_given_axes_without_colorbar():
    fig, ax = plt.subplots()
    returned = plot_attention(
        torch.eye(2), ["x", "y"], ["x", "y"], ax=ax, colorbar=False
    )
    assert returned is ax and len(fig.axes) == 1


@pytest.mark.parametrize(
    "queries, keys, message",
    [
        (["a", "b"], ["1", "2", "3", "4", "5"], "2 query labels"),
        (["a", "b", "c"], ["1", "2"], "2 key labels"),
    ],
)
def test_attention_label_count_mismatch(queries, keys, message):
    with pytest.raises(ValueError, match=message):
        plot_attention(torch.rand(3, 5), queries, keys)


def test_attention_needs_a_matrix():
    with pytest.raises(ValueError, match=r"must be \(queries, keys\)"):
        plot_attention(torch.rand(2, 3, 5), ["a"] * 3, ["b"] * 5)


def test_grid_has_a_map_per_layer_and_head():
    maps = [torch.rand(4, 3, 6).softmax(dim=-1) for _ in range(2)]  # 2 layers, 4 heads
    fig = plot_attention_grid(maps, list("abc"), list("uvwxyz"), title="cross")
    images = [ax for ax in fig.axes if ax.images and ax.get_label() != "<colorbar>"]
    assert len(images) == 8
    assert len(fig.axes) == 9  # 8 maps and one shared colorbar
    for ax in images:
        assert ax.images[0].get_array().shape == (3, 6)
        assert labels(ax, "y") == list("abc") and labels(ax, "x") == list("uvwxyz")
    assert images[5].get_title() == "layer 2, head 2"
    assert fig.get_suptitle() == "cross"


def test_grid_rejects_bad_shapes_and_labels():
    with pytest.raises(
        ValueError, match="one \\(heads, queries, keys\\) tensor per layer"
    ):
        plot_attention_grid([torch.rand(3, 6)], list("abc"), list("uvwxyz"))
    with pytest.raises(ValueError, match="layers differ"):
        plot_attention_grid(
            [torch.rand(2, 3, 6), torch.rand(2, 3, 5)], list("abc"), list("uvwxy")
        )
    with pytest.raises(ValueError, match="3 key labels"):
        plot_attention_grid([torch.rand(2, 3, 6)], list("abc"), list("uvw"))


def test_positional_encoding_heatmap():
    pe = sinusoidal_encoding(20, 16)
    ax = plot_positional_encoding(pe)
    assert ax.images[0].get_array().shape == (20, 16)
    assert ax.get_xlabel() == "dimension i" and ax.get_ylabel() == "position pos"
    assert ax.images[0].get_clim() == (-1.0, 1.0)
    with pytest.raises(ValueError, match="positions, d_model"):
        plot_positional_encoding(pe[0])


def test_a_stacked_box_draws_one_card_per_copy_and_one_label():
    fig, ax = plt.subplots()
    draw_box(ax, 1.0, 2.0, "Linear", "#d8d3ee", width=0.8, copies=3)
    assert len(ax.patches) == 3 and [t.get_text() for t in ax.texts] == ["Linear"]
    front = ax.patches[-1]  # drawn last, on top: centred where asked
    assert front.get_x() + front.get_width() / 2 == pytest.approx(1.0)
    assert front.get_y() + front.get_height() / 2 == pytest.approx(2.0)


def test_an_arrow_runs_through_its_points_and_ends_in_a_head():
    fig, ax = plt.subplots()
    draw_arrow(ax, (0, 0), (0, 1), (2, 1))
    (line,) = ax.lines
    assert list(line.get_xdata()) == [0, 0] and list(line.get_ydata()) == [0, 1]
    assert len(ax.patches) == 1  # the head, from (0, 1) to (2, 1)
    with pytest.raises(ValueError, match="at least 2 points"):
        draw_arrow(ax, (0, 0))


def test_the_transformer_has_every_box_of_figure_1_in_readable_text():
    fig, ax = plt.subplots(figsize=(6.7, 8.6), layout="constrained")
    assert draw_transformer(ax) is ax and not ax.axison
    texts = [t.get_text() for t in ax.texts]
    # encoder: attention, FFN; decoder: masked attention, cross-attention, FFN
    assert texts.count("Add & Norm") == 5
    assert texts.count("Feed Forward") == 2
    assert texts.count("Multi-Head\nAttention") == 2
    assert texts.count("Masked Multi-Head\nAttention") == 1
    assert texts.count("N ×") == 2 and texts.count("Positional\nEncoding") == 2
    for name in [
        "Input Embedding",
        "Output Embedding",
        "Linear",
        "Softmax",
        "Inputs",
        "Outputs (shifted right)",
        "Output Probabilities",
        "Encoder",
        "Decoder",
    ]:
        assert texts.count(name) == 1, name
    # three attentions, each labelled V, K, Q
    assert "".join(t for t in texts if t in "VKQ") == "VKQ" * 3
    assert min(t.get_fontsize() for t in ax.texts) >= 8
    # every text inside the axes, which fill a figure no wider than the text column
    fig.canvas.draw()
    frame = ax.get_window_extent()
    for text in ax.texts:
        box = text.get_window_extent()
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, text.get_text()
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, text.get_text()
