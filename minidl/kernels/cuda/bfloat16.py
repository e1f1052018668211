"""bfloat16 <-> float32 / float64 on the device, in integer arithmetic on the bits.

numba.cuda has no bfloat16 type (and neither its compiler nor its simulator can type an
``ml_dtypes.bfloat16`` array), so a bfloat16 device buffer holds the same 16 bits as uint16
(minidl/backends/cuda/array.py explains the representation). These kernels convert between
that storage and float32, whose buffers they read and write through a uint32 view of the same
memory: no float bit-cast is needed inside a kernel, so the one source runs on a GPU and in
the simulator alike. Every kernel is strided (map's layout: a flat buffer, shape, strides in
elements, offset), so a conversion also copies, transposes or broadcasts at no extra cost.

The conversions are the CPU's (minidl/kernels/cpu/_half.py) and ml_dtypes':

    bfloat16 -> float32    bfloat16 is float32's top 16 bits: ``bits << 16``, exact.
    float32 -> bfloat16    round the low 16 bits away to nearest even, on the magnitude a:
                           (a + 0x7fff + ((a >> 16) & 1)) >> 16, the sign put back; a carry out
                           of the significand is the next binade (and past the largest finite
                           value, inf), so no special case but NaN, which becomes the quiet NaN
                           of its sign (0x7fc0 | sign), as ml_dtypes.
    float64 -> bfloat16    ml_dtypes rounds the float64 value once. Rounding to float32 first
                           and then to bfloat16 would round twice (a value just above a tie
                           would land on the tie and round to even, down). So the float32 step
                           rounds *to odd*: the float32 value nearest v, moved one ulp toward
                           zero if it is beyond v, with its last bit set if it is not v. That
                           keeps the information "above or below the tie" in a bit bfloat16
                           rounding then drops, and the result equals one rounding of v (16
                           bits dropped, far more than the 2 that round-to-odd needs).

Under the simulator the integers are NumPy scalars; the arithmetic stays in uint32 (no
overflow: a < 2^31, plus 2^15).
"""
import numpy as np
from numba import cuda, uint32

from ._common import grid_for, strided_offset

try:
    import ml_dtypes
    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:   # pragma: no cover - bfloat16 is then unavailable everywhere
    BFLOAT16 = None
STORAGE = np.dtype(np.uint16)   # what a bfloat16 device buffer holds


def is_bfloat16(dtype):
    return BFLOAT16 is not None and np.dtype(dtype) == BFLOAT16


def bits_of(value):
    """The bfloat16 bits (np.uint16) of a Python / NumPy scalar, rounded as ml_dtypes rounds."""
    return np.asarray(value).astype(BFLOAT16).view(STORAGE)[()]


@cuda.jit(device=True)
def round_bits(b):
    """float32 bits (uint32) -> bfloat16 bits, rounded to nearest even; NaN -> quiet NaN."""
    sign = (b >> uint32(16)) & uint32(0x8000)
    a = b & uint32(0x7fffffff)
    if a > uint32(0x7f800000):
        return sign | uint32(0x7fc0)
    return sign | ((a + uint32(0x7fff) + ((a >> uint32(16)) & uint32(1))) >> uint32(16))


@cuda.jit
def _widen(out, o_strides, o_off, x, x_strides, x_off, shape, n):
    i = cuda.grid(1)
    if i < n:
        b = uint32(x[strided_offset(i, shape, x_strides, x_off)])
        out[strided_offset(i, shape, o_strides, o_off)] = b << uint32(16)


@cuda.jit
def _narrow32(out, o_strides, o_off, x, x_strides, x_off, shape, n):
    i = cuda.grid(1)
    if i < n:
        b = uint32(x[strided_offset(i, shape, x_strides, x_off)])
        out[strided_offset(i, shape, o_strides, o_off)] = round_bits(b)


@cuda.jit
def _round_to_odd(t_f32, t_bits, v, v_strides, v_off, shape, n):
    """t (contiguous, the float32 nearest each float64 v) rounded to odd instead (the module docstring)."""
    i = cuda.grid(1)
    if i < n:
        x = v[strided_offset(i, shape, v_strides, v_off)]
        f = t_f32[i]
        if x == x and f != x:   # inexact (NaN and exact values keep their nearest float32)
            b = t_bits[i]
            if abs(f) > abs(x):   # compared in float64, exactly
                b = b - uint32(1)   # one ulp toward zero: the float32 truncation of v
            t_bits[i] = b | uint32(1)


def _n(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def widen(out_bits, o_strides, o_off, x_bits, x_strides, x_off, shape):
    """float32 ``out`` (as its uint32 view ``out_bits``)[view] = bfloat16 ``x`` (uint16 storage)[view]."""
    n = _n(shape)
    if n:
        _widen[grid_for(n)](out_bits, o_strides, o_off, x_bits, x_strides, x_off, shape, n)


def narrow(out_bits, o_strides, o_off, x_bits, x_strides, x_off, shape):
    """bfloat16 ``out`` (uint16 storage)[view] = float32 ``x`` (as its uint32 view)[view], rounded."""
    n = _n(shape)
    if n:
        _narrow32[grid_for(n)](out_bits, o_strides, o_off, x_bits, x_strides, x_off, shape, n)


def round_to_odd(t_f32, v, v_strides, v_off, shape):
    """Turn the contiguous float32 buffer ``t_f32``, holding float32(v) of the float64 view v,
    into v rounded to odd, so that ``narrow`` of it is one correct rounding of v."""
    n = _n(shape)
    if n:
        _round_to_odd[grid_for(n)](t_f32, t_f32.view(np.uint32), v, v_strides, v_off, shape, n)
