"""Pictures of a model: attention maps and positional encodings, with matplotlib; and
the boxes and arrows of the book's redrawings of the paper's Figures 1 and 2, and the
whole of Figure 1 (``draw_transformer``).

Attention pictures follow one convention: rows are queries, columns are keys, tick
labels are the tokens, and the colour scale runs from 0 to 1 (every row of attention
weights sums to 1).
"""

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from torch import Tensor

# the width of the book's text column at a 1280-px window, in inches at 100 dpi
COLUMN_INCHES = 6.7


def plot_attention(
    weights: Tensor,
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    ax: Axes | None = None,
    title: str | None = None,
    colorbar: bool = True,
) -> Axes:
    """One attention map (Q, K) as a heatmap: rows = queries, columns = keys.

    Returns the Axes; its image is ``ax.images[0]``. The tokens label the rows and
    columns, so their counts must match the shape of ``weights``.
    """
    weights = torch.as_tensor(weights).detach().cpu()
    if weights.dim() != 2:
        raise ValueError(
            f"weights must be (queries, keys), got shape {tuple(weights.shape)}"
        )
    n_queries, n_keys = weights.shape
    if len(query_labels) != n_queries or len(key_labels) != n_keys:
        raise ValueError(
            f"{len(query_labels)} query labels and {len(key_labels)} key labels for "
            "weights "
            f"of shape {tuple(weights.shape)} (queries, keys)"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(0.4 * n_keys + 1.5, 0.4 * n_queries + 1))
    image = ax.imshow(
        weights.numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto"
    )
    ax.set_xticks(range(n_keys), list(key_labels), rotation=90)
    ax.set_yticks(range(n_queries), list(query_labels))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    if title is not None:
        ax.set_title(title)
    if colorbar:
        ax.figure.colorbar(
            image, ax=ax, fraction=0.046, pad=0.04, label="attention weight"
        )
    return ax


def plot_attention_grid(
    maps_per_layer: Sequence[Tensor],
    query_labels: Sequence[str],
    key_labels: Sequence[str],
    title: str | None = None,
    cell_size: float = 2.4,
) -> Figure:
    """Every layer (rows of the grid) and head (columns) of one kind of attention.

    ``maps_per_layer`` holds one (h, Q, K) tensor per layer, for a single example,
    e.g. ``[w[0] for w in attention_maps(model, src, tgt)["cross"]]``. One colorbar
    serves the whole grid.
    """
    maps = [torch.as_tensor(m).detach().cpu() for m in maps_per_layer]
    if not maps or any(m.dim() != 3 for m in maps):
        shapes = [tuple(m.shape) for m in maps]
        raise ValueError(
            f"need one (heads, queries, keys) tensor per layer, got shapes {shapes}"
        )
    if len({m.shape for m in maps}) != 1:
        raise ValueError(f"layers differ in shape: {[tuple(m.shape) for m in maps]}")
    n_layers, n_heads = len(maps), maps[0].size(0)
    # no wider than the book's text column (6.7 in at 100 dpi is 670 px): text shown
    # at the size it was drawn
    cell_size = min(cell_size, (COLUMN_INCHES - 1.2) / n_heads)
    fig, axes = plt.subplots(
        n_layers,
        n_heads,
        figsize=(cell_size * n_heads + 1.2, cell_size * n_layers + 0.6),
        squeeze=False,
        layout="constrained",
    )
    for layer, weights in enumerate(maps):
        for head in range(n_heads):
            ax = plot_attention(
                weights[head],
                query_labels,
                key_labels,
                ax=axes[layer, head],
                colorbar=False,
            )
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=9)
            ax.tick_params(labelsize=8)
            if head > 0:
                ax.set_ylabel("")
            if layer < n_layers - 1:
                ax.set_xlabel("")
    fig.colorbar(axes[0, 0].images[0], ax=axes, shrink=0.6, label="attention weight")
    if title is not None:
        fig.suptitle(title)
    return fig


def plot_positional_encoding(
    pe: Tensor,
    ax: Axes | None = None,
    title: str | None = "Sinusoidal positional encoding",
) -> Axes:
    """A (positions, d_model) encoding as a heatmap, values in [-1, 1].

    One row per position, one column per dimension, on a diverging colour scale.
    """
    pe = torch.as_tensor(pe).detach().cpu()
    if pe.dim() != 2:
        raise ValueError(
            f"pe must be (positions, d_model), got shape {tuple(pe.shape)}"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(COLUMN_INCHES, 3.2))
    limit = max(1.0, float(pe.abs().max()))
    image = ax.imshow(pe.numpy(), cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    ax.set_xlabel("dimension i")
    ax.set_ylabel("position pos")
    if title is not None:
        ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, label="value")
    return ax


def draw_box(
    ax: Axes,
    x: float,
    y: float,
    text: str,
    colour: str,
    width: float,
    height: float = 0.42,
    dashed: bool = False,
    copies: int = 1,
) -> None:
    """A labelled, rounded box centred at (x, y), in data coordinates.

    ``copies`` > 1 draws that many boxes offset up and to the right, like a stack of
    cards: the paper's way of drawing one box per attention head.
    """
    for copy in reversed(range(copies)):
        offset = 0.07 * copy
        box = FancyBboxPatch(
            (x - width / 2 + offset, y - height / 2 + offset),
            width,
            height,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=colour,
            edgecolor="black",
            linewidth=1,
            linestyle="--" if dashed else "-",
            zorder=2,
        )
        ax.add_patch(box)
    ax.text(x, y, text, ha="center", va="center", fontsize=9, zorder=3)


def draw_arrow(ax: Axes, *points: tuple[float, float]) -> None:
    """A line through ``points`` (at least two), with an arrowhead at the last one."""
    if len(points) < 2:
        raise ValueError(f"an arrow needs at least 2 points, got {len(points)}")
    xs, ys = zip(*points, strict=True)
    ax.plot(xs[:-1], ys[:-1], color="black", linewidth=1, zorder=1)
    head = FancyArrowPatch(
        points[-2], points[-1], arrowstyle="-|>", mutation_scale=10, linewidth=1
    )
    ax.add_patch(head)


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
    ``side`` (-1 left, +1 right). Attention gets three inputs, V, K, Q from left to
    right; with ``memory`` (a point on the encoder's output line) V and K come from
    there. The input arrives at (x, y - 0.8); returns the top of Add & Norm."""
    bottom, norm_y, split = y - _BOX_HEIGHT / 2, y + 0.8, y - 0.8
    branch = split + 0.2  # height of the horizontal branches to V, K, Q
    if kind == "attention":
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
                    ax,
                    (x, split),
                    (x, branch),
                    (x + offset, branch),
                    (x + offset, bottom),
                )
        if memory is not None:
            level = branch + 0.17
            mx, my = memory
            ax.plot([mx, mx, x - 0.7], [my, level, level], color="black", lw=1)
            draw_arrow(ax, (x - 0.7, level), (x - 0.7, bottom))
            draw_arrow(ax, (x - 0.7, level), (x, level), (x, bottom))
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


def _draw_stack(
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

    encoder_top = _draw_stack(
        ax,
        encoder_x,
        [("Multi-Head\nAttention", "attention", False), ("Feed Forward", "ffn", False)],
        bottom=2.55,
        side=-1,
    )
    ax.plot(
        [encoder_x, encoder_x], [encoder_top, encoder_top + 0.6], color="black", lw=1
    )
    # the encoder's output runs across to the decoder's second attention
    memory = (5.0, encoder_top + 0.6)
    ax.plot([encoder_x, memory[0]], [memory[1], memory[1]], color="black", lw=1)
    decoder_top = _draw_stack(
        ax,
        decoder_x,
        [
            ("Masked Multi-Head\nAttention", "attention", False),
            ("Multi-Head\nAttention", "attention", True),
            ("Feed Forward", "ffn", False),
        ],
        bottom=2.55,
        side=1,
        memory=memory,
    )
    _draw_outputs(ax, decoder_x, decoder_top)
    ax.text(
        encoder_x,
        encoder_top + 0.95,
        "Encoder",
        ha="center",
        fontsize=12,
        weight="bold",
    )
    ax.text(
        decoder_x - 2.6,
        decoder_top - 0.3,
        "Decoder",
        ha="center",
        fontsize=12,
        weight="bold",
    )
    ax.set_ylim(-0.3, decoder_top + 2.3)
    return ax
