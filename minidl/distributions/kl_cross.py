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
from .kl import _INF, _kl_infinity, _x_log_x, register_kl
from .laplace import Laplace
from .normal import Normal
from .poisson import Poisson
from .uniform import Uniform
from .utils import _where, euler_constant

__all__ = []


# --------------------------------------------------------------------------------------------------
# -E_p[ln q(x)] for each family of q, from the moments of p that it needs


def _exponential_cross_entropy(q, mean):
    """-E_p[ln Exp(x; l)] = -ln l + l E x."""
    return -q.rate.log() + q.rate * mean


def _gamma_cross_entropy(q, mean, mean_log):
    """-E_p[ln Gamma(x; a, r)] = lnG(a) - a ln r - (a - 1) E ln x + r E x."""
    a, r = q.concentration, q.rate
    return a.lgamma() - a * r.log() - (a - 1) * mean_log + r * mean


def _gumbel_cross_entropy(q, mean, mean_exp):
    """-E_p[ln Gumbel(x; m, b)] = ln b + (E x - m) / b + E e**(-(x - m)/b), the last given as ``mean_exp``
    (each p writes it in the form that stays finite)."""
    return q.scale.log() + (mean - q.loc) / q.scale + mean_exp


def _normal_cross_entropy(q, mean, variance):
    """-E_p[ln N(x; m, s)] = ln(s sqrt(2 pi)) + (Var + (E x - m)**2) / (2 s**2)."""
    var = q.scale.pow(2)
    return 0.5 * (var * (2 * math.pi)).log() + (variance + (mean - q.loc).pow(2)) / (2 * var)


def _uniform_mean_log(low, high):
    """E ln x for x ~ Uniform(low, high) on [0, inf): (h ln h - l ln l) / (h - l) - 1."""
    width = high - low
    return (_x_log_x(high) - _x_log_x(low) - width) / width


def _beta_mean(p):
    return p.concentration1 / (p.concentration1 + p.concentration0)


# --------------------------------------------------------------------------------------------------
# inf: p has mass where q has no density, on the whole parameter space

for _p, _q in (
        (Poisson, Bernoulli), (Poisson, Binomial),   # a Poisson puts mass on every count
        (Exponential, Beta), (Exponential, Uniform), (Gamma, Beta), (Gamma, Uniform),   # beyond any interval
        (Gumbel, Beta), (Gumbel, Exponential), (Gumbel, Gamma), (Gumbel, Uniform),   # the whole real line
        (Laplace, Beta), (Laplace, Exponential), (Laplace, Gamma), (Laplace, Uniform),
        (Normal, Beta), (Normal, Exponential), (Normal, Gamma), (Normal, Uniform)):
    register_kl(_p, _q)(_kl_infinity)


# --------------------------------------------------------------------------------------------------
# discrete


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    """-H(p) - (p ln r - r): ln q(x) = x ln r - r on x in {0, 1} (ln x! = 0 there)."""
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


# --------------------------------------------------------------------------------------------------
# Beta(a, b) on [0, 1]


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    return -p.entropy() + _exponential_cross_entropy(q, _beta_mean(p))


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    mean_log = p.concentration1.digamma() - (p.concentration1 + p.concentration0).digamma()
    return -p.entropy() + _gamma_cross_entropy(q, _beta_mean(p), mean_log)


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    """Var = E x (1 - E x) / (a + b + 1)."""
    mean = _beta_mean(p)
    variance = mean * (1 - mean) / (p.concentration1 + p.concentration0 + 1)
    return -p.entropy() + _normal_cross_entropy(q, mean, variance)


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    """-H(p) + ln(h - l); inf unless [0, 1] lies inside [l, h]."""
    result = -p.entropy() + (q.high - q.low).log()
    support = p.support
    return _where((q.low > support.lower_bound) | (q.high < support.upper_bound), _INF, result)


# --------------------------------------------------------------------------------------------------
# Exponential(l) on [0, inf)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    return -p.entropy() + _gamma_cross_entropy(q, p.mean, -euler_constant - p.rate.log())


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    """E e**(-(x - m)/b) = e**(m/b) l b / (l b + 1)."""
    scale_rate_prod = p.rate * q.scale
    mean_exp = (q.loc / q.scale).exp() * scale_rate_prod / (scale_rate_prod + 1)
    return -p.entropy() + _gumbel_cross_entropy(q, p.mean, mean_exp)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance)


# --------------------------------------------------------------------------------------------------
# Gamma(a, r) on [0, inf)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() + _exponential_cross_entropy(q, p.mean)


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    """E e**(-(x - m)/b) = e**(m/b) (1 + 1 / (r b))**-a."""
    mean_exp = (q.loc / q.scale).exp() * (1 + (p.rate * q.scale).reciprocal()).pow(-p.concentration)
    return -p.entropy() + _gumbel_cross_entropy(q, p.mean, mean_exp)


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance)


# --------------------------------------------------------------------------------------------------
# Gumbel(m, b), Laplace(m, b), Normal(m, s) on the real line


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    """E e**(-(x - m_q)/b) = e**(-(m_p - m_q)/b + s**2 / (2 b**2))."""
    mean_exp = ((q.loc - p.loc) / q.scale + 0.5 * (p.scale / q.scale).pow(2)).exp()
    return -p.entropy() + _gumbel_cross_entropy(q, p.mean, mean_exp)


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
    """-H(p) - (a - 1) E ln x - (b - 1) E ln(1 - x) + ln B(a, b), 1 - x being Uniform(1 - h, 1 - l);
    inf unless [l, h] lies inside [0, 1]."""
    a, b = q.concentration1, q.concentration0
    log_beta = a.lgamma() + b.lgamma() - (a + b).lgamma()
    result = (-p.entropy() - (a - 1) * _uniform_mean_log(p.low, p.high)
              - (b - 1) * _uniform_mean_log(1 - p.high, 1 - p.low) + log_beta)
    support = q.support
    return _where((p.high > support.upper_bound) | (p.low < support.lower_bound), _INF, result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    """inf where the Uniform reaches below 0."""
    result = -p.entropy() + _exponential_cross_entropy(q, p.mean)
    return _where(p.low < q.support.lower_bound, _INF, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    """inf where the Uniform reaches below 0."""
    result = -p.entropy() + _gamma_cross_entropy(q, p.mean, _uniform_mean_log(p.low, p.high))
    return _where(p.low < q.support.lower_bound, _INF, result)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    """E e**(-(x - m)/b) = c (e**-z_l - e**-z_h), with c = b / (h - l) and z = (x - m) / b at x = h, l."""
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    mean_exp = q.scale / (p.high - p.low) * ((-low_loc_diff).exp() - (-high_loc_diff).exp())
    return -p.entropy() + _gumbel_cross_entropy(q, p.mean, mean_exp)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    return -p.entropy() + _normal_cross_entropy(q, p.mean, p.variance)
