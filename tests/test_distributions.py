"""minidl.distributions: values against closed forms computed here with NumPy, gradients by
gradcheck (float64), samples' shapes and moments, argument validation, expand and KL divergences (the
comparisons against torch.distributions are in test_distributions_torch.py)."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.distributions as D
from minidl.autograd import gradcheck
from minidl.distributions import constraints

F64 = md.float64


def t64(x, grad=False):
    return md.tensor(np.asarray(x, np.float64), dtype=F64, requires_grad=grad)


def npy(t):
    return t.detach().numpy()


LGAMMA = np.vectorize(math.lgamma)


def digamma_np(x, h=1e-6):
    return (LGAMMA(x + h) - LGAMMA(x - h)) / (2 * h)


# --------------------------------------------------------------------------------------------------
# closed forms with NumPy


def test_normal_values_match_closed_forms():
    loc, scale, x = np.array([0.5, -1.0, 2.0]), np.array([1.5, 0.3, 2.0]), np.array([0.1, -0.5, -1.0])
    d = D.Normal(t64(loc), t64(scale))
    z = (x - loc) / scale
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), -z ** 2 / 2 - np.log(scale) - 0.5 * np.log(2 * np.pi))
    np.testing.assert_allclose(npy(d.entropy()), 0.5 + 0.5 * np.log(2 * np.pi) + np.log(scale))
    cdf = 0.5 * (1 + np.vectorize(math.erf)(z / np.sqrt(2)))
    np.testing.assert_allclose(npy(d.cdf(t64(x))), cdf)
    np.testing.assert_allclose(npy(d.icdf(t64(cdf))), x, rtol=1e-6)
    np.testing.assert_allclose(npy(d.variance), scale ** 2)
    assert d.batch_shape == md.Size([3]) and d.event_shape == md.Size([])


def test_discrete_log_probs_match_closed_forms():
    p = np.array([0.2, 0.7, 0.5])
    k = np.array([1.0, 0.0, 1.0])
    np.testing.assert_allclose(npy(D.Bernoulli(t64(p)).log_prob(t64(k))), k * np.log(p) + (1 - k) * np.log1p(-p))
    np.testing.assert_allclose(npy(D.Bernoulli(t64(p)).entropy()), -(p * np.log(p) + (1 - p) * np.log1p(-p)))
    rate, n = np.array([0.5, 3.0, 10.0]), np.array([0.0, 2.0, 12.0])
    np.testing.assert_allclose(npy(D.Poisson(t64(rate)).log_prob(t64(n))),
                               n * np.log(rate) - rate - LGAMMA(n + 1))
    total = np.array([5.0, 10.0, 3.0])
    ref = LGAMMA(total + 1) - LGAMMA(n[[0, 1, 1]] + 1) - LGAMMA(total - n[[0, 1, 1]] + 1)
    kk = n[[0, 1, 1]]
    ref = ref + kk * np.log(p) + (total - kk) * np.log1p(-p)
    np.testing.assert_allclose(npy(D.Binomial(t64(total), t64(p)).log_prob(t64(kk))), ref)
    np.testing.assert_allclose(npy(D.Geometric(t64(p)).log_prob(t64(n[:3]))), n * np.log1p(-p) + np.log(p))
    probs = np.array([[0.1, 0.6, 0.3], [0.25, 0.25, 0.5]])
    c = D.Categorical(probs=t64(probs))
    np.testing.assert_allclose(npy(c.log_prob(md.tensor([1, 2]))), np.log([0.6, 0.5]))
    np.testing.assert_allclose(npy(c.entropy()), -(probs * np.log(probs)).sum(-1))
    oh = D.OneHotCategorical(probs=t64(probs))
    np.testing.assert_allclose(npy(oh.log_prob(t64([[0, 0, 1], [1, 0, 0]]))), np.log([0.3, 0.25]))


def test_continuous_values_match_closed_forms():
    x = np.array([0.3, 1.7, 4.0])
    a, r = np.array([0.7, 2.0, 5.0]), np.array([1.5, 0.5, 2.0])
    g = D.Gamma(t64(a), t64(r))
    np.testing.assert_allclose(npy(g.log_prob(t64(x))), a * np.log(r) + (a - 1) * np.log(x) - r * x - LGAMMA(a))
    np.testing.assert_allclose(npy(g.entropy()), a - np.log(r) + LGAMMA(a) + (1 - a) * digamma_np(a), rtol=1e-6)
    # the CDF of a Gamma(1, r) is 1 - e^{-r x}; of a Gamma(2, r) it is 1 - e^{-r x}(1 + r x)
    np.testing.assert_allclose(npy(D.Gamma(t64([1.0, 2.0]), t64([1.5, 0.5])).cdf(t64([0.3, 1.7]))),
                               [1 - np.exp(-0.45), 1 - np.exp(-0.85) * 1.85], rtol=1e-12)
    e = D.Exponential(t64(r))
    np.testing.assert_allclose(npy(e.log_prob(t64(x))), np.log(r) - r * x)
    np.testing.assert_allclose(npy(e.cdf(t64(x))), 1 - np.exp(-r * x))
    lap = D.Laplace(t64([0.0, 1.0, -2.0]), t64(r))
    np.testing.assert_allclose(npy(lap.log_prob(t64(x))), -np.log(2 * r) - np.abs(x - [0.0, 1.0, -2.0]) / r)
    u = D.Uniform(t64([0.0, 1.0, -1.0]), t64([1.0, 3.0, 5.0]))
    np.testing.assert_allclose(npy(u.log_prob(t64([0.3, 1.7, 4.0]))), -np.log([1.0, 2.0, 6.0]))
    outside = D.Uniform(t64([0.0, 1.0, -1.0]), t64([1.0, 3.0, 5.0]), validate_args=False)
    assert npy(outside.log_prob(t64([1.5, 1.7, 4.0])))[0] == -np.inf
    gum = D.Gumbel(t64([0.0, 1.0, -2.0]), t64(r))
    z = (x - [0.0, 1.0, -2.0]) / r
    np.testing.assert_allclose(npy(gum.log_prob(t64(x))), -(z + np.exp(-z)) - np.log(r))
    c1, c0 = np.array([0.5, 2.0, 3.0]), np.array([1.5, 2.5, 0.8])
    xb = np.array([0.2, 0.5, 0.9])
    lbeta = LGAMMA(c1) + LGAMMA(c0) - LGAMMA(c1 + c0)
    np.testing.assert_allclose(npy(D.Beta(t64(c1), t64(c0)).log_prob(t64(xb))),
                               (c1 - 1) * np.log(xb) + (c0 - 1) * np.log1p(-xb) - lbeta)
    conc = np.array([0.7, 2.0, 3.5])
    xd = np.array([0.2, 0.3, 0.5])
    np.testing.assert_allclose(npy(D.Dirichlet(t64(conc)).log_prob(t64(xd))),
                               ((conc - 1) * np.log(xd)).sum() + math.lgamma(conc.sum()) - LGAMMA(conc).sum())
    ln = D.LogNormal(t64([0.2]), t64([0.5]))
    np.testing.assert_allclose(npy(ln.log_prob(t64([1.3]))),
                               -np.log(1.3) - np.log(0.5) - 0.5 * np.log(2 * np.pi) - (np.log(1.3) - 0.2) ** 2 / 0.5)
    np.testing.assert_allclose(npy(ln.mean), np.exp(0.2 + 0.125))


def _mvn_reference(loc, L, x):
    S = L @ L.T
    d = x - loc
    n = len(loc)
    return -0.5 * (n * np.log(2 * np.pi) + np.linalg.slogdet(S)[1] + d @ np.linalg.solve(S, d))


def test_multivariate_normal_matches_numpy():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((3, 3))
    L = np.linalg.cholesky(A @ A.T + 3 * np.eye(3))
    loc, x = rng.standard_normal(3), rng.standard_normal((2, 3))
    d = D.MultivariateNormal(t64(loc), scale_tril=t64(L))
    assert d.batch_shape == md.Size([]) and d.event_shape == md.Size([3])
    np.testing.assert_allclose(npy(d.log_prob(t64(x))), [_mvn_reference(loc, L, xi) for xi in x])
    S = L @ L.T
    np.testing.assert_allclose(npy(d.entropy()), 0.5 * (3 * (1 + np.log(2 * np.pi)) + np.linalg.slogdet(S)[1]))
    np.testing.assert_allclose(npy(d.covariance_matrix), S)
    np.testing.assert_allclose(npy(d.precision_matrix), np.linalg.inv(S), atol=1e-12)
    np.testing.assert_allclose(npy(d.variance), np.diag(S))
    # batched loc against one scale_tril
    db = D.MultivariateNormal(t64(np.stack([loc, -loc])), scale_tril=t64(L))
    assert db.batch_shape == md.Size([2])
    np.testing.assert_allclose(npy(db.log_prob(t64(x[0]))), [_mvn_reference(loc, L, x[0]),
                                                             _mvn_reference(-loc, L, x[0])])


def test_multivariate_normal_from_covariance_and_precision():
    S = np.array([[2.0, 0.3], [0.3, 1.0]])
    x = np.array([0.3, -0.4])
    for kw in ({"covariance_matrix": t64(S)}, {"precision_matrix": t64(np.linalg.inv(S))}):
        d = D.MultivariateNormal(t64([0.0, 0.0]), **kw)
        np.testing.assert_allclose(npy(d.log_prob(t64(x))), _mvn_reference(np.zeros(2), np.linalg.cholesky(S), x))


def test_kl_closed_forms():
    m1, s1, m2, s2 = 0.3, 1.2, -0.5, 0.7
    kl = D.kl_divergence(D.Normal(t64([m1]), t64([s1])), D.Normal(t64([m2]), t64([s2])))
    np.testing.assert_allclose(npy(kl), np.log(s2 / s1) + (s1 ** 2 + (m1 - m2) ** 2) / (2 * s2 ** 2) - 0.5)
    p, q = np.array([0.2, 0.5, 0.3]), np.array([0.4, 0.4, 0.2])
    np.testing.assert_allclose(npy(D.kl_divergence(D.Categorical(t64(p)), D.Categorical(t64(q)))),
                               (p * np.log(p / q)).sum())
    kl_u = D.kl_divergence(D.Uniform(t64([0.0, -1.0]), t64([1.0, 2.0])), D.Uniform(t64([-1.0, 0.0]), t64([2.0, 2.0])))
    np.testing.assert_allclose(npy(kl_u), [np.log(3.0), np.inf])
    kl_b = D.kl_divergence(D.Bernoulli(t64([0.0, 0.3])), D.Bernoulli(t64([0.5, 1.0])))
    np.testing.assert_allclose(npy(kl_b), [np.log(2.0), np.inf])
    rng = np.random.default_rng(1)
    Lp = np.linalg.cholesky(np.cov(rng.standard_normal((3, 10))) + np.eye(3))
    Lq = np.linalg.cholesky(np.cov(rng.standard_normal((3, 10))) + np.eye(3))
    mp, mq = rng.standard_normal(3), rng.standard_normal(3)
    Sp, Sq = Lp @ Lp.T, Lq @ Lq.T
    ref = 0.5 * (np.trace(np.linalg.solve(Sq, Sp)) + (mq - mp) @ np.linalg.solve(Sq, mq - mp) - 3
                 + np.linalg.slogdet(Sq)[1] - np.linalg.slogdet(Sp)[1])
    kl_m = D.kl_divergence(D.MultivariateNormal(t64(mp), scale_tril=t64(Lp)),
                           D.MultivariateNormal(t64(mq), scale_tril=t64(Lq)))
    np.testing.assert_allclose(npy(kl_m), ref)
    ind = D.kl_divergence(D.Independent(D.Normal(t64([m1, 0.0]), t64([s1, 1.0])), 1),
                          D.Independent(D.Normal(t64([m2, 0.0]), t64([s2, 1.0])), 1))
    np.testing.assert_allclose(npy(ind), npy(kl)[0])


def test_kl_dispatch_and_register_kl():
    with pytest.raises(NotImplementedError, match="No KL\\(p \\|\\| q\\) is implemented for p type Normal and q "
                                                  "type Poisson"):
        D.kl_divergence(D.Normal(0.0, 1.0), D.Poisson(1.0))

    class MyNormal(D.Normal):
        pass
    kl = D.kl_divergence(MyNormal(0.0, 1.0), D.Normal(1.0, 1.0))   # subclasses use the base pair
    assert abs(kl.item() - 0.5) < 1e-6

    @D.register_kl(MyNormal, D.Laplace)
    def _kl(p, q):
        return md.tensor(7.0)
    assert D.kl_divergence(MyNormal(0.0, 1.0), D.Laplace(0.0, 1.0)).item() == 7.0
    with pytest.raises(TypeError, match="Distribution subclass"):
        D.register_kl(int, D.Normal)


# --------------------------------------------------------------------------------------------------
# gradients


def test_log_prob_gradcheck():
    x = t64([0.4, 1.3, 2.5])
    assert gradcheck(lambda m, s: D.Normal(m, s).log_prob(x), (t64([0.1, 1.0, -1.0], True), t64([0.5, 1.0, 2.0], True)))
    assert gradcheck(lambda a, r: D.Gamma(a, r).log_prob(x), (t64([0.7, 2.0, 3.0], True), t64([1.0, 0.5, 2.0], True)))
    assert gradcheck(lambda a, b: D.Beta(a, b).log_prob(x / 3),
                     (t64([0.7, 2.0, 3.0], True), t64([1.0, 0.5, 2.0], True)))
    assert gradcheck(lambda c: D.Dirichlet(c).log_prob(t64([0.2, 0.3, 0.5])), (t64([0.7, 2.0, 3.0], True),))
    assert gradcheck(lambda l: D.Categorical(logits=l).log_prob(md.tensor([0, 2])),
                     (t64([[0.1, 0.5, -1.0]] * 2, True),))
    assert gradcheck(lambda l: D.Bernoulli(logits=l).log_prob(t64([1.0, 0.0, 1.0])), (t64([0.1, -2.0, 3.0], True),))
    assert gradcheck(lambda r: D.Poisson(r).log_prob(t64([0.0, 2.0, 5.0])), (t64([0.5, 2.0, 4.0], True),))
    assert gradcheck(lambda a, r: D.Gamma(a, r).entropy(), (t64([0.7, 2.0], True), t64([1.0, 0.5], True)))
    assert gradcheck(lambda c: D.Dirichlet(c).entropy(), (t64([0.7, 2.0, 3.0], True),))
    rng = np.random.default_rng(0)
    L = np.linalg.cholesky(np.cov(rng.standard_normal((3, 10))) + np.eye(3))
    xs = t64(rng.standard_normal((2, 3)))
    # (the upper triangle is not a parameter: tril() keeps finite differences there from leaving the constraint)
    assert gradcheck(lambda m, L: D.MultivariateNormal(m, scale_tril=L.tril()).log_prob(xs),
                     (t64(rng.standard_normal(3), True), t64(L, True)))
    Lq = t64(np.linalg.cholesky(np.cov(rng.standard_normal((3, 10))) + 2 * np.eye(3)), True)
    assert gradcheck(lambda m, L, Lq: D.kl_divergence(D.MultivariateNormal(m, scale_tril=L.tril()),
                                                      D.MultivariateNormal(m * 0.5, scale_tril=Lq.tril())),
                     (t64(rng.standard_normal(3), True), t64(L, True), Lq))


def _seeded(build, shape=(4,)):
    """A loss of an rsample whose noise is the same at every call (so finite differences see a
    fixed reparameterised function of the parameters)."""
    def f(*params):
        md.manual_seed(3)
        return (build(*params).rsample(shape) ** 2).sum()
    return f


@pytest.mark.parametrize("build, params", [
    (D.Normal, ([0.3, -1.0], [0.5, 2.0])),
    (D.Laplace, ([0.3, -1.0], [0.5, 2.0])),
    (D.Gumbel, ([0.3, -1.0], [0.5, 2.0])),
    (D.Uniform, ([0.3, -1.0], [0.5, 2.0])),
    (lambda r: D.Exponential(r), ([0.5, 2.0],)),
    (D.LogNormal, ([0.3, -1.0], [0.5, 0.2])),
    (lambda m, L: D.MultivariateNormal(m, scale_tril=L.tril()), ([0.3, -1.0], [[1.0, 0.0], [0.4, 0.7]])),
    (lambda m, s: D.TransformedDistribution(D.Normal(m, s), [D.TanhTransform(), D.AffineTransform(1.0, 2.0)]),
     ([0.3, -1.0], [0.5, 0.2])),
], ids=["normal", "laplace", "gumbel", "uniform", "exponential", "lognormal", "mvn", "tanh-affine"])
def test_rsample_gradcheck(build, params):
    inputs = tuple(t64(p, True) for p in params)
    assert gradcheck(_seeded(build), inputs)
    assert build(*inputs).rsample((2,)).requires_grad


def test_gamma_rsample_gradient_is_the_implicit_reparameterisation():
    """dx/da at a fixed CDF value u = P(a, x): compare with a finite difference of the inverse CDF
    in a, found by bisection on P (computed here by quadrature of the density)."""
    def cdf(a, x, n=20001):
        t = np.linspace(0, x, n)[1:]
        logp = (a - 1) * np.log(t) - t - math.lgamma(a)
        return np.trapezoid(np.exp(logp), t) + (t[0] ** a) / math.exp(math.lgamma(a + 1))

    def inv(a, u):
        lo, hi = 1e-8, 60.0
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if cdf(a, mid) < u else (lo, mid)
        return 0.5 * (lo + hi)

    a = t64([2.5], True)
    md.manual_seed(0)
    x = D.Gamma(a, t64([1.0])).rsample()
    x.sum().backward()
    u = cdf(2.5, x.item())
    h = 1e-4
    fd = (inv(2.5 + h, u) - inv(2.5 - h, u)) / (2 * h)
    np.testing.assert_allclose(a.grad.numpy(), [fd], rtol=1e-4)


def test_gamma_and_dirichlet_rsample_gradients_are_unbiased():
    md.manual_seed(0)
    a = t64([0.6, 3.0], True)
    D.Gamma(a, t64([2.0, 2.0])).rsample((4000,)).mean(0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [0.5, 0.5], rtol=0.08)   # dE[x]/da = 1 / rate
    c = t64([1.0, 2.0, 3.0], True)
    D.Dirichlet(c).rsample((4000,))[:, 0].mean().backward()   # dE[x0]/dc = (s e0 - c0) / s**2
    np.testing.assert_allclose(c.grad.numpy(), [5 / 36, -1 / 36, -1 / 36], atol=0.015)
    assert D.Beta(t64([2.0], True), t64([3.0])).rsample().requires_grad


# --------------------------------------------------------------------------------------------------
# samples


@pytest.mark.parametrize("dist, mean, var", [
    (lambda: D.Normal(t64([1.0, -2.0]), t64([0.5, 2.0])), [1.0, -2.0], [0.25, 4.0]),
    (lambda: D.Bernoulli(t64([0.2, 0.9])), [0.2, 0.9], [0.16, 0.09]),
    (lambda: D.Uniform(t64([0.0, -1.0]), t64([1.0, 3.0])), [0.5, 1.0], [1 / 12, 16 / 12]),
    (lambda: D.Exponential(t64([0.5, 4.0])), [2.0, 0.25], [4.0, 1 / 16]),
    (lambda: D.Laplace(t64([0.0, 1.0]), t64([1.0, 0.5])), [0.0, 1.0], [2.0, 0.5]),
    (lambda: D.Gumbel(t64([0.0, 1.0]), t64([1.0, 0.5])), [0.5772, 1.2886], [1.6449, 0.4112]),
    (lambda: D.Poisson(t64([0.5, 6.0])), [0.5, 6.0], [0.5, 6.0]),
    (lambda: D.Binomial(t64([10.0, 4.0]), t64([0.3, 0.8])), [3.0, 3.2], [2.1, 0.64]),
    (lambda: D.Geometric(t64([0.3, 0.8])), [7 / 3, 0.25], [70 / 9, 0.3125]),
    (lambda: D.Gamma(t64([0.5, 4.0]), t64([1.0, 2.0])), [0.5, 2.0], [0.5, 1.0]),
    (lambda: D.Beta(t64([2.0, 0.5]), t64([3.0, 0.5])), [0.4, 0.5], [0.04, 0.125]),
    (lambda: D.Categorical(t64([[0.2, 0.8], [0.5, 0.5]])), [0.8, 0.5], [0.16, 0.25]),
    (lambda: D.LogNormal(t64([0.0, 0.5]), t64([0.25, 0.1])), None, None),
])
def test_sample_shapes_and_moments(dist, mean, var):
    md.manual_seed(0)
    d = dist()
    s = d.sample((20000,))
    assert tuple(s.shape) == (20000, 2) and not s.requires_grad
    m, v = npy(s).mean(0), npy(s).var(0)
    np.testing.assert_allclose(m, npy(d.mean) if mean is None else mean, rtol=0.05, atol=0.02)
    np.testing.assert_allclose(v, npy(d.variance) if var is None else var, rtol=0.1, atol=0.01)
    if mean is not None and not isinstance(d, D.Categorical):   # a Categorical's mean is NaN, as torch's
        np.testing.assert_allclose(npy(d.mean), mean, rtol=1e-3)
        np.testing.assert_allclose(npy(d.variance), var, rtol=1e-3)


def test_multivariate_samples_and_shapes():
    md.manual_seed(0)
    L = np.array([[1.0, 0.0], [0.6, 0.8]])
    s = D.MultivariateNormal(t64([1.0, -1.0]), scale_tril=t64(L)).sample((20000,))
    assert tuple(s.shape) == (20000, 2)
    np.testing.assert_allclose(np.cov(npy(s).T), L @ L.T, atol=0.05)
    dr = D.Dirichlet(t64([[1.0, 2.0, 3.0]] * 2))
    x = dr.sample((5000,))
    assert tuple(x.shape) == (5000, 2, 3)
    np.testing.assert_allclose(npy(x).sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(npy(x).mean(0)[0], [1 / 6, 2 / 6, 3 / 6], atol=0.02)
    oh = D.OneHotCategorical(probs=t64([0.1, 0.2, 0.7])).sample((4000, 2))
    assert tuple(oh.shape) == (4000, 2, 3) and (npy(oh).sum(-1) == 1).all()
    np.testing.assert_allclose(npy(oh).mean((0, 1)), [0.1, 0.2, 0.7], atol=0.02)
    assert D.Normal(0.0, 1.0).sample().shape == md.Size([])
    assert D.Normal(md.zeros(3), 1.0).rsample((2, 4)).shape == md.Size([2, 4, 3])


def test_manual_seed_makes_samples_reproducible():
    d = D.Normal(md.zeros(3), md.ones(3))
    md.manual_seed(11)
    a = d.sample((2,))
    g = D.Gamma(md.ones(3), 1.0).sample()
    md.manual_seed(11)
    assert (d.sample((2,)) == a).all() and (D.Gamma(md.ones(3), 1.0).sample() == g).all()


def test_enumerate_support():
    b = D.Bernoulli(t64([0.2, 0.4, 0.7]))
    assert npy(b.enumerate_support()).tolist() == [[0.0] * 3, [1.0] * 3]
    assert b.enumerate_support(expand=False).shape == md.Size([2, 1])
    c = D.Categorical(t64([[0.2, 0.8, 0.0]] * 2))
    assert npy(c.enumerate_support()).tolist() == [[0, 0], [1, 1], [2, 2]]
    assert D.OneHotCategorical(t64([0.5, 0.5])).enumerate_support().shape == md.Size([2, 2])
    bi = D.Binomial(3, t64([0.2, 0.4]))
    assert bi.enumerate_support().shape == md.Size([4, 2])
    p = np.array([0.2, 0.4])
    ent = [-sum(math.comb(3, k) * q ** k * (1 - q) ** (3 - k) * math.log(math.comb(3, k) * q ** k * (1 - q) ** (3 - k))
                for k in range(4)) for q in p]
    np.testing.assert_allclose(npy(bi.entropy()), ent)
    with pytest.raises(NotImplementedError, match="cartesian product"):
        D.Independent(b, 1).enumerate_support()


# --------------------------------------------------------------------------------------------------
# validation, expand, constraints


def test_validate_args_raise_value_error():
    with pytest.raises(ValueError, match=r"Expected parameter scale \(Tensor of shape \(2,\)\) of distribution "
                                         r"Normal\(loc: .*\) to satisfy the constraint GreaterThan\(lower_bound=0.0\)"):
        D.Normal(md.zeros(2), md.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="to be within the support \\(GreaterThanEq\\(lower_bound=0.0\\)\\)"):
        D.Exponential(1.0).log_prob(md.tensor([-1.0]))
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Bernoulli()
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        D.Categorical(md.ones(2), md.ones(2))
    with pytest.raises(ValueError, match="`probs` parameter must be at least one-dimensional."):
        D.Categorical(md.tensor(1.0))
    with pytest.raises(ValueError, match="Uniform is not defined when low>= high"):
        D.Uniform(1.0, 0.0)
    with pytest.raises(ValueError, match="constraint IndependentConstraint\\(GreaterThan\\(lower_bound=0.0\\), 1\\)"):
        D.Dirichlet(md.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="constraint LowerCholesky"):
        D.MultivariateNormal(md.zeros(2), scale_tril=md.tensor([[1.0, 0.5], [0.0, 1.0]]))
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix or precision_matrix or scale_tril"):
        D.MultivariateNormal(md.zeros(2))
    with pytest.raises(ValueError, match="loc must be at least one-dimensional."):
        D.MultivariateNormal(md.tensor(0.0), scale_tril=md.eye(1))
    with pytest.raises(ValueError, match="The right-most size of value must match event_shape"):
        D.MultivariateNormal(md.zeros(2), scale_tril=md.eye(2)).log_prob(md.zeros(3))
    with pytest.raises(ValueError, match="Value is not broadcastable with batch_shape\\+event_shape"):
        D.Normal(md.zeros(3), 1.0).log_prob(md.zeros(2))
    with pytest.raises(ValueError, match="The value argument to log_prob must be a Tensor"):
        D.Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(ValueError, match="constraint IntegerGreaterThan\\(lower_bound=0\\)"):
        D.Binomial(md.tensor([-1.0]), md.tensor([0.5]))
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims <= len\\(base_distribution.batch_shape\\)"):
        D.Independent(D.Normal(md.zeros(2), 1.0), 2)
    assert D.Normal(md.zeros(2), md.tensor([1.0, -1.0]), validate_args=False).scale[1].item() == -1.0


def test_set_default_validate_args():
    try:
        D.Distribution.set_default_validate_args(False)
        assert math.isnan(D.Normal(0.0, -1.0).log_prob(md.tensor(1.0)).item())
    finally:
        D.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        D.Normal(0.0, -1.0)
    with pytest.raises(ValueError):
        D.Distribution.set_default_validate_args("yes")


def test_expand():
    d = D.Normal(t64([0.0, 1.0]), t64([1.0, 2.0])).expand((3, 2))
    assert d.batch_shape == md.Size([3, 2]) and d.sample().shape == md.Size([3, 2])
    one = npy(D.Normal(t64([0.0, 1.0]), t64([1.0, 2.0])).log_prob(t64([0.5, 0.5])))
    np.testing.assert_allclose(npy(d.log_prob(t64([0.5, 0.5]))), np.broadcast_to(one, (3, 2)))
    for dist in (D.Bernoulli(t64([0.3])), D.Gamma(t64([2.0]), t64([1.0])), D.Poisson(t64([2.0])),
                 D.Beta(t64([2.0]), t64([1.0])), D.Uniform(t64([0.0]), t64([1.0])), D.LogNormal(t64([0.0]), t64([1.0])),
                 D.Geometric(t64([0.3])), D.Binomial(4, t64([0.3])), D.Laplace(t64([0.0]), t64([1.0])),
                 D.Exponential(t64([1.0])), D.Gumbel(t64([0.0]), t64([1.0]))):
        e = dist.expand((4, 1))
        assert type(e) is type(dist) and e.batch_shape == md.Size([4, 1]) and e.sample().shape == md.Size([4, 1])
    c = D.Categorical(t64([0.2, 0.8])).expand((5,))
    assert c.batch_shape == md.Size([5]) and c.sample().shape == md.Size([5])
    m = D.MultivariateNormal(t64([0.0, 1.0]), scale_tril=t64(np.eye(2))).expand((3,))
    assert m.batch_shape == md.Size([3]) and m.sample().shape == md.Size([3, 2])
    i = D.Independent(D.Normal(t64([[0.0, 1.0]]), 1.0), 1).expand((4,))
    assert i.batch_shape == md.Size([4]) and i.event_shape == md.Size([2])
    dr = D.Dirichlet(t64([1.0, 2.0])).expand((3,))
    assert dr.sample().shape == md.Size([3, 2])


def test_independent_shapes_and_constraints():
    base = D.Normal(md.zeros(4, 3), md.ones(4, 3))
    ind = D.Independent(base, 1)
    assert ind.batch_shape == md.Size([4]) and ind.event_shape == md.Size([3])
    assert ind.log_prob(md.zeros(4, 3)).shape == md.Size([4]) and ind.has_rsample
    assert repr(ind.support) == "IndependentConstraint(Real(), 1)"
    assert bool(constraints.simplex.check(md.tensor([0.3, 0.7])))
    assert npy(constraints.lower_cholesky.check(md.tensor([[[1.0, 0.0], [2.0, 1.0]], [[1.0, 0.0], [2.0, -1.0]]]))
               ).tolist() == [True, False]
    assert npy(constraints.positive_definite.check(md.tensor([[[2.0, 1.0], [1.0, 2.0]], [[1.0, 2.0], [2.0, 1.0]]]))
               ).tolist() == [True, False]
    assert constraints.is_dependent(D.Uniform.arg_constraints["low"])
    assert repr(D.Categorical(md.ones(3)).support) == "IntegerInterval(lower_bound=0, upper_bound=2)"


def test_transforms():
    x = t64([-1.5, 0.2, 2.0])
    for t in (D.ExpTransform(), D.SigmoidTransform(), D.TanhTransform(), D.AffineTransform(1.0, -2.0)):
        y = t(x)
        np.testing.assert_allclose(npy(t.inv(y)), npy(x), rtol=1e-9)
        # log |dy/dx| against a central difference
        h = 1e-6
        fd = (npy(t(t64(npy(x) + h))) - npy(t(t64(npy(x) - h)))) / (2 * h)
        np.testing.assert_allclose(npy(t.log_abs_det_jacobian(x, y)), np.log(np.abs(fd)), rtol=1e-6)
    comp = D.ComposeTransform([D.AffineTransform(0.5, 2.0), D.SigmoidTransform()])
    np.testing.assert_allclose(npy(comp(x)), 1 / (1 + np.exp(-(0.5 + 2 * npy(x)))))
    np.testing.assert_allclose(npy(comp.inv(comp(x))), npy(x), rtol=1e-9)
    td = D.TransformedDistribution(D.Normal(t64([0.0]), t64([1.0])), [D.AffineTransform(1.0, -2.0)])
    np.testing.assert_allclose(npy(td.log_prob(t64([0.3]))), npy(D.Normal(t64([1.0]), t64([2.0])).log_prob(t64([0.3]))))
    # y = 1 - 2x decreases: P(y <= 0.3) = P(x >= 0.35) = 1 - Phi(0.35)
    np.testing.assert_allclose(npy(td.cdf(t64([0.3]))), 1 - npy(D.Normal(t64([0.0]), t64([1.0])).cdf(t64([0.35]))))
    assert D.ExpTransform() == D.ExpTransform() and D.ExpTransform().sign == 1


def test_md_distributions_is_no_longer_unsupported():
    assert md.distributions is D
    assert "distributions" not in __import__("minidl._unsupported", fromlist=["x"]).UNSUPPORTED


def test_float32_parameters_give_float32_results():
    d = D.Normal(md.zeros(2), 1.0)
    assert d.sample().dtype == md.float32 and d.log_prob(md.zeros(2)).dtype == md.float32
    assert D.Gamma(md.ones(2), 1.0).rsample().dtype == md.float32
