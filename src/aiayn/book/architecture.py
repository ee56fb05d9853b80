"""The Transformer, after Figure 1 of the paper, drawn with matplotlib
(``draw_transformer``): the boxes and arrows of ``aiayn.book.plots``, laid out as the
paper lays them out."""

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import FancyBboxPatch

from aiayn.book.plots import draw_arrow, draw_box

# The book's redrawing of the paper's Figure 1: colours by kind of box, sizes in data
# units of an axes that draw_transformer sets up itself.
TRANSFORMER_COLOURS = {
    "attention": "#fbe3b8",
    "norm": "#f5f1a6",
    "ffn": "#c9e7f2",
    "embedding": "#f6c9c9",
    "output": "#d8d3ee",
}
_BOX_WIDTH, _BOX_HEIGHT = 2.6, 0.55


def _draw_part(ax: Axes, x: float, y: float, text: str, kind: str, height=_BOX_HEIGHT):
    """One box of the architecture, coloured by its kind."""
    draw_box(ax, x, y, text, TRANSFORMER_COLOURS[kind], width=_BOX_WIDTH, height=height)


def _draw_sublayer(
    ax: Axes,
    x: float,
    y: float,
    name: str,
    kind: str,
    side: int,
    memory: tuple[float, float] | None = None,
) -> float:
    """Sub-layer box at y, Add & Norm above it, the residual path around it on
    ``side`` (-1 left, +1 right); an attention's inputs as ``_draw_attention_inputs``
    draws them. The input arrives at (x, y - 0.8); returns the top of Add & Norm."""
    bottom, norm_y, split = y - _BOX_HEIGHT / 2, y + 0.8, y - 0.8
    if kind == "attention":
        _draw_attention_inputs(ax, x, bottom, split, memory)
    else:
        draw_arrow(ax, (x, split), (x, bottom))
    _draw_part(ax, x, y, name, kind)
    _draw_part(ax, x, norm_y, "Add & Norm", "norm", height=0.4)
    draw_arrow(ax, (x, y + _BOX_HEIGHT / 2), (x, norm_y - 0.2))
    edge = x + side * (_BOX_WIDTH / 2 + 0.22)
    draw_arrow(
        ax,
        (x, split),
        (x + side * 0.05, split),
        (edge, split),
        (edge, norm_y),
        (x + side * _BOX_WIDTH / 2, norm_y),
    )
    return norm_y + 0.2


def _draw_attention_inputs(
    ax: Axes,
    x: float,
    bottom: float,
    split: float,
    memory: tuple[float, float] | None,
) -> None:
    """An attention box's three inputs V, K, Q from left to right, into its bottom:
    each a branch of the input line, which splits at height ``split``; with
    ``memory`` (a point on the encoder's output line) V and K come from there."""
    branch = split + 0.2  # height of the horizontal branches to V, K, Q
    own = "Q" if memory is not None else "VKQ"
    for offset, label in zip((-0.7, 0.0, 0.7), "VKQ", strict=True):
        ax.text(
            x + offset + 0.07,
            bottom - 0.17,
            label,
            fontsize=8,
            color="dimgrey",
            va="center",
        )
        if label in own:
            draw_arrow(
                ax, (x, split), (x, branch), (x + offset, branch), (x + offset, bottom)
            )
    if memory is not None:
        level = branch + 0.17
        mx, my = memory
        ax.plot([mx, mx, x - 0.7], [my, level, level], color="black", lw=1)
        draw_arrow(ax, (x - 0.7, level), (x - 0.7, bottom))
        draw_arrow(ax, (x - 0.7, level), (x, level), (x, bottom))


def draw_stack(
    ax: Axes,
    x: float,
    sublayers: Sequence[tuple[str, str, bool]],
    bottom: float,
    side: int,
    memory: tuple[float, float] | None = None,
) -> float:
    """The sub-layers (name, kind, whether it reads the memory) of one layer, stacked,
    in an 'N ×' frame; the input line enters at (x, bottom). Returns the top of the
    last Add & Norm."""
    y = bottom + 0.8
    for name, kind, uses_memory in sublayers:
        top = _draw_sublayer(
            ax, x, y, name, kind, side, memory if uses_memory else None
        )
        below = y - 1.3 if y > bottom + 0.8 else bottom
        ax.plot([x, x], [below, y - 0.8], color="black", lw=1)
        y = top + 1.3
    frame_bottom, frame_top = bottom - 0.15, top + 0.15
    ax.add_patch(
        FancyBboxPatch(
            (x - 1.75, frame_bottom),
            3.5,
            frame_top - frame_bottom,
            boxstyle="round,pad=0.02,rounding_size=0.2",
            facecolor="#f2f2f2",
            edgecolor="grey",
            linewidth=1,
            zorder=0,
        )
    )
    ax.text(
        x + side * 1.9,
        (frame_bottom + frame_top) / 2,
        "N ×",
        fontsize=10,
        va="center",
        ha="right" if side < 0 else "left",
    )
    return top


def _draw_inputs(ax: Axes, x: float, inputs: str, embedding: str, side: int) -> None:
    """The bottom of one side: its inputs, their embedding and the positional
    encoding added to it (labelled on ``side``), up to the stack at height 2.55."""
    ax.text(x, 0.0, inputs, ha="center", va="center", fontsize=9)
    draw_arrow(ax, (x, 0.15), (x, 0.62))
    _draw_part(ax, x, 0.9, embedding, "embedding")
    ax.text(
        x + side * 0.45,
        1.75,
        "Positional\nEncoding",
        ha="right" if side < 0 else "left",
        va="center",
        fontsize=9,
    )
    ax.add_patch(
        plt.Circle((x, 1.75), 0.16, facecolor="white", edgecolor="black", zorder=2)
    )
    ax.text(x, 1.75, "+", ha="center", va="center", fontsize=11, zorder=3)
    draw_arrow(ax, (x, 1.18), (x, 1.59))
    ax.plot([x, x], [1.91, 2.55], color="black", linewidth=1)


def _draw_outputs(ax: Axes, x: float, top: float) -> None:
    """Linear and Softmax above the decoder's last Add & Norm (at ``top``)."""
    _draw_part(ax, x, top + 0.7, "Linear", "output", height=0.4)
    _draw_part(ax, x, top + 1.35, "Softmax", "output", height=0.4)
    draw_arrow(ax, (x, top), (x, top + 0.5))
    draw_arrow(ax, (x, top + 0.9), (x, top + 1.15))
    draw_arrow(ax, (x, top + 1.55), (x, top + 1.85))
    ax.text(x, top + 2.0, "Output Probabilities", ha="center", fontsize=9)


# the sub-layers of a layer: (name, kind, whether it reads the encoder's output)
ENCODER_LAYER = (
    ("Multi-Head\nAttention", "attention", False),
    ("Feed Forward", "ffn", False),
)
DECODER_LAYER = (
    ("Masked Multi-Head\nAttention", "attention", False),
    ("Multi-Head\nAttention", "attention", True),
    ("Feed Forward", "ffn", False),
)


def draw_transformer(ax: Axes) -> Axes:
    """The Transformer, after Figure 1 of the paper, drawn on ``ax``.

    The encoder stack on the left, the decoder stack on the right, each in an 'N ×'
    frame; a residual path around every sub-layer into its Add & Norm; every attention
    with its three inputs V, K, Q, the decoder's second attention taking V and K from
    the encoder's output. Sets the axes' limits and hides them. Its text is 8 points or
    more; it fits a figure 6.7 inches wide and about 8.5 tall (``layout="constrained"``
    lets the drawing fill it). Returns ``ax``.
    """
    ax.set_xlim(0.0, 10.0)
    ax.axis("off")
    encoder_x, decoder_x = 2.5, 7.5
    _draw_inputs(ax, encoder_x, "Inputs", "Input Embedding", side=-1)
    _draw_inputs(ax, decoder_x, "Outputs (shifted right)", "Output Embedding", side=1)
    encoder_top = draw_stack(ax, encoder_x, ENCODER_LAYER, bottom=2.55, side=-1)
    ax.plot(
        [encoder_x, encoder_x], [encoder_top, encoder_top + 0.6], color="black", lw=1
    )
    # the encoder's output runs across to the decoder's second attention
    memory = (5.0, encoder_top + 0.6)
    ax.plot([encoder_x, memory[0]], [memory[1], memory[1]], color="black", lw=1)
    decoder_top = draw_stack(
        ax, decoder_x, DECODER_LAYER, bottom=2.55, side=1, memory=memory
    )
    _draw_outputs(ax, decoder_x, decoder_top)
    title = dict(ha="center", fontsize=12, weight="bold")
    ax.text(encoder_x, encoder_top + 0.95, "Encoder", **title)
    ax.text(decoder_x - 2.6, decoder_top - 0.3, "Decoder", **title)
    ax.set_ylim(-0.3, decoder_top + 2.3)
    return ax
