"""kl_divergence pairs for the families beyond the core ones (as torch.distributions.kl registers
them): the same-family closed forms, the low-rank / full Gaussian pairs, and each pair with a
ContinuousBernoulli or a Pareto, registered with ``register_kl`` on import.

A pair whose q gives zero density where p does not (a Pareto's support starts at its scale; a
ContinuousBernoulli's is [0, 1]) is inf, as PyTorch returns; a closed form that needs a finite
moment p lacks (a Pareto's mean for alpha <= 1) is inf there too.
"""
from .beta import Beta
from .cauchy import Cauchy
from .continuous_bernoulli import ContinuousBernoulli
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import Gumbel
from .half_normal import HalfNormal
from .kl import _INF, _kl_infinity, _kl_normal_normal, register_kl
from .kl_cross import _exponential_cross_entropy, _gamma_cross_entropy, _normal_cross_entropy, _uniform_mean_log
from .laplace import Laplace
from .lowrank_multivariate_normal import LowRankMultivariateNormal, _batch_lowrank_logdet, \
    _batch_lowrank_mahalanobis, _batch_trace_XXT
from .multivariate_normal import MultivariateNormal, _batch_mahalanobis
from .normal import Normal
from .pareto import Pareto
from .uniform import Uniform
from .utils import _where

__all__ = []

def _capacitance_solve(q):
    """A = L_C^-1 W^T D^-1 of a LowRankMultivariateNormal q, so that S_q^-1 = D^-1 - A^T A."""
    from ..linalg import solve_triangular
    qWt_qDinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    return solve_triangular(q._capacitance_tril, qWt_qDinv, upper=False)


def _lowrank_logdet(d):
    return _batch_lowrank_logdet(d._unbroadcasted_cov_factor, d._unbroadcasted_cov_diag, d._capacitance_tril)


def _lowrank_mahalanobis(q, x):
    return _batch_lowrank_mahalanobis(q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag, x,
                                      q._capacitance_tril)


def _check_event_shapes(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError(f"KL-divergence between two {type(p).__name__} and {type(q).__name__} with different "
                         "event shapes cannot be computed")


# --------------------------------------------------------------------------------------------------
# same family


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_continuous_bernoulli_continuous_bernoulli(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    """Folding both at 0 leaves the divergence of the Normal(0, s) bases."""
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    """a_q ln(s_p / s_q) - ln(a_q / a_p) + a_q / a_p - 1; inf where s_p < s_q."""
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _where(p.support.lower_bound < q.support.lower_bound, _INF, result)


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    """ln(((s_p + s_q)**2 + (m_p - m_q)**2) / (4 s_p s_q)) (Chyzak and Nielsen, 2019)."""
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    return t1 - (4 * p.scale * q.scale).log()


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrankmultivariatenormal_lowrankmultivariatenormal(p, q):
    """(ln det S_q - ln det S_p + tr(S_q^-1 S_p) + (m_q - m_p)^T S_q^-1 (m_q - m_p) - n) / 2, with
    tr(S_q^-1 S_p) = tr((qD^-1 - A^T A)(pW pW^T + pD)) expanded into four Frobenius norms."""
    _check_event_shapes(p, q)
    term1 = _lowrank_logdet(q) - _lowrank_logdet(p)
    term3 = _lowrank_mahalanobis(q, q.loc - p.loc)
    A = _capacitance_solve(q)
    pW, pD, qD = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag, q._unbroadcasted_cov_diag
    term21 = (pD / qD).sum(-1)
    term22 = _batch_trace_XXT(pW * qD.rsqrt().unsqueeze(-1))
    term23 = _batch_trace_XXT(A * pD.sqrt().unsqueeze(-2))
    term24 = _batch_trace_XXT(A @ pW)
    return 0.5 * (term1 + term21 + term22 - term23 - term24 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_multivariatenormal_lowrankmultivariatenormal(p, q):
    """As the low-rank pair, with S_p = L_p L_p^T: tr(S_q^-1 S_p) = |qD^-1/2 L_p|_F**2 - |A L_p|_F**2."""
    _check_event_shapes(p, q)
    Lp = p._unbroadcasted_scale_tril
    term1 = _lowrank_logdet(q) - 2 * Lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    term3 = _lowrank_mahalanobis(q, q.loc - p.loc)
    A = _capacitance_solve(q)
    term21 = _batch_trace_XXT(Lp * q._unbroadcasted_cov_diag.rsqrt().unsqueeze(-1))
    term22 = _batch_trace_XXT(A @ Lp)
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrankmultivariatenormal_multivariatenormal(p, q):
    """tr(S_q^-1 S_p) = |L_q^-1 pW|_F**2 + |L_q^-1 pD^1/2|_F**2."""
    import minidl as md
    from ..linalg import solve_triangular
    _check_event_shapes(p, q)
    Lq = q._unbroadcasted_scale_tril
    term1 = 2 * Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - _lowrank_logdet(p)
    term3 = _batch_mahalanobis(Lq, q.loc - p.loc)
    batch = tuple(md.broadcast_shapes(tuple(Lq.shape[:-2]), tuple(p._unbroadcasted_cov_factor.shape[:-2])))
    n = p.event_shape[0]
    q_scale_tril = Lq.expand(batch + (n, n))
    p_cov_factor = p._unbroadcasted_cov_factor.expand(batch + (n, p.cov_factor.size(-1)))
    p_cov_diag = md.diag_embed(p._unbroadcasted_cov_diag.sqrt()).expand(batch + (n, n))
    term21 = _batch_trace_XXT(solve_triangular(q_scale_tril, p_cov_factor, upper=False))
    term22 = _batch_trace_XXT(solve_triangular(q_scale_tril, p_cov_diag, upper=False))
    return 0.5 * (term1 + term21 + term22 + term3 - p.event_shape[0])


# --------------------------------------------------------------------------------------------------
# with a ContinuousBernoulli or a Pareto: q with no density on part of p's support gives inf


# p has mass where q has no density (outside [0, 1], or below q's scale)
for _p, _q in ((Beta, Pareto), (ContinuousBernoulli, Pareto), (Exponential, ContinuousBernoulli), (Exponential, Pareto),
               (Gamma, ContinuousBernoulli), (Gamma, Pareto), (Gumbel, ContinuousBernoulli), (Gumbel, Pareto),
               (Laplace, ContinuousBernoulli), (Laplace, Pareto), (Normal, ContinuousBernoulli), (Normal, Pareto),
               (Pareto, Beta), (Pareto, ContinuousBernoulli), (Pareto, Uniform)):
    register_kl(_p, _q)(_kl_infinity)


# --------------------------------------------------------------------------------------------------
# with a ContinuousBernoulli: -H(p) - E_p[ln q]


def _cross_entropy_continuous_bernoulli(p, q):
    """-E_p[ln q(x)] for q a ContinuousBernoulli: ln q(x) = x l_q + ln(1 - p_q) + ln C(p_q) (with its
    logits l_q = ln p_q - ln(1 - p_q)), linear in x, so only p's mean enters."""
    return -p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_continuous_bernoulli(p, q):
    return -p.entropy() + _cross_entropy_continuous_bernoulli(p, q)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_continuous_bernoulli(p, q):
    result = -p.entropy() + _cross_entropy_continuous_bernoulli(p, q)
    outside = (p.high >= q.support.upper_bound) | (p.low <= q.support.lower_bound)
    return _where(outside, _INF, result)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_continuous_bernoulli_exponential(p, q):
    return -p.entropy() + _exponential_cross_entropy(q, p.mean)


@register_kl(ContinuousBernoulli, Normal)
def _kl_continuous_bernoulli_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance)


@register_kl(ContinuousBernoulli, Uniform)
def _kl_continuous_bernoulli_uniform(p, q):
    """ln(b - a) - H(p) when [0, 1] lies in [a, b]; inf otherwise (PyTorch's condition, which also
    counts q.low == 0 or q.high == 1 as not covering)."""
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low >= p.support.lower_bound) | (q.high <= p.support.upper_bound)
    return _where(outside, _INF, result)


# --------------------------------------------------------------------------------------------------
# from a Pareto(s, a) and into one. A Pareto's E x = a s / (a - 1) is finite for a > 1 only, its
# Var = a s**2 / ((a - 1)**2 (a - 2)) for a > 2 only: inf where the closed form needs the missing one
# (written out here rather than p.mean and p.variance, whose clamps would feed the masked entries' gradients).


def _pareto_mean(p):
    return p.alpha * p.scale / (p.alpha - 1)


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    return _where(p.alpha <= 1, _INF, -p.entropy() + _exponential_cross_entropy(q, _pareto_mean(p)))


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    """E ln x = ln s + 1 / a."""
    mean_log = p.scale.log() + p.alpha.reciprocal()
    return _where(p.alpha <= 1, _INF, -p.entropy() + _gamma_cross_entropy(q, _pareto_mean(p), mean_log))


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    variance = p.alpha * (p.scale / (p.alpha - 1)).pow(2) / (p.alpha - 2)
    return _where(p.alpha <= 2, _INF, -p.entropy() + _normal_cross_entropy(q, _pareto_mean(p), variance))


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    """-ln q(x) = (a + 1) ln x - ln(a s**a); inf where the Uniform reaches below q's scale."""
    result = -p.entropy() + (q.alpha + 1) * _uniform_mean_log(p.low, p.high) - (q.alpha * q.scale.pow(q.alpha)).log()
    return _where(p.low < q.support.lower_bound, _INF, result)
