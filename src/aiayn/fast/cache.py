"""The key/value cache of incremental decoding: what the decoder keeps between steps."""

from dataclasses import dataclass, field

from torch import Tensor


@dataclass(frozen=True)
class LayerCache:
    """What one decoder layer keeps between decoding steps, for a batch of B sequences.

    The self-attention keys and values of the t positions decoded so far grow by one
    position a step; the encoder memory's keys and values are projected once.
    """

    keys: Tensor  # (B, h, t, d_k)
    values: Tensor  # (B, h, t, d_v)
    memory_keys: Tensor  # (B, h, S, d_k)
    memory_values: Tensor  # (B, h, S, d_v)


@dataclass(frozen=True)
class DecoderCache:
    """The key/value cache of a whole decoder: one LayerCache per decoder layer.

    ``aiayn.fast.transformer.decode`` takes one (a new, empty ``DecoderCache()`` at
    first) and returns another, which holds the new positions too; each call's target
    holds only the positions after ``length``. A cache is never changed in place.
    """

    layers: list[LayerCache] = field(default_factory=list)

    @property
    def length(self) -> int:
        """How many target positions are cached (0 for a new cache)."""
        return self.layers[0].keys.size(-2) if self.layers else 0

    def select(self, rows: Tensor) -> "DecoderCache":
        """The cache of batch rows ``rows`` (B',) in that order; rows may repeat."""
        return DecoderCache(
            [
                LayerCache(
                    layer.keys[rows],
                    layer.values[rows],
                    layer.memory_keys[rows],
                    layer.memory_values[rows],
                )
                for layer in self.layers
            ]
        )
