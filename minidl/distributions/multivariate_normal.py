"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril): the Gaussian on R^n,
as torch.distributions.MultivariateNormal.

Everything is computed from the lower Cholesky factor L of the covariance (S = L L^T):

    log p(x) = -(n ln 2 pi + |L^-1 (x - loc)|**2) / 2 - sum_i ln L_ii,
    H = n (1 + ln 2 pi) / 2 + sum_i ln L_ii,        rsample = loc + L eps, eps ~ N(0, I),

with the triangular solve minidl.linalg.solve_triangular. A covariance matrix is factored with
``minidl.linalg.cholesky``; a precision matrix P with the factor of its reversal,
which gives P = U U^T with U upper-triangular and so L = U^-T (PyTorch's construction).
"""
import math

from ..linalg import cholesky, solve_triangular
from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .utils import _attr_property, _standard_normal, lazy_property

__all__ = ["MultivariateNormal"]


def _solve_lower(L, B):
    """L^-1 B for lower-triangular L (..., n, n) and B (..., n, k), batch dims broadcast."""
    return solve_triangular(L, B, upper=False)


def _batch_mv(bmat, bvec):
    """Matrix-vector products over broadcast batch dims."""
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _batch_mahalanobis(bL, bx):
    """|L^-1 x|**2 over the last dim, for L (..., n, n) and x (..., n) with broadcast batch dims."""
    return _solve_lower(bL, bx.unsqueeze(-1)).squeeze(-1).pow(2).sum(-1)


def _identity_like(L):
    import minidl as md
    n = L.shape[-1]
    return md.eye(n, dtype=L.dtype, device=L.device).expand(tuple(L.shape[:-2]) + (n, n))


def _precision_to_scale_tril(P):
    """L with L L^T = P^-1: factor the reversed P (J P J = Lf Lf^T, J the reversal), then P = U U^T
    with U = J Lf J upper-triangular, and L = U^-T = (J Lf^T J)^-1 is lower-triangular."""
    Lf = cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).transpose(-2, -1)
    return _solve_lower(L_inv, _identity_like(L_inv))


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        import minidl as md
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        given = {"scale_tril": scale_tril, "covariance_matrix": covariance_matrix,
                 "precision_matrix": precision_matrix}
        name, matrix = next((k, v) for k, v in given.items() if v is not None)
        for t in (loc, matrix):
            if t.device.type != "cpu":
                raise NotImplementedError(f"MultivariateNormal runs on the CPU (its triangular solves are NumPy's); "
                                          f"got a tensor on device '{t.device}'")
        if matrix.dim() < 2:
            raise ValueError(f"{name} {'matrix ' if name == 'scale_tril' else ''}must be at least two-dimensional, "
                             "with optional leading batch dimensions")
        batch_shape = md.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        setattr(self, name, matrix.expand(tuple(batch_shape) + (-1, -1)))
        self.loc = loc.expand(tuple(batch_shape) + (-1,))
        super().__init__(batch_shape, self.loc.shape[-1:], validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(MultivariateNormal, batch_shape, _instance, share=("_unbroadcasted_scale_tril",))

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        L_inv = _solve_lower(self._unbroadcasted_scale_tril, _identity_like(self._unbroadcasted_scale_tril))
        return (L_inv.mT @ L_inv).expand(self._matrix_shape())

    mean = mode = _attr_property("loc")

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape)
                                                                    + tuple(self._event_shape))

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_scale_tril, eps)

    def _half_log_det(self):
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - self._half_log_det()

    def entropy(self):
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        if len(self._batch_shape) == 0:
            return H
        return H.expand(self._batch_shape)
