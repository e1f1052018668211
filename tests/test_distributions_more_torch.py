"""The families of test_distributions_more.py (Cauchy, HalfNormal, HalfCauchy, StudentT, Chi2, Weibull,
Pareto, Kumaraswamy, LogisticNormal, NegativeBinomial, Multinomial, RelaxedBernoulli,
RelaxedOneHotCategorical, ContinuousBernoulli, VonMises, MixtureSameFamily, LowRankMultivariateNormal)
and their kl_divergence pairs against torch.distributions (skipped without torch): values and gradients."""
import numpy as np
import pytest

import minidl as md
import minidl.distributions as D

F64 = md.float64


def t64(x, grad=False):
    return md.tensor(np.asarray(x, np.float64), dtype=F64, requires_grad=grad)


def npy(t):
    return t.detach().numpy()


# --------------------------------------------------------------------------------------------------
# against torch


def _torch_pair(torch, name, params, **kw):
    tparams = [torch.tensor(np.asarray(p, np.float64)) if not isinstance(p, int) else p for p in params]
    mparams = [t64(p) if not isinstance(p, int) else p for p in params]
    return getattr(D, name)(*mparams, **kw), getattr(torch.distributions, name)(*tparams, **kw)


TORCH_CASES = [
    ("Cauchy", ([0.5, -1.0], [1.5, 0.3]), {}, [0.1, 2.0]),
    ("HalfNormal", ([0.5, 2.0],), {}, [0.3, 1.0]),
    ("HalfCauchy", ([0.5, 2.0],), {}, [0.3, 1.0]),
    ("StudentT", ([3.0, 0.8], [0.0, 1.0], [1.0, 2.0]), {}, [0.7, -1.0]),
    ("Chi2", ([1.0, 4.5],), {}, [0.5, 3.0]),
    ("Weibull", ([1.0, 2.0], [0.7, 3.0]), {}, [0.5, 2.5]),
    ("Pareto", ([1.0, 0.5], [3.0, 2.5]), {}, [1.5, 0.7]),
    ("Kumaraswamy", ([2.0, 1.5], [3.0, 1.5]), {}, [0.3, 0.8]),
    ("NegativeBinomial", ([2.0, 0.5],), {"logits": None}, [0.0, 3.0]),
    ("ContinuousBernoulli", ([0.2, 0.5004],), {}, [0.3, 0.9]),
    ("VonMises", ([0.5, -1.0], [0.5, 4.0]), {}, [0.1, 3.0]),
    ("LogisticNormal", ([0.3, -0.5], [1.0, 0.7]), {}, [0.2, 0.5, 0.3]),
]


@pytest.mark.parametrize("name, params, kw, value", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_values_match_torch(name, params, kw, value):
    torch = pytest.importorskip("torch")
    if "logits" in kw:
        kw = {"logits": t64([0.3, -1.0])}
        m = D.NegativeBinomial(t64(params[0]), **kw)
        t = torch.distributions.NegativeBinomial(torch.tensor(params[0], dtype=torch.float64),
                                                 logits=torch.tensor([0.3, -1.0], dtype=torch.float64))
    else:
        m, t = _torch_pair(torch, name, params, **kw)
    v, tv = t64(value), torch.tensor(value, dtype=torch.float64)
    rtol = 1e-6 if name == "VonMises" else 1e-9
    np.testing.assert_allclose(npy(m.log_prob(v)), t.log_prob(tv).numpy(), rtol=rtol)
    for attr in ("mean", "mode", "variance"):
        if (name, attr) == ("Kumaraswamy", "mode"):
            continue   # PyTorch's formula is NaN for concentration0 > 1; the closed form is tested above
        try:
            ref = getattr(t, attr).numpy()
        except NotImplementedError:
            continue
        np.testing.assert_allclose(npy(getattr(m, attr)), ref, rtol=1e-6, err_msg=attr)
    for meth in ("entropy", "cdf"):
        try:
            ref = (getattr(t, meth)(tv) if meth == "cdf" else t.entropy()).numpy()
        except NotImplementedError:
            continue
        np.testing.assert_allclose(npy(getattr(m, meth)(v) if meth == "cdf" else m.entropy()), ref, rtol=1e-9,
                                   err_msg=meth)
    try:
        u = torch.tensor([0.2, 0.7], dtype=torch.float64)
        ref = t.icdf(u).numpy()
    except NotImplementedError:
        ref = None
    if ref is not None:
        np.testing.assert_allclose(npy(m.icdf(t64([0.2, 0.7]))), ref, rtol=1e-9)
    assert m.batch_shape == md.Size(t.batch_shape) and m.event_shape == md.Size(t.event_shape)
    assert m.has_rsample == t.has_rsample
    assert repr(m.support) == repr(t.support).replace("torch.", "") or name == "Pareto"


def test_discrete_and_multivariate_match_torch():
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    tt = lambda x: torch.tensor(np.asarray(x, np.float64))  # noqa: E731
    probs = np.array([[0.2, 0.3, 0.5], [0.6, 0.4, 0.0]])
    x = np.array([[1.0, 1.0, 3.0], [2.0, 3.0, 0.0]])
    m, t = D.Multinomial(5, probs=t64(probs)), TD.Multinomial(5, probs=tt(probs))
    np.testing.assert_allclose(npy(m.log_prob(t64(x))), t.log_prob(tt(x)).numpy())
    np.testing.assert_allclose(npy(m.entropy()), t.entropy().numpy())
    np.testing.assert_allclose(npy(m.variance), t.variance.numpy())
    rng = np.random.default_rng(1)
    loc, W, d = rng.normal(size=(2, 3)), rng.normal(size=(3, 2)), rng.uniform(0.5, 2, size=3)
    m, t = D.LowRankMultivariateNormal(t64(loc), t64(W), t64(d)), TD.LowRankMultivariateNormal(tt(loc), tt(W), tt(d))
    v = rng.normal(size=(4, 2, 3))
    np.testing.assert_allclose(npy(m.log_prob(t64(v))), t.log_prob(tt(v)).numpy(), rtol=1e-10)
    for attr in ("scale_tril", "covariance_matrix", "precision_matrix", "variance"):
        np.testing.assert_allclose(npy(getattr(m, attr)), getattr(t, attr).numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(npy(m.entropy()), t.entropy().numpy())
    lg, z = np.array([0.3, -1.0, 0.5]), np.array([0.2, 0.5, 0.3])
    m, t = D.RelaxedOneHotCategorical(t64(0.7), logits=t64(lg)), TD.RelaxedOneHotCategorical(tt(0.7), logits=tt(lg))
    np.testing.assert_allclose(npy(m.log_prob(t64(z))), t.log_prob(tt(z)).numpy())
    m, t = D.RelaxedBernoulli(t64(0.7), logits=t64(lg)), TD.RelaxedBernoulli(tt(0.7), logits=tt(lg))
    np.testing.assert_allclose(npy(m.log_prob(t64(z))), t.log_prob(tt(z)).numpy())
    comp_m = D.Independent(D.Normal(t64(rng.normal(size=(3, 2))), t64(rng.uniform(0.5, 1, (3, 2)))), 1)
    comp_t = TD.Independent(TD.Normal(tt(npy(comp_m.base_dist.loc)), tt(npy(comp_m.base_dist.scale))), 1)
    m = D.MixtureSameFamily(D.Categorical(t64([0.2, 0.5, 0.3])), comp_m)
    t = TD.MixtureSameFamily(TD.Categorical(tt([0.2, 0.5, 0.3])), comp_t)
    v = rng.normal(size=(4, 2))
    np.testing.assert_allclose(npy(m.log_prob(t64(v))), t.log_prob(tt(v)).numpy())
    np.testing.assert_allclose(npy(m.mean), t.mean.numpy())
    np.testing.assert_allclose(npy(m.variance), t.variance.numpy())


def test_gradients_match_torch():
    torch = pytest.importorskip("torch")
    TD = torch.distributions

    def both(build_m, build_t, params, value):
        mp = [t64(p, True) for p in params]
        tp = [torch.tensor(np.asarray(p, np.float64), requires_grad=True) for p in params]
        build_m(*mp).log_prob(t64(value)).sum().backward()
        build_t(*tp).log_prob(torch.tensor(np.asarray(value, np.float64))).sum().backward()
        for a, b in zip(mp, tp):
            np.testing.assert_allclose(npy(a.grad), b.grad.numpy(), rtol=1e-6, atol=1e-9)

    both(D.StudentT, TD.StudentT, ([3.0, 0.8], [0.0, 1.0], [1.0, 2.0]), [0.7, -1.0])
    both(D.Kumaraswamy, TD.Kumaraswamy, ([2.0, 1.5], [3.0, 1.5]), [0.3, 0.8])
    both(D.Weibull, TD.Weibull, ([1.0, 2.0], [0.7, 3.0]), [0.5, 2.5])
    both(D.ContinuousBernoulli, TD.ContinuousBernoulli, ([0.2, 0.7],), [0.3, 0.9])
    both(D.VonMises, TD.VonMises, ([0.5, -1.0], [0.5, 4.0]), [0.1, 3.0])
    both(lambda r, l: D.NegativeBinomial(r, logits=l), lambda r, l: TD.NegativeBinomial(r, logits=l),
         ([2.0, 0.5], [0.3, -1.0]), [0.0, 3.0])
    both(lambda m, W, d: D.LowRankMultivariateNormal(m, W, d), lambda m, W, d: TD.LowRankMultivariateNormal(m, W, d),
         ([0.1, 0.0, -0.3], [[1.0, 0.2], [0.3, -0.5], [0.0, 0.8]], [0.5, 1.0, 2.0]), [[0.3, -0.2, 1.0]])


def test_kl_pairs_match_torch():
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    tt = lambda x: torch.tensor(np.asarray(x, np.float64))  # noqa: E731

    def pair(name, *params):
        return getattr(D, name)(*[t64(p) for p in params]), getattr(TD, name)(*[tt(p) for p in params])

    dists = {
        "ContinuousBernoulli": [pair("ContinuousBernoulli", [0.2, 0.7, 0.5002]),
                                pair("ContinuousBernoulli", [0.6, 0.3, 0.9])],
        "Pareto": [pair("Pareto", [1.0, 2.0, 0.5], [2.5, 3.0, 0.8]),
                   pair("Pareto", [0.5, 1.0, 1.0], [1.5, 4.0, 2.5])],
        "HalfNormal": [pair("HalfNormal", [0.5, 2.0, 1.0]), pair("HalfNormal", [1.0, 1.5, 3.0])],
        "Cauchy": [pair("Cauchy", [0.0, 1.0, -1.0], [0.5, 2.0, 1.0]),
                   pair("Cauchy", [0.5, -1.0, 0.0], [1.0, 1.5, 3.0])],
        "Normal": [pair("Normal", [0.0, 1.0, -1.0], [0.5, 2.0, 1.0])],
        "Exponential": [pair("Exponential", [0.5, 2.0, 1.0])],
        "Gamma": [pair("Gamma", [0.5, 2.0, 1.0], [1.0, 1.5, 3.0])],
        "Gumbel": [pair("Gumbel", [0.0, 1.0, -1.0], [0.5, 2.0, 1.0])],
        "Laplace": [pair("Laplace", [0.0, 1.0, -1.0], [0.5, 2.0, 1.0])],
        "Beta": [pair("Beta", [0.5, 2.0, 1.0], [1.0, 1.5, 3.0])],
        "Uniform": [pair("Uniform", [0.1, 0.0, -1.0], [0.6, 1.0, 2.0]),
                    pair("Uniform", [1.5, 2.0, 0.5], [3.0, 4.0, 2.0])],
    }
    names = ["ContinuousBernoulli", "Pareto", "HalfNormal", "Cauchy"]
    checked = 0
    for pn, plist in dists.items():
        for qn, qlist in dists.items():
            if pn not in names and qn not in names:
                continue
            for pm, pt in plist:
                for qm, qt in qlist:
                    try:
                        ref = TD.kl_divergence(pt, qt).numpy()
                    except NotImplementedError:
                        with pytest.raises(NotImplementedError):
                            D.kl_divergence(pm, qm)
                        continue
                    np.testing.assert_allclose(npy(D.kl_divergence(pm, qm)), ref, rtol=1e-8, atol=1e-12,
                                               err_msg=f"{pn} || {qn}")
                    checked += 1
    assert checked > 30
    rng = np.random.default_rng(2)
    loc, W, d = rng.normal(size=3), rng.normal(size=(3, 2)), rng.uniform(0.5, 2, size=3)
    lr_m, lr_t = D.LowRankMultivariateNormal(t64(loc), t64(W), t64(d)), TD.LowRankMultivariateNormal(tt(loc), tt(W),
                                                                                                     tt(d))
    A = rng.normal(size=(3, 3))
    cov = A @ A.T + np.eye(3)
    mv_m = D.MultivariateNormal(t64(loc[::-1].copy()), covariance_matrix=t64(cov))
    mv_t = TD.MultivariateNormal(tt(loc[::-1].copy()), covariance_matrix=tt(cov))
    lr2_m = D.LowRankMultivariateNormal(t64(loc * 0.5), t64(W[:, :1]), t64(d[::-1].copy()))
    lr2_t = TD.LowRankMultivariateNormal(tt(loc * 0.5), tt(W[:, :1]), tt(d[::-1].copy()))
    for (pm, pt), (qm, qt) in [((lr_m, lr_t), (lr2_m, lr2_t)), ((lr_m, lr_t), (mv_m, mv_t)),
                               ((mv_m, mv_t), (lr_m, lr_t))]:
        np.testing.assert_allclose(npy(D.kl_divergence(pm, qm)), TD.kl_divergence(pt, qt).numpy(), rtol=1e-9)
