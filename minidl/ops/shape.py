"""Ops that move or relabel elements without changing them: reshape, permute, expand,
dtype casts and device moves. Each backward applies the inverse rearrangement to g."""
import operator

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ._broadcast import normalize_dim, unbroadcast
from ._higher_order import sum_to
from .low_precision import cast_array
from .shape_error import ShapeError


class Reshape(Function):
    """out = x viewed with a new shape;  dL/dx = g reshaped back."""

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return x.reshape(shape)

    @staticmethod
    def backward(ctx, g):
        return g.reshape(ctx.shape), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g.reshape(ctx.shape), None


class Permute(Function):
    """out = x with its axes reordered by ``dims``;  dL/dx = g with the inverse order."""

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return x.transpose(dims)

    @staticmethod
    def backward(ctx, g):
        inverse = [0] * len(ctx.dims)  # the inverse permutation (np.argsort is slow on tiny tuples)
        for i, d in enumerate(ctx.dims):
            inverse[d] = i
        return g.transpose(inverse), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        inverse = [0] * len(ctx.dims)
        for i, d in enumerate(ctx.dims):
            inverse[d] = i
        return g.permute(tuple(inverse)), None


class Expand(Function):
    """out = x broadcast to ``shape`` (no copy);  dL/dx = g summed over the broadcast axes."""

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.shape
        return namespace_of(x).broadcast_to(x, shape)

    @staticmethod
    def backward(ctx, g):
        return unbroadcast(g, ctx.shape), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return sum_to(g, ctx.shape), None


class Cast(Function):
    """out = x converted to another dtype;  dL/dx = g converted back."""

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.dtype = x.dtype
        return cast_array(x, dtype)

    @staticmethod
    def backward(ctx, g):
        return cast_array(g, ctx.dtype), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g.to(ctx.dtype), None


class ToDevice(Function):
    """out = x copied to another device;  dL/dx = g copied back."""

    @staticmethod
    def forward(ctx, x, device):
        from .. import backends
        ctx.device = backends.device_of(x)
        host = backends.get(ctx.device).to_host(x)
        return backends.get(device).from_host(host)

    @staticmethod
    def backward(ctx, g):
        from .. import backends
        host = backends.get(backends.device_of(g)).to_host(g)
        return backends.get(ctx.device).from_host(host), None


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def reshape(x, *shape):
    shape = _shape_arg(shape)
    dims = [operator.index(n) for n in shape]
    if dims.count(-1) > 1 or any(n < -1 for n in dims):   # NumPy would take any negative size for -1
        raise ShapeError(f"reshape: shape {list(shape)} is invalid for input of shape {list(x.shape)}: only one "
                         f"dimension can be inferred (-1), and no other may be negative")
    try:
        return Reshape.apply(x, shape)
    except ValueError:
        raise ShapeError(f"reshape: shape {list(shape)} is invalid for input of shape {list(x.shape)} "
                         f"({x.numel()} elements)") from None


def view(x, *shape):
    """x with a new shape over the same memory, as ``Tensor.view``: reshape, where the strides
    allow it without a copy; a RuntimeError (PyTorch's) where they do not (reshape copies there)."""
    shape = _shape_arg(shape)
    dims = [operator.index(n) for n in shape]
    n = x.numel()
    if dims.count(-1) == 1 and all(d >= 0 for d in dims if d != -1):
        known = int(np.prod([d for d in dims if d != -1]))
        if known and n % known == 0:
            dims[dims.index(-1)] = n // known
    if n and x.ndim and all(d >= 0 for d in dims) and int(np.prod(dims)) == n:
        item = x._data.dtype.itemsize
        if _view_strides(x.shape, [st // item for st in x._data.strides], dims) is None:
            raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                               "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return reshape(x, *shape)


def _view_strides(old_shape, old_strides, new_shape):
    """The strides of ``new_shape`` over the memory of a tensor of ``old_shape`` / ``old_strides``,
    or None where no strides give it (PyTorch's computeStride). The old dims are taken in chunks
    that are contiguous with one another; each chunk must be split exactly by whole new dims."""
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_stride = old_strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[d]
        if d == 0 or (old_shape[d - 1] != 1 and old_strides[d - 1] != tensor_numel * chunk_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_stride
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_stride = old_strides[d - 1]
                tensor_numel = view_numel = 1
    return new_strides if view_d == -1 else None


def permute(x, *dims):
    dims = _shape_arg(dims)
    axes = tuple(normalize_dim(d, max(x.ndim, 1), "permute") for d in dims)   # out of range: IndexError
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"permute: dims {list(dims)} are not a permutation of the {x.ndim} dims of shape "
                         f"{list(x.shape)}")
    return Permute.apply(x, axes)


def transpose(x, dim0, dim1):
    nd = max(x.ndim, 1)  # a 0-d tensor accepts dims 0 and -1, as PyTorch
    dim0, dim1 = normalize_dim(dim0, nd, "transpose"), normalize_dim(dim1, nd, "transpose")
    if x.ndim == 0:
        return Reshape.apply(x, ())
    dims = list(range(x.ndim))
    dims[dim0], dims[dim1] = dims[dim1], dims[dim0]
    return Permute.apply(x, tuple(dims))


def unsqueeze(x, dim):
    if not -x.ndim - 1 <= dim <= x.ndim:
        raise IndexError(f"unsqueeze: dim {dim} out of range for a tensor with {x.ndim} dims")
    dim = dim % (x.ndim + 1)
    return Reshape.apply(x, x.shape[:dim] + (1,) + x.shape[dim:])


def squeeze(x, dim=None):
    if dim is None:
        shape = tuple(n for n in x.shape if n != 1)
    else:
        nd = max(x.ndim, 1)
        dims = {normalize_dim(d, nd, "squeeze") for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        shape = tuple(n for i, n in enumerate(x.shape) if not (i in dims and n == 1))
    return Reshape.apply(x, shape)


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:   # dims 0 and -1 name its one (implicit) dim, as PyTorch
        normalize_dim(start_dim, 1, "flatten"), normalize_dim(end_dim, 1, "flatten")
        return Reshape.apply(x, (1,))
    s, e = normalize_dim(start_dim, x.ndim, "flatten"), normalize_dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise ShapeError(f"flatten() has invalid args: start_dim cannot come after end_dim; got start_dim "
                         f"{start_dim} and end_dim {end_dim} for a {x.ndim}-d tensor")
    shape = x.shape[:s] + (int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:]
    return Reshape.apply(x, shape)


def expand(x, *sizes):
    sizes = _shape_arg(sizes)
    lead = len(sizes) - x.ndim
    shape = tuple(x.shape[i - lead] if (n == -1 and i >= lead) else n for i, n in enumerate(sizes))
    try:
        return Expand.apply(x, shape)
    except ValueError:
        raise ShapeError(f"expand: cannot expand shape {list(x.shape)} to {list(sizes)}") from None


def cast(x, dtype):
    return Cast.apply(x, dtype)


def to_device(x, device):
    return ToDevice.apply(x, device)
