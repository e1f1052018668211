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


UNARY = dict(identity=identity, negative=neg, exp=exp, log=log, sqrt=sqrt, tanh=tanh, absolute=absolute,
             sign=sign, erf=erf, logical_not=logical_not, isfinite=isfinite, sin=sin, cos=cos, tan=tan,
             log1p=log1p, expm1=expm1, log2=log2)
BINARY = dict(add=add, subtract=subtract, multiply=multiply, divide=divide, floor_divide=floor_divide,
              remainder=remainder, power=power, maximum=maximum, minimum=minimum, less=less,
              less_equal=less_equal, greater=greater, greater_equal=greater_equal, equal=equal,
              not_equal=not_equal, logical_and=logical_and, logical_or=logical_or)
