"""Indexing cuda arrays: basic indices as views; integer-array indices as element offsets
computed on the device (range-checked there, reported at the next read) and run through the
``gather`` kernels (gather, scatter-set, scatter-add, ``where``); the index forms whose offsets
only NumPy's rules give are computed on the host (one round trip)."""
import builtins
import numbers

import numpy as np

from ...kernels.cuda import checks as _checks
from ...kernels.cuda import gather as _gather
from . import bfloat16 as _bf16
from .array import CudaArray, broadcast_to
from .creation import _arange, _const
from .elementwise import _assign, _copy_into, _operand, _unaliased


def getitem(x, index):
    basic = _basic_index(x, index)
    if basic is not None:
        return basic
    on_axis = _axis_index(x, index)
    if on_axis is not None:
        return _gather_axis(x, *on_axis)
    offsets = _offsets(x, index)
    out = CudaArray.empty(offsets.shape, x.dtype)
    _gather.gather(out._buf, x._buf, _flat_buffer(offsets))
    return out


def setitem(x, index, value):
    target = _basic_index(x, index)
    if target is not None:
        _assign(target, value)
        return
    on_axis = _axis_index(x, index)
    if on_axis is not None:
        _scatter_axis(x, *on_axis, value, add=False)
        return
    if (isinstance(index, CudaArray) and index.dtype.kind == "b" and index.shape == x.shape
            and not (isinstance(value, (CudaArray, np.ndarray)) and np.ndim(value))):
        # x[mask] = scalar: a where on the device, no host copy
        _copy_into(x, _where(index, value, x))
        return
    _scatter(x, _offsets(x, index), value, add=False)


def _basic_index(x, index):
    """x[index] as a view when ``index`` holds only ints, slices, None and Ellipsis; else None."""
    items = index if isinstance(index, tuple) else (index,)
    for i in items:
        if not (i is None or i is Ellipsis or isinstance(i, slice) or
                (isinstance(i, (numbers.Integral, np.integer)) and not isinstance(i, (bool, np.bool_))) or
                (isinstance(i, np.ndarray) and i.ndim == 0 and i.dtype.kind in "iu")):
            return None
    n_real = builtins.sum(1 for i in items if i is not None and i is not Ellipsis)
    if n_real > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {n_real} were indexed")
    if builtins.sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    expanded = []
    for i in items:
        if i is Ellipsis:
            expanded.extend([slice(None)] * (x.ndim - n_real))
        else:
            expanded.append(i)
    if Ellipsis not in items:
        expanded.extend([slice(None)] * (x.ndim - n_real))
    shape, strides, offset, d = [], [], x._off, 0
    for i in expanded:
        if i is None:
            shape.append(1)
            strides.append(0)
            continue
        n, st = x.shape[d], x._st[d]
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            shape.append(len(range(start, stop, step)))
            strides.append(st * step)
            offset += start * st if shape[-1] else 0
        else:
            k = int(i)
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {d} with size {n}")
            offset += (k % n) * st
        d += 1
    return x._view(tuple(shape), tuple(strides), offset)


def _index_array(i):
    """An integer index array as a contiguous int64 CudaArray (host arrays are uploaded)."""
    i = i if isinstance(i, CudaArray) else CudaArray.from_host(np.asarray(i))
    if i.dtype != np.int64 or not i.is_contiguous():
        i = i.astype(np.int64)
    return i


def _flat_buffer(a):
    return a._buf[a._off:a._off + a.size]


def _is_int_array(i):
    if isinstance(i, list):
        i = np.asarray(i)
    return isinstance(i, (CudaArray, np.ndarray)) and i.dtype.kind in "iu" and i.ndim >= 1


def _axis_index(x, index):
    """(axis, indices) when ``index`` picks along one axis with one integer array and takes
    every element of the others (``x[idx]``, ``x[:, idx]``): gathered on the device."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) > x.ndim:
        return None
    axis = None
    for d, i in enumerate(items):
        if isinstance(i, slice) and i == slice(None):
            continue
        if axis is None and _is_int_array(i):
            axis = d
            continue
        return None
    if axis is None:
        return None
    return axis, _index_array(items[axis])


def _axis_geometry(x, axis):
    pre, post = x.shape[:axis], x.shape[axis + 1:]
    return (pre or (1,), x._st[:axis] or (0,), x.shape[axis], x._st[axis], post or (1,), x._st[axis + 1:] or (0,))


def _check_axis_range(x, axis, idx):
    """The take/put kernels clamp an index into the array (they never leave it); a wrong one is
    reported at the next read, as the other device index checks (kernels/cuda/checks.py)."""
    n = x.shape[axis]
    _checks.assert_all((idx >= -n) & (idx < n), IndexError,
                       f"index out of bounds for axis {axis} with size {n} (an integer index array on device 'cuda')")


def _gather_axis(x, axis, idx):
    _check_axis_range(x, axis, idx)
    out = CudaArray.empty(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)
    pre_s, pre_st, n, st, post_s, post_st = _axis_geometry(x, axis)
    _gather.take_axis(out._buf, x._buf, x._off, pre_s, pre_st, _flat_buffer(idx), n, st, post_s, post_st)
    return out


def _value_for(x, value, shape):
    """``value`` as a CudaArray of x's dtype that broadcasts to ``shape``."""
    if isinstance(value, np.ndarray) and value.ndim:
        value = CudaArray.from_host(value)
    value = _operand(value, x)
    if not isinstance(value, CudaArray):
        value = _const(value, x.dtype)
    if value.dtype != x.dtype:
        value = value.astype(x.dtype)
    if np.broadcast_shapes(value.shape, shape) != shape:
        raise ValueError(f"shape mismatch: value array of shape {value.shape} could not be broadcast "
                         f"to indexing result of shape {shape}")
    return _unaliased(value, x)


def _scatter_axis(x, axis, idx, value, add):
    _check_axis_range(x, axis, idx)
    shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
    value = _value_for(x, value, shape)
    pre_s, pre_st, n, st, post_s, post_st = _axis_geometry(x, axis)
    _gather.put_axis(x._buf, x._off, pre_s, pre_st, _flat_buffer(idx), n, st, post_s, post_st,
                     value._buf, value._strides_for(shape), value._off, shape, add)


def _host_index(index):
    items = index if isinstance(index, tuple) else (index,)
    return tuple(i.copy_to_host() if isinstance(i, CudaArray) else i for i in items)


def _offsets(x, index):
    """Buffer offsets (a contiguous int64 CudaArray) of the elements of x[index] for an
    advanced index: computed on the device when ``_device_offsets`` can, else by NumPy's own
    rules on the host (a round trip: device index arrays are read back, the offsets copied up)."""
    on_device = _device_offsets(x, index)
    if on_device is not None:
        return on_device
    pos = np.full((), x._off, dtype=np.int64)
    for d, (n, st) in enumerate(zip(x.shape, x._st)):
        shape = [1] * x.ndim
        shape[d] = n
        pos = pos + np.arange(n, dtype=np.int64).reshape(shape) * st
    pos = np.broadcast_to(pos, x.shape)
    return CudaArray.from_host(np.ascontiguousarray(pos[_host_index(index)]))


def _device_offsets(x, index):
    """Offsets of x[i0, i1, ..., :, :] on the device, or None for other index forms.

    Handles a run of adjacent integer indices (arrays, or ints, which broadcast with them),
    optionally after and before full slices: NumPy puts the broadcast index shape B in place
    of the run, so x[:, i, j] has shape x.shape[:1] + B + x.shape[3:], and element
    (p, b, q) lives at off + p . st_pre + sum_d wrap(i_d[b]) st_d + q . st_post. Every term is
    a small integer array, summed with broadcasting by the zip kernel. Index ranges are
    checked on the device (deferred, see kernels/cuda/checks.py). Bool masks, None,
    Ellipsis and partial slices return None (the host path)."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) > x.ndim:
        return None
    kinds = []
    for i in items:
        if isinstance(i, slice) and i == slice(None):
            kinds.append("s")
        elif _is_int_array(i) or _is_int_scalar(i):
            kinds.append("a")
        else:
            return None
    run = "".join(kinds).strip("s")
    if not run or "s" in run:
        return None
    first = kinds.index("a")
    last = first + len(run)
    arrays = []
    for d in range(first, last):
        i = items[d]
        arrays.append(_index_array(i) if _is_int_array(i) else _const(int(i), np.int64))
    bshape = np.broadcast_shapes(*[a.shape for a in arrays])
    pre, post = x.shape[:first], x.shape[last:]
    out_shape = pre + bshape + post
    nd = len(out_shape)
    pos = _const(x._off, np.int64)
    for d, n in enumerate(pre):
        pos = pos + _expand_to(_arange(n, dtype=np.int64) * x._st[d], d, nd)
    for d, a in zip(range(first, last), arrays):
        n = x.shape[d]
        _check_axis_range(x, d, a)
        wrapped = a + (a < 0).astype(np.int64) * n
        pos = pos + wrapped.reshape((1,) * len(pre) + (1,) * (len(bshape) - a.ndim) + a.shape + (1,) * len(post)) \
            * x._st[d]
    for k, n in enumerate(post):
        pos = pos + _expand_to(_arange(n, dtype=np.int64) * x._st[last + k], len(pre) + len(bshape) + k, nd)
    pos = broadcast_to(pos, out_shape)
    return pos if pos.is_contiguous() else pos.copy()


def _is_int_scalar(i):
    return isinstance(i, (numbers.Integral, np.integer)) and not isinstance(i, (bool, np.bool_))


def _expand_to(v, axis, ndim):
    """A 1-d array as the ``axis`` of an ndim-d array (size 1 elsewhere)."""
    return v.reshape((1,) * axis + (v.size,) + (1,) * (ndim - axis - 1))


def _scatter(x, offsets, value, add):
    shape = offsets.shape
    value = _value_for(x, value, shape)
    shape_k = shape if shape else (1,)
    _gather.scatter(x._buf, _flat_buffer(offsets), value._buf,
                    value._strides_for(shape_k) if shape else (0,), value._off, shape_k, add)


def _where(cond, a=None, b=None):
    if a is None or b is None:
        raise NotImplementedError("where(cond) with one argument (nonzero) is not implemented for device 'cuda'")
    cond = _operand(cond, a)
    a, b = _operand(a, cond), _operand(b, cond)
    arrays = [v for v in (cond, a, b) if isinstance(v, CudaArray)]
    if not arrays:
        raise TypeError("cuda where: expected at least one cuda array")
    dt = np.result_type(*[v.dtype if isinstance(v, CudaArray) else v for v in (a, b)])
    cond = cond if isinstance(cond, CudaArray) else _const(bool(cond), np.bool_)
    a = a if isinstance(a, CudaArray) else _const(a, dt)
    b = b if isinstance(b, CudaArray) else _const(b, dt)
    if _bf16.involves(a, b, dt):   # the kernel moves bits: both sides in the result's dtype first
        a, b = (v if v.dtype == dt else v.astype(dt) for v in (a, b))
    shape = np.broadcast_shapes(cond.shape, a.shape, b.shape)
    out = CudaArray.empty(shape, dt)
    sk = shape or (1,)
    st = (lambda v: v._strides_for(sk) if shape else (0,))
    _gather.where(out._buf, cond._buf, st(cond), cond._off, a._buf, st(a), a._off, b._buf, st(b), b._off, sk)
    return out
