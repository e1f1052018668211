"""torch.special's Bessel and Airy functions. The math (Cephes' approximations) is in
special_functions_bessel_math.py; values are computed in float64 on the host and rounded once
to the input's dtype (integer and bool inputs become the default float dtype).

Differentiable, as in PyTorch, are the modified Bessel functions of the first kind under their
short names, with the derivatives (DLMF 10.29.3, I0' = I1, I1' = I0 - I1/x):

    d/dx i0e(x) = i1e(x) - sgn(x) i0e(x)                   (i0e = e**-|x| I0)
    d/dx i1(x)  = i0(x) - i1(x)/x,             1/2 at 0
    d/dx i1e(x) = i0e(x) - i1e(x) (sgn(x) + 1/x), 1/2 at 0  (i1e = e**-|x| I1)

(i0 itself is md.i0, in special.py; i0 and i1, with i1's derivative, also run on a device whose
namespace has them, cuda's: the power and asymptotic series of minidl/kernels/cuda/special.py).
The rest (bessel_j0/j1/y0/y1, modified_bessel_i0/i1/k0/k1, scaled_modified_bessel_k0/k1,
spherical_bessel_j0, airy_ai) have no derivative in PyTorch: their results do not require grad,
here likewise.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from . import special_functions_bessel_math as bm
from .special import _host, _host_unary, _special_unary, special
from .special_functions import _grad


class I0e(Function):
    """y = e**-|x| I0(x);  dy/dx = e**-|x| I1(x) - sgn(x) y."""

    @staticmethod
    def forward(ctx, x):
        y = _host(bm.i0e, x)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, g):
        x = np.asarray(ctx.saved_tensors[0], np.float64)
        return _grad(g, bm.i1e(x) - np.sign(x) * bm.i0e(x))


class I1(Function):
    """y = I1(x);  dy/dx = I0(x) - I1(x)/x (the limit 1/2 at 0)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return special("i1", bm.i1, x)

    @staticmethod
    def backward(ctx, g):
        x = ctx.saved_tensors[0]
        xp = namespace_of(x)
        if xp is np:
            x = np.asarray(x, np.float64)
            with np.errstate(all="ignore"):
                d = np.where(x == 0, 0.5, bm.i0(x) - bm.i1(x) / x)
        else:   # the device's I0 and I1 (1/x is inf at 0, where the 1/2 is taken instead)
            d = xp.where(x == 0, 0.5, xp.i0(x) - xp.i1(x) / x)
        return _grad(g, d)


class I1e(Function):
    """y = e**-|x| I1(x);  dy/dx = e**-|x| (I0 - I1/x) - sgn(x) y = i0e(x) - y (sgn(x) + 1/x)
    (1/2 at 0)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return _host(bm.i1e, x)

    @staticmethod
    def backward(ctx, g):
        x = np.asarray(ctx.saved_tensors[0], np.float64)
        with np.errstate(all="ignore"):
            d = np.where(x == 0, 0.5, bm.i0e(x) - bm.i1e(x) * (np.sign(x) + 1 / x))
        return _grad(g, d)


class Nondifferentiable(Function):
    """y = fn(x) for a function PyTorch gives no derivative: y does not require grad."""

    @staticmethod
    def forward(ctx, x, fn):
        y = _host(fn, x)
        ctx.mark_non_differentiable(y)
        return y

    @staticmethod
    def backward(ctx, g):
        return None, None


i0e, i1, i1e = _host_unary(I0e, "i0e"), _special_unary(I1, "i1"), _host_unary(I1e, "i1e")

NONDIFFERENTIABLE = {
    "bessel_j0": bm.j0, "bessel_j1": bm.j1, "bessel_y0": bm.y0, "bessel_y1": bm.y1,
    "modified_bessel_i0": bm.i0, "modified_bessel_i1": bm.i1, "modified_bessel_k0": bm.k0,
    "modified_bessel_k1": bm.k1, "scaled_modified_bessel_k0": lambda x: bm.k0(x, scaled=True),
    "scaled_modified_bessel_k1": lambda x: bm.k1(x, scaled=True), "spherical_bessel_j0": bm.spherical_j0,
    "airy_ai": bm.airy_ai,
}
FUNCTIONS = {name: _host_unary(Nondifferentiable, name, f, doc=f"{name}(input), elementwise (Cephes' approximation; "
                                                               "the result takes no gradient, as PyTorch's).")
             for name, f in NONDIFFERENTIABLE.items()}
