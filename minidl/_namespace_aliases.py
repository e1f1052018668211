"""PyTorch's other names for functions minidl has (greater for gt, swapdims for transpose, ger for
outer...), the dtype conversions byte/char/short, the splits along a named axis (hsplit, vsplit,
dsplit), and the storage queries a CPU-only framework answers trivially (is_pinned, data_ptr...),
installed by _namespace.py's tables like the rest."""
import numpy as np

from .tensor import dtype as _dtypes


def _md():
    import minidl
    return minidl


def _split_along(dim, name, min_ndim):
    def split(input, indices_or_sections):
        if input.ndim < min_ndim:
            raise RuntimeError(f"torch.{name} requires a tensor with at least {min_ndim} dimension, but got a tensor "
                               f"with {input.ndim} dimensions!")
        d = 0 if (dim == 1 and input.ndim == 1) else dim
        if isinstance(indices_or_sections, int) and input.shape[d] % indices_or_sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {d}, but the size of the dimension "
                               f"{input.shape[d]} is not divisible by the split_size {indices_or_sections}!")
        return input.tensor_split(indices_or_sections, d)
    split.__name__ = name
    split.__doc__ = f"tensor_split along dim {dim} (dim 0 of a 1-d tensor for hsplit), equal parts only for an int."
    return split


def sum_to_size(input, *size):
    """The sum of input over the dims it was broadcast along to get from ``size`` (the inverse of
    expand)."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else tuple(size)
    if np.broadcast_shapes(shape, tuple(input.shape)) != tuple(input.shape):
        raise RuntimeError(f"size {list(shape)} is not expandable to size {list(input.shape)}.")
    lead = input.ndim - len(shape)
    out = input.sum(tuple(range(lead))) if lead else input
    dims = tuple(d for d, n in enumerate(shape) if n == 1 and out.shape[d] != 1)
    return out.sum(dims, keepdim=True) if dims else out


def dist(input, other, p=2):
    """The p-norm of input - other."""
    return (input - other).norm(p)


def msort(input):
    """The values sorted along dim 0."""
    return input.sort(0).values


def argwhere(input):
    return _md().nonzero(input)


def log10(input):
    """log10 x = ln x / ln 10 (its gradient through log and the division)."""
    return input.log() / float(np.log(10.0))


def _to(dtype):
    return lambda self: self.to(dtype)


def _get_device(self):
    """-1 on the CPU, the device index on cuda."""
    return -1 if self.device.type == "cpu" else (self.device.index or 0)


def _data_ptr(self):
    data = self._data
    return data.ctypes.data if isinstance(data, np.ndarray) else int(getattr(data, "device_ctypes_pointer", 0).value)


def _storage_offset(self):
    """The offset in elements of the first element from the start of its storage."""
    if not isinstance(self._data, np.ndarray):
        return 0
    from .ops.as_strided import flat_storage
    return flat_storage(self._data)[1]


def _functional(name):
    """A function of nn.functional that PyTorch also offers as torch.X (and some as a method)."""
    def fn(*args, **kwargs):
        from .nn import functional
        return getattr(functional, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"md.{name}(...) is nn.functional.{name}(...)."
    return fn


BOTH = {
    "greater": lambda input, other: input.gt(other), "greater_equal": lambda input, other: input.ge(other),
    "less": lambda input, other: input.lt(other), "less_equal": lambda input, other: input.le(other),
    "not_equal": lambda input, other: input.ne(other),
    "swapdims": lambda input, dim0, dim1: input.transpose(dim0, dim1),
    "ger": lambda input, vec2: _md().outer(input, vec2), "hsplit": _split_along(1, "hsplit", 1),
    "vsplit": _split_along(0, "vsplit", 2), "dsplit": _split_along(2, "dsplit", 3), "dist": dist, "msort": msort,
    "argwhere": argwhere, "log10": log10, "hardshrink": _functional("hardshrink"),
}

MODULE_ONLY = {name: _functional(name) for name in ("pdist", "channel_shuffle", "rrelu", "rrelu_", "threshold",
                                                    "threshold_", "alpha_dropout", "feature_alpha_dropout")}

METHODS_ONLY = {
    "byte": _to(_dtypes.uint8), "char": _to(_dtypes.int8), "short": _to(_dtypes.int16),
    "ndimension": lambda self: self.ndim, "is_signed": lambda self: self.dtype.kind in "if" or self.dtype.kind == "V",
    "get_device": _get_device, "data_ptr": _data_ptr, "storage_offset": _storage_offset,
    "is_pinned": lambda self: False, "pin_memory": lambda self: self,
    "split_with_sizes": lambda self, split_sizes, dim=0: _md().split(self, list(split_sizes), dim),
    "sum_to_size": sum_to_size, "H": property(lambda self: self.t() if self.ndim == 2 else self),
    "mH": property(lambda self: self.mT),
}
