"""kl_divergence(p, q) between distributions of different families, as torch.distributions.kl registers them.

Every closed form here is one identity, KL(p || q) = -H(p) - E_p[ln q(x)], with the expectation of the
log-density of q taken under p from p's moments:

    Beta(a, b):      E x = a / (a + b),  E x**2 = Var + (E x)**2,  E ln x = psi(a) - psi(a + b)
    Exponential(l):  E x = 1 / l,  E x**2 = 2 / l**2,  E ln x = -gamma - ln l,  E e**(-x/s) = l s / (l s + 1)
    Gamma(a, r):     E x = a / r,  E x**2 = (a**2 + a) / r**2,  E e**(-x/s) = (1 + 1 / (r s))**-a
    Gumbel(m, b):    E x = m + b gamma,  Var = (pi b)**2 / 6
    Laplace(m, b):   E (x - c)**2 = 2 b**2 + (m - c)**2
    Normal(m, s):    E e**(-x/b) = e**(-m/b + s**2 / (2 b**2)),
                     E |x - c| = s sqrt(2/pi) e**(-d**2 / (2 s**2)) + d erf(d / (s sqrt 2)),  d = m - c
    Uniform(l, h):   E x = (h + l) / 2,  E ln x = (h ln h - l ln l) / (h - l) - 1

(gamma is the Euler-Mascheroni constant, psi the digamma function). Where p puts mass on a set q gives
zero density (a Normal against an Exponential, a Poisson against a Bernoulli, a Uniform reaching below
0 against a Gamma) the divergence is inf, as PyTorch returns. An inf entry sends no gradient of its own, but
(as in PyTorch) a closed-form term that is undefined there, such as ln of a negative bound, can still make
that entry's parameter gradient NaN.
"""
import math

from .bernoulli import Bernoulli
from .beta import Beta
from .binomial import Binomial
from .exponential import Exponential
from .gamma import Gamma
from .gumbel import Gumbel
from .kl import register_kl
from .laplace import Laplace
from .normal import Normal
from .poisson import Poisson
from .uniform import Uniform
from .utils import _where, euler_constant

__all__ = []

_INF = float("inf")
_LOG_2PI = math.log(2 * math.pi)


def _infinite_like(tensor):
    import minidl as md
    return md.full_like(tensor, _INF)


def _x_log_x(tensor):
    """x ln x, 0 at x = 0."""
    import minidl as md
    return md.xlogy(tensor, tensor)


def _normal_cross_entropy(q, mean, second_moment):
    """-E_p[ln N(x; m_q, s_q)] = ln(s_q sqrt(2 pi)) + (E x**2 - 2 m_q E x + m_q**2) / (2 s_q**2)."""
    var = q.scale.pow(2)
    return 0.5 * (var * (2 * math.pi)).log() + (0.5 * second_moment - q.loc * mean + 0.5 * q.loc.pow(2)) / var


# --------------------------------------------------------------------------------------------------
# discrete


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    """-H(p) - (p ln r - r): ln q(x) = x ln r - r on x in {0, 1} (ln x! = 0 there)."""
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p, q):
    """inf: a Poisson puts mass on every count, a Bernoulli or Binomial on finitely many."""
    return _infinite_like(p.rate)


# --------------------------------------------------------------------------------------------------
# Beta(a, b) on [0, 1]


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    """-H(p) - ln l + l E x."""
    return -p.entropy() - q.rate.log() + q.rate * (p.concentration1 / (p.concentration1 + p.concentration0))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    """-H(p) + lnG(a_q) - a_q ln r_q - (a_q - 1) E ln x + r_q E x."""
    total = p.concentration1 + p.concentration0
    t1 = -p.entropy()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (p.concentration1.digamma() - total.digamma())
    t4 = q.rate * p.concentration1 / total
    return t1 + t2 - t3 + t4


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    """-H(p) + ln(s sqrt(2 pi)) + (E x**2 - 2 m E x + m**2) / (2 s**2),  E x**2 = E x (1 - E x) / (a + b + 1)
    + (E x)**2."""
    total = p.concentration1 + p.concentration0
    mean = p.concentration1 / total
    second = mean * (1 - mean) / (total + 1) + mean.pow(2)
    return -p.entropy() + _normal_cross_entropy(q, mean, second)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    """-H(p) + ln(h - l); inf unless [0, 1] lies inside [l, h]."""
    result = -p.entropy() + (q.high - q.low).log()
    support = p.support
    return _where((q.low > support.lower_bound) | (q.high < support.upper_bound), _INF, result)


# --------------------------------------------------------------------------------------------------
# Exponential(l) on [0, inf)


@register_kl(Exponential, Beta)
@register_kl(Exponential, Uniform)
def _kl_exponential_infinity(p, q):
    """inf: the Exponential's mass beyond any bounded interval."""
    return _infinite_like(p.rate)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    """-a ln(r / l) + r / l + lnG(a) + a gamma - (1 + gamma): -H(p) = ln l - 1 and E ln x = -gamma - ln l."""
    ratio = q.rate / p.rate
    return (-q.concentration * ratio.log() + ratio + q.concentration.lgamma() + q.concentration * euler_constant
            - (1 + euler_constant))


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    """ln(l b) - 1 + 1 / (l b) - m / b + e**(m/b) l b / (l b + 1): -ln q(x) = ln b + (x - m) / b + e**(-(x-m)/b)."""
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = loc_scale_ratio.exp() * scale_rate_prod / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    """ln(l s sqrt(2 pi)) - 1 + (1 / l**2 - m / l + m**2 / 2) / s**2."""
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * (rate_sqr * var_normal * (2 * math.pi)).log()
    t2 = rate_sqr.reciprocal()
    t3 = q.loc / p.rate
    t4 = q.loc.pow(2) * 0.5
    return t1 - 1 + (t2 - t3 + t4) / var_normal


# --------------------------------------------------------------------------------------------------
# Gamma(a, r) on [0, inf)


@register_kl(Gamma, Beta)
@register_kl(Gamma, Uniform)
def _kl_gamma_infinity(p, q):
    """inf: the Gamma's mass beyond any bounded interval."""
    return _infinite_like(p.concentration)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    """-H(p) - ln l + l a / r."""
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    """(a - 1) psi(a) - lnG(a) - a + ln(r b) + a / (r b) - m / b + e**(m/b) (1 + 1 / (r b))**-a."""
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (p.concentration - 1) * p.concentration.digamma() - p.concentration.lgamma() - p.concentration
    t2 = beta_scale_prod.log() + p.concentration / beta_scale_prod
    t3 = loc_scale_ratio.exp() * (1 + beta_scale_prod.reciprocal()).pow(-p.concentration) - loc_scale_ratio
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    """-H(p) + ln(s sqrt(2 pi)) + (E x**2 - 2 m E x + m**2) / (2 s**2), with -H(p) = (a - 1) psi(a) - lnG(a)
    - a + ln r."""
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * (beta_sqr * var_normal * (2 * math.pi)).log() - p.concentration - p.concentration.lgamma()
    t2 = 0.5 * (p.concentration.pow(2) + p.concentration) / beta_sqr
    t3 = q.loc * p.concentration / p.rate
    t4 = 0.5 * q.loc.pow(2)
    return t1 + (p.concentration - 1) * p.concentration.digamma() + (t2 - t3 + t4) / var_normal


# --------------------------------------------------------------------------------------------------
# Gumbel(m, b), Laplace(m, b), Normal(m, s) on the real line


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p, q):
    """inf: the Gumbel's mass on the whole real line."""
    return _infinite_like(p.loc)


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    """-ln(b / (s sqrt(2 pi))) + (pi b / s)**2 / 12 + ((m_p + b gamma - m_q) / s)**2 / 2 - (1 + gamma):
    -H(p) = -ln b - 1 - gamma and E(x - m_q)**2 = Var + (E x - m_q)**2."""
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * euler_constant - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (euler_constant + 1)


@register_kl(Laplace, Beta)
@register_kl(Laplace, Exponential)
@register_kl(Laplace, Gamma)
@register_kl(Laplace, Uniform)
def _kl_laplace_infinity(p, q):
    """inf: the Laplace's mass on the whole real line."""
    return _infinite_like(p.loc)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    """-ln(2 b**2 / (pi s**2)) / 2 + b**2 / s**2 + (m_p - m_q)**2 / (2 s**2) - 1: -H(p) = -1 - ln(2 b) and
    E(x - m_q)**2 = 2 b**2 + (m_p - m_q)**2."""
    var_normal = q.scale.pow(2)
    scale_sqr_var_ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * (2 * scale_sqr_var_ratio / math.pi).log()
    t2 = 0.5 * p.loc.pow(2)
    t3 = p.loc * q.loc
    t4 = 0.5 * q.loc.pow(2)
    return -t1 + scale_sqr_var_ratio + (t2 - t3 + t4) / var_normal - 1


@register_kl(Normal, Beta)
@register_kl(Normal, Exponential)
@register_kl(Normal, Gamma)
@register_kl(Normal, Uniform)
def _kl_normal_infinity(p, q):
    """inf: the Normal's mass on the whole real line."""
    return _infinite_like(p.loc)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    """-ln(s / b) + (m_p - m_q) / b + e**(-(m_p - m_q) / b + s**2 / (2 b**2)) - (1 + ln 2 pi) / 2."""
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = (-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio).exp()
    return -t1 + t2 + t3 - (0.5 * (1 + _LOG_2PI))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    """-ln(s / b) + E|x - m_q| / b - (1 + ln(pi / 2)) / 2, the folded-normal mean E|x - m_q| as above."""
    loc_diff = p.loc - q.loc
    scale_ratio = p.scale / q.scale
    loc_diff_scale_ratio = loc_diff / p.scale
    t1 = scale_ratio.log()
    t2 = math.sqrt(2 / math.pi) * p.scale * (-0.5 * loc_diff_scale_ratio.pow(2)).exp()
    t3 = loc_diff * (math.sqrt(0.5) * loc_diff_scale_ratio).erf()
    return -t1 + (t2 + t3) / q.scale - (0.5 * (1 + math.log(0.5 * math.pi)))


# --------------------------------------------------------------------------------------------------
# Uniform(l, h)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    """-ln(h - l) - (a - 1) E ln x - (b - 1) E ln(1 - x) + ln B(a, b), with
    E ln x = (h ln h - l ln l - (h - l)) / (h - l) and E ln(1 - x) = ((1-l) ln(1-l) - (1-h) ln(1-h) - (h - l))
    / (h - l); inf unless [l, h] lies inside [0, 1]."""
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + common_term) / common_term
    t4 = q.concentration1.lgamma() + q.concentration0.lgamma() - (q.concentration1 + q.concentration0).lgamma()
    result = t3 + t4 - t1 - t2
    support = q.support
    return _where((p.high > support.upper_bound) | (p.low < support.lower_bound), _INF, result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    """l_q (h + l) / 2 - ln((h - l) l_q); inf where the Uniform reaches below 0."""
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _where(p.low < q.support.lower_bound, _INF, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    """-ln(h - l) + lnG(a) - a ln r - (a - 1) E ln x + r (h + l) / 2; inf where the Uniform reaches below 0."""
    common_term = p.high - p.low
    t1 = common_term.log()
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - common_term) / common_term
    t4 = q.rate * (p.high + p.low) / 2
    result = -t1 + t2 + t3 + t4
    return _where(p.low < q.support.lower_bound, _INF, result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    """ln c + (z_h + z_l) / 2 - c (e**-z_h - e**-z_l), with c = b / (h - l) and z = (x - m) / b at x = h, l:
    E e**(-(x-m)/b) = c (e**-z_l - e**-z_h)."""
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * ((-high_loc_diff).exp() - (-low_loc_diff).exp())
    return t1 - t2


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    """ln(s sqrt(2 pi) / (h - l)) + ((h - l)**2 / 12 + ((h + l) / 2 - m)**2) / (2 s**2)."""
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)

