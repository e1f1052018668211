"""PyTorch's tensor functions at both levels: ``md.X(t, ...)`` and ``t.X(...)``.

The differentiable ops live in minidl.ops (each a Function with its backward); this module
adds the functions PyTorch offers that compose them (norm, std, einsum via matmul-free
NumPy, split, meshgrid...) or that give no gradient (isnan, unique, nonzero...), and
attaches every name of ``BOTH`` to the module and to Tensor where it is not there yet.
Reductions accept ``axis=`` for ``dim=`` and tuple dims, as PyTorch's do.
"""
import builtins
import functools
import math
import operator

import numpy as np

from . import _namespace_aliases as _aliases
from . import _namespace_arrange as _arrange
from . import _namespace_decompositions as _decompositions
from . import _namespace_elementwise as _elementwise
from . import _namespace_extra as _extra
from . import _namespace_foreach as _foreach
from . import _namespace_legacy as _legacy
from . import _namespace_linalg as _linalg_tables
from . import _namespace_more as _more
from . import _namespace_special as _special_tables
from . import _namespace_statistics as _statistics
from . import _namespace_tensor_methods as _tensor_methods
from . import _namespace_toplevel as _toplevel
from . import linalg as _linalg
from .ops import addmm as _addmm
from .ops import cumulative as _cum
from .ops import elementwise_math as _em
from .ops import rearrange as _re
from .ops import rounding_division as _rdiv
from .ops import selection as _sel
from .ops.distance import cdist
from .ops.einsum import einsum
from .ops.shape_error import broadcast_shape as _broadcast_shape
from .tensor import dtype as _dtypes
from .tensor import storage as _storage
from .tensor.deprecated_overloads import value_first
from .tensor.inplace import install_inplace_forms
from .tensor.layout import check as check_layout
from .tensor.out_argument import install_out_argument
from .tensor.tensor import Tensor


def _ops():
    from . import ops
    return ops


def _axis(fn):
    """Let ``axis=`` stand for ``dim=`` and ``keepdims=`` for ``keepdim=`` (NumPy's spellings, which
    PyTorch's argument parser also takes; torch.norm, a Python function, takes no ``keepdims``)."""
    aliases = (("axis", "dim"),) if fn.__name__ == "norm" else (("axis", "dim"), ("keepdims", "keepdim"))

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for alias, name in aliases:
            if alias in kwargs:
                if name in kwargs:
                    raise TypeError(f"{fn.__name__}(): got both {name} and {alias}")
                kwargs[name] = kwargs.pop(alias)
        return fn(*args, **kwargs)
    return wrapper


def _wrap_bool(array, like=None):
    """A result computed on the host, placed on ``like``'s device (left on the CPU when like is None)."""
    return Tensor._wrap(_on_device_of(like, np.asarray(array)), None, 0)


def _on_device_of(like, array):
    """``array`` (an ndarray) moved to the device of the Tensor ``like``: results that NumPy computes on
    the host (nonzero, unique, isclose...) live where their input does, as PyTorch's."""
    from . import backends
    device = "cpu" if like is None else backends.device_of(like._data)
    return array if device == "cpu" else backends.get(device).from_host(array)


# reductions ------------------------------------------------------------------------------
def sum(input, dim=None, keepdim=False, *, dtype=None):   # noqa: A001
    x = input if dtype is None else input.to(dtype)
    if dtype is None and x.dtype.kind in "biu":
        x = x.to(_dtypes.int64)
    return _ops().sum(x, dim, keepdim)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    return _ops().mean(input if dtype is None else input.to(dtype), dim, keepdim)


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _ops().var(input, dim, unbiased is None or unbiased, keepdim, correction=correction)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return _ops().std(input, dim, unbiased is None or unbiased, keepdim, correction=correction)


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) over the same dims, as torch.var_mean."""
    return var(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) over the same dims, as torch.std_mean."""
    return std(input, dim, unbiased, keepdim, correction=correction), mean(input, dim, keepdim)


def max(input, dim=None, keepdim=False, *, other=None):   # noqa: A001
    if isinstance(dim, Tensor):
        return _em.maximum(input, dim)
    return _ops().max(input, None, keepdim) if dim is None else _sel.max_dim(input, dim, keepdim)


def min(input, dim=None, keepdim=False):   # noqa: A001
    if isinstance(dim, Tensor):
        return _em.minimum(input, dim)
    return _ops().min(input, None, keepdim) if dim is None else _sel.min_dim(input, dim, keepdim)


def amax(input, dim=(), keepdim=False):
    return _ops().max(input, None if dim == () else dim, keepdim)


def amin(input, dim=(), keepdim=False):
    return _ops().min(input, None if dim == () else dim, keepdim)


def argmax(input, dim=None, keepdim=False):
    return _ops().argmax(input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    return _ops().argmin(input, dim, keepdim)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """The p-norm (sum |x|**p)**(1/p) over ``dim`` (all elements by default); "fro" is p=2,
    inf/-inf the largest/smallest |x|: minidl.linalg.vector_norm, which dispatches every p;
    "nuc" is the nuclear norm of the matrices over ``dim`` (the last two by default)."""
    if p == "fro":
        p = 2
    if p == "nuc":
        return _linalg.matrix_norm(input, "nuc", (-2, -1) if dim is None else dim, keepdim, dtype=dtype)
    if isinstance(p, str) and p != "inf":
        raise RuntimeError(f"norm: unsupported norm type {p!r}; expected a number, 'fro' or 'nuc'")
    return _linalg.vector_norm(input, math.inf if p == "inf" else p, dim, keepdim, dtype=dtype)


def any(input, dim=None, keepdim=False):   # noqa: A001
    return _any_all_result(np.any(input.numpy(force=True), axis=_np_axis(dim, input), keepdims=keepdim), input)


def all(input, dim=None, keepdim=False):   # noqa: A001
    return _any_all_result(np.all(input.numpy(force=True), axis=_np_axis(dim, input), keepdims=keepdim), input)


def _any_all_result(array, input):
    """any/all give bool, except on uint8 input, where PyTorch keeps uint8 (0 or 1): the dtype that
    served as bool before bool tensors existed."""
    return _wrap_bool(np.asarray(array).astype(np.uint8) if input.dtype == _dtypes.uint8 else array, input)


def _np_axis(dim, x):
    if dim is None:
        return None
    from .ops._broadcast import normalize_dims
    return normalize_dims(dim, x.ndim, "reduction") or None


# matrix products and shapes --------------------------------------------------------------------
def _ndim(t, n, op):
    if t.ndim != n:
        raise RuntimeError(f"{op}: expected a {n}-D tensor, got {t.ndim}-D of shape {list(t.shape)}")


def mm(input, mat2):
    _ndim(input, 2, "mm")
    _ndim(mat2, 2, "mm")
    return _ops().matmul(input, mat2)


def bmm(input, mat2):
    _ndim(input, 3, "bmm")
    _ndim(mat2, 3, "bmm")
    return _ops().matmul(input, mat2)


def outer(input, vec2):
    _ndim(input, 1, "outer")
    _ndim(vec2, 1, "outer")
    return input.reshape(-1, 1) * vec2.reshape(1, -1)


def view_as(input, other):
    return input.reshape(*other.shape)


reshape_as = view_as


def expand_as(input, other):
    return input.expand(*other.shape)


def unflatten(input, dim, sizes):
    from .ops._broadcast import normalize_dim
    d = normalize_dim(dim, input.ndim, "unflatten")
    return input.reshape(*input.shape[:d], *sizes, *input.shape[d + 1:])


def split(tensor, split_size_or_sections, dim=0):
    from .ops._broadcast import normalize_dim
    d = normalize_dim(dim, tensor.ndim, "split")
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        if split_size_or_sections < 0 or (split_size_or_sections == 0 and n):   # 0 only for an empty dim
            raise RuntimeError(f"split expects split_size be positive, got {split_size_or_sections}")
        step = builtins.max(split_size_or_sections, 1)
        sizes = [builtins.min(step, n - i) for i in range(0, n, step)] or [0]
    else:
        sizes = [operator.index(s) for s in split_size_or_sections]
        if builtins.any(s < 0 for s in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes have only non-negative entries, but got "
                               f"split_sizes={sizes}")
        if builtins.sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at "
                               f"dimension {d}), but got split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(tensor[(slice(None),) * d + (slice(start, start + s),)])
        start += s
    return tuple(out)


def chunk(input, chunks, dim=0):
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    from .ops._broadcast import normalize_dim
    n = input.shape[normalize_dim(dim, input.ndim, "chunk")]
    if n == 0:   # PyTorch: `chunks` empty pieces (a tuple that must fit in memory)
        from .tensor.allocation import check_allocation
        check_allocation("chunk", (chunks,), "intp")
        return split(input, [0] * chunks, dim)
    return split(input, -(-n // chunks), dim)


def unbind(input, dim=0):
    from .ops._broadcast import normalize_dim
    d = normalize_dim(dim, input.ndim, "unbind")
    return tuple(input[(slice(None),) * d + (i,)] for i in range(input.shape[d]))


def swapaxes(input, axis0, axis1):
    return input.transpose(axis0, axis1)


def meshgrid(*tensors, indexing="ij"):
    ts = list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if indexing == "xy" and len(ts) >= 2:
        ts[0], ts[1] = ts[1], ts[0]
    shape = [t.numel() for t in ts]
    out = [t.reshape(*[-1 if i == k else 1 for i in range(len(ts))]).expand(*shape) for k, t in enumerate(ts)]
    if indexing == "xy" and len(ts) >= 2:   # the grids of (y, x, ...) in "ij", handed back as (x, y, ...)
        out[0], out[1] = out[1], out[0]
    return tuple(out)


# comparisons and tests ----------------------------------------------------------------------
def _cmp(name):
    def fn(input, other):
        return _ops().compare(name, input, other)
    return fn


eq, ne, lt, le, gt, ge = (_cmp(n) for n in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"))


def _logical(name):
    def fn(input, other):
        for pos, arg in enumerate((input, other), 1):
            if not isinstance(arg, Tensor):
                raise TypeError(f"{name}(): argument {('input', 'other')[pos - 1]!r} (position {pos}) must be "
                                f"Tensor, not {type(arg).__name__}")
        return _ops().compare(name, input, other)
    fn.__name__ = fn.__qualname__ = name
    return fn


logical_and, logical_or, logical_xor = (_logical(n) for n in ("logical_and", "logical_or", "logical_xor"))


def _elementwise_test(name):
    def fn(input):   # computed where the input lives (the namespace's ufunc of that name)
        data = input._data
        return Tensor._wrap(getattr(_backends().namespace_of(data), name)(data), None, 0)
    fn.__name__ = fn.__qualname__ = name
    return fn


def _backends():
    from . import backends
    return backends


logical_not, isnan, isinf, isfinite = (_elementwise_test(n) for n in ("logical_not", "isnan", "isinf", "isfinite"))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    _same_dtype("isclose", input, other)
    _broadcast_shape("isclose", input.shape, np.shape(_values(other)))
    return _wrap_bool(np.isclose(_values(input), _values(other), rtol=rtol, atol=atol, equal_nan=equal_nan), input)


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    _same_dtype("allclose", input, other)
    _broadcast_shape("allclose", input.shape, np.shape(_values(other)))
    return builtins.bool(np.allclose(_values(input), _values(other), rtol=rtol, atol=atol, equal_nan=equal_nan))


def equal(input, other):
    return input.shape == other.shape and builtins.bool(np.array_equal(_values(input), _values(other)))


def _same_dtype(op, input, other):
    """isclose/allclose compare tensors of one dtype, as PyTorch (which does not promote them)."""
    if isinstance(other, Tensor) and other.dtype != input.dtype:
        raise RuntimeError(f"{op}: expected input and other of the same dtype, got {input.dtype} and {other.dtype}")


def _values(x):
    return x.numpy(force=True) if isinstance(x, Tensor) else x


def nonzero(input, *, as_tuple=False):
    """The indices of the nonzero elements, one row each. A 0-d tensor has no dims to index: a row of
    no columns when it is nonzero, (1, 0), and (0, 0) when zero; as_tuple treats it as 1-d."""
    idx = np.nonzero(input.numpy(force=True)) if input.ndim else np.nonzero(input.numpy(force=True).reshape(1))
    if as_tuple:
        return tuple(_wrap_bool(i.astype(np.int64), input) for i in idx)
    if input.ndim == 0:
        return _wrap_bool(np.zeros((len(idx[0]), 0), np.int64), input)
    return _wrap_bool(np.stack(idx, axis=1).astype(np.int64) if idx else np.zeros((0, 0), np.int64), input)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    # NaN != NaN, so each NaN is its own value (PyTorch's), not merged into one as NumPy's default
    out = np.unique(input.numpy(force=True), return_inverse=True, return_counts=True, axis=dim, equal_nan=False)
    values, inverse, counts = out
    res = [_wrap_bool(values, input)]
    if return_inverse:
        shape = input.shape if dim is None else (input.shape[dim],)
        res.append(_wrap_bool(inverse.reshape(shape).astype(np.int64), input))
    if return_counts:
        res.append(_wrap_bool(counts.astype(np.int64), input))
    return res[0] if len(res) == 1 else tuple(res)


def numel(input):
    return input.numel()


def clip(input, min=None, max=None):   # noqa: A002
    return _ops().clamp(input, min, max)


def clamp_min(input, min):   # noqa: A002
    return _ops().clamp(input, min, None)


def clamp_max(input, max):   # noqa: A002
    return _ops().clamp(input, None, max)


# compositions optimizers use (the in-place forms are in tensor/inplace.py) --------------------
def addcmul(input, tensor1, tensor2, *value_first_form, value=1):
    """input + value * tensor1 * tensor2, multiplied in PyTorch's order (so float32 results match
    its kernel's bit for bit); gradients through the ordinary ops. PyTorch's deprecated
    ``addcmul(input, value, tensor1, tensor2)`` is read too, with its warning."""
    tensor1, tensor2, value = value_first("addcmul", "Tensor input, ", tensor1, tensor2, value_first_form, value)
    _check_integral_value("addcmul", (input, tensor1, tensor2), value)
    return input + (tensor1 * tensor2 if value == 1 else value * tensor1 * tensor2)


def addcdiv(input, tensor1, tensor2, *value_first_form, value=1):
    """input + value * tensor1 / tensor2 (Adam's ``p - lr * m / (sqrt(v) + eps)``); the deprecated
    ``addcdiv(input, value, tensor1, tensor2)`` as addcmul's."""
    tensor1, tensor2, value = value_first("addcdiv", "Tensor input, ", tensor1, tensor2, value_first_form, value)
    if _is_integral(tensor1) and _is_integral(tensor2):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a future release addcdiv "
                           "will perform a true division of tensor1 and tensor2. Use addcmul(input, tensor1, "
                           "1 / tensor2) or addcdiv with float tensors instead.")
    _check_integral_value("addcdiv", (input, tensor1, tensor2), value)
    return input + (tensor1 / tensor2 if value == 1 else value * tensor1 / tensor2)


def _is_integral(t):
    return t.dtype.kind in "iub"


def _check_integral_value(op, tensors, value):
    if builtins.all(_is_integral(t) for t in tensors) and isinstance(value, float):
        raise RuntimeError(f"{op}: for integral input tensors, argument value must not be a floating point number.")


def lerp(input, end, weight):
    """input + weight * (end - input), computed as PyTorch does from the nearer end: for
    |weight| >= 0.5 as end - (end - input) * (1 - weight), so weight 1 gives exactly ``end``.
    Gradients (through the ordinary ops): 1 - weight to input, weight to end, end - input to a
    weight tensor."""
    diff = end - input
    if isinstance(weight, Tensor):
        return _ops().where(weight.abs() < 0.5, input + weight * diff, end - diff * (1 - weight))
    return input + weight * diff if builtins.abs(weight) < 0.5 else end - diff * (1 - weight)


def subtract(input, other, *, alpha=1):
    return _ops().sub(input, other, alpha)


def multiply(input, other):
    return _ops().mul(input, other)


def divide(input, other, *, rounding_mode=None):
    return _rdiv.div(input, other, rounding_mode=rounding_mode)


def true_divide(input, other):
    return _ops().div(input, other)


def square(input):
    return _ops().pow(input, 2)


def rsqrt(input):
    return _ops().pow(_floating(input), -0.5)


def _floating(x):
    from .ops.unary import _floating as f
    return f(x)


def softmax(input, dim, dtype=None):
    return _ops().softmax(input if dtype is None else input.to(dtype), dim)


def log_softmax(input, dim, dtype=None):
    return _ops().log_softmax(input if dtype is None else input.to(dtype), dim)


def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False):
    from .tensor import factories
    return factories.zeros_like(input, dtype=dtype, requires_grad=requires_grad, layout=layout)


# new_* and properties ------------------------------------------------------------------------
def _new(fill):
    def method(self, *size, dtype=None, layout=None, device=None, requires_grad=False):
        from .tensor import factories
        check_layout(layout, "new_zeros" if fill == 0 else "new_ones")
        shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        return factories.full(tuple(shape), fill, dtype=dtype or self.dtype, requires_grad=requires_grad,
                              device=device or self.device)
    return method


def _new_full(self, size, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False):
    from .tensor import factories
    check_layout(layout, "new_full")
    return factories.full(tuple(size), fill_value, dtype=dtype or self.dtype, requires_grad=requires_grad,
                          device=device or self.device)


def _new_tensor(self, data, *, dtype=None, layout=None, device=None, requires_grad=False):
    from .tensor import factories
    check_layout(layout, "new_tensor")
    return factories.tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad,
                            device=device or self.device)


def _type(self, dtype=None, non_blocking=False):
    """No dtype: the legacy type name ("minidl.FloatTensor"); a dtype: the tensor in it."""
    from .tensor.dtype import LEGACY_TYPE_NAMES, legacy_type_name
    if dtype is None:
        return f"minidl.{legacy_type_name(self.dtype)}"
    from .tensor.legacy import LegacyTensorType
    if isinstance(dtype, LegacyTensorType):   # x.type(md.LongTensor)
        dtype = dtype.dtype
    if isinstance(dtype, str) and dtype.endswith("Tensor"):
        by_legacy = {v: k for k, v in LEGACY_TYPE_NAMES.items()}
        dtype = by_legacy[dtype.rsplit(".", 1)[-1][:-len("Tensor")]]
    return self.to(dtype)


_PROPERTIES = {
    "mT": property(lambda self: self.transpose(-2, -1)),
    "is_cuda": property(lambda self: self.device.type == "cuda"),
    "is_cpu": property(lambda self: self.device.type == "cpu"),
    "itemsize": property(lambda self: self.dtype.itemsize),
    "nbytes": property(lambda self: self.numel() * self.dtype.itemsize),
}

_METHODS_ONLY = {
    "new_zeros": _new(0), "new_ones": _new(1), "new_empty": _new(0), "new_full": _new_full,
    "new_tensor": _new_tensor, "type": _type, "element_size": lambda self: self.dtype.itemsize,
    "is_floating_point": lambda self: self.dtype.is_floating_point,
    "nelement": lambda self: self.numel(),
}


# the further tables, each a module with BOTH, MODULE_ONLY and METHODS_ONLY (no name is in two of them)
_TABLES = (_extra, _elementwise, _arrange, _statistics, _aliases, _more, _special_tables, _decompositions,
           _linalg_tables, _tensor_methods, _toplevel, _storage, _legacy, _foreach)


def _merged(kind):
    return {name: fn for table in _TABLES for name, fn in getattr(table, kind).items()}


def _random_methods():
    from .tensor import sampling
    return {"bernoulli": sampling.bernoulli, "multinomial": sampling.multinomial}


BOTH = {
    **{n: getattr(_em, n) for n in ("log1p", "expm1", "erf", "sign", "floor", "ceil", "trunc",
                                    "maximum", "minimum")},
    **{n: getattr(_cum, n) for n in ("prod", "cumsum", "cumprod")},
    **{n: getattr(_re, n) for n in ("flip", "roll", "tril", "triu", "diag", "gather", "index_select",
                                    "masked_select", "repeat_interleave", "tile")},
    "sum": sum, "mean": mean, "var": var, "std": std, "var_mean": var_mean, "std_mean": std_mean,
    "max": max, "min": min, "amax": amax, "amin": amin,
    "argmax": argmax, "argmin": argmin, "norm": norm, "any": any, "all": all,
    "mm": mm, "bmm": bmm, "addmm": _addmm.addmm, "baddbmm": _addmm.baddbmm, "addbmm": _addmm.addbmm,
    "outer": outer, "einsum": einsum, "view_as": view_as, "reshape_as": reshape_as,
    "expand_as": expand_as, "unflatten": unflatten, "split": split, "chunk": chunk, "unbind": unbind,
    "swapaxes": swapaxes, "cdist": cdist, "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor, "logical_not": logical_not,
    "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "isclose": isclose, "allclose": allclose, "equal": equal,
    "nonzero": nonzero, "unique": unique, "numel": numel, "clip": clip, "clamp": clip, "square": square,
    "clamp_min": clamp_min, "clamp_max": clamp_max, "addcmul": addcmul, "addcdiv": addcdiv, "lerp": lerp,
    "floor_divide": _rdiv.floor_divide, "remainder": _rdiv.remainder, "fmod": _rdiv.fmod,
    "subtract": subtract, "multiply": multiply, "divide": divide, "true_divide": true_divide,
    "rsqrt": rsqrt, "softmax": softmax, "log_softmax": log_softmax,
    **_merged("BOTH"),
}

# module level only (a tensor method of these names would mean something else or nothing)
MODULE_ONLY = {"meshgrid": meshgrid, "empty_like": empty_like, **_merged("MODULE_ONLY")}

# at module level from the Tensor method of the same name
FROM_METHODS = ("sqrt", "exp", "log", "tanh", "sigmoid", "relu", "abs", "neg", "pow", "matmul", "transpose",
                "permute", "reshape", "flatten", "squeeze", "unsqueeze", "sort", "argsort", "topk", "kthvalue",
                "median", "mode", "masked_fill", "add", "sub", "mul", "div", "t", "detach", "clone", "repeat")

def _module_from_method(name):
    def fn(input, *args, **kwargs):
        return getattr(input, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"md.{name}(t, ...) is t.{name}(...)."
    return fn


def install(module_globals):
    """Attach the functions to minidl's namespace and to Tensor. A method Tensor already
    defines stays (only taught ``axis=``); the module-level function is the fuller one here."""
    for name, fn in BOTH.items():
        module_globals.setdefault(name, _axis(fn))
        setattr(Tensor, name, _axis(Tensor.__dict__[name]) if name in Tensor.__dict__ else _axis(fn))
    if "repeat" not in Tensor.__dict__:
        Tensor.repeat = _re.repeat
    for name, fn in {**MODULE_ONLY, **_random_methods()}.items():
        module_globals.setdefault(name, fn)
    for name, fn in {**_random_methods(), **_METHODS_ONLY, **_merged("METHODS_ONLY")}.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, fn)
    for name in ("median", "mode", "kthvalue"):   # reductions Tensor defines: axis= and keepdims= too
        setattr(Tensor, name, _axis(Tensor.__dict__[name]))
    for name in FROM_METHODS:
        module_globals.setdefault(name, _module_from_method(name))
    for name, prop in _PROPERTIES.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, prop)
    install_inplace_forms(Tensor)
    install_out_argument(module_globals)   # md.add(a, b, out=c): the module-level functions only
