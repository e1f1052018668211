"""More of PyTorch's top-level tensor functions: unravel_index, scalar_tensor, rsub, fill,
the deprecated frobenius_norm and nuclear_norm, split_with_sizes, empty_permuted, histogramdd,
the ``*_copy`` forms of the view ops, and as_strided_.

The ``*_copy`` functions are the view op followed by a copy: the result owns fresh, contiguous
memory (a write to it reaches no other tensor), and the gradient is the view op's, through
``clone``. The differentiable ones here compose ops with their own backward.
"""
import builtins
import itertools
import numbers
import operator
from collections import namedtuple

import numpy as np

from .tensor import dtype as _dtypes
from .tensor.layout import check as check_layout
from .tensor.tensor import Tensor


def _md():
    import minidl
    return minidl


def _wrap(array):
    return Tensor._wrap(array, None, 0)


def unravel_index(indices, shape):
    """The coordinates (a tuple of int64 tensors of ``indices``' shape, one per dim of ``shape``)
    of flat C-order ``indices`` into a tensor of ``shape``: index // stride % size per dim, as
    PyTorch computes it (so an index outside [0, numel) wraps around rather than raising)."""
    if not isinstance(indices, Tensor):
        indices = _md().tensor(indices)
    if indices.dtype.is_floating_point or indices.dtype == _md().bool:
        raise TypeError(f"expected 'indices' to be integer dtype, but got {indices.dtype}")
    if isinstance(shape, numbers.Integral) and not isinstance(shape, builtins.bool):
        shape = (shape,)
    elif not isinstance(shape, (tuple, list)):
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {type(shape)}")
    for s in shape:
        if isinstance(s, builtins.bool) or not isinstance(s, numbers.Integral):
            raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(s)}")
    shape = tuple(int(s) for s in shape)
    if builtins.any(s < 0 for s in shape):
        raise ValueError(f"'shape' cannot have negative values, but got {shape}")
    strides = list(itertools.accumulate(reversed(shape[1:] + (1,)), operator.mul))[::-1]
    flat = indices.numpy(force=True).astype(np.int64)[..., None]
    with np.errstate(divide="ignore"):
        coords = flat // np.array(strides, np.int64) % np.array(shape, np.int64)
    return tuple(_wrap(np.array(coords[..., k])) for k in range(len(shape)))


def scalar_tensor(s, *, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False):
    """A 0-d tensor holding ``s``, in the default float dtype unless ``dtype`` says otherwise
    (also for an integer or bool ``s``, as PyTorch's)."""
    check_layout(layout, "scalar_tensor")
    return _md().tensor(s, dtype=_md().get_default_dtype() if dtype is None else dtype,
                        device="cpu" if device is None else device, requires_grad=requires_grad)


def rsub(input, other, *, alpha=1):
    """other - alpha * input (sub with the operands swapped)."""
    if isinstance(other, Tensor):
        return other.sub(input, alpha=alpha)
    return other - (input if alpha == 1 else alpha * input)


def is_signed(input):
    return input.is_signed()


def get_device(input):
    """-1 for a CPU tensor, the GPU's index for a CUDA one."""
    return input.get_device()


def fill(input, value):
    """A new tensor of ``input``'s shape and dtype full of ``value`` (a number or a 0-d tensor).
    Gradient: zero to input, the sum of the output's gradient to a tensor ``value``."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} "
                               "dimensions.")
    keep = _md().zeros(input.shape, dtype=_md().bool, device=input.device)
    out = _md().where(keep, input, value if isinstance(value, Tensor) else
                      _md().tensor(value, dtype=input.dtype, device=input.device))
    return out if out.dtype == input.dtype else out.to(input.dtype)


def frobenius_norm(input, dim, keepdim=False):
    """sqrt(sum x^2) over ``dim`` (one or two dims): linalg.vector_norm(input, 2, dim, keepdim)."""
    dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions instead.")
    return _md().linalg.vector_norm(input, 2, dims if dims else None, keepdim)


def nuclear_norm(input, dim=None, keepdim=False):
    """The sum of the singular values: ``nuclear_norm(A, keepdim=False)`` of a 2-D A, or
    ``nuclear_norm(A, dim, keepdim=False)`` of the matrices over the two dims ``dim`` (PyTorch's
    two overloads: a bool second argument is keepdim)."""
    if isinstance(dim, builtins.bool):
        dim, keepdim = None, dim
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError(f"Expected a tensor with 2 dimensions, but got a tensor with {input.ndim} "
                               f"dimension{'' if input.ndim == 1 else 's'} instead.")
        dim = (0, 1)
    return _md().linalg.matrix_norm(input, "nuc", tuple(dim), keepdim)


def split_with_sizes(input, split_sizes, dim=0):
    return _md().split(input, [operator.index(n) for n in split_sizes], dim)


def empty_permuted(size, physical_layout, *, dtype=None, layout=None, device=None, requires_grad=False,
                   pin_memory=False):
    """A tensor of ``size`` whose memory holds the dims in the order ``physical_layout`` (the
    first the outermost): ``empty(size[l] for l in physical_layout).permute(inverse)``. Its
    elements are zeros, as md.empty's."""
    size, order = tuple(operator.index(s) for s in size), tuple(operator.index(p) for p in physical_layout)
    if sorted(order) != list(range(len(size))):
        raise RuntimeError(f"Number of dimensions in size does not match the length of the physical_layout; or "
                           f"physical_layout is not a permutation of 0..{len(size) - 1}: size={list(size)}, "
                           f"physical_layout={list(order)}")
    if builtins.any(s < 0 for s in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {list(size)}")
    dt = _dtypes.DEFAULT_FLOAT if dtype is None else _dtypes.to_dtype(dtype)
    from .tensor.allocation import check_allocation
    check_allocation("empty_permuted", size, dt)
    from .tensor.factories import _leaf
    array = np.zeros([size[p] for p in order], dt).transpose(np.argsort(order))
    return _leaf(array, requires_grad, device)


histogramdd_result = namedtuple("histogramdd", ("hist", "bin_edges"))


def histogramdd(input, bins, *, range=None, weight=None, density=False):   # noqa: A002  (PyTorch's name)
    """The D-dimensional histogram of the points input (..., D): ``bins`` an int (per dim), D
    ints, or D 1-D tensors of increasing edges; ``range`` [min_0, max_0, ..., min_D-1, max_D-1]
    (the data's own by default); optional per-point ``weight``; ``density`` divides by the total
    and by each bin's volume. Returns (hist, bin_edges) as PyTorch (NumPy's histogramdd: bins
    closed on the left, the last also on the right)."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the same dtype, and "
                           f"input should be floating point, got {input.dtype}")
    if input.ndim < 1:
        raise RuntimeError("torch.histogramdd: input should have at least 1 dimension")
    D = input.shape[-1]
    pts = input.numpy(force=True).reshape(-1, D)
    if isinstance(bins, numbers.Integral):
        np_bins = [int(bins)] * D
    else:
        np_bins = [b.numpy(force=True) if isinstance(b, Tensor) else operator.index(b) for b in bins]
    if len(np_bins) != D:
        raise RuntimeError(f"torch.histogramdd: expected {D} sequences of bin edges for each of the {D} input "
                           f"dimensions, but got {len(np_bins)} bin sequences")
    rng = None
    if range is not None:
        if len(range) != 2 * D:
            raise RuntimeError(f"torch.histogramdd: for a {D}-dimensional histogram range should have {2 * D} "
                               f"elements, but got {len(range)}")
        rng = [(float(range[2 * k]), float(range[2 * k + 1])) for k in builtins.range(D)]
    w = None if weight is None else weight.numpy(force=True).reshape(-1)
    hist, edges = np.histogramdd(pts, np_bins, range=rng, weights=w, density=density)
    dt = input.dtype.dtype
    return histogramdd_result(_wrap(hist.astype(dt)), tuple(_wrap(e.astype(dt)) for e in edges))


# the *_copy forms of the view ops (narrow_copy is _namespace_tensor_methods.py's) ---------------------
_COPIED_VIEWS = {
    "view_copy": "view", "permute_copy": "permute", "transpose_copy": "transpose", "t_copy": "t",
    "squeeze_copy": "squeeze", "unsqueeze_copy": "unsqueeze", "select_copy": "select",
    "diagonal_copy": "diagonal", "detach_copy": "detach", "unfold_copy": "unfold", "as_strided_copy": "as_strided",
    "alias_copy": "view_as", "unbind_copy": "unbind", "split_copy": "split",
    "split_with_sizes_copy": "split_with_sizes",
}


def _copied_view(name, method):
    def fn(input, *args, **kwargs):
        if method == "view_as":
            args = (input,)
        out = getattr(input, method)(*args, **kwargs)
        return tuple(t.clone() for t in out) if isinstance(out, (tuple, list)) else out.clone()
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"md.{name}(t, ...) is t.{method}(...) copied into memory of its own"
                  f"{' (one copy per piece)' if method in ('unbind', 'split', 'split_with_sizes') else ''}.")
    return fn


def expand_copy(input, size, *, implicit=False):
    """input.expand(size) copied into memory of its own (``implicit`` is only a tracing hint)."""
    return input.expand(*size).clone()


def slice_copy(input, dim=0, start=None, end=None, step=1):
    """input[..., start:end:step, ...] along ``dim``, copied."""
    from .ops._broadcast import normalize_dim
    d = normalize_dim(dim, input.ndim, "slice_copy")
    if step <= 0:
        raise RuntimeError(f"slice step must be positive, got {step}")
    return input[(slice(None),) * d + (slice(start, end, step),)].clone()


def as_strided_(input, size, stride, storage_offset=None):
    """Make ``input`` the as_strided view of its own memory, in place (see tensor/inplace_shape.py)."""
    from .tensor.inplace_shape import _restride
    return _restride(input, "as_strided_", lambda t: t.as_strided(size, stride, storage_offset))


COPIES = {name: _copied_view(name, method) for name, method in _COPIED_VIEWS.items()}
COPIES.update(expand_copy=expand_copy, slice_copy=slice_copy)
