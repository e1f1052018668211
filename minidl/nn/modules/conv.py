"""Conv2d: 2-D convolution over (N, C, H, W) with PyTorch's constructor and initialisation."""

from .. import functional as F
from .. import init
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
        if padding_mode != "zeros":
            raise NotImplementedError(f"Conv2d: only padding_mode='zeros' is supported, got {padding_mode!r}")
        if isinstance(padding, str) and padding not in ("same", "valid"):
            raise ValueError(f"Conv2d: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
        self.in_channels, self.out_channels = int(in_channels), int(out_channels)
        self.kernel_size, self.stride, self.dilation = _pair(kernel_size), _pair(stride), _pair(dilation)
        self.padding = padding if isinstance(padding, str) else _pair(padding)
        self.groups, self.padding_mode = int(groups), padding_mode
        _add_weight_and_bias(self, (self.out_channels, self.in_channels // self.groups) + self.kernel_size, bias,
                             self.out_channels, dtype, device)

    def reset_parameters(self):
        init.default_layer_init_(self.weight, self.bias)

    def forward(self, input):
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)

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
        return s
