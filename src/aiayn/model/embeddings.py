"""Token embeddings (§3.4) and positional encodings (§3.5)."""

import math

import torch
from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    """Learned embedding times sqrt(d_model): (B, S) token ids -> (B, S, d_model).

    An id outside [0, vocab_size) is caught by nn.Embedding's own lookup, which costs
    nothing extra: on a CPU it raises the ValueError below; on a GPU the kernel stops
    with a device-side assertion (checking beforehand would make the host wait for the
    device at every call).
    """

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)

    def forward(self, tokens: Tensor) -> Tensor:
        try:
            return self.embedding(tokens) * math.sqrt(self.d_model)
        except IndexError as error:
            message = f"tokens must be ids in [0, vocab_size={self.vocab_size})"
            raise ValueError(message) from error


def sinusoidal_encoding(max_positions: int, d_model: int) -> Tensor:
    """PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(...).

    Returns a (max_positions, d_model) tensor.
    """
    if d_model % 2 != 0:
        raise ValueError(
            f"d_model={d_model} must be even: sines and cosines come in pairs"
        )
    pos = torch.arange(max_positions, dtype=torch.float64).unsqueeze(
        1
    )  # (max_positions, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d_model / 2,)
    angles = pos / 10000 ** (two_i / d_model)  # (max_positions, d_model / 2)
    pe = torch.stack(
        [angles.sin(), angles.cos()], dim=-1
    )  # (max_positions, d_model / 2, 2)
    return pe.flatten(1).float()  # (max_positions, d_model): sin, cos, sin, cos, ...


def check_length(length: int, max_positions: int) -> None:
    """Raise a clear error if a sequence is longer than the positions we have."""
    if length > max_positions:
        raise ValueError(
            f"sequence length {length} exceeds max_positions={max_positions}"
        )


class PositionalEncoding(nn.Module):
    """Add the fixed sinusoids, then dropout: (B, S, d_model) -> (B, S, d_model)."""

    def __init__(self, d_model: int, max_positions: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.max_positions = max_positions
        self.dropout = nn.Dropout(dropout)
        # A buffer moves with .to(device) but is not trained; non-persistent:
        # not in state_dict.
        self.register_buffer(
            "pe", sinusoidal_encoding(max_positions, d_model), persistent=False
        )

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x (B, S, d_model) holds positions offset, ..., offset + S - 1."""
        end = offset + x.size(1)
        check_length(end, self.max_positions)
        return self.dropout(x + self.pe[offset:end])  # (B, S, d_model) + (S, d_model)


class LearnedPositionalEmbedding(nn.Module):
    """The paper's alternative (Table 3, row E): one learned vector per position."""

    def __init__(self, d_model: int, max_positions: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.max_positions = max_positions
        self.dropout = nn.Dropout(dropout)
        # (max_positions, d_model)
        self.pe = nn.Parameter(torch.randn(max_positions, d_model) * 0.02)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        """x (B, S, d_model) holds positions offset, ..., offset + S - 1."""
        end = offset + x.size(1)
        check_length(end, self.max_positions)
        return self.dropout(x + self.pe[offset:end])  # (B, S, d_model) + (S, d_model)
