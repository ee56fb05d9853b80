"""One encoder layer and one decoder layer, drawn with matplotlib (``draw_layers``): the
inside of the two stacks of the paper's Figure 1, in the boxes, colours and residual
paths of ``aiayn.book.architecture``, with the inputs, the memory and the queries, keys
and values of each attention named."""

from matplotlib.axes import Axes

from aiayn.book.architecture import draw_stack
from aiayn.book.plots import draw_arrow

# the sub-layers of a layer: (name, kind, whether it reads the encoder's output)
ENCODER_SUBLAYERS = (
    ("Self-Attention", "attention", False),
    ("Feed Forward", "ffn", False),
)
DECODER_SUBLAYERS = (
    ("Masked Self-Attention", "attention", False),
    ("Cross-Attention", "attention", True),
    ("Feed Forward", "ffn", False),
)
# the text column's width; the height keeps one line of 9-point text inside a box
LAYERS_FIGSIZE = (6.7, 3.4)
_LABEL = dict(ha="center", va="center", fontsize=9)


def draw_encoder_layer(ax: Axes, x: float, bottom: float) -> float:
    """The encoder layer centred at ``x``, its input entering at height ``bottom``:
    self-attention, then the feed-forward network, each with its residual path on the
    left into Add & Norm, in an 'N ×' frame. Returns the height of its output."""
    ax.text(x, bottom - 0.4, "source vectors (B, S, d_model)", **_LABEL)
    ax.plot([x, x], [bottom - 0.25, bottom], color="black", lw=1)
    return draw_stack(ax, x, ENCODER_SUBLAYERS, bottom=bottom, side=-1)


def draw_decoder_layer(
    ax: Axes, x: float, bottom: float, memory: tuple[float, float]
) -> float:
    """The decoder layer centred at ``x``, its input entering at height ``bottom``:
    masked self-attention, encoder-decoder attention (queries from below, keys and
    values from the point ``memory`` on the encoder's output line), the feed-forward
    network; residual paths on the right. Returns the height of its output."""
    ax.text(x, bottom - 0.4, "target, shifted right (B, T, d_model)", **_LABEL)
    ax.plot([x, x], [bottom - 0.25, bottom], color="black", lw=1)
    return draw_stack(ax, x, DECODER_SUBLAYERS, bottom=bottom, side=1, memory=memory)


def draw_layers(ax: Axes) -> Axes:
    """An encoder layer (left) and a decoder layer (right) on ``ax``, the encoder's
    output (the memory) running across to the keys and values of the decoder's
    encoder-decoder attention. Sets the limits, hides the axes; text of 8 points or
    more, for a figure of ``LAYERS_FIGSIZE``. Returns ``ax``."""
    ax.set_xlim(-0.2, 10.6)
    ax.set_ylim(0.4, 8.1)
    ax.axis("off")
    encoder_x, decoder_x, bottom = 2.3, 8.1, 1.0
    encoder_top = draw_encoder_layer(ax, encoder_x, bottom)
    memory = (5.75, encoder_top + 0.55)
    ax.plot([encoder_x, encoder_x, memory[0]], [encoder_top, *[memory[1]] * 2],
            color="black", lw=1)  # fmt: skip
    ax.text(memory[0] - 0.15, memory[1] - 1.1,
            "memory: keys\nand values of\nevery decoder\nlayer",
            ha="right", va="center", fontsize=9)  # fmt: skip
    decoder_top = draw_decoder_layer(ax, decoder_x, bottom, memory)
    draw_arrow(ax, (decoder_x, decoder_top), (decoder_x, decoder_top + 0.45))
    ax.text(decoder_x - 0.15, decoder_top + 0.3, "to Linear and Softmax", ha="right",
            va="center", fontsize=9)  # fmt: skip
    title = dict(ha="center", fontsize=11, weight="bold")
    ax.text(encoder_x, memory[1] + 0.35, "Encoder layer", **title)
    ax.text(decoder_x - 2.9, decoder_top - 0.4, "Decoder layer", **title)
    return ax
