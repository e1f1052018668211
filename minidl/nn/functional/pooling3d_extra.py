"""The 3-D pools beyond max/avg/adaptive: lp_pool3d, max_unpool3d, fractional_max_pool3d (the
ops, with their backwards, are in ``minidl.ops.pooling3d_extra`` and ``fractional_pool3d``), and
the ``*_with_indices`` forms of max_pool3d and adaptive_max_pool3d (always returning
(out, indices), as PyTorch's; the 1-D and 2-D ones are in pooling_extra.py)."""
from ...ops.fractional_pool3d import fractional_max_pool3d, fractional_max_pool3d_with_indices  # noqa: F401
from ...ops.pooling3d import adaptive_max_pool3d, max_pool3d
from ...ops.pooling3d_extra import lp_pool3d, max_unpool3d  # noqa: F401


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """As ``torch.nn.functional.max_pool3d_with_indices``: (out, indices) whatever return_indices says."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """As ``torch.nn.functional.adaptive_max_pool3d_with_indices``: (out, indices)."""
    return adaptive_max_pool3d(input, output_size, True)
