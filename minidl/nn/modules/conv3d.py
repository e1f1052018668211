"""Conv3d and ConvTranspose3d over (N, C, D, H, W) volumes, with PyTorch's constructors,
initialisation and repr (the shared set-up is conv_nd's ``_ConvNd``; the math is in
``minidl.ops.conv3d``)."""
from ...ops.conv3d import conv3d, conv_transpose3d
from .conv_nd import _ConvNd, _ConvTransposeNd, pad_for_mode


class Conv3d(_ConvNd):
    """Weight (out_channels, in_channels/groups, kD, kH, kW) ~ kaiming_uniform(a=sqrt 5), bias ~
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels/groups * kD * kH * kW, as PyTorch."""
    dims = 3

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, device, dtype)
        if self.padding == "same" and self.stride != (1, 1, 1):
            raise ValueError(f"Conv3d: padding='same' is not supported for strided convolutions, got "
                             f"stride={self.stride}")

    def _conv_forward(self, input, weight, bias):
        input, padding = pad_for_mode(self, input)
        return conv3d(input, weight, bias, self.stride, padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class ConvTranspose3d(_ConvTransposeNd):
    """Weight (in_channels, out_channels/groups, kD, kH, kW) over (N, C, D, H, W) input;
    ``forward(input, output_size)`` picks the output_padding that gives that size, as PyTorch."""
    dims = 3

    def forward(self, input, output_size=None):
        return conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                self._output_padding(input, output_size), self.groups, self.dilation)
