"""The torch.distributions families beyond the core ones (Cauchy, HalfNormal, HalfCauchy, StudentT,
Chi2, Weibull, Pareto, Kumaraswamy, LogisticNormal, NegativeBinomial, Multinomial, RelaxedBernoulli,
RelaxedOneHotCategorical, ContinuousBernoulli, VonMises, MixtureSameFamily,
LowRankMultivariateNormal) and their kl_divergence pairs: values against closed forms computed
here with NumPy, gradients by gradcheck (float64), samples' shapes and moments with fixed seeds,
argument validation and expand (the comparisons against torch.distributions are in
test_distributions_more_torch.py)."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.distributions as D
from minidl.autograd import gradcheck

F64 = md.float64
LGAMMA = np.vectorize(math.lgamma)
trapezoid = getattr(np, "trapezoid", None) or np.trapz


def t64(x, grad=False):
    return md.tensor(np.asarray(x, np.float64), dtype=F64, requires_grad=grad)


def npy(t):
    return t.detach().numpy()


def digamma_np(x, h=1e-6):
    return (LGAMMA(x + h) - LGAMMA(x - h)) / (2 * h)


# --------------------------------------------------------------------------------------------------
# closed forms with NumPy


def test_cauchy_and_half_cauchy_closed_forms():
    loc, scale, x = np.array([0.5, -1.0]), np.array([1.5, 0.3]), np.array([0.1, 2.0])
    d = D.Cauchy(t64(loc), t64(scale))
    z = (x - loc) / scale
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), -np.log(np.pi * scale * (1 + z ** 2)))
    np.testing.assert_allclose(npy(d.cdf(t64(x))), np.arctan(z) / np.pi + 0.5)
    np.testing.assert_allclose(npy(d.icdf(d.cdf(t64(x)))), x, rtol=1e-9)
    np.testing.assert_allclose(npy(d.entropy()), np.log(4 * np.pi * scale))
    assert np.isnan(npy(d.mean)).all() and np.isinf(npy(d.variance)).all()
    h = D.HalfCauchy(t64(scale))
    y = np.array([0.4, 0.0])
    np.testing.assert_allclose(npy(h.log_prob(t64(y))), np.log(2 / (np.pi * scale * (1 + (y / scale) ** 2))))
    np.testing.assert_allclose(npy(h.cdf(t64(y))), 2 / np.pi * np.arctan(y / scale))
    np.testing.assert_allclose(npy(h.entropy()), np.log(4 * np.pi * scale) - np.log(2))
    assert npy(D.HalfCauchy(t64(scale), validate_args=False).log_prob(t64([-1.0, 1.0])))[0] == -np.inf


def test_half_normal_closed_forms():
    s, y = np.array([0.5, 2.0]), np.array([0.3, 1.0])
    h = D.HalfNormal(t64(s))
    np.testing.assert_allclose(npy(h.log_prob(t64(y))), np.log(2) - y ** 2 / (2 * s ** 2) - np.log(s)
                               - 0.5 * np.log(2 * np.pi))
    np.testing.assert_allclose(npy(h.cdf(t64(y))), np.vectorize(math.erf)(y / (s * np.sqrt(2))))
    np.testing.assert_allclose(npy(h.icdf(h.cdf(t64(y)))), y, rtol=1e-8)
    np.testing.assert_allclose(npy(h.mean), s * np.sqrt(2 / np.pi))
    np.testing.assert_allclose(npy(h.variance), s ** 2 * (1 - 2 / np.pi))
    np.testing.assert_allclose(npy(h.entropy()), 0.5 * np.log(np.pi * s ** 2 / 2) + 0.5)
    assert npy(h.mode).tolist() == [0.0, 0.0]


def test_student_t_and_chi2_closed_forms():
    df, loc, scale, x = np.array([3.0, 0.8, 1.5]), np.array([0.0, 1.0, -2.0]), np.array([1.0, 2.0, 0.5]), \
        np.array([0.7, -1.0, -2.5])
    d = D.StudentT(t64(df), t64(loc), t64(scale))
    y = (x - loc) / scale
    ref = (LGAMMA((df + 1) / 2) - LGAMMA(df / 2) - 0.5 * np.log(df * np.pi) - np.log(scale)
           - (df + 1) / 2 * np.log1p(y ** 2 / df))
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), ref)
    h = (np.log(scale) + (df + 1) / 2 * (digamma_np((df + 1) / 2) - digamma_np(df / 2)) + 0.5 * np.log(df)
         + LGAMMA(df / 2) + math.lgamma(0.5) - LGAMMA((df + 1) / 2))
    np.testing.assert_allclose(npy(d.entropy()), h, rtol=1e-6)
    mean, var = npy(d.mean), npy(d.variance)
    assert mean[0] == 0.0 and np.isnan(mean[1]) and mean[2] == -2.0
    assert var[0] == pytest.approx(3.0) and np.isnan(var[1]) and np.isinf(var[2])
    c = D.Chi2(t64([1.0, 4.0]))
    v = np.array([0.5, 3.0])
    k = np.array([1.0, 4.0])
    np.testing.assert_allclose(npy(c.log_prob(t64(v))), (k / 2 - 1) * np.log(v) - v / 2 - k / 2 * np.log(2)
                               - LGAMMA(k / 2))
    assert isinstance(c, D.Gamma) and npy(c.df).tolist() == [1.0, 4.0] and npy(c.mean).tolist() == [1.0, 4.0]


def test_weibull_pareto_kumaraswamy_closed_forms():
    s, k, x = np.array([1.0, 2.0]), np.array([0.7, 3.0]), np.array([0.5, 2.5])
    w = D.Weibull(t64(s), t64(k))
    np.testing.assert_allclose(npy(w.log_prob(t64(x))), np.log(k / s) + (k - 1) * np.log(x / s) - (x / s) ** k)
    np.testing.assert_allclose(npy(w.cdf(t64(x))), 1 - np.exp(-(x / s) ** k))
    g1, g2 = np.exp(LGAMMA(1 + 1 / k)), np.exp(LGAMMA(1 + 2 / k))
    np.testing.assert_allclose(npy(w.mean), s * g1)
    np.testing.assert_allclose(npy(w.variance), s ** 2 * (g2 - g1 ** 2))
    np.testing.assert_allclose(npy(w.entropy()), 0.5772156649015329 * (1 - 1 / k) + np.log(s / k) + 1)
    sc, a, y = np.array([1.0, 0.5]), np.array([3.0, 0.8]), np.array([1.5, 0.7])
    p = D.Pareto(t64(sc), t64(a))
    np.testing.assert_allclose(npy(p.log_prob(t64(y))), np.log(a) + a * np.log(sc) - (a + 1) * np.log(y))
    np.testing.assert_allclose(npy(p.cdf(t64(y))), 1 - (sc / y) ** a)
    np.testing.assert_allclose(npy(p.mean), [1.5, np.inf])
    np.testing.assert_allclose(npy(p.entropy()), np.log(sc / a) + 1 + 1 / a)
    with pytest.raises(ValueError):
        p.log_prob(t64([0.9, 0.7]))   # below the first scale: outside the support
    c1, c0, u = np.array([2.0, 0.5]), np.array([3.0, 1.5]), np.array([0.3, 0.8])
    q = D.Kumaraswamy(t64(c1), t64(c0))
    np.testing.assert_allclose(npy(q.log_prob(t64(u))), np.log(c1 * c0) + (c1 - 1) * np.log(u)
                               + (c0 - 1) * np.log1p(-u ** c1), rtol=1e-9)
    m1 = c0 * np.exp(LGAMMA(1 + 1 / c1) + LGAMMA(c0) - LGAMMA(1 + 1 / c1 + c0))
    np.testing.assert_allclose(npy(q.mean), m1)
    mode = npy(q.mode)
    assert mode[0] == pytest.approx(((c1[0] - 1) / (c1[0] * c0[0] - 1)) ** (1 / c1[0])) and np.isnan(mode[1])


def test_negative_binomial_and_multinomial_closed_forms():
    r, p, k = np.array([2.0, 0.5, 3.0]), np.array([0.3, 0.6, 0.5]), np.array([0.0, 3.0, 2.0])
    nb = D.NegativeBinomial(t64(r), probs=t64(p))
    ref = LGAMMA(r + k) - LGAMMA(k + 1) - LGAMMA(r) + r * np.log1p(-p) + k * np.log(p)
    np.testing.assert_allclose(npy(nb.log_prob(t64(k))), ref)
    np.testing.assert_allclose(npy(nb.mean), r * p / (1 - p))
    np.testing.assert_allclose(npy(nb.variance), r * p / (1 - p) ** 2)
    assert npy(D.NegativeBinomial(t64(0.0), probs=t64(0.4)).log_prob(t64(0.0))) == 0.0
    probs = np.array([[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]])
    m = D.Multinomial(5, probs=t64(probs))
    x = np.array([[1.0, 1.0, 3.0], [2.0, 3.0, 0.0]])
    ref = LGAMMA(6) - LGAMMA(x + 1).sum(-1) + np.where(x > 0, x * np.log(np.where(probs > 0, probs, 1)), 0).sum(-1)
    np.testing.assert_allclose(npy(m.log_prob(t64(x))), ref)
    # the entropy against the sum over every count vector of the first row
    counts = [(a, b, 5 - a - b) for a in range(6) for b in range(6 - a)]
    lp = npy(D.Multinomial(5, probs=t64(probs[0])).log_prob(t64(counts)))
    np.testing.assert_allclose(npy(m.entropy())[0], -(np.exp(lp) * lp).sum(), rtol=1e-9)
    assert m.batch_shape == md.Size([2]) and m.event_shape == md.Size([3])
    np.testing.assert_allclose(npy(m.mean), 5 * probs)


def test_continuous_bernoulli_closed_forms():
    lam, x = np.array([0.2, 0.7, 0.5]), np.array([0.3, 0.9, 0.4])
    cb = D.ContinuousBernoulli(t64(lam))
    c = np.where(lam == 0.5, 2.0, 2 * np.arctanh(np.abs(1 - 2 * lam)) / np.abs(1 - 2 * np.where(lam == 0.5, 0, lam)))
    np.testing.assert_allclose(npy(cb.log_prob(t64(x))), np.log(c) + x * np.log(lam) + (1 - x) * np.log1p(-lam),
                               rtol=1e-9)
    with np.errstate(divide="ignore"):
        off = np.where(lam == 0.5, 0.0, lam)
        mean = np.where(lam == 0.5, 0.5, lam / (2 * lam - 1) + 1 / (2 * np.arctanh(1 - 2 * off)))
    np.testing.assert_allclose(npy(cb.mean), mean, rtol=1e-9)
    cdf = npy(cb.cdf(t64(x)))
    np.testing.assert_allclose(cdf[:2], (lam[:2] ** x[:2] * (1 - lam[:2]) ** (1 - x[:2]) + lam[:2] - 1)
                               / (2 * lam[:2] - 1))
    assert cdf[2] == pytest.approx(0.4)
    np.testing.assert_allclose(npy(cb.icdf(t64(cdf))), x, rtol=1e-9)


def test_von_mises_closed_forms():
    loc, kappa, x = np.array([0.5, -1.0]), np.array([0.5, 4.0]), np.array([0.1, 3.0])
    v = D.VonMises(t64(loc), t64(kappa))
    np.testing.assert_allclose(npy(v.log_prob(t64(x))), kappa * np.cos(x - loc) - np.log(2 * np.pi * np.i0(kappa)),
                               rtol=1e-12)
    assert not v.has_rsample and npy(v.mean).tolist() == loc.tolist()
    # the circular variance 1 - I1/I0 against the density integrated on a grid
    grid = np.linspace(-np.pi, np.pi, 20001)
    dens = np.exp(kappa[:, None] * np.cos(grid)) / (2 * np.pi * np.i0(kappa))[:, None]
    r = trapezoid(dens * np.cos(grid), grid, axis=-1)
    np.testing.assert_allclose(npy(v.variance), 1 - r, rtol=1e-6)


def test_low_rank_mvn_matches_the_full_covariance_gaussian():
    rng = np.random.default_rng(0)
    loc, W, d = rng.normal(size=(2, 4)), rng.normal(size=(4, 2)), rng.uniform(0.5, 2.0, size=4)
    lr = D.LowRankMultivariateNormal(t64(loc), t64(W), t64(d))
    cov = W @ W.T + np.diag(d)
    full = D.MultivariateNormal(t64(loc), covariance_matrix=t64(cov))
    x = t64(rng.normal(size=(3, 2, 4)))
    np.testing.assert_allclose(npy(lr.log_prob(x)), npy(full.log_prob(x)), rtol=1e-10)
    np.testing.assert_allclose(npy(lr.entropy()), npy(full.entropy()), rtol=1e-12)
    np.testing.assert_allclose(npy(lr.covariance_matrix), np.broadcast_to(cov, (2, 4, 4)), rtol=1e-12)
    np.testing.assert_allclose(npy(lr.precision_matrix)[0], np.linalg.inv(cov), rtol=1e-9, atol=1e-12)
    L = npy(lr.scale_tril)[0]
    np.testing.assert_allclose(L @ L.T, cov, rtol=1e-10)
    np.testing.assert_allclose(npy(lr.variance)[1], np.diag(cov))
    assert lr.batch_shape == md.Size([2]) and lr.event_shape == md.Size([4])
    other = D.LowRankMultivariateNormal(t64(loc[0] + 0.3), t64(W[:, :1] * 0.5), t64(d * 1.5))
    other_full = D.MultivariateNormal(other.loc, covariance_matrix=other.covariance_matrix)
    np.testing.assert_allclose(npy(D.kl_divergence(lr, other)), npy(D.kl_divergence(full, other_full)), rtol=1e-9)
    np.testing.assert_allclose(npy(D.kl_divergence(full, other)), npy(D.kl_divergence(full, other_full)), rtol=1e-9)
    np.testing.assert_allclose(npy(D.kl_divergence(lr, other_full)), npy(D.kl_divergence(full, other_full)),
                               rtol=1e-9)


def test_mixture_same_family_of_normals():
    w, mu, s = np.array([0.2, 0.5, 0.3]), np.array([-1.0, 0.5, 3.0]), np.array([0.5, 1.0, 2.0])
    mix = D.MixtureSameFamily(D.Categorical(t64(w)), D.Normal(t64(mu), t64(s)))
    x = np.array([-1.0, 0.2, 4.0])
    dens = (w * np.exp(-((x[:, None] - mu) / s) ** 2 / 2) / (s * np.sqrt(2 * np.pi))).sum(-1)
    np.testing.assert_allclose(npy(mix.log_prob(t64(x))), np.log(dens))
    np.testing.assert_allclose(npy(mix.cdf(t64(x))), (w * 0.5 * (1 + np.vectorize(math.erf)(
        (x[:, None] - mu) / (s * np.sqrt(2))))).sum(-1))
    m = (w * mu).sum()
    np.testing.assert_allclose(npy(mix.mean), m)
    np.testing.assert_allclose(npy(mix.variance), (w * s ** 2).sum() + (w * (mu - m) ** 2).sum())
    md.manual_seed(0)
    draws = npy(mix.sample((20000,)))
    assert draws.shape == (20000,) and abs(draws.mean() - m) < 0.05
    # a batch of mixtures of 2-d Gaussians
    comp = D.Independent(D.Normal(md.zeros(4, 3, 2, dtype=F64), md.ones(4, 3, 2, dtype=F64)), 1)
    batch = D.MixtureSameFamily(D.Categorical(md.ones(4, 3, dtype=F64)), comp)
    assert batch.batch_shape == md.Size([4]) and batch.event_shape == md.Size([2])
    assert batch.sample((5,)).shape == md.Size([5, 4, 2]) and batch.log_prob(md.zeros(4, 2)).shape == md.Size([4])
    assert batch.expand((6, 4)).sample().shape == md.Size([6, 4, 2])


def test_relaxed_families_closed_forms():
    t, p, y = 0.5, np.array([0.3, 0.8]), np.array([0.2, 0.9])
    rb = D.RelaxedBernoulli(t64(t), probs=t64(p))
    # the binary Concrete density (Maddison et al., 2017, eq. (25))
    a = p / (1 - p)
    ref = np.log(t * a * y ** (-t - 1) * (1 - y) ** (-t - 1) / (a * y ** -t + (1 - y) ** -t) ** 2)
    np.testing.assert_allclose(npy(rb.log_prob(t64(y))), ref, rtol=1e-9)
    probs = np.array([0.2, 0.3, 0.5])
    rc = D.RelaxedOneHotCategorical(t64(t), probs=t64(probs))
    z = np.array([0.1, 0.6, 0.3])
    k = 3
    ref = (math.lgamma(k) + (k - 1) * np.log(t) + np.log(probs).sum() - (t + 1) * np.log(z).sum()
           - k * np.log((probs * z ** -t).sum()))
    # the density on the simplex of the first K-1 coordinates, from the log-simplex one: subtract sum ln z
    np.testing.assert_allclose(npy(rc.log_prob(t64(z))), ref, rtol=1e-9)
    md.manual_seed(0)
    s = rc.rsample((2000,))
    assert s.shape == md.Size([2000, 3]) and np.allclose(npy(s).sum(-1), 1.0)
    # low temperature: draws near a vertex, picked with the categorical's probabilities
    cold = npy(D.RelaxedOneHotCategorical(t64(0.05), probs=t64(probs)).sample((4000,)))
    np.testing.assert_allclose(np.bincount(cold.argmax(-1), minlength=3) / 4000, probs, atol=0.03)
    cold_b = npy(D.RelaxedBernoulli(t64(0.05), probs=t64(p)).sample((4000,)))
    np.testing.assert_allclose((cold_b > 0.5).mean(0), p, atol=0.03)


def test_logistic_normal_closed_form():
    loc, scale = np.array([0.3, -0.5]), np.array([1.0, 0.7])
    d = D.LogisticNormal(t64(loc), t64(scale))
    assert d.event_shape == md.Size([3]) and d.batch_shape == md.Size([])
    y = np.array([0.2, 0.5, 0.3])
    # stick-breaking inverse: z_i = y_i / (1 - sum_{j<i} y_j), x_i = logit(z_i) + ln(K - 1 - i)
    rest = 1 - np.concatenate([[0.0], np.cumsum(y[:-1])])[:2]
    z = y[:2] / rest
    x = np.log(z / (1 - z)) + np.log([2.0, 1.0])
    normal = -((x - loc) / scale) ** 2 / 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
    # |det dy/dx| = prod_i z_i (1 - z_i) rest_i
    ref = normal.sum() - np.log(z * (1 - z) * rest).sum()
    np.testing.assert_allclose(npy(d.log_prob(t64(y))), ref, rtol=1e-9)
    assert np.allclose(npy(d.sample((7,))).sum(-1), 1.0)


def test_kl_closed_forms():
    s1, s2 = np.array([0.5, 2.0]), np.array([1.0, 1.5])
    np.testing.assert_allclose(npy(D.kl_divergence(D.HalfNormal(t64(s1)), D.HalfNormal(t64(s2)))),
                               np.log(s2 / s1) + s1 ** 2 / (2 * s2 ** 2) - 0.5)
    l1, l2 = np.array([0.0, 1.0]), np.array([0.5, -1.0])
    np.testing.assert_allclose(npy(D.kl_divergence(D.Cauchy(t64(l1), t64(s1)), D.Cauchy(t64(l2), t64(s2)))),
                               np.log(((s1 + s2) ** 2 + (l1 - l2) ** 2) / (4 * s1 * s2)))
    a1, a2 = np.array([2.0, 3.0]), np.array([1.0, 4.0])
    kl = npy(D.kl_divergence(D.Pareto(t64([1.0, 1.0]), t64(a1)), D.Pareto(t64([0.5, 2.0]), t64(a2))))
    assert kl[0] == pytest.approx(a2[0] * np.log(2.0) + np.log(a1[0] / a2[0]) + a2[0] / a1[0] - 1)
    assert kl[1] == np.inf
    cb1, cb2 = D.ContinuousBernoulli(t64([0.2, 0.7])), D.ContinuousBernoulli(t64([0.6, 0.5]))
    # by quadrature of p ln(p / q) on [0, 1]
    grid = t64(np.linspace(1e-9, 1 - 1e-9, 20001)[:, None])
    lp, lq = npy(cb1.log_prob(grid)), npy(cb2.log_prob(grid))
    ref = trapezoid(np.exp(lp) * (lp - lq), np.linspace(1e-9, 1 - 1e-9, 20001), axis=0)
    np.testing.assert_allclose(npy(D.kl_divergence(cb1, cb2)), ref, rtol=1e-6)
    assert (npy(D.kl_divergence(D.Normal(t64(0.0), t64(1.0)), D.Pareto(t64(1.0), t64(2.0)))) == np.inf)
    assert (npy(D.kl_divergence(D.Pareto(t64(1.0), t64(0.5)), D.Exponential(t64(1.0)))) == np.inf)


# --------------------------------------------------------------------------------------------------
# gradients


def test_log_prob_gradcheck():
    x = t64([0.4, 1.3])
    cases = [
        (lambda a, b: D.Cauchy(a, b).log_prob(x), ([0.1, -1.0], [0.5, 2.0])),
        (lambda a, b, c: D.StudentT(a, b, c).log_prob(x), ([2.5, 0.7], [0.1, 1.0])),
        (lambda s, k: D.Weibull(s, k).log_prob(x), ([1.0, 2.0], [0.7, 3.0])),
        (lambda s, a: D.Pareto(s, a).log_prob(t64([1.4, 2.5])), ([1.0, 2.0], [0.7, 3.0])),
        (lambda a, b: D.Kumaraswamy(a, b).log_prob(t64([0.3, 0.8])), ([1.5, 0.7], [2.0, 0.6])),
        (lambda s: D.HalfNormal(s).log_prob(x), ([0.5, 2.0],)),
        (lambda s: D.HalfCauchy(s).log_prob(x), ([0.5, 2.0],)),
        (lambda p: D.ContinuousBernoulli(p).log_prob(t64([0.3, 0.8])), ([0.2, 0.9],)),
        (lambda l: D.ContinuousBernoulli(logits=l).entropy(), ([-1.0, 2.0],)),
        (lambda m, k: D.VonMises(m, k).log_prob(x), ([0.2, -1.0], [0.5, 5.0])),
        (lambda r, l: D.NegativeBinomial(r, logits=l).log_prob(t64([0.0, 3.0])), ([2.0, 0.5], [0.3, -1.0])),
        (lambda l: D.Multinomial(4, logits=l).log_prob(t64([1.0, 3.0])), ([0.3, -1.0],)),
        (lambda l: D.RelaxedBernoulli(t64(0.7), logits=l).log_prob(t64([0.3, 0.8])), ([0.3, -1.0],)),
        (lambda l, t: D.RelaxedOneHotCategorical(t, logits=l).log_prob(t64([0.3, 0.7])), ([0.3, -1.0], [0.6])),
        (lambda m, s: D.LogisticNormal(m, s).log_prob(t64([0.2, 0.3, 0.5])), ([0.3, -1.0], [1.0, 0.5])),
    ]
    for fn, params in cases:
        if len(params) == 2 and fn.__code__.co_argcount == 3:   # StudentT: df, loc, and a fixed scale
            params = params + ([1.5, 0.8],)
        assert gradcheck(fn, tuple(t64(p, True) for p in params))


def test_low_rank_mvn_and_mixture_gradcheck():
    x = t64([[0.3, -0.2, 1.0], [1.0, 0.5, -0.5]])
    assert gradcheck(lambda m, W, d: D.LowRankMultivariateNormal(m, W, d).log_prob(x),
                     (t64([0.1, 0.0, -0.3], True), t64([[1.0, 0.2], [0.3, -0.5], [0.0, 0.8]], True),
                      t64([0.5, 1.0, 2.0], True)))
    q = D.LowRankMultivariateNormal(t64([0.0, 0.2, 0.1]), t64([[0.4], [0.1], [-0.3]]), t64([1.0, 0.7, 1.2]))
    assert gradcheck(lambda m, W, d: D.kl_divergence(D.LowRankMultivariateNormal(m, W, d), q),
                     (t64([0.1, 0.0, -0.3], True), t64([[1.0, 0.2], [0.3, -0.5], [0.0, 0.8]], True),
                      t64([0.5, 1.0, 2.0], True)))
    assert gradcheck(lambda lg, m: D.MixtureSameFamily(D.Categorical(logits=lg), D.Normal(m, t64([1.0, 0.5])))
                     .log_prob(t64([0.3, -1.0, 2.0])), (t64([0.2, -0.4], True), t64([0.0, 1.0], True)))


def _seeded(draw):
    def fn(*params):
        md.manual_seed(3)
        return draw(*params)
    return fn


def test_rsample_gradcheck():
    cases = [
        (lambda a, b: D.Cauchy(a, b).rsample((3,)), ([0.1, -1.0], [0.5, 2.0])),
        (lambda a, b: D.StudentT(t64([2.5, 4.0]), a, b).rsample((3,)), ([0.1, -1.0], [0.5, 2.0])),
        (lambda s, k: D.Weibull(s, k).rsample((3,)), ([1.0, 2.0], [0.7, 3.0])),
        (lambda s, a: D.Pareto(s, a).rsample((3,)), ([1.0, 2.0], [1.7, 3.0])),
        (lambda a, b: D.Kumaraswamy(a, b).rsample((3,)), ([1.5, 0.7], [2.0, 0.6])),
        (lambda s: D.HalfNormal(s).rsample((3,)), ([0.5, 2.0],)),
        (lambda p: D.ContinuousBernoulli(p).rsample((3,)), ([0.2, 0.9],)),
        (lambda l: D.RelaxedBernoulli(t64(0.7), logits=l).rsample((3,)), ([0.3, -1.0],)),
        (lambda l: D.RelaxedOneHotCategorical(t64(0.7), logits=l).rsample((3,)), ([0.3, -1.0, 0.5],)),
        (lambda m, s: D.LogisticNormal(m, s).rsample((3,)), ([0.3, -1.0], [1.0, 0.5])),
        (lambda m, W, d: D.LowRankMultivariateNormal(m, W, d).rsample((3,)),
         ([0.1, 0.0], [[1.0, 0.2], [0.3, -0.5]], [0.5, 1.0])),
    ]
    for fn, params in cases:
        assert gradcheck(_seeded(fn), tuple(t64(p, True) for p in params))


# --------------------------------------------------------------------------------------------------
# samples: shapes and moments


def test_sample_shapes_and_moments():
    md.manual_seed(0)
    n = 40000
    cases = [
        (D.HalfNormal(t64([0.5, 2.0])), "mean", 0.02),
        (D.StudentT(t64([5.0, 8.0]), t64([1.0, -1.0]), t64([1.0, 2.0])), "mean", 0.04),
        (D.StudentT(t64([5.0, 8.0]), t64([1.0, -1.0]), t64([1.0, 2.0])), "variance", 0.06),
        (D.Chi2(t64([1.0, 6.0])), "mean", 0.02),
        (D.Weibull(t64([1.0, 2.0]), t64([1.5, 3.0])), "variance", 0.03),
        (D.Pareto(t64([1.0, 2.0]), t64([4.0, 5.0])), "mean", 0.02),
        (D.Kumaraswamy(t64([2.0, 0.5]), t64([3.0, 1.5])), "mean", 0.02),
        (D.NegativeBinomial(t64([2.0, 5.0]), probs=t64([0.3, 0.6])), "mean", 0.03),
        (D.NegativeBinomial(t64([2.0, 5.0]), probs=t64([0.3, 0.6])), "variance", 0.05),
        (D.ContinuousBernoulli(t64([0.2, 0.7])), "mean", 0.02),
        (D.ContinuousBernoulli(t64([0.2, 0.7])), "variance", 0.03),
        (D.VonMises(t64([0.5, -2.0]), t64([0.5, 4.0])), "variance", 0.03),
        (D.Multinomial(6, probs=t64([0.2, 0.3, 0.5])), "mean", 0.02),
        (D.Multinomial(6, probs=t64([0.2, 0.3, 0.5])), "variance", 0.03),
        (D.LowRankMultivariateNormal(t64([1.0, -1.0]), t64([[1.0], [0.5]]), t64([0.5, 2.0])), "variance", 0.03),
    ]
    for d, moment, tol in cases:
        s = npy(d.sample((n,)))
        assert s.shape == (n,) + tuple(d.batch_shape) + tuple(d.event_shape)
        ref = npy(getattr(d, moment))
        if isinstance(d, D.VonMises):
            est = 1 - np.cos(s - npy(d.loc)).mean(0)
        else:
            est = s.mean(0) if moment == "mean" else s.var(0)
        np.testing.assert_allclose(est, ref, rtol=tol, atol=tol, err_msg=f"{type(d).__name__}.{moment}")
    for d in (D.Cauchy(0.0, 1.0), D.HalfCauchy(md.ones(2, 3)), D.VonMises(md.zeros(3), 2.0),
              D.RelaxedBernoulli(md.tensor(0.5), probs=md.tensor([0.3, 0.6])), D.LogisticNormal(md.zeros(2, 4), 1.0)):
        s = d.sample((5,))
        assert s.shape == md.Size((5,) + tuple(d.batch_shape) + tuple(d.event_shape)) and s.dtype == md.float32
        assert bool(d.support.check(s).all())
    vm = npy(D.VonMises(t64([3.0]), t64([0.01])).sample((2000,)))
    assert (vm >= -np.pi).all() and (vm < np.pi).all()


def test_expand():
    dists = [D.Cauchy(t64([0.0]), t64([1.0])), D.HalfNormal(t64([1.0])), D.HalfCauchy(t64([1.0])),
             D.StudentT(t64([3.0])), D.Chi2(t64([2.0])), D.Weibull(t64([1.0]), t64([2.0])),
             D.Pareto(t64([1.0]), t64([2.0])), D.Kumaraswamy(t64([2.0]), t64([3.0])),
             D.NegativeBinomial(t64([2.0]), probs=t64([0.3])), D.ContinuousBernoulli(t64([0.3])),
             D.VonMises(t64([0.0]), t64([1.0])), D.RelaxedBernoulli(t64(0.5), probs=t64([0.3]))]
    for d in dists:
        e = d.expand((4, 1))
        assert type(e) is type(d) and e.batch_shape == md.Size([4, 1]) and e.sample().shape == md.Size([4, 1])
        v = d.sample()
        np.testing.assert_allclose(npy(e.log_prob(v)), np.broadcast_to(npy(d.log_prob(v)), (4, 1)))
    for d in (D.Multinomial(3, probs=t64([0.2, 0.8])), D.RelaxedOneHotCategorical(t64(0.5), probs=t64([0.2, 0.8])),
              D.LogisticNormal(t64([0.0]), t64([1.0])),
              D.LowRankMultivariateNormal(t64([0.0, 1.0]), t64([[1.0], [0.5]]), t64([1.0, 1.0]))):
        e = d.expand((3,))
        assert type(e) is type(d) and e.batch_shape == md.Size([3]) and e.sample().shape == md.Size([3, 2])
    w = D.Weibull(t64([1.0]), t64([2.0])).expand((3,))
    assert w.concentration_reciprocal.shape == md.Size([3]) and w.rsample().shape == md.Size([3])


# --------------------------------------------------------------------------------------------------
# validation and bad input


def test_bad_input_errors():
    with pytest.raises(ValueError):
        D.Cauchy(0.0, -1.0)
    with pytest.raises(ValueError):
        D.HalfNormal(t64([-1.0]))
    with pytest.raises(ValueError):
        D.StudentT(t64([0.0]))
    with pytest.raises(ValueError):
        D.Pareto(1.0, -2.0)
    with pytest.raises(ValueError):
        D.NegativeBinomial(2.0, probs=1.0)    # p in [0, 1)
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.NegativeBinomial(2.0, probs=0.3, logits=0.1)
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.ContinuousBernoulli()
    with pytest.raises(NotImplementedError, match="inhomogeneous total_count"):
        D.Multinomial(2.5, probs=t64([0.5, 0.5]))
    with pytest.raises(ValueError):
        D.Multinomial(3, probs=t64([0.5, 0.5])).log_prob(t64([2.0, 2.0]))   # sums to 4 > 3
    with pytest.raises(ValueError):
        D.HalfNormal(t64([1.0])).log_prob(t64([-0.5]))
    with pytest.raises(ValueError):
        D.ContinuousBernoulli(t64([0.3])).log_prob(t64([1.5]))
    with pytest.raises(ValueError, match="cov_factor must be a batch of matrices"):
        D.LowRankMultivariateNormal(md.zeros(3), md.ones(2, 1), md.ones(3))
    with pytest.raises(ValueError, match="cov_diag must be a batch of vectors"):
        D.LowRankMultivariateNormal(md.zeros(3), md.ones(3, 1), md.ones(2))
    with pytest.raises(ValueError, match="loc must be at least one-dimensional"):
        D.LowRankMultivariateNormal(md.tensor(0.0), md.ones(3, 1), md.ones(3))
    with pytest.raises(ValueError):
        D.LowRankMultivariateNormal(md.zeros(3), md.zeros(3, 1), md.tensor([-1.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="Categorical"):
        D.MixtureSameFamily(D.Normal(0.0, 1.0), D.Normal(md.zeros(2), 1.0))
    with pytest.raises(ValueError, match="does not equal"):
        D.MixtureSameFamily(D.Categorical(md.ones(3)), D.Normal(md.zeros(2), 1.0))
    with pytest.raises(ValueError, match="not compatible"):
        D.MixtureSameFamily(D.Categorical(md.ones(4, 2)), D.Normal(md.zeros(3, 2), 1.0))
    with pytest.raises(ValueError, match="different event shapes"):
        D.kl_divergence(D.LowRankMultivariateNormal(md.zeros(3), md.ones(3, 1), md.ones(3)),
                        D.LowRankMultivariateNormal(md.zeros(2), md.ones(2, 1), md.ones(2)))
