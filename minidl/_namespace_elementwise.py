"""PyTorch's further elementwise functions, installed by _namespace.py's tables like the rest:
the trigonometric and hyperbolic functions and their inverses (ops/trigonometric.py), the
two-operand ones (atan2, hypot, xlogy, copysign, fmax/fmin, logaddexp(2), ldexp, float_power, heaviside:
ops/elementwise_binary.py), the special functions (erfinv, erfc, lgamma, digamma, i0, logit,
exp2: ops/special.py) and a number's parts and sign (frexp, frac, fix, sgn, signbit, ...:
ops/elementwise_parts.py), with NumPy's arc* names as aliases and their in-place methods
(``t.asin_()``), which write through tensor/inplace.py's ``apply_inplace`` like every other."""
from .ops import elementwise_binary as _bin
from .ops import elementwise_parts as _parts
from .ops import special as _special
from .ops import trigonometric as _trig
from .tensor.inplace import apply_inplace

BOTH = {
    **{n: getattr(_trig, n) for n in ("sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
                                      "acosh", "atanh", "sinc", "deg2rad", "rad2deg")},
    **{n: getattr(_bin, n) for n in ("atan2", "hypot", "xlogy", "copysign", "fmax", "fmin", "logaddexp",
                                     "logaddexp2", "ldexp", "float_power", "heaviside")},
    **{n: getattr(_special, n) for n in ("erfinv", "erfc", "lgamma", "digamma", "i0", "logit", "exp2")},
    **{n: getattr(_parts, n) for n in ("frexp", "frac", "fix", "sgn", "positive", "negative", "absolute",
                                       "signbit", "isposinf", "isneginf", "isreal")},
    # NumPy's names, which PyTorch also has
    "arcsin": _trig.asin, "arccos": _trig.acos, "arctan": _trig.atan, "arcsinh": _trig.asinh,
    "arccosh": _trig.acosh, "arctanh": _trig.atanh, "arctan2": _bin.atan2,
}

MODULE_ONLY = {}


def _inplace(name, fn):
    """``t.<name>_(*args)``: fn(t, *args) written into t (its dtype kept: a float result cannot go
    into an integer tensor, as PyTorch)."""
    def method(self, *args, **kwargs):
        others = [a for a in args if hasattr(a, "_data")]
        return apply_inplace(self, name + "_", lambda s: fn(s, *args, **kwargs), *others)
    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place {name}: t.{name}_(...) writes {name}(t, ...) into t."
    return method


def _float_power_(self, exponent):
    """float_power in place: the result is float64, so only a float64 tensor can take it (as PyTorch)."""
    from .tensor import dtype as _dtypes
    if self.dtype != _dtypes.float64:
        raise RuntimeError(f"the base given to float_power_ has dtype {self.dtype} but the operation's result "
                           "requires dtype minidl.float64")
    return apply_inplace(self, "float_power_", lambda s: _bin.float_power(s, exponent),
                         *[a for a in (exponent,) if hasattr(a, "_data")])


_INPLACE = ("asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan",
            "arcsinh", "arccosh", "arctanh", "atan2", "arctan2", "hypot", "logit", "xlogy", "copysign", "erfinv",
            "erfc", "exp2", "sinc", "deg2rad", "rad2deg", "lgamma", "digamma", "sgn", "frac", "negative",
            "absolute", "fix", "heaviside", "ldexp", "i0")

METHODS_ONLY = {**{n + "_": _inplace(n, BOTH[n]) for n in _INPLACE}, "float_power_": _float_power_}
