import torch
from torch import nn
from torch.testing import assert_close

from aiayn import PositionwiseFeedForward


def test_ffn_equals_two_convolutions_with_kernel_size_one():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(d_model=16, d_ff=64).eval()
    conv1, conv2 = nn.Conv1d(16, 64, kernel_size=1), nn.Conv1d(64, 16, kernel_size=1)
    with torch.no_grad():
        conv1.weight.copy_(ffn.linear1.weight.unsqueeze(-1))  # (64, 16) -> (64, 16, 1)
        conv1.bias.copy_(ffn.linear1.bias)
        conv2.weight.copy_(ffn.linear2.weight.unsqueeze(-1))
        conv2.bias.copy_(ffn.linear2.bias)
    x = torch.randn(3, 7, 16)  # (B, T, d_model)
    # channels second
    convolved = conv2(torch.relu(conv1(x.transpose(1, 2)))).transpose(1, 2)
    assert ffn(x).shape == (3, 7, 16)
    assert_close(ffn(x), convolved)


def test_ffn_equals_equation_2_and_acts_per_position():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(8, 32).eval()
    x = torch.randn(2, 5, 8)
    w1, b1, w2, b2 = (
        ffn.linear1.weight,
        ffn.linear1.bias,
        ffn.linear2.weight,
        ffn.linear2.bias,
    )
    assert_close(ffn(x), torch.clamp(x @ w1.T + b1, min=0) @ w2.T + b2)
    # one position alone gives the same result
    assert_close(ffn(x[:, 3:4]), ffn(x)[:, 3:4])


def test_ffn_inner_dropout_only_in_training():
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(8, 32, dropout=0.5)
    x = torch.randn(2, 5, 8)
    assert not torch.allclose(ffn(x), ffn.eval()(x))
    assert_close(ffn(x), ffn(x))
