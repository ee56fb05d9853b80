"""Multi-head attention, after Figure 2 (right) of the paper, drawn with matplotlib
(``draw_multi_head_attention``): the boxes and arrows of ``aiayn.book.plots``, read
bottom to top, with the shape (or the matrices) of each step written on the left."""

from matplotlib.axes import Axes

from aiayn.book.plots import draw_arrow, draw_box


def draw_multi_head_attention(ax: Axes, copies: int = 3) -> Axes:
    """Multi-head attention, after Figure 2 (right) of the paper, drawn on ``ax``.

    V, K and Q each pass through a stack of Linear boxes (the h projections) into a
    stack of Scaled Dot-Product Attention boxes (the h heads), then Concat and a final
    Linear (W^O). ``copies`` cards are drawn per stacked box; they stand for h. Sets the
    axes' limits and hides them; it fits a figure 6.7 inches wide and 3.1 tall, its text
    9 points or more. Returns ``ax``.
    """
    ax.set_xlim(-3.6, 3.4)
    ax.set_ylim(-0.25, 4.5)
    ax.axis("off")

    def note(y: float, text: str) -> None:
        """The shape (or the matrices) of one step, written left of the diagram."""
        ax.text(-0.55, y, text, ha="right", va="center", fontsize=10, color="dimgrey")

    for name, x in {"V": 0.0, "K": 1.1, "Q": 2.2}.items():
        ax.text(x, 0.0, name, ha="center", va="center", fontsize=11, weight="bold")
        draw_arrow(ax, (x, 0.2), (x, 0.79))
        draw_box(ax, x, 1.0, "Linear", "#d8d3ee", width=0.85, copies=copies)
        draw_arrow(ax, (x, 1.21), (x, 1.66))
    note(0.0, r"each $T \times d_{\mathrm{model}}$")
    note(1.0, "$h$ projections each:\n" r"$W^V_i, W^K_i, W^Q_i$ to $d_v, d_k, d_k$")
    attention = "Scaled Dot-Product\nAttention"
    draw_box(ax, 1.1, 2.0, attention, "#fbe3b8", width=2.9, height=0.62, copies=copies)
    ax.text(2.85, 2.0, r"$h$", fontsize=11, va="center")
    note(2.0, r"$h$ heads in parallel: $T \times d_v$ each")
    draw_arrow(ax, (1.1, 2.31), (1.1, 2.69))
    draw_box(ax, 1.1, 2.9, "Concat", "#f5f1a6", width=1.6)
    note(2.9, r"$T \times h d_v$ $(= d_{\mathrm{model}})$")
    draw_arrow(ax, (1.1, 3.11), (1.1, 3.59))
    draw_box(ax, 1.1, 3.8, "Linear", "#d8d3ee", width=1.6)
    note(3.8, r"$W^O$: $T \times d_{\mathrm{model}}$ output")
    draw_arrow(ax, (1.1, 4.01), (1.1, 4.45))
    return ax
