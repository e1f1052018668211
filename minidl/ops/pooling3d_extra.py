"""F.lp_pool3d and F.max_unpool3d: the 3-D forms of ``lp_pool.py`` and ``unpool.py``, as
``torch.nn.functional.lp_pool3d`` / ``max_unpool3d``.

lp_pool3d is lp_pool2d's composition with one more axis: (n avg_pool3d(x ** p)) ** (1/p) through
``LpRoot`` (whose gradient is 0 for an all-zero window), with n = kT kH kW; p = +inf is
max_pool3d(|x|), p = -inf is -max_pool3d(-|x|).

max_unpool3d writes each value at its flat index t H W + h W + w in a zero volume of the output
size. With flat indices the unpooling does not see the volume's shape: it is 2-D unpooling of an
(N, C, T*H*W, 1) image into an (oT*oH*oW, 1) one (``MaxUnpool2d``: a scatter forward, the gather
at the same positions backward), as 1-D unpooling is 2-D unpooling of a width-1 image. The
default output size is (in - 1) stride + kernel - 2 padding per axis; an explicit one must lie
within a stride of it (``unpool_output_size``).
"""
import math

from ..tensor.tensor import Tensor
from .conv3d import int_triple
from .lp_pool import LpRoot, _check_input, _norm
from .pooling3d import avg_pool3d, max_pool3d
from .unpool import MaxUnpool2d, check_unpool_inputs, unpool_output_size


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """As ``torch.nn.functional.lp_pool3d``: (sum over each kernel_size window of x ** p) ** (1/p)."""
    op = "lp_pool3d"
    p = _norm(norm_type, op)
    _check_input(input, (4, 5), op)
    kt, kh, kw = int_triple(kernel_size, "kernel_size", op)
    if math.isinf(p):
        pooled = max_pool3d(input.abs() if p > 0 else -input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return pooled if p > 0 else -pooled
    a = avg_pool3d(input.pow(p), kernel_size, stride, 0, ceil_mode)
    return LpRoot.apply(a, kt * kh * kw, float(p))


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """As ``torch.nn.functional.max_unpool3d``: ``indices`` as max_pool3d(..., return_indices=True)
    gives them; output_size (T, H, W) or (N, C, T, H, W) picks among the sizes a pooling could have
    come from. See the module docstring."""
    op = "max_unpool3d"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be a Tensor, got {type(input).__name__}")
    k = int_triple(kernel_size, "kernel_size", op)
    s = int_triple(stride, "stride", op) if stride is not None else k
    p = int_triple(padding, "padding", op)
    out = unpool_output_size(input.shape[-3:], k, s, p, output_size)
    check_unpool_inputs(input, indices, out, op)
    data = indices._data
    x, i = (input, data) if input.ndim == 5 else (input.unsqueeze(0), data[None])
    N, C = x.shape[:2]
    flat = x.reshape(N, C, math.prod(x.shape[2:]), 1)   # (not -1: ambiguous for an empty batch)
    y = MaxUnpool2d.apply(flat, i.reshape(flat.shape), (math.prod(out), 1)).reshape(N, C, *out)
    return y if input.ndim == 5 else y.squeeze(0)
