"""1-D pooling as 2-D pooling of a height-1 image ((N, C, L) -> (N, C, 1, L), a kernel of
height 1): max_pool1d, avg_pool1d, adaptive_avg_pool1d, adaptive_max_pool1d, with PyTorch's
signatures. The 2-D ops (``minidl.ops.pooling``, ``minidl.ops.adaptive_max_pool``) carry
the hand-written backwards; the reshapes here are views. The windows are checked here first,
so that an error names the 1-D op and sizes, not the 2-D op's height-1 image."""
from ..tensor.size import as_ints
from ..tensor.tensor import Tensor
from .adaptive_max_pool import adaptive_max_pool2d
from .pooling import adaptive_avg_pool2d, avg_pool2d, max_pool2d, pool_output_size
from .shape_error import ShapeError


def _check(op, input):
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got:{list(getattr(input, 'shape', [])) or type(input).__name__}")
    return input.unsqueeze(-2)


def _one(v, name, op):
    """An int or a 1-tuple as an int (None stays None), or an error naming ``name``: a float is
    a TypeError, as in PyTorch (int() would truncate it)."""
    if v is None or (isinstance(v, (tuple, list)) and len(v) == 0 and name == "stride"):
        return None
    values = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if len(values) != 1:
        raise RuntimeError(f"{op}: {name} must be an int or a 1-tuple, got {v!r}")
    return as_ints(values, op, name)[0]


def _window(op, input, k, s, p, d, ceil_mode):
    """PyTorch's checks of a 1-D pooling window, in 1-D terms."""
    if 0 in input.shape[-2:]:   # only the batch may be empty, as PyTorch
        raise RuntimeError(f"{op}: expected an input with non-zero channels and length (only the batch dim may "
                           f"be 0), got shape {list(input.shape)}")
    if min(k, s, d) < 1 or p < 0:
        raise ShapeError(f"{op}: kernel_size, stride and dilation must be >= 1 and padding >= 0, got "
                         f"kernel_size={k}, stride={s}, padding={p}, dilation={d}")
    if 2 * p > d * (k - 1) + 1:
        raise ShapeError(f"{op}: padding should be at most half of the effective kernel size, got padding={p} "
                         f"for kernel_size={k}")
    n = pool_output_size(input.shape[-1], k, s, p, d, ceil_mode)
    if n < 1:
        raise ShapeError(f"{op}: input of length {input.shape[-1]} (shape {list(input.shape)}) is too small for "
                         f"kernel_size={k}, padding={p}, dilation={d} (output length would be {n})")


def _pair(v, trivial):
    return None if v is None else (trivial, v)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """As ``torch.nn.functional.max_pool1d``; indices are positions along L."""
    op = "max_pool1d"
    x = _check(op, input)
    k, s = _one(kernel_size, "kernel_size", op), _one(stride, "stride", op)
    p, d = _one(padding, "padding", op), _one(dilation, "dilation", op)
    _window(op, input, k, k if s is None else s, p, d, ceil_mode)
    out = max_pool2d(x, (1, k), _pair(s if s is not None else k, 1), (0, p), (1, d), ceil_mode, return_indices)
    if return_indices:
        return out[0].squeeze(-2), out[1].squeeze(-2)    # flat h W + w with h = 0 is the position along L
    return out.squeeze(-2)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """As ``torch.nn.functional.avg_pool1d``."""
    op = "avg_pool1d"
    x = _check(op, input)
    k, s, p = _one(kernel_size, "kernel_size", op), _one(stride, "stride", op), _one(padding, "padding", op)
    _window(op, input, k, k if s is None else s, p, 1, ceil_mode)
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
