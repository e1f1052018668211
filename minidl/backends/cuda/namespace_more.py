"""More of NumPy for cuda arrays: rounding, the inverse and hyperbolic trigonometry, float tests,
and the rearrangements that are views or a few copies (moveaxis, roll, tile, repeat, diag,
diagonal). ``CudaNamespace`` inherits them; each is built on the generic kernels."""
import numbers

import numpy as np

from .array import CudaArray, asarray, broadcast_to, expand_dims
from .elementwise import _copy_into, _ufunc1, _ufunc2, _unary


def _round(x, decimals=0, out=None):
    """NumPy's round: half to even, at ``decimals`` places (scaled by 10**decimals and back)."""
    x = asarray(x)
    if x.dtype.kind in "iub" and decimals >= 0:
        y = x.copy()
    elif decimals == 0:
        y = _unary("rint", x)
    else:
        scale = 10.0 ** decimals
        y = _unary("rint", x * scale) / scale
    if out is not None:
        _copy_into(out, y)
        return out
    return y


def _moveaxis(x, source, destination):
    x = asarray(x)
    src = [s % x.ndim for s in (source if isinstance(source, (tuple, list)) else (source,))]
    dst = [d % x.ndim for d in (destination if isinstance(destination, (tuple, list)) else (destination,))]
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    order = [n for n in range(x.ndim) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x.transpose(tuple(order))


def _roll(x, shift, axis=None):
    """Each element moved ``shift`` places along ``axis`` (wrapping): two slices concatenated."""
    from .namespace import CUDA_NUMPY as xp
    x = asarray(x)
    if axis is None:
        return _roll(x.reshape(-1), shift, 0).reshape(x.shape)
    shifts = shift if isinstance(shift, (tuple, list)) else (shift,)
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    shifts, axes = np.broadcast_arrays(np.asarray(shifts), np.asarray(axes))
    y = x
    for s, a in zip(shifts.tolist(), axes.tolist()):
        n = x.shape[a]
        if n == 0:
            continue
        s %= n
        if s:
            lead = (slice(None),) * (a % x.ndim)
            y = xp.concatenate([y[lead + (slice(n - s, None),)], y[lead + (slice(0, n - s),)]], axis=a)
    return y.copy() if y is x else y


def _tile(x, reps):
    """x repeated ``reps`` times along each axis: a broadcast view (r, n) per axis, copied once."""
    x = asarray(x)
    reps = (reps,) if isinstance(reps, numbers.Integral) else tuple(int(r) for r in reps)
    d = max(len(reps), x.ndim)
    x = x.reshape((1,) * (d - x.ndim) + x.shape)
    reps = (1,) * (d - len(reps)) + reps
    v = x
    for ax in range(d):
        v = expand_dims(v, 2 * ax)
    pairs = tuple(n for r, s in zip(reps, x.shape) for n in (r, s))
    return broadcast_to(v, pairs).copy().reshape(tuple(r * s for r, s in zip(reps, x.shape)))


def _repeat(x, repeats, axis=None):
    """Each element repeated ``repeats`` times along ``axis``: a broadcast for a scalar count, a
    gather (host-computed source positions) for per-element counts."""
    x = asarray(x)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis %= x.ndim
    counts = np.asarray(repeats.copy_to_host() if isinstance(repeats, CudaArray) else repeats)
    if counts.ndim == 0:
        r = int(counts)
        v = broadcast_to(expand_dims(x, axis + 1), x.shape[:axis + 1] + (r,) + x.shape[axis + 1:])
        return v.copy().reshape(x.shape[:axis] + (x.shape[axis] * r,) + x.shape[axis + 1:])
    src = np.repeat(np.arange(x.shape[axis]), counts)
    return x[(slice(None),) * axis + (CudaArray.from_host(src),)]


def _diagonal(x, offset=0, axis1=0, axis2=1):
    """The diagonal as NumPy's diagonal: a read-only strided view moved to the last axis."""
    x = asarray(x)
    a1, a2 = axis1 % x.ndim, axis2 % x.ndim
    n1, n2 = x.shape[a1], x.shape[a2]
    s1, s2 = x.elem_strides[a1], x.elem_strides[a2]
    if offset >= 0:
        n, start = max(0, min(n1, n2 - offset)), offset * s2
    else:
        n, start = max(0, min(n1 + offset, n2)), -offset * s1
    rest = [k for k in range(x.ndim) if k not in (a1, a2)]
    shape = tuple(x.shape[k] for k in rest) + (n,)
    strides = tuple(x.elem_strides[k] for k in rest) + (s1 + s2,)
    return x._view(shape, strides, x.offset + (start if n else 0), writeable=False)


def _diag(v, k=0):
    """A 1-D v on the k-th diagonal of a zero square matrix, or a 2-D v's k-th diagonal (copied)."""
    from .creation import _full
    v = asarray(v)
    if v.ndim == 1:
        n = v.shape[0] + abs(k)
        out = _full((n, n), 0, v.dtype)
        _copy_into(_diagonal(out, k)._view((v.shape[0],), (n + 1,), writeable=True), v)
        return out
    if v.ndim == 2:
        return _diagonal(v, k).copy()
    raise ValueError("Input must be 1- or 2-d.")


def _nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    x = asarray(x)
    if x.dtype.kind not in "f":
        return x.copy() if copy else x
    from .indexing import _where
    info = np.finfo(x.dtype)
    hi = info.max if posinf is None else posinf
    lo = info.min if neginf is None else neginf
    y = _where(_unary("isnan", x), nan, x)
    y = _where(x == np.inf, hi, y)
    return _where(x == -np.inf, lo, y)


def _split(x, indices_or_sections, axis=0):
    """Views of x cut along ``axis`` (equal sections, or at the given indices), as numpy.split."""
    x = asarray(x)
    n = x.shape[axis]
    if isinstance(indices_or_sections, numbers.Integral):
        if n % indices_or_sections:
            raise ValueError("array split does not result in an equal division")
        step = n // indices_or_sections
        bounds = list(range(0, n + 1, step)) if step else [0] * (indices_or_sections + 1)
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    lead = (slice(None),) * (axis % x.ndim)
    return [x[lead + (slice(lo, hi),)] for lo, hi in zip(bounds[:-1], bounds[1:])]


def _broadcast_arrays(*arrays):
    arrays = [asarray(a) for a in arrays]
    shape = np.broadcast_shapes(*[a.shape for a in arrays])
    return [broadcast_to(a, shape) for a in arrays]


class MoreNumPy:
    """The functions above, as the namespace's static methods."""

    floor, ceil, trunc, rint, isnan, isinf, signbit = (_ufunc1(n) for n in (
        "floor", "ceil", "trunc", "rint", "isnan", "isinf", "signbit"))
    fix = trunc
    arcsin, arccos, arctan, sinh, cosh, arcsinh, arccosh, arctanh, exp2 = (_ufunc1(n) for n in (
        "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh", "arctanh", "exp2"))
    arctan2, hypot, copysign, fmod, logical_xor = (_ufunc2(n) for n in (
        "arctan2", "hypot", "copysign", "fmod", "logical_xor"))
    round = around = staticmethod(_round)
    moveaxis = staticmethod(_moveaxis)
    roll = staticmethod(_roll)
    tile = staticmethod(_tile)
    repeat = staticmethod(_repeat)
    diagonal = staticmethod(_diagonal)
    diag = staticmethod(_diag)
    nan_to_num = staticmethod(_nan_to_num)
    split = staticmethod(_split)
    broadcast_arrays = staticmethod(_broadcast_arrays)
