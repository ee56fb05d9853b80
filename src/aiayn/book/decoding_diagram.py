"""Greedy decoding step by step, drawn with matplotlib (``draw_decoding_steps``): one
row per step, from the prefix the decoder reads through the next token's probabilities
to the argmax, which is appended to the next row's prefix, until the end token."""

from collections.abc import Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from torch import Tensor

from aiayn.book.plots import COLUMN_INCHES, draw_arrow, draw_box

PREFIX_COLOUR, CHOSEN_COLOUR, BAR_COLOUR = "#9ec3e6", "#f28e2b", "#b0b0b0"
_PITCH, _BOX, _ROW, _BAR = 0.9, 0.8, 1.25, 0.3  # data units: token, box, row, bar


def _check_steps(
    chosen: Sequence[str], probabilities: Tensor, vocabulary: Sequence[str]
) -> None:
    """A ValueError unless there is one distribution per step over the vocabulary,
    whose argmax is the token that step chose."""
    if probabilities.shape != (len(chosen), len(vocabulary)):
        raise ValueError(
            f"probabilities of shape {tuple(probabilities.shape)} for "
            f"{len(chosen)} steps over {len(vocabulary)} tokens: "
            "need (steps, vocabulary)"
        )
    for step, (token, row) in enumerate(zip(chosen, probabilities, strict=True)):
        best = vocabulary[int(row.argmax())]
        if token != best:
            raise ValueError(
                f"step {step + 1} chose {token!r}, but its argmax is {best!r}"
            )


def _draw_bars(ax: Axes, x0: float, y: float, row: Tensor, best: int) -> None:
    """The probabilities of one step as bars standing on y - 0.4, the argmax's
    coloured, over a baseline."""
    ax.plot(
        [x0 - _BAR / 2, x0 + (len(row) - 0.5) * _BAR],
        [y - 0.4, y - 0.4],
        color="dimgrey",
        linewidth=0.8,
    )
    for i, p in enumerate(row.tolist()):
        colour = CHOSEN_COLOUR if i == best else BAR_COLOUR
        ax.bar(x0 + i * _BAR, 0.8 * p, width=0.8 * _BAR, bottom=y - 0.4, color=colour)


def _feed_back(ax: Axes, start: tuple[float, float], end: tuple[float, float]) -> None:
    """The appended token's way from one row's argmax to the next row's prefix,
    through the gap between the rows."""
    (x, y), (x_new, y_new) = start, end
    gap = (y + y_new) / 2
    draw_arrow(ax, (x, y - 0.4), (x, gap), (x_new, gap), (x_new, y_new + 0.4))


def _draw_row(
    ax: Axes, t: int, chosen: Sequence[str], row: Tensor, start: str, x: dict
) -> None:
    """Step t: the prefix it reads, its probabilities, its argmax ``chosen[t]``."""
    y = -t * _ROW
    for i, symbol in enumerate([start, *chosen[:t]]):
        colour = CHOSEN_COLOUR if 0 < i == t else PREFIX_COLOUR
        draw_box(ax, 0.5 + i * _PITCH, y, symbol, colour, width=_BOX, height=0.6)
    draw_arrow(ax, (0.5 + t * _PITCH, y), (x["bars"] - 0.4, y))
    _draw_bars(ax, x["bars"], y, row, int(row.argmax()))
    draw_arrow(ax, (x["bars"] + len(row) * _BAR, y), (x["chosen"] - 0.5, y))
    draw_box(ax, x["chosen"], y, chosen[t], CHOSEN_COLOUR, width=_BOX, height=0.6)
    ax.text(x["chosen"] + 0.55, y, f"p = {row.max():.2f}", va="center", fontsize=9)
    if t + 1 < len(chosen):
        _feed_back(ax, (x["chosen"], y), (0.5 + (t + 1) * _PITCH, y - _ROW))


def _draw_labels(ax: Axes, steps: int, vocabulary: Sequence[str], x: dict) -> None:
    """The column headings, the decoder and feed-back lines' names, the vocabulary
    under the last row's bars."""
    header = dict(ha="center", fontsize=9, weight="bold")
    middle = x["bars"] + (len(vocabulary) - 1) * _BAR / 2
    ax.text(0.5 + (steps - 1) * _PITCH / 2, 0.75, "prefix read", **header)
    ax.text(middle, 0.75, "next-token probabilities", **header)
    ax.text(x["chosen"], 0.75, "argmax", **header)
    name = dict(ha="center", va="center", fontsize=8, color="dimgrey")
    ax.text((0.5 + steps * _PITCH + x["bars"]) / 2, 0.3, "decoder", **name)
    if steps > 1:
        white = dict(facecolor="white", edgecolor="none", pad=1)
        ax.text(middle, -0.5 * _ROW, "append, feed back", bbox=white, **name)
    ticks = [x["bars"] + i * _BAR for i in range(len(vocabulary))]
    ax.set_xticks(ticks, list(vocabulary), rotation=90, fontsize=8)
    ax.tick_params(axis="x", length=0, pad=2)
    ax.set_yticks([])
    for side in ax.spines.values():
        side.set_visible(False)


def draw_decoding_steps(
    chosen: Sequence[str],
    probabilities: Tensor,
    vocabulary: Sequence[str],
    title: str = "",
    start: str = "<s>",
    end: str = "</s>",
) -> Figure:
    """Greedy decoding as a strip of steps, one row per step, top to bottom.

    Row t shows the prefix the decoder reads (``start`` and the tokens chosen so far,
    the newest in the chosen colour), the probabilities it gives every token of
    ``vocabulary`` (``probabilities[t]``, bars labelled under the last row), and the
    argmax, ``chosen[t]``, with its probability; a line carries it into the next row's
    prefix. After ``end`` the strip says "stop"; without it, that the length limit
    stopped it. A ValueError unless ``probabilities`` is (steps, vocabulary) and each
    row's argmax is the token chosen. Text of 8 points or more, as wide as the book's
    column. Returns the figure.
    """
    probabilities = torch.as_tensor(probabilities).detach().cpu().float()
    _check_steps(chosen, probabilities, vocabulary)
    steps = len(chosen)
    x = {"bars": 0.5 + steps * _PITCH + 1.4}  # the first bar's centre
    x["chosen"] = x["bars"] + len(vocabulary) * _BAR + 1.2
    fig, ax = plt.subplots(
        figsize=(COLUMN_INCHES, 0.43 * steps + 1.0), layout="constrained"
    )
    for t in range(steps):
        _draw_row(ax, t, chosen, probabilities[t], start, x)
    _draw_labels(ax, steps, vocabulary, x)
    last = -(steps - 1) * _ROW
    stop = "stop" if chosen[-1] == end else "stop: length limit"
    ax.text(x["chosen"], last - 0.45, stop, ha="center", va="top", weight="bold")
    ax.set_xlim(0.0, x["chosen"] + 2.0)
    ax.set_ylim(last - 0.55, 1.05)
    if title:
        ax.set_title(title, fontsize=10)
    return fig
