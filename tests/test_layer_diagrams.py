"""aiayn.book.layer_diagrams: both layers drawn, every sub-layer named, the text
readable and inside the figure."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from aiayn.book.layer_diagrams import LAYERS_FIGSIZE, draw_layers  # noqa: E402


def test_both_layers_have_their_sublayers_in_readable_text():
    fig = plt.figure(figsize=LAYERS_FIGSIZE)
    ax = fig.add_axes((0, 0, 1, 1))
    try:
        assert draw_layers(ax) is ax and not ax.axison
        texts = [t.get_text() for t in ax.texts]
        # encoder: self-attention, FFN; decoder: masked self-attention, cross, FFN
        assert texts.count("Add & Norm") == 5
        assert texts.count("Feed Forward") == 2
        for name in ["Self-Attention", "Masked Self-Attention", "Cross-Attention"]:
            assert texts.count(name) == 1, name
        assert texts.count("N ×") == 2
        for name in ["Encoder layer", "Decoder layer", "to Linear and Softmax"]:
            assert texts.count(name) == 1, name
        assert any(t.startswith("memory") for t in texts)
        assert any(t.startswith("source vectors") for t in texts)
        assert any(t.startswith("target, shifted right") for t in texts)
        # three attentions, each labelled V, K, Q
        assert "".join(t for t in texts if t in "VKQ") == "VKQ" * 3
        # 8 points at the book's 100 dpi: 11 px, shown at that size in the text column
        assert min(t.get_fontsize() for t in ax.texts) >= 8
        fig.canvas.draw()
        frame = fig.bbox
        for text in ax.texts:
            box = text.get_window_extent()
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1, text.get_text()
            assert frame.y0 <= box.y0 and box.y1 <= frame.y1, text.get_text()
    finally:
        plt.close(fig)
