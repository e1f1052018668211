"""The last of torch.distributions: FisherSnedecor, GeneralizedPareto, InverseGamma, LKJCholesky,
OneHotCategoricalStraightThrough, Wishart and identity_transform (the ExponentialFamily base is in
test_distributions_exp_family.py). Values against closed forms computed here with NumPy, log_prob
gradients by gradcheck (float64), samples' shapes and moments with fixed seeds, argument validation,
expand, and (where torch is installed) values and gradients against torch.distributions."""
import math
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.distributions as D
from minidl.autograd import gradcheck
from minidl.testing.op_spec import OpSpec, check_forward, check_gradcheck, spec_id

F64 = md.float64
LGAMMA = np.vectorize(math.lgamma)


def t64(x, grad=False):
    return md.tensor(np.asarray(x, np.float64), dtype=F64, requires_grad=grad)


def npy(t):
    return t.detach().numpy()


def digamma_np(x, h=1e-5):
    return (LGAMMA(x + h) - LGAMMA(x - h)) / (2 * h)


def mvlgamma_np(a, p):
    a = np.asarray(a, np.float64)
    return p * (p - 1) / 4 * math.log(math.pi) + sum(LGAMMA(a - j / 2) for j in range(p))


def mvdigamma_np(a, p):
    return sum(digamma_np(np.asarray(a, np.float64) - j / 2) for j in range(p))


def spd(rng, *shape):
    a = rng.normal(size=shape)
    return a @ np.swapaxes(a, -1, -2) + np.eye(shape[-1])


def logdet(m):
    return np.linalg.slogdet(m)[1]


# --------------------------------------------------------------------------------------------------
# NumPy references


def fisher_logpdf(df1, df2, x):
    a, b, r = df1 / 2, df2 / 2, df1 / df2
    return LGAMMA(a + b) - LGAMMA(a) - LGAMMA(b) + a * np.log(r) + (a - 1) * np.log(x) - (a + b) * np.log1p(r * x)


def gpd_logpdf(loc, scale, xi, x):
    z = (x - loc) / scale
    safe = np.where(xi == 0, 1.0, xi)
    return np.where(xi == 0, -np.log(scale) - z, -np.log(scale) - (1 / safe + 1) * np.log1p(safe * z))


def inverse_gamma_logpdf(a, b, y):
    return a * np.log(b) - LGAMMA(a) - (a + 1) * np.log(y) - b / y


def lkj_logpdf(dim, eta, L):
    diag = np.diagonal(L, axis1=-2, axis2=-1)[..., 1:]
    i = np.arange(1, dim)
    order = 2 * (np.asarray(eta)[..., None] - 1) + dim - 1 - i
    alpha = np.asarray(eta) + (dim - 1) / 2
    log_c = (dim - 1) / 2 * math.log(math.pi) + mvlgamma_np(alpha - 0.5, dim - 1) - (dim - 1) * LGAMMA(alpha)
    return (order * np.log(diag)).sum(-1) - log_c


def wishart_logpdf(nu, sigma, x):
    p = sigma.shape[-1]
    tr = np.trace(np.linalg.solve(sigma, x), axis1=-2, axis2=-1)
    return (-nu * p / 2 * math.log(2) - nu / 2 * logdet(sigma) - mvlgamma_np(nu / 2, p)
            + (nu - p - 1) / 2 * logdet(x) - tr / 2)


def wishart_entropy(nu, sigma):
    p = sigma.shape[-1]
    return ((p + 1) / 2 * logdet(sigma) + p * (p + 1) / 2 * math.log(2) + mvlgamma_np(nu / 2, p)
            - (nu - p - 1) / 2 * mvdigamma_np(nu / 2, p) + nu * p / 2)


# --------------------------------------------------------------------------------------------------
# log_prob: values and gradcheck through OpSpec


def _lkj_value(rng, n, dim):
    """n Cholesky factors of random correlation matrices."""
    c = spd(rng, n, dim, dim)
    d = 1 / np.sqrt(np.diagonal(c, axis1=-2, axis2=-1))
    return np.linalg.cholesky(c * d[..., :, None] * d[..., None, :])


def _free_lkj(z):
    """A corr-Cholesky factor from free parameters (rows of a lower-triangular matrix, normalised)."""
    dim = z.shape[-1]
    low = md.tril(z, -1) + md.eye(dim, dtype=z.dtype)
    return low / low.norm(dim=-1, keepdim=True)


def _free_lkj_np(z):
    low = np.tril(z, -1) + np.eye(z.shape[-1])
    return low / np.linalg.norm(low, axis=-1, keepdims=True)


def _spd(b):
    return b @ b.transpose(-2, -1) + md.eye(b.shape[-1], dtype=b.dtype)


def _spd_np(b):
    return b @ np.swapaxes(b, -1, -2) + np.eye(b.shape[-1])


SPECS = [
    OpSpec("fisher_snedecor", lambda d1, d2, x: D.FisherSnedecor(d1, d2).log_prob(x), fisher_logpdf,
           lambda r: (r.uniform(0.5, 6, 4), r.uniform(0.5, 9, 4), r.uniform(0.1, 3, 4))),
    OpSpec("generalized_pareto", lambda loc, s, xi, x: D.GeneralizedPareto(loc, s, xi).log_prob(x), gpd_logpdf,
           lambda r: (np.array([0.1, -1.0, 0.5, 0.0]), np.array([2.0, 0.5, 1.0, 1.5]), np.array([0.4, 0.3, -0.2, 0.7]),
                      np.array([0.5, 0.2, 1.5, 2.5]))),
    OpSpec("generalized_pareto_xi0", lambda loc, s, x: D.GeneralizedPareto(loc, s, 0.0 * loc).log_prob(x),
           lambda loc, s, x: gpd_logpdf(loc, s, 0.0, x),
           lambda r: (np.array([0.1, -1.0]), np.array([2.0, 0.5]), np.array([0.5, 0.2]))),
    OpSpec("inverse_gamma", lambda a, b, y: D.InverseGamma(a, b).log_prob(y), inverse_gamma_logpdf,
           lambda r: (r.uniform(0.5, 4, 4), r.uniform(0.3, 3, 4), r.uniform(0.1, 3, 4))),
    OpSpec("lkj_cholesky", lambda eta, z: D.LKJCholesky(4, eta).log_prob(_free_lkj(z)),
           lambda eta, z: lkj_logpdf(4, eta, _free_lkj_np(z)),
           lambda r: (np.array([0.5, 2.0, 1.0]), r.normal(size=(3, 4, 4)))),
    OpSpec("wishart", lambda nu, b, x: D.Wishart(nu, covariance_matrix=_spd(b)).log_prob(_spd(x)),
           lambda nu, b, x: wishart_logpdf(nu, _spd_np(b), _spd_np(x)),
           lambda r: (np.array([3.5, 6.0]), r.normal(size=(2, 3, 3)), r.normal(size=(2, 3, 3)))),
    OpSpec("wishart_scale_tril", lambda nu, b, x: D.Wishart(nu, scale_tril=md.linalg.cholesky(_spd(b))).log_prob(
        _spd(x)), lambda nu, b, x: wishart_logpdf(nu, _spd_np(b), _spd_np(x)),
        lambda r: (np.array(4.0), r.normal(size=(3, 3)), r.normal(size=(5, 3, 3)))),
    OpSpec("wishart_precision", lambda nu, b, x: D.Wishart(nu, precision_matrix=_spd(b)).log_prob(_spd(x)),
           lambda nu, b, x: wishart_logpdf(nu, np.linalg.inv(_spd_np(b)), _spd_np(x)),
           lambda r: (np.array([2.5]), r.normal(size=(2, 2)), r.normal(size=(2, 2)))),
]


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_log_prob_values(spec):
    check_forward(spec, "float64")
    check_forward(spec, "float32")


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_log_prob_gradcheck(spec):
    assert check_gradcheck(spec)


def test_lkj_density_integrates_to_one():
    # dim 2: L = [[1, 0], [r, sqrt(1 - r**2)]], one free coordinate r in (-1, 1)
    r = -1 + (np.arange(20000) + 0.5) / 10000        # midpoints of 20000 cells of (-1, 1)
    L = np.zeros((r.size, 2, 2))
    L[:, 0, 0], L[:, 1, 0], L[:, 1, 1] = 1.0, r, np.sqrt(1 - r ** 2)
    for eta in (1.0, 2.5, 6.0):
        dens = np.exp(npy(D.LKJCholesky(2, t64(eta)).log_prob(t64(L))))
        assert dens.sum() / 10000 == pytest.approx(1.0, abs=1e-4)


# --------------------------------------------------------------------------------------------------
# moments, entropies, supports


def test_fisher_snedecor_moments():
    df1, df2 = np.array([1.5, 5.0, 3.0]), np.array([1.0, 6.0, 10.0])
    d = D.FisherSnedecor(t64(df1), t64(df2))
    mean, mode, var = npy(d.mean), npy(d.mode), npy(d.variance)
    assert np.isnan(mean[0]) and np.isnan(mode[0]) and np.isnan(var[0])
    np.testing.assert_allclose(mean[1:], df2[1:] / (df2[1:] - 2))
    np.testing.assert_allclose(mode[1:], (df1[1:] - 2) / df1[1:] * df2[1:] / (df2[1:] + 2))
    a, b = df1[1:], df2[1:]
    np.testing.assert_allclose(var[1:], 2 * b ** 2 * (a + b - 2) / (a * (b - 2) ** 2 * (b - 4)))
    assert np.isnan(npy(D.FisherSnedecor(t64(3.0), t64(4.0)).variance))
    assert d.support is D.constraints.positive and d.has_rsample


def test_generalized_pareto_cdf_icdf_moments_support():
    loc, scale, xi = np.array([0.1, -1.0, 0.5, 0.0]), np.array([2.0, 0.5, 1.0, 1.5]), np.array([0.4, 0.0, -0.5, 0.7])
    d = D.GeneralizedPareto(t64(loc), t64(scale), t64(xi))
    x = np.array([0.5, 0.2, 1.5, 2.5])
    z = (x - loc) / scale
    safe = np.where(xi == 0, 1.0, xi)
    survival = np.where(xi == 0, np.exp(-z), (1 + safe * z) ** (-1 / safe))
    np.testing.assert_allclose(npy(d.cdf(t64(x))), 1 - survival, rtol=1e-10)
    np.testing.assert_allclose(npy(d.log_survival_function(t64(x))), np.log(survival), rtol=1e-10)
    np.testing.assert_allclose(npy(d.icdf(d.cdf(t64(x)))), x, rtol=1e-9)
    mean, var = npy(d.mean), npy(d.variance)
    np.testing.assert_allclose(mean[:3], loc[:3] + scale[:3] / (1 - xi[:3]))
    np.testing.assert_allclose(var[:3], scale[:3] ** 2 / ((1 - xi[:3]) ** 2 * (1 - 2 * xi[:3])))
    assert np.isnan(var[3]) and not np.isnan(mean[3])
    assert np.isnan(npy(D.GeneralizedPareto(0.0, 1.0, 1.5).mean))
    np.testing.assert_allclose(npy(d.entropy()), np.log(scale) + xi + 1)
    np.testing.assert_allclose(npy(d.mode), loc)
    np.testing.assert_allclose(npy(d.support.upper_bound), [np.inf, np.inf, 0.5 + 1.0 / 0.5, np.inf])
    assert D.GeneralizedPareto(0.0, 1.0, -1.0).entropy().shape == ()
    assert D.GeneralizedPareto(t64([0.0, 1.0]), 1.0, 0.5).entropy().shape == (2,)


def test_inverse_gamma_moments_and_entropy():
    a, b = np.array([0.5, 1.5, 3.0]), np.array([1.0, 2.0, 0.5])
    d = D.InverseGamma(t64(a), t64(b))
    np.testing.assert_allclose(npy(d.mean), [np.inf, 2.0 / 0.5, 0.5 / 2.0])
    np.testing.assert_allclose(npy(d.variance), [np.inf, np.inf, 0.25 / (4.0 * 1.0)])
    np.testing.assert_allclose(npy(d.mode), b / (a + 1))
    np.testing.assert_allclose(npy(d.entropy()), a + np.log(b) + LGAMMA(a) - (1 + a) * digamma_np(a), rtol=1e-8)
    np.testing.assert_allclose(npy(d.concentration), a)
    np.testing.assert_allclose(npy(d.rate), b)


def test_wishart_moments_and_entropy():
    rng = np.random.default_rng(5)
    sigma, nu = spd(rng, 2, 3, 3), np.array([3.5, 7.0])
    w = D.Wishart(t64(nu), covariance_matrix=t64(sigma))
    np.testing.assert_allclose(npy(w.mean), nu[:, None, None] * sigma)
    mode = npy(w.mode)
    assert np.isnan(mode[0]).all()
    np.testing.assert_allclose(mode[1], (7.0 - 4) * sigma[1])
    d = np.diagonal(sigma, axis1=-2, axis2=-1)
    np.testing.assert_allclose(npy(w.variance), nu[:, None, None] * (sigma ** 2 + d[..., :, None] * d[..., None, :]))
    np.testing.assert_allclose(npy(w.entropy()), wishart_entropy(nu, sigma), rtol=1e-8)
    np.testing.assert_allclose(npy(w.precision_matrix), np.linalg.inv(sigma), rtol=1e-9)
    np.testing.assert_allclose(npy(w.scale_tril), np.linalg.cholesky(sigma), rtol=1e-9)
    wp = D.Wishart(t64(nu), precision_matrix=t64(np.linalg.inv(sigma)))
    np.testing.assert_allclose(npy(wp.covariance_matrix), sigma, rtol=1e-9)


# --------------------------------------------------------------------------------------------------
# sampling


def test_fisher_snedecor_samples_and_rsample_gradient():
    md.manual_seed(0)
    df1, df2 = t64([5.0, 3.0], grad=True), t64([10.0, 12.0], grad=True)
    d = D.FisherSnedecor(df1, df2)
    x = d.rsample((20000,))
    assert x.shape == (20000, 2) and bool((x > 0).all())
    np.testing.assert_allclose(npy(x).mean(0), [10 / 8, 12 / 10], rtol=0.04)
    x.mean().backward()
    assert np.isfinite(npy(df1.grad)).all() and np.isfinite(npy(df2.grad)).all()
    assert float(npy(df2.grad).sum()) < 0    # a larger df2 lowers the mean df2 / (df2 - 2)
    assert D.FisherSnedecor(2.0, 3.0).sample((3,)).shape == (3,)


def test_generalized_pareto_samples_and_rsample_gradcheck():
    md.manual_seed(1)
    d = D.GeneralizedPareto(t64([0.5, 0.0]), t64([2.0, 1.0]), t64([0.2, -0.5]))
    x = npy(d.sample((20000,)))
    assert x.shape == (20000, 2) and (x[:, 0] >= 0.5).all() and (x[:, 1] <= 2.0).all()
    np.testing.assert_allclose(x.mean(0), [0.5 + 2 / 0.8, 1 / 1.5], rtol=0.04)

    def draw(loc, scale, xi):
        md.manual_seed(2)
        return D.GeneralizedPareto(loc, scale, xi).rsample((3,))
    assert gradcheck(draw, (t64([0.5, 0.0], True), t64([2.0, 1.0], True), t64([0.2, -0.5], True)))


def test_inverse_gamma_samples():
    md.manual_seed(3)
    a, b = t64([4.0, 6.0], grad=True), t64([3.0, 1.0], grad=True)
    y = D.InverseGamma(a, b).rsample((20000,))
    assert y.shape == (20000, 2) and bool((y > 0).all())
    np.testing.assert_allclose(npy(y).mean(0), [1.0, 0.2], rtol=0.03)
    np.testing.assert_allclose(npy(y).var(0), [0.5, 1 / (25 * 4)], rtol=0.1)
    y.sum().backward()
    assert np.isfinite(npy(a.grad)).all() and float(npy(b.grad)[0]) > 0


def test_lkj_samples_follow_the_lkj_law():
    md.manual_seed(4)
    dim, eta = 4, np.array([1.0, 3.0])
    d = D.LKJCholesky(dim, t64(eta))
    L = d.sample((20000,))
    assert L.shape == (20000, 2, dim, dim) and not d.has_rsample and not L.requires_grad
    assert bool(D.constraints.corr_cholesky.check(L).all())
    Ln = npy(L)
    np.testing.assert_allclose(np.linalg.norm(Ln, axis=-1), 1.0, rtol=1e-12)
    M = Ln @ np.swapaxes(Ln, -1, -2)
    i, j = np.tril_indices(dim, -1)
    off = M[..., i, j]                       # (n, 2, 6): every off-diagonal correlation
    # each is 2 Beta(a, a) - 1 with a = eta - 1 + dim / 2: mean 0, variance 1 / (2 eta + dim - 1)
    np.testing.assert_allclose(off.mean(0), 0.0, atol=0.02)
    np.testing.assert_allclose(off.var(0), np.broadcast_to((1 / (2 * eta + dim - 1))[:, None], (2, 6)), rtol=0.06)
    assert D.LKJCholesky(3, 0.5).sample().shape == (3, 3)


def test_wishart_samples_moments_and_rsample():
    md.manual_seed(5)
    sigma = np.array([[2.0, 0.6], [0.6, 1.0]])
    nu = 5.0
    w = D.Wishart(t64(nu), covariance_matrix=t64(sigma))
    x = npy(w.sample((20000,)))
    assert x.shape == (20000, 2, 2)
    np.testing.assert_allclose(x, np.swapaxes(x, -1, -2))
    assert (np.linalg.eigvalsh(x) > 0).all()
    np.testing.assert_allclose(x.mean(0), nu * sigma, rtol=0.03)
    np.testing.assert_allclose(x.var(0), npy(w.variance), rtol=0.08)
    b0 = np.random.default_rng(0).normal(size=(2, 2))

    def draw(b):
        md.manual_seed(6)
        return D.Wishart(t64(nu), covariance_matrix=_spd(b)).rsample((2,))
    assert gradcheck(draw, (t64(b0, True),))
    df = t64([4.0, 6.0], grad=True)
    D.Wishart(df, scale_tril=t64(np.linalg.cholesky(sigma))).rsample().sum().backward()
    assert np.isfinite(npy(df.grad)).all() and (npy(df.grad) > 0).all()


def test_wishart_redraws_only_singular_samples():
    w = D.Wishart(t64(5.0), covariance_matrix=t64(np.eye(3)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a positive-definite draw raises no "singular" warning
        assert w.rsample((4,)).shape == (4, 3, 3)
    assert w.rsample((2,), max_try_correction=0).shape == (2, 3, 3)


def test_one_hot_straight_through():
    md.manual_seed(7)
    logits = np.array([[0.3, -1.0, 0.5], [2.0, 0.0, -0.5]])
    lg = t64(logits, grad=True)
    d = D.OneHotCategoricalStraightThrough(logits=lg)
    assert d.has_rsample and isinstance(d, D.OneHotCategorical)
    x = d.rsample((5,))
    assert x.shape == (5, 2, 3) and x.requires_grad
    xn = npy(x)
    assert set(np.unique(xn)) <= {0.0, 1.0} and (xn.sum(-1) == 1).all()
    w = np.array([1.0, -2.0, 0.5])
    (x * t64(w)).sum().backward()
    p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    # d/dl of 5 <w, softmax(l)>: 5 p (w - <w, p>)
    np.testing.assert_allclose(npy(lg.grad), 5 * p * (w - (p * w).sum(-1, keepdims=True)), rtol=1e-10)
    e = d.expand((4, 2))
    assert type(e) is D.OneHotCategoricalStraightThrough and e.rsample().shape == (4, 2, 3)


# --------------------------------------------------------------------------------------------------
# identity_transform, expand, validation


def test_identity_transform():
    t = D.identity_transform
    assert isinstance(t, D.ComposeTransform) and t.parts == [] and t is D.transforms.identity_transform
    x = t64([[0.3, -2.0], [1.0, 4.0]])
    np.testing.assert_array_equal(npy(t(x)), npy(x))
    np.testing.assert_array_equal(npy(t.inv(x)), npy(x))
    np.testing.assert_array_equal(npy(t.log_abs_det_jacobian(x, x)), np.zeros((2, 2)))


def test_expand():
    rng = np.random.default_rng(8)
    cases = [
        (D.FisherSnedecor(t64([2.0, 5.0]), t64([3.0, 7.0])), t64([0.5, 1.5])),
        (D.GeneralizedPareto(t64([0.0, 1.0]), t64([1.0, 2.0]), t64([0.3, -0.2])), t64([0.5, 1.5])),
        (D.InverseGamma(t64([2.0, 5.0]), t64([3.0, 7.0])), t64([0.5, 1.5])),
        (D.LKJCholesky(3, t64([0.5, 2.0])), t64(_lkj_value(rng, 2, 3))),
        (D.Wishart(t64([4.0, 5.0]), covariance_matrix=t64(spd(rng, 2, 3, 3))), t64(spd(rng, 2, 3, 3))),
    ]
    for d, v in cases:
        e = d.expand((4, 2))
        assert type(e) is type(d) and e.batch_shape == (4, 2) and e.event_shape == d.event_shape
        np.testing.assert_allclose(npy(e.log_prob(v)), np.broadcast_to(npy(d.log_prob(v)), (4, 2)), rtol=1e-12)
        assert e.sample((3,)).shape == (3, 4, 2) + tuple(d.event_shape)
        assert e._validate_args == d._validate_args
    w = D.Wishart(t64(4.0), scale_tril=t64(np.eye(2))).expand((3,))
    assert w.scale_tril.shape == (3, 2, 2) and w.df.shape == (3,) and w._dist_chi2.batch_shape == (3, 2)


def test_validation_errors():
    with pytest.raises(ValueError, match="df1"):
        D.FisherSnedecor(t64(-1.0), t64(2.0))
    with pytest.raises(ValueError):
        D.FisherSnedecor(t64(1.0), t64(2.0)).log_prob(t64(-0.5))
    with pytest.raises(ValueError, match="scale"):
        D.GeneralizedPareto(0.0, -1.0, 0.1)
    with pytest.raises(ValueError, match="support"):
        D.GeneralizedPareto(t64(1.0), t64(1.0), t64(0.1)).log_prob(t64(0.5))    # below loc
    with pytest.raises(ValueError, match="support"):
        D.GeneralizedPareto(t64(0.0), t64(1.0), t64(-0.5)).log_prob(t64(2.5))   # above loc - scale / xi = 2
    with pytest.raises(ValueError):
        D.InverseGamma(t64(0.0), t64(1.0))
    with pytest.raises(ValueError):
        D.InverseGamma(t64(1.0), t64(1.0)).log_prob(t64(-1.0))
    with pytest.raises(ValueError, match="dim"):
        D.LKJCholesky(1, 1.0)
    with pytest.raises(ValueError, match="concentration"):
        D.LKJCholesky(3, t64(0.0))
    with pytest.raises(ValueError, match="support"):
        D.LKJCholesky(2, 1.0).log_prob(t64([[1.0, 0.0], [0.5, 0.5]]))
    with pytest.raises(AssertionError, match="Exactly one"):
        D.Wishart(t64(3.0), covariance_matrix=t64(np.eye(2)), scale_tril=t64(np.eye(2)))
    with pytest.raises(AssertionError, match="Exactly one"):
        D.Wishart(t64(3.0))
    with pytest.raises(ValueError, match="two-dimensional"):
        D.Wishart(t64(3.0), covariance_matrix=t64([1.0, 2.0]))
    with pytest.raises(ValueError, match="greater than ndim - 1"):
        D.Wishart(t64(1.0), covariance_matrix=t64(np.eye(2)))
    with pytest.raises(ValueError, match="covariance_matrix"):
        D.Wishart(t64(3.0), covariance_matrix=t64([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.warns(UserWarning, match="Low df"):
        D.Wishart(t64(1.5), covariance_matrix=t64(np.eye(2)))
    with pytest.raises(ValueError, match="support"):
        D.Wishart(t64(3.0), covariance_matrix=t64(np.eye(2))).log_prob(t64([[1.0, 2.0], [2.0, 1.0]]))
    assert D.Wishart(t64(3.0), covariance_matrix=t64(np.eye(2))).arg_constraints["df"].lower_bound == 1


# --------------------------------------------------------------------------------------------------
# against torch


@pytest.mark.parametrize("name", ["FisherSnedecor", "GeneralizedPareto", "InverseGamma", "LKJCholesky", "Wishart"])
def test_log_prob_values_and_gradients_match_torch(name):
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    rng = np.random.default_rng(9)
    dtype = np.float32 if name == "GeneralizedPareto" else np.float64   # PyTorch's GPD log_prob is float32-only
    if name == "FisherSnedecor":
        params, value = [np.array([1.5, 5.0, 3.0]), np.array([1.0, 6.0, 10.0])], np.array([0.3, 1.2, 2.0])
        make = lambda lib, ps: lib.FisherSnedecor(*ps)  # noqa: E731
    elif name == "GeneralizedPareto":
        params = [np.array([0.1, -1.0, 0.5]), np.array([2.0, 0.5, 1.0]), np.array([0.4, 0.0, -0.2])]
        value = np.array([0.5, 0.2, 1.5])
        make = lambda lib, ps: lib.GeneralizedPareto(*ps)  # noqa: E731
    elif name == "InverseGamma":
        params, value = [np.array([0.5, 2.5, 3.0]), np.array([1.0, 2.0, 0.5])], np.array([0.3, 1.0, 2.0])
        make = lambda lib, ps: lib.InverseGamma(*ps)  # noqa: E731
    elif name == "LKJCholesky":
        params, value = [np.array([0.5, 2.0])], _lkj_value(rng, 2, 3)
        make = lambda lib, ps: lib.LKJCholesky(3, *ps)  # noqa: E731
    else:
        params, value = [np.array([3.5, 6.0]), np.linalg.cholesky(spd(rng, 2, 3, 3))], spd(rng, 2, 3, 3)
        make = lambda lib, ps: lib.Wishart(ps[0], scale_tril=ps[1])  # noqa: E731
    ours = [md.tensor(p.astype(dtype), requires_grad=True) for p in params]
    theirs = [torch.tensor(p.astype(dtype), requires_grad=True) for p in params]
    v, tv = md.tensor(value.astype(dtype), requires_grad=True), torch.tensor(value.astype(dtype), requires_grad=True)
    m, t = make(D, ours), make(TD, theirs)
    lp, tlp = m.log_prob(v), t.log_prob(tv)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(npy(lp), tlp.detach().numpy(), **tol)
    lp.sum().backward()
    tlp.sum().backward()
    for a, b in zip(ours + [v], theirs + [tv]):
        np.testing.assert_allclose(npy(a.grad), b.grad.numpy(), **tol)
    for attr in ("mean", "mode", "variance"):
        try:
            ref = getattr(t, attr).detach().numpy()
        except NotImplementedError:
            continue
        np.testing.assert_allclose(npy(getattr(m, attr)), ref, err_msg=attr, **tol)
    try:
        ref = t.entropy().detach().numpy()
    except NotImplementedError:
        with pytest.raises(NotImplementedError):
            m.entropy()
        return
    np.testing.assert_allclose(npy(m.entropy()), ref, **tol)


def test_wishart_kl_and_straight_through_gradients_match_torch():
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    rng = np.random.default_rng(10)
    sp, sq = spd(rng, 3, 3), spd(rng, 3, 3)
    ours = [t64(4.0, True), t64(sp, True), t64(5.5, True), t64(sq, True)]
    theirs = [torch.tensor(npy(x), requires_grad=True) for x in ours]

    def kl(lib, kl_divergence, a, b, c, d):
        return kl_divergence(lib.Wishart(a, covariance_matrix=b), lib.Wishart(c, covariance_matrix=d))
    k, tk = kl(D, D.kl_divergence, *ours), kl(TD, TD.kl_divergence, *theirs)
    np.testing.assert_allclose(npy(k), tk.detach().numpy(), rtol=1e-9)
    k.backward()
    tk.backward()
    for a, b in zip(ours, theirs):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            np.testing.assert_allclose(npy(a.grad), b.grad.numpy(), rtol=1e-8, atol=1e-12)
    logits = np.array([[0.3, -1.0, 0.5], [2.0, 0.0, -0.5]])
    w = np.array([1.0, -2.0, 0.5])
    lg, tlg = t64(logits, True), torch.tensor(logits, requires_grad=True)
    (D.OneHotCategoricalStraightThrough(logits=lg).rsample((3,)) * t64(w)).sum().backward()
    (TD.OneHotCategoricalStraightThrough(logits=tlg).rsample((3,)) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(npy(lg.grad), tlg.grad.numpy(), rtol=1e-12)
