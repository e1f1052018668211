"""LowRankMultivariateNormal(loc, cov_factor, cov_diag): the Gaussian on R^n with covariance
S = W W^T + D (W n x m, D diagonal positive), as torch.distributions.LowRankMultivariateNormal.

Everything goes through the m x m capacitance matrix C = I + W^T D^-1 W and its Cholesky factor
L_C (minidl.linalg.cholesky), never an n x n factorisation:

    S^-1 = D^-1 - D^-1 W C^-1 W^T D^-1                                 (Woodbury)
    ln det S = ln det C + ln det D = 2 sum ln diag(L_C) + sum ln D       (matrix determinant lemma)
    x^T S^-1 x = x^T D^-1 x - |L_C^-1 W^T D^-1 x|**2

with the triangular solves minidl.linalg.solve_triangular. rsample is loc + W e_W + sqrt(D) e_D
with e_W ~ N(0, I_m), e_D ~ N(0, I_n): differentiable in all three parameters.
"""
import math

from ..linalg import cholesky, solve_triangular
from ..tensor.size import Size
from . import constraints
from .distribution import Distribution
from .multivariate_normal import _batch_mahalanobis, _batch_mv
from .utils import _attr_property, _standard_normal, lazy_property

__all__ = ["LowRankMultivariateNormal"]


def _add_identity(K):
    import minidl as md
    m = K.shape[-1]
    return K + md.eye(m, dtype=K.dtype, device=K.device)


def _batch_capacitance_tril(W, D):
    """The Cholesky factor of C = I + W^T D^-1 W."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    return cholesky(_add_identity(Wt_Dinv @ W))


def _batch_lowrank_logdet(W, D, capacitance_tril):
    """ln det(W W^T + D) = 2 sum ln diag(L_C) + sum ln D."""
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    """x^T (W W^T + D)^-1 x = x^T D^-1 x - |L_C^-1 W^T D^-1 x|**2 (Woodbury)."""
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    Wt_Dinv_x = _batch_mv(Wt_Dinv, x)
    return (x.pow(2) / D).sum(-1) - _batch_mahalanobis(capacitance_tril, Wt_Dinv_x)


def _batch_trace_XXT(bmat):
    """tr(X X^T) = the squared Frobenius norm of X, over the batch."""
    return bmat.pow(2).sum((-2, -1))


class LowRankMultivariateNormal(Distribution):
    arg_constraints = {"loc": constraints.real_vector, "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        import minidl as md
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = loc.shape[-1:]
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2:-1] != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if cov_diag.shape[-1:] != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        for t in (loc, cov_factor, cov_diag):
            if t.device.type != "cpu":
                raise NotImplementedError("LowRankMultivariateNormal runs on the CPU (its triangular solves are "
                                          f"NumPy's); got a tensor on device '{t.device}'")
        try:
            loc_, self.cov_factor, cov_diag_ = md.broadcast_tensors(loc.unsqueeze(-1), cov_factor,
                                                                    cov_diag.unsqueeze(-1))
        except (RuntimeError, ValueError) as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, "
                             f"cov_diag {cov_diag.shape}") from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(self.loc.shape[:-1], event_shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return self._expand_params(LowRankMultivariateNormal, batch_shape, _instance,
                                   share=("_unbroadcasted_cov_factor", "_unbroadcasted_cov_diag", "_capacitance_tril"))

    mean = mode = _attr_property("loc")

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) + tuple(self._event_shape)

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        """sqrt(D) chol(I + D^-1/2 W W^T D^-1/2): the factor without forming S first."""
        cov_diag_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / cov_diag_sqrt
        K = _add_identity(Dinvsqrt_W @ Dinvsqrt_W.mT)
        return (cov_diag_sqrt * cholesky(K)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        import minidl as md
        W = self._unbroadcasted_cov_factor
        return (W @ W.mT + md.diag_embed(self._unbroadcasted_cov_diag)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        """D^-1 - A^T A with A = L_C^-1 W^T D^-1 (Woodbury)."""
        import minidl as md
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        A = solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        return (md.diag_embed(self._unbroadcasted_cov_diag.reciprocal()) - A.mT @ A).expand(self._matrix_shape())

    def rsample(self, sample_shape=Size()):
        shape = tuple(self._extended_shape(sample_shape))
        W_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_W = _standard_normal(W_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_D = _standard_normal(shape, dtype=self.loc.dtype, device=self.loc.device)
        return (self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_W)
                + self._unbroadcasted_cov_diag.sqrt() * eps_D)

    def _log_det(self):
        return _batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                     self._capacitance_tril)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                       value - self.loc, self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + M)

    def entropy(self):
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        if len(self._batch_shape) == 0:
            return H
        return H.expand(self._batch_shape)
