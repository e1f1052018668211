"""3-D pooling layers: MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, AdaptiveMaxPool3d, with
PyTorch's constructors and repr (the math is in ``minidl.ops.pooling3d``)."""
from ...ops.pooling3d import adaptive_avg_pool3d, adaptive_max_pool3d, avg_pool3d, max_pool3d
from .pooling import _AvgPoolNd, _MaxPoolNd
from .pooling1d import _Adaptive


class MaxPool3d(_MaxPoolNd):
    def forward(self, input):
        return max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                          self.return_indices)


class AvgPool3d(_AvgPoolNd):
    def forward(self, input):
        return avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                          self.divisor_override)


class AdaptiveAvgPool3d(_Adaptive):
    def __init__(self, output_size):
        super().__init__(output_size)

    def forward(self, input):
        return adaptive_avg_pool3d(input, self.output_size)


class AdaptiveMaxPool3d(_Adaptive):
    def forward(self, input):
        return adaptive_max_pool3d(input, self.output_size, self.return_indices)
