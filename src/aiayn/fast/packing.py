"""Packing: the position-wise layers of a training step skip the padding positions.

Every layer of the Transformer but attention works on each position alone: the
projections, the feed-forward network, the residual sums, LayerNorm, dropout. On a
padded batch their work at the padding positions is wasted: no query attends to a
padding key, and the loss ignores padding targets. Packing keeps only the real
positions, (B, T, ...) -> (N, ...); attention, which needs the (B, T) layout, unpacks
its inputs (zeros at the padding) and packs its output again.
"""

from dataclasses import dataclass

from torch import Tensor


@dataclass(frozen=True)
class Packing:
    """Where the N real positions of a (B, T) batch lie: ``index`` (N,) into B * T."""

    index: Tensor  # (N,) flat positions b * T + t, increasing
    batch_size: int  # B
    length: int  # T

    @classmethod
    def from_mask(cls, mask: Tensor) -> "Packing":
        """The positions that some query may attend to: mask (B, T or 1, T) -> Packing.

        A key that no query may see (a column of False) is padding: its value is never
        read. For target_mask that column belongs to a position that may not attend
        even to itself. Finding the positions makes the host wait for the device (the
        count N decides a shape), so the model packs on the CPU only.
        """
        seen = mask.any(dim=-2)  # (B, T): attended by some query
        return cls(seen.flatten().nonzero().squeeze(1), *seen.shape)

    def pack(self, x: Tensor) -> Tensor:
        """(B, T, ...) -> (N, ...): the real positions, in order."""
        return x.flatten(0, 1).index_select(0, self.index)

    def unpack(self, x: Tensor) -> Tensor:
        """(N, ...) -> (B, T, ...), zeros at the padding positions."""
        padded = x.new_zeros(self.batch_size * self.length, *x.shape[1:])
        padded.index_copy_(0, self.index, x)  # in place: no copy of the zeros
        return padded.unflatten(0, (self.batch_size, self.length))
