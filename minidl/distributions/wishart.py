"""Wishart(df, covariance_matrix | precision_matrix | scale_tril): the law of sum_k x_k x_k^T over df
draws x_k ~ N(0, Sigma) (for integer df; any real df > p - 1 is allowed), a distribution over p x p
positive-definite matrices, as torch.distributions.Wishart. Sigma is given by exactly one of its
covariance, its inverse or its lower Cholesky factor L (Sigma = L L^T; the other two are factored
into it once). With nu = df and lnGamma_p the multivariate log-gamma function:

    log p(X) = -nu (p/2 ln 2 + ln det L) - lnGamma_p(nu/2) + (nu - p - 1)/2 ln det X - tr(Sigma^-1 X) / 2
    H = (p + 1)(p/2 ln 2 + ln det L) + lnGamma_p(nu/2) - (nu - p - 1)/2 psi_p(nu/2) + nu p / 2
    mean = nu Sigma,  mode = (nu - p - 1) Sigma (NaN for nu <= p + 1),  var(X_ij) = nu (S_ij**2 + S_ii S_jj)

with psi_p(a) = sum_{i<p} digamma(a - i/2) the multivariate digamma. As an exponential family its
natural parameters are (-Sigma^-1 / 2, (nu - p - 1) / 2), of the statistics (X, ln det X), and
its log normaliser is (y + (p+1)/2)(p ln 2 - ln det(-2 x)) + lnGamma_p(y + (p+1)/2).

rsample is the Bartlett decomposition (Odell and Feiveson, 1966): X = (L A)(L A)^T with A lower
triangular, A_ii = sqrt(c_i) for c_i ~ Chi2(nu - i), and A_ij ~ N(0, 1) below the diagonal. The
chi-squared draws are reparameterised (the Gamma's implicit gradient), so X is differentiable in
nu and in L. A draw can come out numerically singular when nu is close to p - 1; those draws are
redrawn up to ``max_try_correction`` times, with a warning (PyTorch tests for singularity with the
positive-definite check the wrong way round, so it warns and redraws every time; this redraws only
what is singular).
"""
import math
import warnings

import numpy as np

from ..tensor.dtype_info import finfo
from ..tensor.size import Size
from . import constraints
from .chi2 import Chi2
from .exp_family import ExponentialFamily
from .multivariate_normal import _precision_to_scale_tril
from .utils import lazy_property

__all__ = ["Wishart"]

_LOG_2 = math.log(2)


def _mvdigamma(x, p):
    """psi_p(x) = sum_{i<p} digamma(x - i/2), defined for x > (p - 1) / 2."""
    import minidl as md
    if not bool(x.gt((p - 1) / 2).all()):
        raise AssertionError("Wrong domain for multivariate digamma function.")
    shift = md.arange(p, dtype=x.dtype, device=x.device) / 2
    return (x.unsqueeze(-1) - shift).digamma().sum(-1)


def _clamp_above_eps(x):
    return x.clamp(min=finfo(x.dtype).eps)


class Wishart(ExponentialFamily):
    support = constraints.positive_definite
    has_rsample = True
    _mean_carrier_measure = 0

    @property
    def arg_constraints(self):
        return {"covariance_matrix": constraints.positive_definite,
                "precision_matrix": constraints.positive_definite,
                "scale_tril": constraints.lower_cholesky,
                "df": constraints.greater_than(self.event_shape[-1] - 1)}

    def __init__(self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        import minidl as md
        given = [(name, p) for name, p in (("covariance_matrix", covariance_matrix),
                                           ("precision_matrix", precision_matrix), ("scale_tril", scale_tril))
                 if p is not None]
        if len(given) != 1:
            raise AssertionError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                                 f"specified, got {len(given)}.")
        name, param = given[0]
        if param.dim() < 2:
            raise ValueError("scale_tril must be at least two-dimensional, with optional leading batch dimensions")
        if isinstance(df, md.Tensor):
            batch_shape = Size(np.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(tuple(batch_shape))
        else:
            batch_shape = Size(tuple(param.shape[:-2]))
            self.df = md.tensor(df, dtype=param.dtype, device=param.device)
        event_shape = Size(tuple(param.shape[-2:]))
        p = event_shape[-1]
        if bool(self.df.le(p - 1).any()):
            raise ValueError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        setattr(self, name, param.expand(tuple(batch_shape) + (-1, -1)))
        if bool(self.df.lt(p).any()):
            warnings.warn("Low df values detected. Singular samples are highly likely to occur for "
                          "ndim - 1 < df < ndim.", stacklevel=2)
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = md.linalg.cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self._dist_chi2 = self._chi2()

    def _chi2(self):
        """The Chi2(nu - i), i < p, of the Bartlett factor's squared diagonal."""
        import minidl as md
        p = self._event_shape[-1]
        tril = self._unbroadcasted_scale_tril
        shift = md.arange(p, dtype=tril.dtype, device=tril.device).expand(tuple(self._batch_shape) + (-1,))
        return Chi2(df=self.df.unsqueeze(-1) - shift)

    @property
    def _batch_dims(self):
        return [-(x + 1) for x in range(len(self._batch_shape))]

    def expand(self, batch_shape, _instance=None):
        batch_shape = Size(tuple(batch_shape))
        cov_shape = tuple(batch_shape) + tuple(self.event_shape)
        attrs = {name: self.__dict__[name].expand(cov_shape)
                 for name in ("covariance_matrix", "scale_tril", "precision_matrix") if name in self.__dict__}
        new = self._new_expanded(Wishart, batch_shape, _instance, df=self.df.expand(tuple(batch_shape)),
                                 _unbroadcasted_scale_tril=self._unbroadcasted_scale_tril.expand(cov_shape), **attrs)
        new._dist_chi2 = new._chi2()
        return new

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        tril = self._unbroadcasted_scale_tril
        return (tril @ tril.transpose(-2, -1)).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self):
        import minidl as md
        tril = self._unbroadcasted_scale_tril
        identity = md.eye(self._event_shape[-1], device=tril.device, dtype=tril.dtype)
        return md.cholesky_solve(identity, tril).expand(self._matrix_shape())

    def _df_matrix(self):
        return self.df.view(tuple(self._batch_shape) + (1, 1))

    @property
    def mean(self):
        return self._df_matrix() * self.covariance_matrix

    @property
    def mode(self):
        import minidl as md
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = md.where(factor <= 0, float("nan"), factor)
        return factor.view(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        diag_v = v.diagonal(dim1=-2, dim2=-1)
        return self._df_matrix() * (v.pow(2) + diag_v.unsqueeze(-1) * diag_v.unsqueeze(-2))

    def _bartlett_sampling(self, sample_shape=Size()):
        import minidl as md
        p = self._event_shape[-1]
        diag = _clamp_above_eps(self._dist_chi2.rsample(sample_shape).sqrt())
        lead = tuple(sample_shape) + tuple(self._batch_shape)
        i, j = md.tril_indices(p, p, offset=-1)
        below = md.zeros(lead + (p, p), dtype=diag.dtype, device=diag.device)
        below[..., i, j] = md.randn(lead + (p * (p - 1) // 2,), dtype=diag.dtype, device=diag.device)
        chol = self._unbroadcasted_scale_tril @ (md.diag_embed(diag) + below)
        return chol @ chol.transpose(-2, -1)

    def _singular(self, sample):
        """Per draw of ``sample_shape`` (a bool array): whether any matrix of its batch fails the
        positive-definite check."""
        bad = np.logical_not(np.asarray(self.support.check(sample).numpy(force=True), dtype=bool))
        n_batch = len(self._batch_shape)
        return bad.reshape(bad.shape[:bad.ndim - n_batch] + (-1,)).any(-1) if n_batch else bad

    def rsample(self, sample_shape=Size(), max_try_correction=None):
        """A Bartlett draw (module docstring); draws that come out singular are redrawn up to
        ``max_try_correction`` (default 10) times, after a warning, and may stay singular (their
        log_prob is then -inf)."""
        import minidl as md
        if max_try_correction is None:
            max_try_correction = 10
        sample_shape = Size(tuple(sample_shape))
        sample = self._bartlett_sampling(sample_shape)
        singular = self._singular(sample)
        if singular.any():
            warnings.warn("Singular sample detected.", stacklevel=2)
            for _ in range(max_try_correction):
                redraw = self._bartlett_sampling(sample_shape)
                mask = md.tensor(singular.reshape(singular.shape + (1,) * (sample.ndim - singular.ndim)),
                                 device=sample.device)
                sample = md.where(mask, redraw, sample)
                singular = self._singular(sample)
                if not singular.any():
                    break
        return sample

    def log_prob(self, value):
        import minidl as md
        if self._validate_args:
            self._validate_sample(value)
        nu = self.df
        p = self._event_shape[-1]
        tril = self._unbroadcasted_scale_tril
        return (-nu * (p * _LOG_2 / 2 + tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
                - md.mvlgamma(nu / 2, p=p)
                + (nu - p - 1) / 2 * md.linalg.slogdet(value).logabsdet
                - md.cholesky_solve(value, tril).diagonal(dim1=-2, dim2=-1).sum(dim=-1) / 2)

    def entropy(self):
        import minidl as md
        nu = self.df
        p = self._event_shape[-1]
        tril = self._unbroadcasted_scale_tril
        return ((p + 1) * (p * _LOG_2 / 2 + tril.diagonal(dim1=-2, dim2=-1).log().sum(-1))
                + md.mvlgamma(nu / 2, p=p)
                - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p=p)
                + nu * p / 2)

    @property
    def _natural_params(self):
        p = self._event_shape[-1]
        return -self.precision_matrix / 2, (self.df - p - 1) / 2

    def _log_normalizer(self, x, y):
        import minidl as md
        p = self._event_shape[-1]
        return ((y + (p + 1) / 2) * (-md.linalg.slogdet(-2 * x).logabsdet + _LOG_2 * p)
                + md.mvlgamma(y + (p + 1) / 2, p=p))
