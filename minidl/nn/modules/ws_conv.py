"""WSConv2d: Conv2d whose filters are standardized per output channel in every forward (Weight
Standardization, Qiao et al. 2019), meant to be followed by GroupNorm (or BatchNorm): the pair
trains at batch 1-2 about as well as BatchNorm at large batches in the paper. The math and the
backward: minidl.ops.weight_standardization. PyTorch has no such layer (timm's StdConv2d is the
same idea); the arguments are Conv2d's plus ``eps``.
"""
from .. import functional as F
from .conv import Conv2d


class WSConv2d(Conv2d):
    """Conv2d with weight (O, C/G, kH, kW) standardized per output channel before use; the
    stored ``weight`` parameter is the raw one (its initialisation is Conv2d's)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None, eps=1e-5):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode,
                         device, dtype)
        self.eps = eps

    def standardized_weight(self):
        return F.weight_standardization(self.weight, self.eps)

    def forward(self, input):
        return self._conv_forward(input, self.standardized_weight(), self.bias)

    def extra_repr(self):
        return super().extra_repr() + f", eps={self.eps}"
