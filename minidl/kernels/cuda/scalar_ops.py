"""The scalar functions the generic map / zip kernels apply, as cuda device functions.

Each takes two arguments (unary ones ignore the second) so that one map kernel serves
both ``exp(x)`` and ``x + 2``. The guards make the simulator (plain Python ``math``, which
raises on log(0) or exp(1000)) agree with the GPU and NumPy (which give -inf / inf / nan).
"""
import math

from numba import cuda


def _d(fn):
    return cuda.jit(device=True)(fn)


@_d
def identity(x, c):
    return x


@_d
def neg(x, c):
    return -x


@_d
def exp(x, c):
    if x > 709.0:
        return math.inf
    return math.exp(x)


@_d
def log(x, c):
    if x > 0:
        return math.log(x)
    if x == 0:
        return -math.inf
    return math.nan


@_d
def sqrt(x, c):
    if x >= 0:
        return math.sqrt(x)
    return math.nan


@_d
def tanh(x, c):
    return math.tanh(x)


@_d
def absolute(x, c):
    return -x if x < 0 else x


@_d
def sign(x, c):
    if x > 0:
        return 1
    if x < 0:
        return -1
    return 0 * x   # keeps nan


@_d
def erf(x, c):
    return math.erf(x)


@_d
def sin(x, c):
    if math.isinf(x):
        return math.nan
    return math.sin(x)


@_d
def cos(x, c):
    if math.isinf(x):
        return math.nan
    return math.cos(x)


@_d
def tan(x, c):
    if math.isinf(x):
        return math.nan
    return math.tan(x)


@_d
def log1p(x, c):
    if x > -1:
        return math.log1p(x)
    if x == -1:
        return -math.inf
    return math.nan


@_d
def expm1(x, c):
    if x > 709.0:
        return math.inf
    return math.expm1(x)


@_d
def log2(x, c):
    if x > 0:
        return math.log2(x)
    if x == 0:
        return -math.inf
    return math.nan


@_d
def logical_not(x, c):
    return not x


@_d
def isfinite(x, c):
    return not (math.isinf(x) or math.isnan(x))


@_d
def add(a, b):
    return a + b


@_d
def subtract(a, b):
    return a - b


@_d
def multiply(a, b):
    return a * b


@_d
def divide(a, b):
    if b == 0:   # IEEE division; Python (the simulator) would raise
        if a == 0 or a != a:
            return math.nan
        return math.inf if (a > 0) == (math.copysign(1.0, b) > 0) else -math.inf
    return a / b


@_d
def floor_divide(a, b):
    return a // b


@_d
def remainder(a, b):
    return a % b


@_d
def power(a, b):
    return a ** b


@_d
def maximum(a, b):
    if a != a:
        return a
    return a if a >= b else b


@_d
def minimum(a, b):
    if a != a:
        return a
    return a if a <= b else b


@_d
def less(a, b):
    return a < b


@_d
def less_equal(a, b):
    return a <= b


@_d
def greater(a, b):
    return a > b


@_d
def greater_equal(a, b):
    return a >= b


@_d
def equal(a, b):
    return a == b


@_d
def not_equal(a, b):
    return a != b


@_d
def logical_and(a, b):
    return bool(a) and bool(b)


@_d
def logical_or(a, b):
    return bool(a) or bool(b)


# rounding, tests, inverse and hyperbolic trigonometry (Python's math raises where NumPy gives inf / nan:
# each guard returns NumPy's value first, so the simulator agrees with the GPU)
@_d
def floor(x, c):
    if math.isinf(x) or x != x:
        return x
    return math.floor(x)


@_d
def ceil(x, c):
    if math.isinf(x) or x != x:
        return x
    return math.ceil(x)


@_d
def trunc(x, c):
    if math.isinf(x) or x != x:
        return x
    return math.floor(x) if x >= 0 else math.ceil(x)   # (math.trunc: the simulator's float32 has no __trunc__)


@_d
def rint(x, c):
    """Round half to even, as NumPy's rint."""
    if math.isinf(x) or x != x:
        return x
    r = math.floor(x)
    d = x - r
    if d > 0.5 or (d == 0.5 and r % 2 != 0):
        r += 1
    return r


@_d
def isnan(x, c):
    return x != x


@_d
def isinf(x, c):
    return math.isinf(x)


@_d
def signbit(x, c):
    return math.copysign(1.0, x) < 0


@_d
def arcsin(x, c):
    if -1 <= x <= 1:
        return math.asin(x)
    return math.nan


@_d
def arccos(x, c):
    if -1 <= x <= 1:
        return math.acos(x)
    return math.nan


@_d
def arctan(x, c):
    return math.atan(x)


@_d
def sinh(x, c):
    if x > 710.0:
        return math.inf
    if x < -710.0:
        return -math.inf
    return math.sinh(x)


@_d
def cosh(x, c):
    if x > 710.0 or x < -710.0:
        return math.inf
    return math.cosh(x)


@_d
def arcsinh(x, c):
    return math.asinh(x)


@_d
def arccosh(x, c):
    if x >= 1:
        return math.acosh(x)
    return math.nan


@_d
def arctanh(x, c):
    if -1 < x < 1:
        return math.atanh(x)
    if x == 1:
        return math.inf
    if x == -1:
        return -math.inf
    return math.nan


@_d
def exp2(x, c):
    if x > 1023.0:
        return math.inf
    return 2.0 ** x


@_d
def arctan2(a, b):
    return math.atan2(a, b)


@_d
def hypot(a, b):
    return math.hypot(a, b)


@_d
def copysign(a, b):
    return math.copysign(a, b)


@_d
def fmod(a, b):
    if b == 0 or math.isinf(a) or a != a or b != b:
        return math.nan
    return math.fmod(a, b)


@_d
def logical_xor(a, b):
    return bool(a) != bool(b)


UNARY = dict(identity=identity, negative=neg, exp=exp, log=log, sqrt=sqrt, tanh=tanh, absolute=absolute,
             sign=sign, erf=erf, logical_not=logical_not, isfinite=isfinite, sin=sin, cos=cos, tan=tan,
             log1p=log1p, expm1=expm1, log2=log2, floor=floor, ceil=ceil, trunc=trunc, rint=rint, isnan=isnan,
             isinf=isinf, signbit=signbit, arcsin=arcsin, arccos=arccos, arctan=arctan, sinh=sinh, cosh=cosh,
             arcsinh=arcsinh, arccosh=arccosh, arctanh=arctanh, exp2=exp2)
BINARY = dict(add=add, subtract=subtract, multiply=multiply, divide=divide, floor_divide=floor_divide,
              remainder=remainder, power=power, maximum=maximum, minimum=minimum, less=less,
              less_equal=less_equal, greater=greater, greater_equal=greater_equal, equal=equal,
              not_equal=not_equal, logical_and=logical_and, logical_or=logical_or, arctan2=arctan2, hypot=hypot,
              copysign=copysign, fmod=fmod, logical_xor=logical_xor)

# the special functions (special.py) run on the same map / zip kernels
from .special import BINARY as _SPECIAL_BINARY  # noqa: E402
from .special import UNARY as _SPECIAL_UNARY  # noqa: E402

UNARY.update(_SPECIAL_UNARY)
BINARY.update(_SPECIAL_BINARY)
