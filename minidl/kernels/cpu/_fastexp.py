"""exp for float32 that the compiler can vectorise, for kernels whose cost is an exp per element.

Numba compiles ``math.exp`` to a call into libm, one element at a time (it vectorises only
with Intel's SVML installed), about 4 ns per float32 value here; NumPy's own float32 exp is
SIMD code at about 0.5 ns. ``exp32`` is plain arithmetic, so LLVM turns a loop of it into AVX
instructions, 8 or 16 values at a time:

    e^y = 2^n * e^r,  n = round(y / ln 2),  r = y - n ln 2  in [-ln2/2, ln2/2]

- r is computed as (y - n * LN2_HI) - n * LN2_LO with LN2_HI = 355/512 (9 significant bits,
  so n * LN2_HI is exact for |n| < 2^15) and LN2_LO = ln 2 - LN2_HI: r carries no rounding
  error from the reduction (Cody and Waite's trick);
- e^r by its Taylor polynomial of degree 7 (Horner), whose remainder r^8 / 8! < 5e-9 on
  |r| <= 0.347 is below float32's precision;
- 2^n is built directly as the bits of a float32: exponent field n + 127, mantissa 0.
  (``as_float32`` reinterprets an int32 as float32; Numba has no such operation, so it is a
  one-instruction ``@intrinsic``.)

On [-87.3, 88.3] 2^n stays a normal float32. Below, the result is 0; above, inf. NumPy's exp
returns subnormal numbers between -103.9 and -87.3, and 0 below. A clamped result (1.2e-38 however
small y is) would be worse than either: a softmax or cross-entropy row never reaches exact
probabilities of 0 and 1, its gradient never reaches 0, and once a model fits its batch every later
gradient is made of subnormal numbers, on which the CPU's arithmetic runs 15-140 times slower in
the convolutions measured (docs/performance.md, "Subnormal gradients"). Returning 0 makes such
gradients exactly 0, as PyTorch's do. NaN propagates. Max relative error against float64 exp on
[-87.3, 88.3]: 1.0e-7 (NumPy's own float32 exp: 2.0e-7).

Callers must compile with ``error_model="numpy"``: under Numba's default ("python") every
float division checks for zero to raise ZeroDivisionError, and that branch alone stops LLVM
from vectorising the loop.
"""
import math

import numba
import numpy as np
from numba import njit, types
from numba.extending import overload

if numba.config.DISABLE_JIT:
    def as_float32(bits):
        """The int32 ``bits`` reinterpreted as a float32."""
        return np.array(bits, np.int32).view(np.float32)[()]
else:
    from llvmlite import ir
    from numba.extending import intrinsic

    @intrinsic
    def as_float32(typingctx, bits):
        """The integer ``bits`` (cast to int32) reinterpreted as a float32."""
        if not isinstance(bits, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            word = context.cast(builder, args[0], signature.args[0], types.int32)
            return builder.bitcast(word, ir.FloatType())
        return types.float32(bits), codegen


_LOG2E = np.float32(1.0 / math.log(2.0))
_LN2_HI = np.float32(355.0 / 512.0)
_LN2_LO = np.float32(math.log(2.0) - 355.0 / 512.0)
_LO, _HI = np.float32(-87.3), np.float32(88.3)      # keep n in [-126, 127]
_HALF = np.float32(0.5)
_ZERO, _INF = np.float32(0.0), np.float32(np.inf)
_C2, _C3, _C4, _C5, _C6, _C7 = (np.float32(1.0 / math.factorial(k)) for k in range(2, 8))
_ONE = np.float32(1.0)


@njit(cache=True, inline="always", error_model="numpy", fastmath={"contract"})
def _exp32_in_range(y):
    """e^y for a float32 y in [_LO, _HI] (or NaN): the reduction, the polynomial and 2^n, with no
    check of the range; the callers clamp first."""
    n = np.floor(y * _LOG2E + _HALF)
    r = (y - n * _LN2_HI) - n * _LN2_LO
    p = _C7
    p = p * r + _C6
    p = p * r + _C5
    p = p * r + _C4
    p = p * r + _C3
    p = p * r + _C2
    p = p * r + _ONE
    p = p * r + _ONE
    return p * as_float32((np.int32(n) + np.int32(127)) << np.int32(23))


@njit(cache=True, inline="always", error_model="numpy", fastmath={"contract"})
def exp32(y):
    """e^y for a float32 y (see the module docstring)."""
    x = y
    y = _LO if y < _LO else y           # comparisons false for NaN: NaN passes through
    y = _HI if y > _HI else y
    e = _exp32_in_range(y)
    e = _ZERO if x < _LO else e         # underflow: 0, never a clamped or subnormal value
    return _INF if x > _HI else e


_RECIP_T_MAX32 = np.float32(80.0)
_RECIP_T_MAX = 700.0


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def exp32_capped(t):
    """e^min(t, 80) for a float32 t, for a denominator 1 + e^t: beyond 80 the quotient is below
    2e-35 (0 beside any value it is added to or scales), and e^t = inf made the division about
    ten times slower on an Intel Xeon (tanh-GELU of 1M values below -12: 3.9 ms, against
    0.35 ms with the cap and for any values that do not saturate). NaN passes through."""
    return exp32(_RECIP_T_MAX32 if t > _RECIP_T_MAX32 else t)


@njit(cache=True, error_model="numpy", fastmath={"contract"})
def recip_one_plus_exp32(t):
    """1 / (1 + e^t) for a float32 t (the logistic sigmoid of -t), e^t capped as
    ``exp32_capped`` says. t is clamped to [-87.3, 80] and nothing else is checked: below, e^t
    is 2^-126 instead of exp32's 0, and 1 + 2^-126 rounds to 1 all the same. Without exp32's two
    edge selects, tanh-GELU's kernels ran 8-15% faster (docs/performance.md, "One clamp for the
    sigmoid")."""
    t = _LO if t < _LO else t           # NaN passes through, as in exp32
    t = _RECIP_T_MAX32 if t > _RECIP_T_MAX32 else t
    return _ONE / (_ONE + _exp32_in_range(t))


@njit(cache=True, error_model="numpy")
def recip_one_plus_exp(t):
    """1 / (1 + e^t) for a float64 t, with t clamped at 700 (e^700 is still finite) for the
    same reason as ``recip_one_plus_exp32``."""
    t = _RECIP_T_MAX if t > _RECIP_T_MAX else t
    return 1.0 / (1.0 + math.exp(t))


def exp_any(y):
    """exp32(y) for a float32 y, math.exp(y) otherwise: one name for kernels compiled for both."""
    return math.exp(y)


@overload(exp_any, inline="always")
def _exp_any(y):
    if y == types.float32:
        return lambda y: exp32(y)
    return lambda y: math.exp(y)
