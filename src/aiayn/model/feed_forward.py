"""Position-wise feed-forward network (§3.3)."""

import torch.nn.functional as F
from torch import Tensor, nn


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, Eq. (2), applied to every position alike.

    (B, T, d_model) -> (B, T, d_ff) -> (B, T, d_model).

    The dropout after the ReLU is not in the paper; nn.TransformerEncoderLayer and the
    Annotated Transformer have it, so we keep it (dropout=0.0 switches it off).
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)  # W_1, b_1
        self.linear2 = nn.Linear(d_ff, d_model)  # W_2, b_2
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear2(self.dropout(F.relu(self.linear1(x))))
