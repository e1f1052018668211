"""minidl.special: PyTorch's torch.special namespace (``md.special.X`` or ``import minidl.special``).

The functions that minidl already has under their top-level names are the same functions here
(erf, erfc, erfinv, expit = sigmoid, logit, digamma = psi, gammaln = lgamma, xlogy, sinc, log1p,
expm1, exp2, round, softmax, log_softmax, logsumexp, i0); the rest are in
ops/special_functions.py (error and gamma family, incomplete gamma, zeta), ops/special_functions_bessel.py
(Bessel and Airy functions) and ops/special_functions_polynomials.py (orthogonal polynomials).
"""
import minidl as _md

from .ops import special_functions as _sf
from .ops import special_functions_bessel as _bessel
from .ops import special_functions_polynomials as _poly

erf, erfc, erfinv, logit, digamma, xlogy, sinc, exp2, i0 = (
    _md.erf, _md.erfc, _md.erfinv, _md.logit, _md.digamma, _md.xlogy, _md.sinc, _md.exp2, _md.i0)
log1p, expm1, round, softmax, log_softmax, logsumexp = (   # noqa: A001  (PyTorch's name)
    _md.log1p, _md.expm1, _md.round, _md.softmax, _md.log_softmax, _md.logsumexp)
expit, psi, gammaln = _md.sigmoid, _md.digamma, _md.lgamma

ndtr, ndtri, log_ndtr, erfcx, entr = _sf.ndtr, _sf.ndtri, _sf.log_ndtr, _sf.erfcx, _sf.entr
polygamma, multigammaln, zeta, xlog1py = _sf.polygamma, _sf.multigammaln, _sf.zeta, _sf.xlog1py
gammainc, gammaincc = _sf.gammainc, _sf.gammaincc
i0e, i1, i1e = _bessel.i0e, _bessel.i1, _bessel.i1e
globals().update(_bessel.FUNCTIONS)    # bessel_j0, ..., modified_bessel_k1, airy_ai, spherical_bessel_j0
globals().update(_poly.FUNCTIONS)      # chebyshev_polynomial_t, ..., legendre_polynomial_p

__all__ = ["erf", "erfc", "erfinv", "logit", "digamma", "xlogy", "sinc", "exp2", "i0", "log1p", "expm1", "round",
           "softmax", "log_softmax", "logsumexp", "expit", "psi", "gammaln", "ndtr", "ndtri", "log_ndtr", "erfcx",
           "entr", "polygamma", "multigammaln", "zeta", "xlog1py", "gammainc", "gammaincc", "i0e", "i1", "i1e",
           *_bessel.FUNCTIONS, *_poly.FUNCTIONS]
