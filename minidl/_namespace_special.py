"""PyTorch's top-level forms of special functions, installed by _namespace.py's tables like the
rest: md.igamma / md.igammac (torch.special's gammainc / gammaincc), md.polygamma(n, x) and
``t.polygamma(n)``, md.mvlgamma(x, p) (torch.special.multigammaln), the integer md.gcd / md.lcm
and md.nextafter, with their in-place methods (``t.gcd_(u)``, ``t.polygamma_(n)``, ...), which
write through tensor/inplace.py's ``apply_inplace`` like every other. The ops are in
ops/special_functions.py; the torch.special namespace itself is minidl/special.py."""
from .ops import special_functions as _sf
from .tensor.inplace import apply_inplace

BOTH = {"igamma": _sf.igamma, "igammac": _sf.igammac, "mvlgamma": _sf.multigammaln, "gcd": _sf.gcd, "lcm": _sf.lcm,
        "nextafter": _sf.nextafter}

MODULE_ONLY = {"polygamma": _sf.polygamma}


def _polygamma_method(self, n):
    """t.polygamma(n) is md.polygamma(n, t) (the tensor comes second in the function)."""
    return _sf.polygamma(n, self)


def _inplace(name, fn):
    """``t.<name>_(*args)``: fn(t, *args) written into t (its dtype kept, as PyTorch)."""
    def method(self, *args):
        return apply_inplace(self, name + "_", lambda s: fn(s, *args), *[a for a in args if hasattr(a, "_data")])
    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = f"In-place {name}: t.{name}_(...) writes {name}(t, ...) into t."
    return method


METHODS_ONLY = {"polygamma": _polygamma_method, "polygamma_": _inplace("polygamma", _polygamma_method),
                **{n + "_": _inplace(n, BOTH[n]) for n in BOTH}}
