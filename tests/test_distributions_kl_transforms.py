"""kl_divergence between different families (kl_cross.py), the remaining transforms (transforms_more.py,
transforms_matrix.py) and biject_to / transform_to (constraint_registry.py).

KL values are checked against E_p[ln p - ln q] integrated numerically in NumPy, their gradients against
finite differences of that integral and by gradcheck; transforms' log |det J| against the log-determinant
of a finite-difference Jacobian, their inverses by round trips; and (where torch is installed) values and
gradients against torch.distributions."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.distributions as D
from minidl.autograd import gradcheck
from minidl.distributions import constraints, transforms as T
from minidl.distributions.constraint_registry import biject_to, transform_to

LGAMMA = np.vectorize(math.lgamma)


def t64(x, grad=False):
    return md.tensor(np.asarray(x, np.float64), dtype=md.float64, requires_grad=grad)


def npy(t):
    return t.detach().numpy()


# --------------------------------------------------------------------------------------------------
# KL between families: (p family, p params), (q family, q params), each a batch of two


KL_CROSS = {
    "bernoulli_poisson": (("Bernoulli", [[0.3, 0.8]]), ("Poisson", [[0.5, 2.0]])),
    "beta_exponential": (("Beta", [[2.0, 3.5], [3.0, 1.5]]), ("Exponential", [[0.7, 2.0]])),
    "beta_gamma": (("Beta", [[2.0, 3.5], [3.0, 1.5]]), ("Gamma", [[1.5, 3.0], [2.0, 0.5]])),
    "beta_normal": (("Beta", [[2.0, 3.5], [3.0, 1.5]]), ("Normal", [[0.2, -1.0], [0.8, 1.5]])),
    "beta_uniform": (("Beta", [[2.0, 3.5], [3.0, 1.5]]), ("Uniform", [[-0.5, 0.1], [1.5, 1.0]])),
    "exponential_gamma": (("Exponential", [[0.7, 2.0]]), ("Gamma", [[1.5, 3.0], [2.0, 0.5]])),
    "exponential_gumbel": (("Exponential", [[0.7, 2.0]]), ("Gumbel", [[0.3, -1.0], [1.2, 0.7]])),
    "exponential_normal": (("Exponential", [[0.7, 2.0]]), ("Normal", [[0.5, -1.0], [1.0, 2.0]])),
    "gamma_exponential": (("Gamma", [[2.0, 3.5], [1.5, 0.8]]), ("Exponential", [[0.7, 2.0]])),
    "gamma_gumbel": (("Gamma", [[2.0, 3.5], [1.5, 0.8]]), ("Gumbel", [[0.3, -1.0], [1.2, 0.7]])),
    "gamma_normal": (("Gamma", [[2.0, 3.5], [1.5, 0.8]]), ("Normal", [[0.5, 2.0], [1.0, 2.0]])),
    "gumbel_normal": (("Gumbel", [[0.3, -0.5], [1.2, 0.6]]), ("Normal", [[0.0, 1.0], [1.5, 0.8]])),
    "laplace_normal": (("Laplace", [[0.3, -0.5], [1.2, 0.6]]), ("Normal", [[0.0, 1.0], [1.5, 0.8]])),
    "normal_gumbel": (("Normal", [[0.3, -0.5], [1.2, 0.6]]), ("Gumbel", [[0.0, 1.0], [1.5, 0.8]])),
    "normal_laplace": (("Normal", [[0.3, -0.5], [1.2, 0.6]]), ("Laplace", [[0.1, 1.0], [1.5, 0.8]])),
    "uniform_beta": (("Uniform", [[0.2, -0.1], [0.7, 0.9]]), ("Beta", [[2.0, 0.7], [3.0, 1.5]])),
    "uniform_beta_2": (("Uniform", [[0.1, 0.3], [0.95, 0.6]]), ("Beta", [[0.7, 2.5], [1.5, 4.0]])),
    "uniform_exponential": (("Uniform", [[0.5, -1.0], [2.0, 3.0]]), ("Exponential", [[0.7, 2.0]])),
    "uniform_gamma": (("Uniform", [[0.5, -1.0], [2.0, 3.0]]), ("Gamma", [[1.5, 3.0], [2.0, 0.5]])),
    "uniform_gumbel": (("Uniform", [[-1.0, 0.5], [2.0, 3.0]]), ("Gumbel", [[0.3, -1.0], [1.2, 0.7]])),
    "uniform_normal": (("Uniform", [[-1.0, 0.5], [2.0, 3.0]]), ("Normal", [[0.5, -1.0], [1.0, 2.0]])),
}

# every pair torch gives inf for every parameter value
KL_INFINITE = [("Exponential", "Beta"), ("Exponential", "Uniform"), ("Gamma", "Beta"), ("Gamma", "Uniform"),
               ("Gumbel", "Beta"), ("Gumbel", "Exponential"), ("Gumbel", "Gamma"), ("Gumbel", "Uniform"),
               ("Laplace", "Beta"), ("Laplace", "Exponential"), ("Laplace", "Gamma"), ("Laplace", "Uniform"),
               ("Normal", "Beta"), ("Normal", "Exponential"), ("Normal", "Gamma"), ("Normal", "Uniform"),
               ("Poisson", "Bernoulli"), ("Poisson", "Binomial")]
DEFAULT_PARAMS = {"Exponential": [[0.7, 2.0]], "Beta": [[2.0, 3.5], [3.0, 1.5]], "Uniform": [[0.0, -1.0], [1.0, 2.0]],
                  "Gamma": [[2.0, 3.5], [1.5, 0.8]], "Gumbel": [[0.3, -0.5], [1.2, 0.6]],
                  "Laplace": [[0.3, -0.5], [1.2, 0.6]], "Normal": [[0.3, -0.5], [1.2, 0.6]],
                  "Poisson": [[0.5, 2.0]], "Bernoulli": [[0.3, 0.8]], "Binomial": [[3.0, 5.0], [0.3, 0.8]]}


def _log_density(name, params, x):
    """ln q(x) in NumPy, -inf off the support."""
    if name == "Normal":
        m, s = params
        return -0.5 * ((x - m) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)
    if name == "Laplace":
        m, b = params
        return -np.abs(x - m) / b - np.log(2 * b)
    if name == "Gumbel":
        m, b = params
        z = (x - m) / b
        return -(z + np.exp(-z)) - np.log(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        if name == "Exponential":
            (r,) = params
            return np.where(x >= 0, np.log(r) - r * x, -np.inf)
        if name == "Gamma":
            a, r = params
            return np.where(x > 0, a * np.log(r) + (a - 1) * np.log(x) - r * x - math.lgamma(a), -np.inf)
        if name == "Beta":
            a, b = params
            inside = (x > 0) & (x < 1)
            return np.where(inside, (a - 1) * np.log(x) + (b - 1) * np.log1p(-x)
                            - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)), -np.inf)
        if name == "Uniform":
            lo, hi = params
            return np.where((x >= lo) & (x < hi), -np.log(hi - lo), -np.inf)
    raise KeyError(name)


def _grid(name, params, n=200_000):
    """Midpoints of n cells covering (all but a negligible tail of) the support of p, and the cells' widths."""
    if name == "Normal":
        lo, hi = params[0] - 14 * params[1], params[0] + 14 * params[1]
    elif name == "Laplace":
        lo, hi = params[0] - 45 * params[1], params[0] + 45 * params[1]
    elif name == "Gumbel":
        lo, hi = params[0] - 5 * params[1], params[0] + 45 * params[1]
    elif name in ("Exponential", "Gamma"):
        # x = e**u on an even grid in u: q's ln x is singular at 0, so cells shrink towards it
        rate = params[-1]
        lo, hi = math.log(1e-14 / rate), math.log((params[0] * (name == "Gamma") + 40 * math.sqrt(params[0]) + 40)
                                                   / rate)
        h = (hi - lo) / n
        x = np.exp(lo + h * (np.arange(n) + 0.5))
        return x, h * x
    elif name == "Beta":
        lo, hi = 0.0, 1.0
    else:
        lo, hi = params
    h = (hi - lo) / n
    return lo + h * (np.arange(n) + 0.5), h


def kl_numeric(p_name, p_params, q_name, q_params):
    """KL(p || q) = E_p[ln p - ln q]: a sum over {0, 1} for a Bernoulli p, the midpoint rule otherwise."""
    if p_name == "Bernoulli":
        (prob,) = p_params
        (rate,) = q_params
        lp = np.log([1 - prob, prob])
        lq = np.array([0.0, math.log(rate)]) - rate
        return float(np.sum(np.exp(lp) * (lp - lq)))
    x, h = _grid(p_name, p_params)
    lp = _log_density(p_name, p_params, x)
    lq = _log_density(q_name, q_params, x)
    dens = np.exp(lp)
    if np.any((dens > 0) & np.isinf(lq)):
        return math.inf
    keep = dens > 0
    h = np.broadcast_to(h, x.shape)
    return float(np.sum(dens[keep] * (lp[keep] - lq[keep]) * h[keep]))


def _build(module, name, params):
    return getattr(module, name)(*params)


def _case(name):
    (pn, pp), (qn, qp) = KL_CROSS[name]
    return pn, np.array(pp, np.float64), qn, np.array(qp, np.float64)


@pytest.mark.parametrize("name", sorted(KL_CROSS))
def test_kl_cross_matches_numeric_integral(name):
    pn, pp, qn, qp = _case(name)
    got = npy(D.kl_divergence(_build(D, pn, [t64(v) for v in pp]), _build(D, qn, [t64(v) for v in qp])))
    assert got.shape == (2,)
    want = np.array([kl_numeric(pn, pp[:, i], qn, qp[:, i]) for i in range(2)])
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    np.testing.assert_allclose(got[np.isfinite(want)], want[np.isfinite(want)], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(KL_CROSS))
def test_kl_cross_gradients(name):
    """The analytic gradient against central differences of the NumPy integral, and gradcheck (float64)."""
    pn, pp, qn, qp = _case(name)
    finite = [i for i in range(2) if math.isfinite(kl_numeric(pn, pp[:, i], qn, qp[:, i]))]
    leaves = [t64(v[finite], True) for v in np.concatenate([pp, qp])]
    n_p = len(pp)

    def kl(*params):
        return D.kl_divergence(_build(D, pn, params[:n_p]), _build(D, qn, params[n_p:]))

    kl(*leaves).sum().backward()
    h = 1e-5
    for k, leaf in enumerate(leaves):
        for j, i in enumerate(finite):
            plus, minus = (np.concatenate([pp, qp])[:, i].copy() for _ in range(2))
            plus[k] += h
            minus[k] -= h
            fd = (kl_numeric(pn, plus[:n_p], qn, plus[n_p:]) - kl_numeric(pn, minus[:n_p], qn, minus[n_p:])) / (2 * h)
            np.testing.assert_allclose(leaf.grad.numpy()[j], fd, rtol=1e-4, atol=1e-5, err_msg=f"param {k}")
    gradcheck(kl, [v.detach().requires_grad_(True) for v in leaves])


@pytest.mark.parametrize("p_name,q_name", KL_INFINITE)
def test_kl_cross_infinite_pairs(p_name, q_name):
    p = _build(D, p_name, [t64(v, True) for v in DEFAULT_PARAMS[p_name]])
    q = _build(D, q_name, [t64(v) for v in DEFAULT_PARAMS[q_name]])
    kl = D.kl_divergence(p, q)
    assert tuple(kl.shape) == (2,) and kl.dtype == md.float64
    assert np.all(np.isposinf(npy(kl)))


def test_kl_cross_masks_are_inf_only_where_the_support_escapes():
    # Beta against a Uniform that covers [0, 1] exactly is finite; one that misses a sliver is inf
    p = D.Beta(t64([2.0, 2.0, 2.0]), t64([3.0, 3.0, 3.0]))
    kl = npy(D.kl_divergence(p, D.Uniform(t64([0.0, 0.01, -1.0]), t64([1.0, 1.0, 0.99]))))
    assert np.isfinite(kl[0]) and np.isinf(kl[1:]).all()
    np.testing.assert_allclose(kl[0], -npy(p.entropy())[0])
    # a masked entry carries no gradient, the finite ones do
    lo = t64([-0.5, 0.5], True)
    D.kl_divergence(D.Uniform(lo, t64([1.0, 2.0])), D.Exponential(t64([1.0, 1.0]))).sum().backward()
    np.testing.assert_allclose(lo.grad.numpy(), [0.0, 0.5 + 1 / 1.5])   # d/dl [r (h + l) / 2 - ln((h - l) r)]


def test_kl_cross_is_registered_on_import_and_float32_stays_float32():
    from minidl.distributions.kl import _KL_REGISTRY
    for pair in [(D.Normal, D.Laplace), (D.Uniform, D.Beta), (D.Poisson, D.Binomial), (D.Bernoulli, D.Poisson)]:
        assert pair in _KL_REGISTRY
    kl = D.kl_divergence(D.Normal(md.zeros(3), md.ones(3)), D.Gumbel(md.zeros(3), md.ones(3)))
    assert kl.dtype == md.float32 and tuple(kl.shape) == (3,)
    with pytest.raises(NotImplementedError, match="Laplace"):
        D.kl_divergence(D.Beta(2.0, 3.0), D.Laplace(0.0, 1.0))   # no closed form, none registered (as torch)


@pytest.mark.parametrize("name", sorted(KL_CROSS))
def test_kl_cross_against_torch(name):
    torch = pytest.importorskip("torch")
    import torch.distributions as TD
    pn, pp, qn, qp = _case(name)
    mp = [t64(v, True) for v in np.concatenate([pp, qp])]
    tp = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in np.concatenate([pp, qp])]
    km = D.kl_divergence(_build(D, pn, mp[:len(pp)]), _build(D, qn, mp[len(pp):]))
    kt = TD.kl_divergence(_build(TD, pn, tp[:len(pp)]), _build(TD, qn, tp[len(pp):]))
    np.testing.assert_allclose(npy(km), kt.detach().numpy(), rtol=1e-10, atol=1e-12)
    finite = torch.isfinite(kt)
    km[md.tensor(finite.numpy())].sum().backward()
    kt[finite].sum().backward()
    for a, b in zip(mp, tp):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize("p_name,q_name", KL_INFINITE)
def test_kl_cross_infinite_against_torch(p_name, q_name):
    torch = pytest.importorskip("torch")
    import torch.distributions as TD
    kt = TD.kl_divergence(_build(TD, p_name, [torch.tensor(v, dtype=torch.float64) for v in DEFAULT_PARAMS[p_name]]),
                          _build(TD, q_name, [torch.tensor(v, dtype=torch.float64) for v in DEFAULT_PARAMS[q_name]]))
    km = D.kl_divergence(_build(D, p_name, [t64(v) for v in DEFAULT_PARAMS[p_name]]),
                         _build(D, q_name, [t64(v) for v in DEFAULT_PARAMS[q_name]]))
    np.testing.assert_array_equal(npy(km), kt.numpy())


# --------------------------------------------------------------------------------------------------
# transforms


def _f(t, x):
    return npy(t(t64(x)))


def numeric_ladj(fn, x, event_dim):
    """log |det dy/dx| from central differences of ``fn`` (NumPy in, NumPy out) over the ``event_dim``
    rightmost dims of x (per batch element), with NumPy's slogdet."""
    h = 1e-6
    if event_dim == 0:
        return np.log(np.abs((fn(x + h) - fn(x - h)) / (2 * h)))
    batch = x.shape[:x.ndim - event_dim]
    n = int(np.prod(x.shape[x.ndim - event_dim:]))
    flat = x.reshape(batch + (n,))
    cols = []
    for k in range(n):
        e = np.zeros(n)
        e[k] = h
        up, down = fn((flat + e).reshape(x.shape)), fn((flat - e).reshape(x.shape))
        cols.append(((up - down) / (2 * h)).reshape(batch + (-1,)))
    jac = np.stack(cols, -1)
    return np.linalg.slogdet(jac)[1]


def _strict_lower(y):
    d = y.shape[-1]
    rows, cols = np.tril_indices(d, -1)
    return y[..., rows, cols]


RNG = np.random.default_rng(0)
BIJECTIONS = {
    # name: (transform, x, fn giving the coordinates whose Jacobian is square, event_dim of x)
    "power": (lambda: T.PowerTransform(t64([0.5, 2.5, -1.5])), np.array([[0.3, 1.7, 2.2], [4.0, 0.9, 0.5]]), None, 0),
    "power_scalar": (lambda: T.PowerTransform(t64(3.0)), np.array([0.3, 1.7, 2.2]), None, 0),
    "softplus": (lambda: T.SoftplusTransform(), np.array([-3.0, 0.1, 2.0, 15.0]), None, 0),
    "stick_breaking": (lambda: T.StickBreakingTransform(), RNG.normal(size=(2, 3)), lambda y: y[..., :-1], 1),
    "corr_cholesky": (lambda: T.CorrCholeskyTransform(), RNG.normal(size=(2, 6)), _strict_lower, 1),
    "cdf": (lambda: T.CumulativeDistributionTransform(D.Normal(t64(0.3), t64(1.5))), np.array([-2.0, 0.1, 1.9]),
            None, 0),
    "independent": (lambda: T.IndependentTransform(T.SoftplusTransform(), 1), RNG.normal(size=(2, 3)), None, 1),
    "reshape": (lambda: T.ReshapeTransform((2, 3), (3, 2)), RNG.normal(size=(2, 2, 3)), None, 2),
    "cat": (lambda: T.CatTransform([T.ExpTransform(), T.AffineTransform(1.0, 3.0), T.SoftplusTransform()], dim=0,
                                   lengths=[1, 2, 1]), RNG.normal(size=(4, 2)), None, 0),
    "stack": (lambda: T.StackTransform([T.ExpTransform(), T.SigmoidTransform()], dim=1), RNG.normal(size=(3, 2)),
              None, 0),
}


@pytest.mark.parametrize("name", sorted(BIJECTIONS))
def test_log_abs_det_jacobian_matches_numeric_jacobian(name):
    make, x, pick, event_dim = BIJECTIONS[name]
    t = make()
    y = t(t64(x))
    got = npy(t.log_abs_det_jacobian(t64(x), y))
    want = numeric_ladj(lambda v: (pick or (lambda a: a))(_f(t, v)), x, event_dim)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    # the inverse undoes the map and its log |det J| is the negation
    np.testing.assert_allclose(npy(t.inv(y)), x, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(npy(t.inv.log_abs_det_jacobian(y, t64(x))), -got, rtol=1e-12, atol=1e-12)
    assert t.bijective and bool(t.codomain.check(y).all())
    assert tuple(t.forward_shape(x.shape)) == tuple(y.shape) and tuple(t.inverse_shape(y.shape)) == x.shape


@pytest.mark.parametrize("name", sorted(BIJECTIONS))
def test_transforms_gradcheck(name):
    make, x, _, _ = BIJECTIONS[name]
    t = make()

    def both(v):
        y = t(v)
        return y, t.log_abs_det_jacobian(v, y), t.inv(y)

    gradcheck(both, [t64(x, True)])


def _stick_breaking_np(x):
    k = x.shape[-1] + 1
    y = np.zeros(x.shape[:-1] + (k,))
    rest = np.ones(x.shape[:-1])
    for i in range(k - 1):
        z = 1 / (1 + np.exp(-(x[..., i] - np.log(k - 1 - i))))
        y[..., i] = z * rest
        rest = rest * (1 - z)
    y[..., -1] = rest
    return y


def _corr_cholesky_np(x):
    n = x.shape[-1]
    d = round((0.25 + 2 * n) ** 0.5 + 0.5)
    out = np.zeros(x.shape[:-1] + (d, d))
    r = np.tanh(x)
    k = 0
    for i in range(d):
        left = np.ones(x.shape[:-1])   # 1 - sum_{j' < j} y_ij'**2
        for j in range(i):
            out[..., i, j] = r[..., k] * np.sqrt(left)
            left = left - out[..., i, j] ** 2
            k += 1
        out[..., i, i] = np.sqrt(left)
    return out


def test_forward_values_match_numpy():
    x = RNG.normal(size=(3, 4))
    np.testing.assert_allclose(_f(T.StickBreakingTransform(), x), _stick_breaking_np(x), rtol=1e-12)
    np.testing.assert_allclose(_f(T.StickBreakingTransform(), np.zeros(3)), np.full(4, 0.25), rtol=1e-12)
    xc = RNG.normal(size=(2, 10))
    y = _f(T.CorrCholeskyTransform(), xc)
    np.testing.assert_allclose(y, _corr_cholesky_np(xc), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(np.diagonal(y @ np.swapaxes(y, -1, -2), 0, -2, -1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(_f(T.SoftmaxTransform(), x), np.exp(x) / np.exp(x).sum(-1, keepdims=True))
    np.testing.assert_allclose(_f(T.SoftplusTransform(), x), np.log1p(np.exp(x)), rtol=1e-12)
    np.testing.assert_allclose(_f(T.PowerTransform(2.5), np.abs(x)), np.abs(x) ** 2.5, rtol=1e-12)
    np.testing.assert_allclose(_f(T.AbsTransform(), x), np.abs(x))
    m = RNG.normal(size=(2, 3, 3))
    lower = np.tril(m, -1) + np.exp(np.diagonal(m, 0, -2, -1))[..., None] * np.eye(3)
    np.testing.assert_allclose(_f(T.LowerCholeskyTransform(), m), lower, rtol=1e-12)
    np.testing.assert_allclose(_f(T.PositiveDefiniteTransform(), m), lower @ np.swapaxes(lower, -1, -2), rtol=1e-12)


def test_non_bijective_transforms_reach_their_codomain_and_invert_from_it():
    x = RNG.normal(size=(2, 3, 3))
    for t in (T.SoftmaxTransform(), T.AbsTransform(), T.LowerCholeskyTransform(), T.PositiveDefiniteTransform()):
        y = t(t64(x))
        assert not t.bijective
        assert bool(t.codomain.check(y).all()), t
        np.testing.assert_allclose(npy(t(t.inv(y))), npy(y), rtol=1e-10, atol=1e-12)
    # the lower-Cholesky map keeps the strict lower triangle and logs the diagonal back
    lc = T.LowerCholeskyTransform()
    np.testing.assert_allclose(npy(lc.inv(lc(t64(x)))), np.tril(x), rtol=1e-12)
    with pytest.raises(NotImplementedError):
        T.SoftmaxTransform().log_abs_det_jacobian(t64(x), t64(x))


def test_wrapper_shapes_and_event_dims():
    ind = T.IndependentTransform(T.ExpTransform(), 2)
    assert ind.domain.event_dim == 2 and ind.codomain.event_dim == 2 and ind.sign == 1
    x = RNG.normal(size=(4, 2, 3))
    np.testing.assert_allclose(npy(ind.log_abs_det_jacobian(t64(x), ind(t64(x)))), x.sum((-2, -1)))
    with pytest.raises(ValueError, match="Too few dimensions"):
        ind(t64([1.0]))
    r = T.ReshapeTransform((2, 3), (6,))
    assert r.domain.event_dim == 2 and r.codomain.event_dim == 1
    assert tuple(r(t64(x)).shape) == (4, 6) and tuple(r.forward_shape((5, 2, 3))) == (5, 6)
    assert tuple(r.log_abs_det_jacobian(t64(x), r(t64(x))).shape) == (4,)
    with pytest.raises(ValueError, match="different numbers of elements"):
        T.ReshapeTransform((2, 3), (5,))
    with pytest.raises(ValueError, match="Shape mismatch"):
        r.forward_shape((3, 2))
    sm = T.StickBreakingTransform()
    assert tuple(sm.forward_shape((5, 3))) == (5, 4) and tuple(sm.inverse_shape((5, 4))) == (5, 3)
    cc = T.CorrCholeskyTransform()
    assert tuple(cc.forward_shape((2, 6))) == (2, 4, 4) and tuple(cc.inverse_shape((2, 4, 4))) == (2, 6)
    with pytest.raises(ValueError, match="flattened lower-diagonal"):
        cc.forward_shape((2, 5))
    with pytest.raises(ValueError, match="not square"):
        cc.inverse_shape((2, 3, 4))
    # a Cat along an event dim sums the parts' log |det J|; along a batch dim it concatenates them
    parts = [T.IndependentTransform(T.ExpTransform(), 1), T.IndependentTransform(T.SoftplusTransform(), 1)]
    cat_event = T.CatTransform(parts, dim=-1, lengths=[2, 1])
    xe = RNG.normal(size=(4, 3))
    ladj = npy(cat_event.log_abs_det_jacobian(t64(xe), cat_event(t64(xe))))
    np.testing.assert_allclose(ladj, xe[:, :2].sum(-1) - np.log1p(np.exp(-xe[:, 2])), rtol=1e-12)
    assert cat_event.event_dim == 1 and cat_event.domain.event_dim == 1
    with pytest.raises(AssertionError, match="must equal length 3"):
        cat_event(t64(RNG.normal(size=(4, 4))))
    with pytest.raises(AssertionError, match="lengths"):
        T.CatTransform(parts, dim=0, lengths=[1])
    with pytest.raises(AssertionError, match="Transform instances"):
        T.StackTransform([T.ExpTransform(), "exp"])
    st = T.StackTransform([T.ExpTransform(), T.SigmoidTransform()], dim=-1)
    with pytest.raises(AssertionError, match="len\\(transforms\\) 2"):
        st(t64(RNG.normal(size=(4, 3))))
    assert bool(st.codomain.check(st(t64(RNG.normal(size=(4, 2))))).all())


def test_power_transform_sign_equality_and_shapes():
    t = T.PowerTransform(t64([2.0, -0.5]))
    np.testing.assert_array_equal(npy(t.sign), [1.0, -1.0])
    assert t == T.PowerTransform(t64([2.0, -0.5])) and t != T.PowerTransform(t64([2.0, 0.5]))
    assert tuple(t.forward_shape((3, 1))) == (3, 2)
    assert T.SoftplusTransform() == T.SoftplusTransform() and T.AbsTransform() != T.SoftplusTransform()


def test_transformed_distribution_on_the_simplex():
    # a Normal pushed through stick breaking: log p(y) = log N(x) - log |det J|, x = inv(y)
    base = D.Independent(D.Normal(t64([0.1, -0.3, 0.5]), t64([1.0, 0.7, 1.3])), 1)
    d = D.TransformedDistribution(base, [T.StickBreakingTransform()])
    assert tuple(d.event_shape) == (4,)
    y = t64([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]])
    x = npy(T.StickBreakingTransform().inv(y))
    assert x.shape == (2, 3)
    ladj = numeric_ladj(lambda v: _stick_breaking_np(v)[..., :-1], x, 1)
    normal = (-0.5 * ((x - [0.1, -0.3, 0.5]) / [1.0, 0.7, 1.3]) ** 2 - np.log([1.0, 0.7, 1.3])
              - 0.5 * np.log(2 * np.pi)).sum(-1)
    np.testing.assert_allclose(npy(d.log_prob(y)), normal - ladj, rtol=1e-6)
    # the CDF of a distribution maps it to Uniform(0, 1): log density 0 everywhere
    u = D.TransformedDistribution(D.Normal(t64(0.3), t64(2.0)), [T.CumulativeDistributionTransform(
        D.Normal(t64(0.3), t64(2.0)))])
    np.testing.assert_allclose(npy(u.log_prob(t64([0.1, 0.5, 0.9]))), 0.0, atol=1e-12)


# --------------------------------------------------------------------------------------------------
# biject_to / transform_to


CONSTRAINTS = [constraints.real, constraints.real_vector, constraints.positive, constraints.nonnegative,
               constraints.greater_than(-2.5), constraints.greater_than_eq(1.0), constraints.less_than(3.0),
               constraints.unit_interval, constraints.interval(-1.0, 4.0), constraints.half_open_interval(0.0, 2.0),
               constraints.simplex, constraints.independent(constraints.positive, 2)]


def _unconstrained(t, shape=(3, 4)):
    return t64(RNG.normal(size=tuple(t.inverse_shape(shape)) if t.codomain.event_dim else shape))


@pytest.mark.parametrize("c", CONSTRAINTS, ids=repr)
def test_biject_to_and_transform_to_reach_the_constraint(c):
    for registry in (biject_to, transform_to):
        t = registry(c)
        x = _unconstrained(t)
        y = t(x)
        assert bool(c.check(y).all()), (registry, c)
        assert t.codomain.event_dim == c.event_dim
        if registry is biject_to:
            assert t.bijective
            np.testing.assert_allclose(npy(t.inv(y)), npy(x), rtol=1e-8, atol=1e-10)


def test_matrix_constraints():
    x = t64(RNG.normal(size=(2, 3, 3)))
    assert bool(constraints.lower_cholesky.check(transform_to(constraints.lower_cholesky)(x)).all())
    for c in (constraints.positive_definite, constraints.positive_semidefinite):
        assert isinstance(transform_to(c), T.PositiveDefiniteTransform)
        assert bool(c.check(transform_to(c)(x)).all())
    cc = T.CorrCholeskyTransform()
    assert isinstance(biject_to(cc.codomain), T.CorrCholeskyTransform)
    assert isinstance(transform_to(cc.codomain), T.CorrCholeskyTransform)
    for c in (constraints.lower_cholesky, constraints.positive_definite):
        with pytest.raises(NotImplementedError, match="Cannot transform"):
            biject_to(c)


def test_cat_and_stack_constraints_round_trip_through_the_registry():
    cat = T.CatTransform([T.ExpTransform(), T.SigmoidTransform()], dim=-1, lengths=[2, 1])
    t = biject_to(cat.codomain)
    assert isinstance(t, T.CatTransform) and t.lengths == [2, 1]
    y = t(t64(RNG.normal(size=(4, 3))))
    assert bool(cat.codomain.check(y).all()) and (npy(y)[:, 2] < 1).all()
    st = T.StackTransform([T.ExpTransform(), T.identity_transform], dim=0)
    t2 = transform_to(st.codomain)
    assert isinstance(t2, T.StackTransform)
    y2 = npy(t2(t64([[-1.0, 2.0], [-3.0, 4.0]])))
    np.testing.assert_allclose(y2, [[np.exp(-1.0), np.exp(2.0)], [-3.0, 4.0]])


def test_registry_errors_and_custom_registration():
    with pytest.raises(NotImplementedError, match="Cannot transform _Boolean constraints"):
        transform_to(constraints.boolean)
    with pytest.raises(TypeError, match="Constraint subclass or instance"):
        transform_to.register(3, lambda c: None)
    from minidl.distributions.constraint_registry import ConstraintRegistry
    reg = ConstraintRegistry()
    reg.register(constraints.positive, lambda c: T.SoftplusTransform())
    assert isinstance(reg(constraints.greater_than(0.0)), T.SoftplusTransform)
    with pytest.raises(NotImplementedError):
        reg(constraints.real)
    # positive is greater_than(0): its transform is exp followed by a shift by the bound
    t = transform_to(constraints.positive)
    assert isinstance(t, T.ComposeTransform) and isinstance(t.parts[0], T.ExpTransform)
    assert isinstance(transform_to(constraints.unit_interval), T.SigmoidTransform)
    assert D.biject_to is biject_to and D.transform_to is transform_to and D.PowerTransform is T.PowerTransform


# --------------------------------------------------------------------------------------------------
# against torch


TORCH_TRANSFORMS = {
    "power": (lambda M, P: M.PowerTransform(P([0.5, 2.5, -1.5])), [[0.3, 1.7, 2.2], [4.0, 0.9, 0.5]]),
    # a number exponent becomes a float32 tensor (as torch's broadcast_all makes it), so 1 / 3 is rounded
    "power_number": (lambda M, P: M.PowerTransform(3.0), [0.3, 1.7, 2.2]),
    "softplus": (lambda M, P: M.SoftplusTransform(), [-3.0, 0.1, 2.0, 15.0]),
    "stick_breaking": (lambda M, P: M.StickBreakingTransform(), RNG.normal(size=(2, 3))),
    "corr_cholesky": (lambda M, P: M.CorrCholeskyTransform(), RNG.normal(size=(2, 6))),
    "independent": (lambda M, P: M.IndependentTransform(M.SigmoidTransform(), 1), RNG.normal(size=(2, 3))),
    "cat": (lambda M, P: M.CatTransform([M.ExpTransform(), M.SoftplusTransform()], dim=1, lengths=[1, 2]),
            RNG.normal(size=(2, 3))),
    "stack": (lambda M, P: M.StackTransform([M.ExpTransform(), M.SoftplusTransform()], dim=-1),
              RNG.normal(size=(3, 2))),
    "reshape": (lambda M, P: M.ReshapeTransform((2, 3), (6,)), RNG.normal(size=(2, 2, 3))),
}


@pytest.mark.parametrize("name", sorted(TORCH_TRANSFORMS))
def test_transforms_against_torch(name):
    torch = pytest.importorskip("torch")
    import torch.distributions.transforms as TT
    make, x = TORCH_TRANSFORMS[name]
    tm = make(T, lambda v: t64(v))
    tt = make(TT, lambda v: torch.tensor(v, dtype=torch.float64))
    xm, xt = t64(x, True), torch.tensor(np.asarray(x, np.float64), requires_grad=True)
    ym, yt = tm(xm), tt(xt)
    lm, lt = tm.log_abs_det_jacobian(xm, ym), tt.log_abs_det_jacobian(xt, yt)
    np.testing.assert_allclose(npy(ym), yt.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(npy(lm), lt.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(npy(tm.inv(ym)), tt.inv(yt).detach().numpy(), rtol=1e-10, atol=1e-12)
    w = RNG.normal(size=tuple(ym.shape))
    ((ym * t64(w)).sum() + lm.sum()).backward()
    ((yt * torch.tensor(w)).sum() + lt.sum()).backward()
    np.testing.assert_allclose(xm.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_non_bijective_transforms_against_torch():
    torch = pytest.importorskip("torch")
    import torch.distributions.transforms as TT
    x = RNG.normal(size=(2, 3, 3))
    for name in ("SoftmaxTransform", "AbsTransform", "LowerCholeskyTransform", "PositiveDefiniteTransform"):
        ym, yt = getattr(T, name)()(t64(x)), getattr(TT, name)()(torch.tensor(x))
        np.testing.assert_allclose(npy(ym), yt.numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(npy(getattr(T, name)().inv(ym)), getattr(TT, name)().inv(yt).numpy(),
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("c", CONSTRAINTS, ids=repr)
def test_registry_picks_torchs_transforms(c):
    torch = pytest.importorskip("torch")
    from torch.distributions import constraints as TC
    from torch.distributions import biject_to as tb, transform_to as tt

    def twin(con):
        name = type(con).__name__
        if name == "_IndependentConstraint":
            return TC.independent(twin(con.base_constraint), con.reinterpreted_batch_ndims)
        args = [getattr(con, a) for a in ("lower_bound", "upper_bound") if hasattr(con, a)]
        return getattr(TC, name)(*args)

    def names(t):
        parts = getattr(t, "parts", None)
        base = getattr(t, "base_transform", None)
        inner = [names(p) for p in parts] if parts is not None else [names(base)] if base is not None else []
        return (type(t).__name__, inner)

    for ours, theirs in ((biject_to, tb), (transform_to, tt)):
        assert names(ours(c)) == names(theirs(twin(c)))
        x = RNG.normal(size=(3, 4))
        np.testing.assert_allclose(npy(ours(c)(t64(x))), theirs(twin(c))(torch.tensor(x)).numpy(), rtol=1e-12)
