"""F.conv_tbc: 1-D convolution over time-first sequences, as ``torch.nn.functional.conv_tbc``
(the layout of fairseq's convolutional models).

input (T, B, C_in), weight (K, C_in, C_out), bias (C_out,), ``pad`` steps of zeros on both ends:

    out[t, b, o] = bias[o] + sum_{k, i} x_pad[t + k, b, i] weight[k, i, o],    out (T + 2 pad - K + 1, B, C_out)

which is conv1d on the (B, C_in, T) view with the (C_out, C_in, K) view of the weight
(cross-correlation, as conv1d's). It is written as that composition of permutes and conv1d,
whose backwards autograd chains. A negative pad crops the sequence instead, as PyTorch's.
"""
from ...ops.conv1d import conv1d
from ...tensor.tensor import Tensor


def conv_tbc(input, weight, bias, pad=0):
    """As ``torch.nn.functional.conv_tbc``; see the module docstring."""
    for name, t in (("input", input), ("weight", weight), ("bias", bias)):
        if not isinstance(t, Tensor):
            raise TypeError(f"conv_tbc(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if isinstance(pad, bool) or not isinstance(pad, int):
        raise TypeError(f"conv_tbc(): argument 'pad' must be int, not {type(pad).__name__}")
    if input.ndim != 3:
        raise RuntimeError("Input must have 3 dims: time, batch, in_channel")
    if weight.ndim != 3:
        raise RuntimeError("Weight tensor must have 3 dims: kernel_width, in_channels, out_channels.")
    if bias.ndim != 1:
        raise RuntimeError("Bias must be 1-D")
    if input.shape[2] != weight.shape[1]:
        raise RuntimeError("Input dim 2 (input channels) is not == dim 1 in the weight tensor")
    if bias.shape[0] != weight.shape[2]:
        raise RuntimeError("Bias size must equal dim 2 in the weight tensor (output channels).")
    T, K = input.shape[0], weight.shape[0]
    if T + 2 * pad - K + 1 < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {T + 2 * pad - K + 1}: "
                           f"[{T + 2 * pad - K + 1}, {input.shape[1]}, {weight.shape[2]}]")
    x = input if pad >= 0 else input[-pad:T + pad]
    out = conv1d(x.permute(1, 2, 0), weight.permute(2, 1, 0), bias, padding=max(pad, 0))   # (B, C_out, T')
    return out.permute(2, 0, 1)
