"""Indexing and selection: x[index], where, masked_fill, and comparisons.

Gradients of a selection flow back only to the selected elements. With integer-array
indices an element can be picked several times; its gradient is then the *sum* of the
gradients of its copies (a scatter-add, ``np.add.at``).
"""
import operator
import warnings

import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import wrap as wrap_dtype
from ._broadcast import shape_of, unbroadcast
from ._higher_order import constant, keep_where, sum_to
from ._saved import keep_for_backward
from .shape_error import ShapeError


# PyTorch's warnings for the index forms it still accepts but means to change
_SEQUENCE_WARNING = ("Using a non-tuple sequence for multidimensional indexing is deprecated and will be changed in "
                     "pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be interpreted as "
                     "tensor index, x[torch.tensor(seq)], which will result either in an error or a different result")
_BYTE_MASK_WARNING = "indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead."
_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32), np.dtype(np.uint8), np.dtype(np.bool_))


def _as_items(index):
    """The index as a tuple of its parts. A list that holds a tensor, a sequence, a slice, None or
    Ellipsis counts as a tuple (PyTorch's, and old NumPy's, reading of ``x[[0, slice(None)]]``),
    with PyTorch's deprecation warning; any other list is one integer or bool index."""
    Tensor = _op_function.Tensor
    if isinstance(index, tuple):
        return index
    if isinstance(index, list) and len(index) < 32:
        for i in index:
            if isinstance(i, (Tensor, list, tuple, slice, np.ndarray)) or i is None or i is Ellipsis:
                warnings.warn(_SEQUENCE_WARNING, UserWarning, stacklevel=4)
                return tuple(index)
    return (index,)


def _index_item(i):
    """One part of an index as PyTorch reads it: an int, a slice, None, Ellipsis, a
    Python bool, or an integer/bool array (a byte array is a mask, with PyTorch's warning)."""
    Tensor = _op_function.Tensor
    if i is None or i is Ellipsis:
        return i
    if isinstance(i, slice):   # a negative step reverses, as NumPy's (PyTorch refuses one; use flip())
        return i
    if isinstance(i, (bool, np.bool_)):
        return bool(i)
    if isinstance(i, Tensor):
        a = i._data
        if a.dtype not in _INDEX_DTYPES:
            raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors; expected integer "
                             f"or bool, got dtype {a.dtype}")
    elif isinstance(i, (list, np.ndarray)):
        a = np.asarray(i)
        if a.size == 0 and a.dtype.kind == "f":      # [] is an empty list of positions
            a = a.astype(np.int64)
    else:
        try:
            i = operator.index(i)
        except TypeError:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                             f"valid indices (got {type(i).__name__})") from None
        if not -2 ** 63 <= i < 2 ** 63:   # NumPy: an OverflowError, or an IndexError
            raise IndexError(f"index {i} is out of bounds (it does not fit in 64 bits)")
        return i
    if a.dtype.kind not in "iub":
        raise IndexError(f"tensors used as indices must be long, int, byte or bool tensors; expected integer "
                         f"or bool, got dtype {a.dtype}")
    if a.dtype == np.uint8:
        warnings.warn(_BYTE_MASK_WARNING, UserWarning, stacklevel=4)
        a = a.astype(np.bool_)
    if a.ndim == 0:        # a 0-d index tensor counts as its number
        return bool(a) if a.dtype.kind == "b" else int(a)
    return a


def split_index(index, ndim):
    """PyTorch's ``x[index]`` as ``x[first][second]``: ``first`` a basic NumPy index (ints, slices,
    None, Ellipsis: a view of x), ``second`` None or an advanced one (index arrays, and ``:`` for
    the dims between them); either may be None (nothing to do).

    Why two steps: PyTorch applies the ints (and the Python bools) before the index arrays, so an int
    does not count among them when it decides where the indexed dims go (they stay in place when
    the arrays sit side by side, and go first otherwise); NumPy counts an int with the arrays.
    ``x[0, :, [1, 2]]`` of a (3, 4, 5) tensor is (4, 2) in PyTorch, (2, 4) in NumPy. A bool is a new
    dim of length 1 indexed by [0] (True) or by no position (False)."""
    items = tuple(_index_item(i) for i in _as_items(index))
    if sum(i is Ellipsis for i in items) > 1:      # checked here: a trivial ``first`` never reaches NumPy
        raise IndexError("an index can only have a single ellipsis ('...')")
    if not any(type(i) is bool or hasattr(i, "dtype") for i in items):
        return items, None
    consumed = sum(1 if type(i) is int or isinstance(i, slice) else
                   (i.ndim if i.dtype.kind == "b" else 1) if hasattr(i, "dtype") else 0 for i in items)
    first, arrays, pos = [], {}, 0
    for i in items:
        if i is Ellipsis:
            first.append(i)
            pos += max(ndim - consumed, 0)
        elif i is None or type(i) is bool:
            first.append(None)
            if type(i) is bool:
                arrays[pos] = np.zeros(int(i), np.int64)
            pos += 1
        elif hasattr(i, "dtype"):
            k = i.ndim if i.dtype.kind == "b" else 1
            first.extend([slice(None)] * k)
            arrays[pos] = i
            pos += k
        else:
            first.append(i)
            pos += isinstance(i, slice)
    second, p, last = [], 0, max(arrays)
    while p <= last:
        a = arrays.get(p)
        second.append(slice(None) if a is None else a)
        p += 1 if a is None or a.dtype.kind != "b" else a.ndim
    trivial = all(i is Ellipsis or i == slice(None) for i in first)
    return (None if trivial else tuple(first)), tuple(second)


def take(a, first, second):
    """a[first][second] (see split_index)."""
    if first is not None:
        a = a[first]
    return a if second is None else a[second]


def assign(a, first, second, v):
    """a[first][second] = v: ``a[first]`` is a view of a, so the write lands in a."""
    if second is None:
        a[first] = v
    elif first is None:
        a[second] = v
    else:
        a[first][second] = v


class GetItem(Function):
    """out = x[index];  dL/dx = zeros with g written (basic) or scatter-added (advanced)
    at the indexed positions."""

    @staticmethod
    def forward(ctx, x, index, advanced):
        ctx.shape, ctx.dtype, ctx.advanced = x.shape, x.dtype, advanced
        ctx.index = _own_index(ctx, index) if advanced else index
        out = x[index]
        if isinstance(out, np.generic):
            # integers in every axis: NumPy gives a scalar copy, PyTorch a 0-d view
            out = x[(index if isinstance(index, tuple) else (index,)) + (Ellipsis,)]
        return out

    @staticmethod
    def backward(ctx, g):
        xp = namespace_of(g)
        gx = xp.zeros(ctx.shape, dtype=g.dtype)
        if ctx.advanced:
            xp.add.at(gx, ctx.index, g)
        else:
            gx[ctx.index] = g
        return gx, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        from .index_put import IndexPutAccumulate   # (they import this module)
        from .scatter_views import SliceScatter
        zeros = constant(namespace_of(g._data).zeros(ctx.shape, dtype=g.dtype))
        if ctx.advanced:
            return IndexPutAccumulate.apply(zeros, g, ctx.index), None, None
        index = ctx.index if isinstance(ctx.index, tuple) else (ctx.index,)
        if not any(i is Ellipsis for i in index):
            index += (Ellipsis,)    # a view even where every axis gets an int
        return SliceScatter.apply(zeros, g, lambda a: a[index]), None, None


class Where(Function):
    """out = a where cond else b;  dL/da = g where cond else 0,  dL/db = g where not cond else 0."""

    @staticmethod
    def forward(ctx, cond, a, b):
        xp = namespace_of(cond)
        ctx.save_for_backward(keep_for_backward(ctx, cond))
        ctx.shapes = shape_of(a), shape_of(b)
        return xp.where(cond, a, b)

    @staticmethod
    def backward(ctx, g):
        (cond,) = ctx.saved_tensors
        xp = namespace_of(g)
        _, na, nb = ctx.needs_input_grad
        ga = unbroadcast(xp.where(cond, g, 0), ctx.shapes[0]) if na else None
        gb = unbroadcast(xp.where(cond, 0, g), ctx.shapes[1]) if nb else None
        return None, ga, gb

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (cond,) = ctx.saved_tensors
        _, na, nb = ctx.needs_input_grad
        ga = sum_to(keep_where(cond, g), ctx.shapes[0]) if na else None
        gb = sum_to(keep_where(~cond, g), ctx.shapes[1]) if nb else None
        return None, ga, gb


class MaskedFill(Function):
    """out = value where mask else x;  dL/dx = 0 where mask else g."""

    @staticmethod
    def forward(ctx, x, mask, value):
        xp = namespace_of(x)
        ctx.save_for_backward(keep_for_backward(ctx, mask))
        return xp.where(mask, xp.asarray(value, dtype=x.dtype), x)

    @staticmethod
    def backward(ctx, g):
        (mask,) = ctx.saved_tensors
        return unbroadcast(namespace_of(g).where(mask, 0, g), g.shape), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (mask,) = ctx.saved_tensors
        return sum_to(keep_where(~mask, g), g.shape), None, None


def _own_index(ctx, index):
    """The index with each of its arrays replaced by backward's private copy (the caller may
    still write to the arrays it indexed with)."""
    if isinstance(index, tuple):
        return tuple(keep_for_backward(ctx, i) if hasattr(i, "dtype") else i for i in index)
    return keep_for_backward(ctx, index) if hasattr(index, "dtype") else index


def getitem(x, index):
    first, second = split_index(index, x.ndim)
    if first is not None:
        x = GetItem.apply(x, first[0] if len(first) == 1 else first, False)
    if second is not None:
        x = GetItem.apply(x, second[0] if len(second) == 1 else second, True)
    return x


class MaskDtypeError(RuntimeError, TypeError):
    """A condition or mask that is not bool: PyTorch's RuntimeError (a TypeError too: it is one)."""


def _as_bool(cond, op):
    Tensor = _op_function.Tensor
    c = cond._data if isinstance(cond, Tensor) else np.asarray(cond)
    if c.dtype == np.uint8 and op == "where":
        warnings.warn("where received a uint8 condition tensor. This behavior is deprecated and will be removed in "
                      "a future version of PyTorch. Use a boolean condition instead.", UserWarning, stacklevel=3)
        return c.astype(np.bool_)
    if c.dtype.kind != "b":
        raise MaskDtypeError(f"{op}: expected a bool condition/mask, got dtype {c.dtype}")
    return c


def where(cond, a, b):
    """a where cond else b, in PyTorch's result dtype of a and b (a Python number or a 0-d tensor
    counts only where its category is higher: where(c, int8 tensor, 300) is int8, where(c, 1., 0.)
    the default float dtype)."""
    from ._elementwise_args import result_dtype   # (it imports this module's package)
    Tensor = _op_function.Tensor
    cond = _as_bool(cond, "where")
    dt = result_dtype(a, b)
    a, b = (_as_dtype(v, dt, Tensor) for v in (a, b))
    try:
        return Where.apply(cond, a, b)
    except ValueError as exc:
        if "broadcast" not in str(exc):
            raise
        raise ShapeError(f"where: shapes of condition {list(cond.shape)}, input {list(shape_of(_raw(a)))} and "
                         f"other {list(shape_of(_raw(b)))} cannot be broadcast together") from None


def _as_dtype(v, dt, Tensor):
    if isinstance(v, Tensor):
        return v if v._data.dtype == dt else v.to(wrap_dtype(dt))
    if dt.kind not in "biuf":   # bfloat16: a Python number is weak, so it takes the array's dtype
        return v
    try:
        return dt.type(v)
    except OverflowError:
        raise RuntimeError(f"value cannot be converted to type {dt} without overflow") from None


def _raw(x):
    return getattr(x, "_data", x)


def masked_fill(x, mask, value):
    """x with value where mask (broadcast with x) holds. A Tensor value must be 0-d; it is cast to x's
    dtype and, when it requires grad, receives the sum of the gradient at the filled positions."""
    Tensor = _op_function.Tensor
    mask = _as_bool(mask, "masked_fill")
    try:
        np.broadcast_shapes(mask.shape, x.shape)
    except ValueError:
        raise ValueError(f"masked_fill: mask of shape {list(mask.shape)} does not broadcast to "
                         f"the input's shape {list(x.shape)}") from None
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        if value._requires_grad and x.dtype.kind == "f":
            return Where.apply(mask, value.to(x.dtype), x)
    return MaskedFill.apply(x, mask, float(value))


def comparable(o):
    """Whether ``o`` can stand on one side of a tensor comparison. None and strings cannot: PyTorch's
    ``t == None`` is Python's False (the operators hand back NotImplemented) and ``md.eq(t, None)`` a
    TypeError."""
    return not (o is None or isinstance(o, (str, bytes)))


def _scalar_as(value, other):
    """A Python int (or a 0-d integer tensor) compared with an integer tensor, cast to that tensor's
    dtype as PyTorch does: the scalar does not promote the comparison, so an out-of-range value wraps
    (``uint8 < -1`` compares with 255). Anything else comes back unchanged."""
    Tensor = _op_function.Tensor
    if not (isinstance(other, Tensor) and other.ndim and other.dtype.kind in "iu"):
        return value
    if isinstance(value, Tensor):
        if value.ndim or value.dtype.kind not in "iu" or value.device.type != "cpu":
            return value
        value = int(value._data)
    elif not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        return value
    if not -2 ** 63 <= int(value) < 2 ** 63:
        raise OverflowError(f"int too big to convert: {value} does not fit in 64 bits")
    return np.array(int(value) & (2 ** 64 - 1), np.uint64).astype(other._data.dtype)[()]


def compare(name, a, b):
    """Elementwise comparison or logic (``name`` is a NumPy ufunc name); returns a bool
    Tensor outside the graph."""
    Tensor = _op_function.Tensor
    for o in (a, b):
        if not comparable(o):
            raise TypeError(f"{name}(): expected a Tensor or a number to compare with, got {type(o).__name__}")
    a, b = _scalar_as(a, b), _scalar_as(b, a)
    ra = a._data if isinstance(a, Tensor) else a
    rb = b._data if isinstance(b, Tensor) else b
    return Tensor._wrap(getattr(namespace_of(ra if hasattr(ra, "shape") else rb), name)(ra, rb), None, 0)


def logical_not(a):
    Tensor = _op_function.Tensor
    return Tensor._wrap(namespace_of(a._data).logical_not(a._data), None, 0)
