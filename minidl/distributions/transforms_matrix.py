"""Transforms onto matrices, as torch.distributions.transforms: lower-triangular matrices with a positive
diagonal (LowerCholeskyTransform), positive-definite matrices (PositiveDefiniteTransform) and Cholesky
factors of correlation matrices (CorrCholeskyTransform, a bijection from R**(D(D-1)/2) with a log |det J|).
Re-exported by ``minidl.distributions.transforms``.
"""
import math

from ..tensor.dtype_info import finfo
from ..tensor.size import Size
from . import constraints
from .transforms import Transform, _at_least_dims, _ParameterFreeTransform
from .utils import _pad_last, _softplus, tril_matrix_to_vec, vec_to_tril_matrix

__all__ = ["CorrCholeskyTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform"]


class LowerCholeskyTransform(_ParameterFreeTransform):
    """Square matrices to lower-triangular ones with a positive diagonal: the strict lower triangle kept,
    the diagonal exponentiated (the upper triangle dropped, so not injective)."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def _call(self, x):
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y):
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(_ParameterFreeTransform):
    """Square matrices to positive-definite ones, L L^T with L = LowerCholeskyTransform()(x); ``inv``
    takes the Cholesky factor back."""
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def _call(self, x):
        lower = LowerCholeskyTransform()(x)
        return lower @ lower.mT

    def _inverse(self, y):
        from .. import linalg
        return LowerCholeskyTransform().inv(linalg.cholesky(y))


class CorrCholeskyTransform(Transform):
    """x in R**(D(D-1)/2) to the Cholesky factor of a D x D correlation matrix (lower triangular, positive
    diagonal, unit-norm rows). The vector fills the strict lower triangle row by row as r = tanh(x); each
    row is then a signed stick-breaking of the unit length: y_ij = r_ij sqrt(prod_{k<j} (1 - r_ik**2)) and
    y_ii = sqrt(1 - sum_{k<i} y_ik**2).

    The Jacobian of x to the strict lower triangle of y is triangular (row by row, column by column); its
    diagonal is (1 - r_ij**2) sqrt(1 - sum_{k<j} y_ik**2), so
    log |det J| = sum_ij ln(1 - tanh(x_ij)**2) + 1/2 ln(1 - sum_{k<j} y_ik**2), with
    ln(1 - tanh(x)**2) = -2 (x + softplus(-2 x) - ln 2)."""
    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x):
        import minidl as md
        fi = finfo(x.dtype)
        r = vec_to_tril_matrix(x.tanh().clamp(min=-1 + fi.eps, max=1 - fi.eps), diag=-1)
        z1m_cumprod_sqrt = (1 - r.pow(2)).sqrt().cumprod(-1)
        r = r + md.eye(r.shape[-1], dtype=r.dtype, device=r.device)   # the diagonal starts at 1
        return r * _pad_last(z1m_cumprod_sqrt[..., :-1], 1, 0, 1.0)

    def _inverse(self, y):
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = _pad_last(y_cumsum[..., :-1], 1, 0, 1.0)
        t = tril_matrix_to_vec(y, diag=-1) / tril_matrix_to_vec(y_cumsum_shifted, diag=-1).sqrt()
        return (t.log1p() - t.neg().log1p()) / 2   # atanh

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        # diag=-2 picks 1 - sum_{k<j} y_ik**2 for each strict-lower (i, j) without shifting the cumsum
        stick_breaking_logdet = 0.5 * tril_matrix_to_vec(y1m_cumsum, diag=-2).log().sum(-1)
        tanh_logdet = -2 * (x + _softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape):
        n = _at_least_dims(shape, 1)[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape):
        if _at_least_dims(shape, 2)[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))
