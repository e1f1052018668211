"""float16 and bfloat16 ops computed in float32 and rounded once, as a GPU computes them.

A GPU multiplies low-precision matrices on tensor cores: the float16/bfloat16 inputs are
multiplied exactly, the products summed in float32, and the result rounded to the low dtype
once; its softmax, GELU and loss kernels likewise load 2-byte values and compute in float32.
The ops decorated with ``float32_compute`` (linear, matmul, addmm, einsum, conv,
conv_transpose, attention, bilinear, adaptive average pooling, softmax, log_softmax, GELU,
cross-entropy) do the same on every device: when an input array is
float16 or bfloat16, forward runs on float32 copies of the inputs (exact: every low-precision
value is a float32 value) and rounds its floating outputs to the low dtype; backward likewise
runs in float32 on the float32 copies forward saved and rounds each input's gradient to that
input's dtype. On the CPU the float32 work is BLAS (and the float32 Numba kernels), so a
float16 GEMM is as fast as a float32 one instead of going through NumPy's slow non-BLAS float16
loops (and bfloat16, which NumPy's matmul returns as float32, keeps its dtype), and a softmax's
sum or a GELU is not rounded after every NumPy step. Every product of two float16 (11-bit) or
bfloat16 (8-bit) significands is exact in float32's 24 bits, so the result equals
"float32-accumulated products of the low-precision inputs" up to the order of summation.

What forward saves for backward stays low precision where it is an input itself (the float32
copy is swapped back for the input it was made from, so the activations kept are 2-byte and an
in-place write to them is still detected); arrays that forward derives (conv's unfolded
columns, attention's probabilities) are kept in float32. Each call converts its inputs once
in forward and once more in backward.
"""
import functools

import numpy as np

_FLOAT32 = np.dtype(np.float32)


def _low(a):
    """True for a float16 or bfloat16 array (NumPy files bfloat16 under kind "V")."""
    dt = getattr(a, "dtype", None)
    return dt is not None and dt.itemsize == 2 and dt.kind in "fV" and hasattr(a, "astype")


def _widen(a):
    return a.astype(_FLOAT32) if _low(a) else a


def float32_compute(cls):
    """Make the Function ``cls`` compute float16/bfloat16 inputs in float32 (see the module
    docstring); float32 and float64 inputs run exactly as before."""
    forward, backward = cls.forward, cls.backward

    @functools.wraps(forward)
    def low_precision_forward(ctx, *args):
        low = next((a.dtype for a in args if _low(a)), None)
        if low is None:
            return forward(ctx, *args)
        ctx.low_precision = (low, tuple(getattr(a, "dtype", None) for a in args))
        wide = tuple(_widen(a) for a in args)
        out = forward(ctx, *wide)
        saved = ctx.__dict__.get("saved_tensors")
        if saved:   # keep the low-precision inputs themselves, not their float32 copies
            own = {id(w): a for w, a in zip(wide, args) if w is not a}
            ctx.saved_tensors = tuple(own.get(id(t), t) for t in saved)
        if isinstance(out, tuple):
            return tuple(_narrow(o, low) for o in out)
        return _narrow(out, low)

    @functools.wraps(backward)
    def low_precision_backward(ctx, *grads):
        meta = ctx.__dict__.get("low_precision")
        if meta is None:
            return backward(ctx, *grads)
        low, arg_dtypes = meta
        saved = ctx.__dict__.get("saved_tensors")
        if saved:
            ctx.saved_tensors = tuple(_widen(t) for t in saved)
        result = backward(ctx, *(_widen(g) for g in grads))
        if not isinstance(result, tuple):
            return _narrow(result, arg_dtypes[0])
        return tuple(_narrow(g, dt) for g, dt in zip(result, arg_dtypes))

    cls.forward = staticmethod(low_precision_forward)
    cls.backward = staticmethod(low_precision_backward)
    return cls


def cast_array(a, dtype):
    """``a.astype(dtype)``, where a value past a narrower float's range becomes inf as in a GPU's
    conversion (and PyTorch's), without NumPy's overflow warning: in float16 training an
    overflow is expected, and GradScaler is what answers it."""
    with np.errstate(over="ignore"):
        return a.astype(dtype)


def _narrow(a, dtype):
    """A float32 result rounded to ``dtype`` (left alone when it is not float32 or dtype is None)."""
    if dtype is None or getattr(a, "dtype", None) != _FLOAT32 or dtype == _FLOAT32:
        return a
    return cast_array(a, dtype)
