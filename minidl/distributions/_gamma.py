"""Gamma draws with an implicit reparameterisation gradient.

A standard Gamma(a) draw x has the CDF P(a, x) = gamma(a, x) / Gamma(a) (the regularised lower
incomplete gamma function). Holding the uniform u = P(a, x) fixed while a moves (the implicit
reparameterisation of Figurnov et al., 2018, which PyTorch's ``_standard_gamma_grad`` also uses)
gives

    0 = dP/da + dP/dx * dx/da   =>   dx/da = -(dP/da)(a, x) / p(x; a),

with the density p(x; a) = x**(a-1) e**-x / Gamma(a). NumPy draws x (by Marsaglia-Tsang, any
sampler works: the gradient depends only on a and x); dP/da is a central difference of P in a
(minidl.special.gammainc's, accurate to ~1e-13), so the difference is good to ~1e-8.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..ops import _special_math as sm
from ..ops.special_functions_math import gammainc
from ..tensor.generator import numpy_generator

def gamma_sample_grad(a, x):
    """dx/da of a standard Gamma(a) draw x at fixed CDF value: -(dP/da) / p(x; a)."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    h = 1e-5 * np.maximum(a, 1e-3)
    h = np.minimum(h, 0.5 * a)
    dp_da = (gammainc(a + h, x) - gammainc(a - h, x)) / (2 * h)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_density = (a - 1) * np.log(x) - x - sm.lgamma(a)
        grad = -dp_da * np.exp(-log_density)
    return np.where(np.isfinite(grad), grad, 0.0)


class StandardGamma(Function):
    """x ~ Gamma(a, 1), drawn from minidl's global generator;  dx/da by implicit reparameterisation
    (the module docstring): dL/da = dL/dx * (-(dP/da)(a, x) / p(x; a))."""

    @staticmethod
    def forward(ctx, a):
        xp = namespace_of(a)
        if xp is not np:
            raise NotImplementedError("distributions: Gamma sampling runs on the CPU; got a tensor on a "
                                      "cuda device (move the parameters to the CPU)")
        tiny = np.finfo(a.dtype).tiny
        x = numpy_generator(None).standard_gamma(a.astype(np.float64))
        x = np.maximum(x, tiny).astype(a.dtype)
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        return g * gamma_sample_grad(a, x).astype(g.dtype, copy=False)
