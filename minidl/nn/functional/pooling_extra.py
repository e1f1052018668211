"""Pooling beyond max/avg/adaptive, sampling grids and the deprecated upsampling names:
lp_pool1d/2d, max_unpool1d/2d, fractional_max_pool2d, the ``*_with_indices`` forms of the max
pools (always returning (out, indices), as PyTorch's), affine_grid and grid_sample (the ops,
with their backwards, are in ``minidl.ops``), and upsample, upsample_nearest and
upsample_bilinear, which PyTorch keeps as deprecated spellings of interpolate."""
import warnings

from ...ops.adaptive_max_pool import adaptive_max_pool2d
from ...ops.fractional_pool import fractional_max_pool2d, fractional_max_pool2d_with_indices  # noqa: F401
from ...ops.grid_sample import affine_grid, grid_sample  # noqa: F401
from ...ops.interpolate import interpolate
from ...ops.lp_pool import lp_pool1d, lp_pool2d  # noqa: F401
from ...ops.pooling import max_pool2d
from ...ops.pooling1d import adaptive_max_pool1d, max_pool1d
from ...ops.unpool import max_unpool1d, max_unpool2d  # noqa: F401


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """As ``torch.nn.functional.max_pool1d_with_indices``: (out, indices) whatever return_indices says."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=False):
    """As ``torch.nn.functional.max_pool2d_with_indices``: (out, indices) whatever return_indices says."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """As ``torch.nn.functional.adaptive_max_pool1d_with_indices``: (out, indices)."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """As ``torch.nn.functional.adaptive_max_pool2d_with_indices``: (out, indices)."""
    return adaptive_max_pool2d(input, output_size, True)


def _deprecated(name):
    # PyTorch's wording and category (a UserWarning: a DeprecationWarning is hidden by default)
    warnings.warn(f"`nn.functional.{name}` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=3)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode, align_corners)``, with a warning."""
    _deprecated("upsample")
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(input, size, scale_factor, mode='nearest')``, with a warning."""
    _deprecated("upsample_nearest")
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated: ``interpolate(..., mode='bilinear', align_corners=True)``, with a warning."""
    _deprecated("upsample_bilinear")
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)
