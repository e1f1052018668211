"""Conv2d: 2-D convolution over (N, C, H, W) with PyTorch's constructor and initialisation; a
``padding_mode`` other than "zeros" pads the input with ``F.pad`` first (conv_nd's ``pad_for_mode``)."""

from .. import functional as F
from .. import init
from .conv_nd import check_padding_mode, pad_for_mode, reversed_padding
from .linear import _add_weight_and_bias
from .module import Module


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Conv2d(Module):
    """Weight (out_channels, in_channels/groups, kH, kW) ~ kaiming_uniform(a=sqrt 5) and bias
    ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels/groups * kH * kW, as PyTorch."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if groups < 1:
            raise ValueError(f"Conv2d: groups must be a positive integer, got groups={groups!r}")
        if in_channels < 0 or out_channels < 0:
            raise RuntimeError(f"Conv2d: in_channels and out_channels must be non-negative, got "
                               f"in_channels={in_channels}, out_channels={out_channels}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                             f"divisible by groups ({groups})")
        if min(_pair(kernel_size)) < 1:     # PyTorch raises at the first forward; an empty kernel is never useful
            raise RuntimeError(f"Conv2d: kernel_size must be positive, got kernel_size={kernel_size!r}")
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ValueError(f"Conv2d: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
        check_padding_mode("Conv2d", padding_mode)
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride, self.dilation = _pair(kernel_size), _pair(stride), _pair(dilation)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.groups, self.padding_mode = int(groups), padding_mode
        self._reversed_padding_repeated_twice = reversed_padding(self.padding, self.kernel_size, self.dilation)
        _add_weight_and_bias(self, (self.out_channels, self.in_channels // self.groups) + self.kernel_size, bias,
                             self.out_channels, dtype, device)

    def reset_parameters(self):
        init.default_layer_init_(self.weight, self.bias)

    def _conv_forward(self, input, weight, bias):
        """The convolution with this layer's geometry and padding mode but the given weight and
        bias (PyTorch's hook for subclasses that transform the weight first)."""
        input, padding = pad_for_mode(self, input)
        return F.conv2d(input, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0, 0):
            s += f", padding={self.padding}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s
