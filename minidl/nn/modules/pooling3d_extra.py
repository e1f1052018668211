"""LPPool3d, MaxUnpool3d and FractionalMaxPool3d, with PyTorch's constructors and repr (the 1-D
and 2-D layers' shared parts are in pooling_extra.py; the math is in ``minidl.ops``)."""
from ...ops.conv3d import int_triple
from .. import functional as F
from .pooling_extra import _LPPoolNd, _MaxUnpoolNd
from .module import Module


class LPPool3d(_LPPoolNd):
    def forward(self, input):
        return F.lp_pool3d(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)


class MaxUnpool3d(_MaxUnpoolNd):
    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        self.kernel_size = int_triple(kernel_size, "kernel_size", "MaxUnpool3d")
        self.stride = int_triple(stride if stride is not None else kernel_size, "stride", "MaxUnpool3d")
        self.padding = int_triple(padding, "padding", "MaxUnpool3d")

    def forward(self, input, indices, output_size=None):
        return F.max_unpool3d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class FractionalMaxPool3d(Module):
    """``_random_samples`` (N, C, 3), if given, is a buffer that fixes the windows; otherwise
    each call draws new ones."""

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices=False, _random_samples=None):
        super().__init__()
        op = "FractionalMaxPool3d"
        self.kernel_size = int_triple(kernel_size, "kernel_size", op)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = int_triple(output_size, "output_size", op) if output_size is not None else None
        self.output_ratio = None
        if output_ratio is not None:
            self.output_ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio,) * 3
        if output_size is None and output_ratio is None:
            raise ValueError("FractionalMaxPool3d requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input):
        return F.fractional_max_pool3d(input, self.kernel_size, self.output_size, self.output_ratio,
                                       self.return_indices, _random_samples=self._random_samples)
