"""Exact GELU, y = x * Phi(x) with Phi(x) = (1 + erf(x / sqrt 2)) / 2, and its derivative
Phi(x) + x * phi(x), phi(x) = exp(-x**2 / 2) / sqrt(2 pi).

NumPy has no erf. float64 arrays call ``math.erf`` (libm) per element, the same function the
reference in ``minidl.ops.activation`` uses. libm's erf is scalar code and dominates the
cost, so float32 arrays use instead a rational approximation evaluated in float32, which the
compiler vectorises (the one Eigen and XLA use for float32 erf):

    erf(x) ~ x * P(x**2) / Q(x**2)  on [-4, 4] (and +-1 outside),

P of degree 6 and Q of degree 4 in x**2, max absolute error 4.2e-7 against math.erf (a few
float32 ulps).

The tanh approximation, y = x (1 + t) / 2 with t = tanh(sqrt(2/pi) (x + 0.044715 x**3)), has
its own pair of kernels (``gelu_tanh_forward`` / ``gelu_tanh_backward``); backward recomputes t
from x instead of saving it.

Arrays must be C-contiguous. Parallel when the layer kernels may be (``minidl.runtime.layer_threads``:
when OpenBLAS's workers have been told to sleep at once) and the input is large enough
(``_threads.layer_parallel``), else serial. Float32 kernels use the vectorisable ``exp32``
instead of libm's scalar exp, and compile with ``fastmath={"contract"}`` (multiply-adds fused):
both let the loops run in SIMD lanes (measurements: docs/performance.md).
"""
import math

import numpy as np
from numba import njit, prange

from ._fastexp import exp32, recip_one_plus_exp, recip_one_plus_exp32
from ._numerics import CONTRACT, by_dtype
from ._threads import layer_parallel

# a*b+c as one fused multiply-add (CONTRACT). The flag must sit on the loop kernels: helpers
# inlined by Numba (inline="always") are compiled under their caller's flags, not their own.
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)

_A1, _A3, _A5, _A7 = (np.float32(-1.60960333262415e-02), np.float32(-2.95459980854025e-03),
                      np.float32(-7.34990630326855e-04), np.float32(-5.69250639462346e-05))
_A9, _A11, _A13 = np.float32(-2.10102402082508e-06), np.float32(2.77068142495902e-08), np.float32(-2.72614225801306e-10)
_B0, _B2, _B4, _B6, _B8 = (np.float32(-1.42647390514189e-02), np.float32(-7.37332916720468e-03),
                           np.float32(-1.68282697438203e-03), np.float32(-2.13374055278905e-04),
                           np.float32(-1.45660718464996e-05))


@njit(error_model="numpy", cache=True, inline="always")
def erf_f32(x):
    """float32 erf by the rational approximation above."""
    x = min(max(x, np.float32(-4.0)), np.float32(4.0))
    x2 = x * x
    p = x2 * _A13 + _A11
    p = p * x2 + _A9
    p = p * x2 + _A7
    p = p * x2 + _A5
    p = p * x2 + _A3
    p = p * x2 + _A1
    q = x2 * _B8 + _B6
    q = q * x2 + _B4
    q = q * x2 + _B2
    q = q * x2 + _B0
    return x * p / q


@njit(error_model="numpy", cache=True, inline="always")
def _gelu(v):
    return 0.5 * v * (1.0 + math.erf(v * _INV_SQRT2))


@njit(error_model="numpy", cache=True, inline="always")
def _dgelu(v):
    return 0.5 * (1.0 + math.erf(v * _INV_SQRT2)) + v * _INV_SQRT_2PI * math.exp(-0.5 * v * v)


@njit(error_model="numpy", cache=True, inline="always")
def _gelu32(v):
    return np.float32(0.5) * v * (np.float32(1.0) + erf_f32(v * np.float32(_INV_SQRT2)))


@njit(error_model="numpy", cache=True, inline="always")
def _dgelu32(v):
    return (np.float32(0.5) * (np.float32(1.0) + erf_f32(v * np.float32(_INV_SQRT2)))
            + v * np.float32(_INV_SQRT_2PI) * exp32(np.float32(-0.5) * v * v))


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _fwd_serial(x, out):
    for i in range(x.size):
        out[i] = _gelu(np.float64(x[i]))


@njit(error_model="numpy", cache=True, parallel=True, fastmath=CONTRACT)
def _fwd_parallel(x, out):
    for i in prange(x.size):
        out[i] = _gelu(np.float64(x[i]))


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _bwd_serial(x, g, out):
    for i in range(x.size):
        out[i] = g[i] * _dgelu(np.float64(x[i]))


@njit(error_model="numpy", cache=True, parallel=True, fastmath=CONTRACT)
def _bwd_parallel(x, g, out):
    for i in prange(x.size):
        out[i] = g[i] * _dgelu(np.float64(x[i]))


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _fwd32_serial(x, out):
    for i in range(x.size):
        out[i] = _gelu32(x[i])


@njit(error_model="numpy", cache=True, parallel=True, fastmath=CONTRACT)
def _fwd32_parallel(x, out):
    for i in prange(x.size):
        out[i] = _gelu32(x[i])


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _bwd32_serial(x, g, out):
    for i in range(x.size):
        out[i] = g[i] * _dgelu32(x[i])


@njit(error_model="numpy", cache=True, parallel=True, fastmath=CONTRACT)
def _bwd32_parallel(x, g, out):
    for i in prange(x.size):
        out[i] = g[i] * _dgelu32(x[i])


def gelu_forward(x):
    out = np.empty_like(x)
    small = not layer_parallel(x.size)
    if x.dtype == np.float32:
        fn = _fwd32_serial if small else _fwd32_parallel
    else:
        fn = _fwd_serial if small else _fwd_parallel
    fn(x.reshape(-1), out.reshape(-1))
    return out


def gelu_backward(x, g):
    out = np.empty_like(g)
    small = not layer_parallel(x.size)
    if x.dtype == np.float32 and g.dtype == np.float32:
        fn = _bwd32_serial if small else _bwd32_parallel
    else:
        fn = _bwd_serial if small else _bwd_parallel
    fn(x.reshape(-1), g.reshape(-1), out.reshape(-1))
    return out


@njit(error_model="numpy", cache=True, inline="always")
def _half_one_plus_tanh(v):
    # (1 + tanh u) / 2 = sigmoid(2u) = 1 / (1 + exp(-2u)): one exp instead of libm's tanh
    return recip_one_plus_exp(-2.0 * _SQRT_2_OVER_PI * (v + 0.044715 * v * v * v))


# tanh-GELU in float32, arranged for few operations per element. With u = sqrt(2/pi) (v + 0.044715 v^3)
# and s = (1 + tanh u) / 2 = 1 / (1 + e^(-2u)):
#     gelu(v)  = v s,                   -2u = v (_T1 + _T3 v^2)
#     gelu'(v) = s + v s' ,             s' = 2 s (1 - s) u'   (tanh' = 1 - t^2 = 4 s (1 - s))
#              = s (1 + (1 - s) v (_D1 + _D3 v^2)),   _D1 + _D3 v^2 = 2 u' = 2 sqrt(2/pi) (1 + 3 * 0.044715 v^2)
# The constants are products taken in float64 and rounded once; folded, they save five of the
# derivative's operations (measurements: docs/performance.md, "One clamp for the sigmoid").
_T1, _T3 = np.float32(-2.0 * _SQRT_2_OVER_PI), np.float32(-2.0 * _SQRT_2_OVER_PI * 0.044715)
_D1, _D3 = np.float32(2.0 * _SQRT_2_OVER_PI), np.float32(2.0 * _SQRT_2_OVER_PI * 3 * 0.044715)
_ONE32 = np.float32(1)


@njit(error_model="numpy", cache=True, inline="always")
def gelu_tanh32(v):
    """tanh-GELU of a float32 v (see above)."""
    return v * recip_one_plus_exp32(v * (_T1 + _T3 * (v * v)))


@njit(error_model="numpy", cache=True, inline="always")
def dgelu_tanh32(v):
    """The derivative of tanh-GELU at a float32 v (see above)."""
    v2 = v * v
    s = recip_one_plus_exp32(v * (_T1 + _T3 * v2))
    return s * (_ONE32 + (_ONE32 - s) * (v * (_D1 + _D3 * v2)))


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _tanh_fwd32(x, out):
    for i in prange(x.size):
        out[i] = gelu_tanh32(x[i])


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _tanh_bwd32(x, g, out):
    for i in prange(x.size):
        out[i] = g[i] * dgelu_tanh32(x[i])


@njit(error_model="numpy", cache=True, inline="always")
def _gelu_tanh(v):
    """tanh-GELU of a float64 v."""
    return v * _half_one_plus_tanh(v)


@njit(error_model="numpy", cache=True, inline="always")
def _dgelu_tanh(v):
    """Its derivative at a float64 v, s + 2 v s (1 - s) u' (the float32 comment above)."""
    s = _half_one_plus_tanh(v)             # s = (1 + t) / 2, so 1 - t**2 = 4 s (1 - s)
    return s + 2.0 * v * s * (1.0 - s) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * v * v)


# each GELU and derivative by the value's dtype, for kernels compiled for both (bias_gelu.py)
gelu_any, dgelu_any = by_dtype(_gelu32, _gelu), by_dtype(_dgelu32, _dgelu)
gelu_tanh_any, dgelu_tanh_any = by_dtype(gelu_tanh32, _gelu_tanh), by_dtype(dgelu_tanh32, _dgelu_tanh)


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _tanh_fwd(x, out):
    for i in prange(x.size):
        out[i] = _gelu_tanh(x[i])


@njit(error_model="numpy", cache=True, fastmath=CONTRACT)
def _tanh_bwd(x, g, out):
    for i in prange(x.size):
        out[i] = g[i] * _dgelu_tanh(x[i])


@njit(error_model="numpy", cache=True, parallel=True, fastmath=CONTRACT)
def _tanh_fwd32_parallel(x, out):
    for i in prange(x.size):
        out[i] = gelu_tanh32(x[i])


@njit(error_model="numpy", cache=True, parallel=True, fastmath=CONTRACT)
def _tanh_bwd32_parallel(x, g, out):
    for i in prange(x.size):
        out[i] = g[i] * dgelu_tanh32(x[i])


def gelu_tanh_forward(x):
    out = np.empty_like(x)
    if x.dtype == np.float32:
        parallel = layer_parallel(x.size)
        fn = _tanh_fwd32_parallel if parallel else _tanh_fwd32
    else:
        fn = _tanh_fwd
    fn(x.reshape(-1), out.reshape(-1))
    return out


def gelu_tanh_backward(x, g):
    out = np.empty_like(g)
    if x.dtype == np.float32 and g.dtype == np.float32:
        parallel = layer_parallel(x.size)
        fn = _tanh_bwd32_parallel if parallel else _tanh_bwd32
    else:
        fn = _tanh_bwd
    fn(x.reshape(-1), g.reshape(-1), out.reshape(-1))
    return out
