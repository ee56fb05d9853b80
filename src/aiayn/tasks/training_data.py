"""Training sources drawn by length: the lengths of a batch's sources, for the tasks
whose training sources are drawn at random (the digit tasks, parsing).

A task draws a batch's lengths here (``draw_lengths``), then its sources of each length
its own way (``DigitTask.training_batch``, ``ParseTask.training_batch``).
"""

import torch
from torch import Tensor


def length_weights(
    lengths: Tensor, length_power: float, uniform_length_share: float = 0.0
) -> Tensor:
    """A weight per length: L**length_power, plus the same floor for every length, so
    that a share ``uniform_length_share`` of the draws has every length equally
    likely (none: the weights L**length_power themselves).

    0 gives every length the same chance; 1 gives a source of 10 tokens ten times the
    chance of a source of 1, so that long sources, where a digit can occur many times,
    are common.
    """
    powered = lengths.double() ** length_power
    share = uniform_length_share
    return powered + share / (1 - share) * powered.sum() / len(lengths)


def draw_lengths(
    source_lengths: range,
    n: int,
    generator: torch.Generator,
    length_power: float,
    uniform_length_share: float = 0.0,
) -> Tensor:
    """n lengths (n,) from ``source_lengths``, each with probability ∝
    ``length_weights``."""
    lengths = torch.tensor(source_lengths)
    weights = length_weights(lengths, length_power, uniform_length_share)
    return lengths[torch.multinomial(weights, n, replacement=True, generator=generator)]


def check_length_options(length_power: float, uniform_length_share: float) -> None:
    """Refuse length options ``draw_lengths`` cannot draw with, saying which."""
    if not 0.0 <= uniform_length_share < 1.0:
        raise ValueError(
            f"uniform_length_share={uniform_length_share} is not a share in [0, 1)"
        )
    if length_power < 0:
        raise ValueError(f"length_power={length_power} is negative")
