"""1-D pooling as 2-D pooling of a height-1 image ((N, C, L) -> (N, C, 1, L), a kernel of
height 1): max_pool1d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d, with PyTorch's
signatures. The 2-D ops (``minidl.ops.pooling``, ``minidl.ops.adaptive_max_pool``) carry
the hand-written backwards; the reshapes here are views."""
import numpy as np

from ..tensor.tensor import Tensor
from .adaptive_max_pool import adaptive_max_pool2d
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d


def _check(op, input):
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got:{list(getattr(input, 'shape', [])) or type(input).__name__}")
    return input.unsqueeze(-2)


def _one(v, name, op):
    if v is None or np.ndim(v) == 0:
        return v
    if len(v) != 1:
        raise RuntimeError(f"{op}: {name} must be an int or a 1-tuple, got {v!r}")
    return int(v[0])


def _pair(v, trivial):
    return None if v is None else (trivial, v)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """As ``torch.nn.functional.max_pool1d``; indices are positions along L."""
    op = "max_pool1d"
    x = _check(op, input)
    k, s = _one(kernel_size, "kernel_size", op), _one(stride, "stride", op)
    p, d = _one(padding, "padding", op), _one(dilation, "dilation", op)
    out = max_pool2d(x, (1, k), _pair(s if s is not None else k, 1), (0, p), (1, d), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)    # flat h W + w with h = 0 is the position along L
    return out.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """As ``torch.nn.functional.avg_pool1d``."""
    op = "avg_pool1d"
    x = _check(op, input)
    k, s, p = _one(kernel_size, "kernel_size", op), _one(stride, "stride", op), _one(padding, "padding", op)
    return avg_pool2d(x, (1, k), _pair(s if s is not None else k, 1), (0, p), ceil_mode,
                      count_include_pad).squeeze(-2)


def adaptive_avg_pool1d(input, output_size):
    """As ``torch.nn.functional.adaptive_avg_pool1d``."""
    x = _check("adaptive_avg_pool1d", input)
    return adaptive_avg_pool2d(x, (1, _one(output_size, "output_size", "adaptive_avg_pool1d"))).squeeze(-2)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """As ``torch.nn.functional.adaptive_max_pool1d``."""
    x = _check("adaptive_max_pool1d", input)
    out = adaptive_max_pool2d(x, (1, _one(output_size, "output_size", "adaptive_max_pool1d")), return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)
