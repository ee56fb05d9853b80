"""Pictures of a model: attention maps and positional encodings, with matplotlib; and
the boxes and arrows of the book's redrawings of the paper's Figures 1 and 2 (the
whole of Figure 1: ``aiayn.book.architecture``).

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


def layer_maps(maps_per_layer: Sequence[Tensor]) -> list[Tensor]:
    """The (h, Q, K) maps of every layer on the CPU, or a ValueError if they are not
    one such tensor per layer, all of one shape."""
    maps = [torch.as_tensor(m).detach().cpu() for m in maps_per_layer]
    shapes = [tuple(m.shape) for m in maps]
    if not maps or any(m.dim() != 3 for m in maps):
        raise ValueError(
            f"need one (heads, queries, keys) tensor per layer, got shapes {shapes}"
        )
    if len(set(shapes)) != 1:
        raise ValueError(f"layers differ in shape: {shapes}")
    return maps


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
    maps = layer_maps(maps_per_layer)
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
