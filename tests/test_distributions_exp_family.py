"""The ExponentialFamily base of minidl.distributions: which families derive from it, its
Bregman-divergence entropy and generic same-family KL divergence against the closed forms (and, for the
Wishart, against a NumPy reference), and (where torch is installed) the family list, natural
parameters, entropies and KL divergences against torch.distributions."""
import math

import numpy as np
import pytest

import minidl as md
import minidl.distributions as D
from minidl.distributions.exp_family import ExponentialFamily
from minidl.distributions.kl_exponential_family import _kl_expfamily_expfamily

F64 = md.float64
LGAMMA = np.vectorize(math.lgamma)
EXP_FAMILIES = ["Bernoulli", "Beta", "ContinuousBernoulli", "Dirichlet", "Exponential", "Gamma", "Normal", "Poisson",
                "Wishart"]


# the NumPy references the other test file of these families defines
from test_distributions_last import (logdet, mvdigamma_np, mvlgamma_np, npy, spd, t64,  # noqa: E402
                                     wishart_entropy)


def wishart_kl(nu_p, s_p, nu_q, s_q):
    p = s_p.shape[-1]
    tr = np.trace(np.linalg.solve(s_q, s_p), axis1=-2, axis2=-1)
    return (nu_q / 2 * (logdet(s_q) - logdet(s_p)) + nu_p / 2 * (tr - p) + mvlgamma_np(nu_q / 2, p)
            - mvlgamma_np(nu_p / 2, p) + (nu_p - nu_q) / 2 * mvdigamma_np(nu_p / 2, p))


# --------------------------------------------------------------------------------------------------
# ExponentialFamily


def test_exponential_families_derive_from_the_base():
    for name in EXP_FAMILIES + ["Chi2"]:
        assert issubclass(getattr(D, name), ExponentialFamily), name
    for name in ("Categorical", "Binomial", "MultivariateNormal", "Laplace", "InverseGamma"):
        assert not issubclass(getattr(D, name), ExponentialFamily), name
    assert D.ExponentialFamily is ExponentialFamily
    assert isinstance(D.Normal(0.0, 1.0), D.ExponentialFamily)


def _family_pairs():
    """(p, q) of each family, with parameters p and q of their own."""
    rng = np.random.default_rng(3)
    s1, s2 = spd(rng, 3, 3), spd(rng, 3, 3)
    return {
        "Normal": (D.Normal(t64([0.3, -1.0]), t64([0.5, 2.0])), D.Normal(t64([1.0, 0.2]), t64([1.5, 0.7]))),
        "Bernoulli": (D.Bernoulli(t64([0.2, 0.7])), D.Bernoulli(t64([0.6, 0.1]))),
        "ContinuousBernoulli": (D.ContinuousBernoulli(t64([0.2, 0.7])), D.ContinuousBernoulli(t64([0.6, 0.1]))),
        "Exponential": (D.Exponential(t64([0.5, 3.0])), D.Exponential(t64([2.0, 0.4]))),
        "Gamma": (D.Gamma(t64([0.5, 3.0]), t64([1.5, 0.2])), D.Gamma(t64([2.0, 1.0]), t64([0.5, 1.0]))),
        "Beta": (D.Beta(t64([0.5, 3.0]), t64([1.5, 0.2])), D.Beta(t64([2.0, 1.0]), t64([0.5, 1.0]))),
        "Dirichlet": (D.Dirichlet(t64([[0.5, 3.0, 1.0]])), D.Dirichlet(t64([[2.0, 1.0, 0.3]]))),
        "Poisson": (D.Poisson(t64([0.5, 3.0])), D.Poisson(t64([2.0, 0.4]))),
        "Wishart": (D.Wishart(t64(4.5), covariance_matrix=t64(s1)), D.Wishart(t64(6.0), covariance_matrix=t64(s2))),
    }


@pytest.mark.parametrize("name", ["Normal", "Bernoulli", "ContinuousBernoulli", "Exponential", "Gamma", "Wishart"])
def test_bregman_entropy_equals_the_closed_form(name):
    p, _ = _family_pairs()[name]
    generic = ExponentialFamily.entropy(p)
    np.testing.assert_allclose(npy(generic), npy(p.entropy()), rtol=1e-10, atol=1e-12)
    assert generic.shape == p.batch_shape


def test_bregman_entropy_against_numpy():
    loc, scale, rate = np.array([0.3, -1.0]), np.array([0.5, 2.0]), np.array([0.5, 3.0])
    np.testing.assert_allclose(npy(ExponentialFamily.entropy(D.Normal(t64(loc), t64(scale)))),
                               0.5 * np.log(2 * np.pi * np.e * scale ** 2))
    np.testing.assert_allclose(npy(ExponentialFamily.entropy(D.Exponential(t64(rate)))), 1 - np.log(rate))
    rng = np.random.default_rng(0)
    sigma, nu = spd(rng, 2, 3, 3), np.array([3.5, 7.0])
    w = D.Wishart(t64(nu), covariance_matrix=t64(sigma))
    np.testing.assert_allclose(npy(ExponentialFamily.entropy(w)), wishart_entropy(nu, sigma), rtol=1e-8)


@pytest.mark.parametrize("name", ["Beta", "Dirichlet", "Poisson"])
def test_bregman_entropy_needs_the_carrier_measure(name):
    p, _ = _family_pairs()[name]
    with pytest.raises(NotImplementedError):
        ExponentialFamily.entropy(p)


@pytest.mark.parametrize("name", ["Normal", "Bernoulli", "ContinuousBernoulli", "Exponential", "Gamma", "Beta",
                                  "Dirichlet", "Poisson"])
def test_bregman_kl_equals_the_registered_closed_form(name):
    p, q = _family_pairs()[name]
    np.testing.assert_allclose(npy(_kl_expfamily_expfamily(p, q)), npy(D.kl_divergence(p, q)), rtol=1e-9,
                               atol=1e-12)


def test_wishart_kl_dispatches_to_the_bregman_divergence():
    rng = np.random.default_rng(1)
    sp, sq = spd(rng, 2, 3, 3), spd(rng, 2, 3, 3)
    nup, nuq = np.array([4.0, 6.0]), np.array([5.0, 3.5])
    p, q = D.Wishart(t64(nup), covariance_matrix=t64(sp)), D.Wishart(t64(nuq), covariance_matrix=t64(sq))
    kl = D.kl_divergence(p, q)
    assert kl.shape == (2,)
    np.testing.assert_allclose(npy(kl), wishart_kl(nup, sp, nuq, sq), rtol=1e-8)
    np.testing.assert_allclose(npy(D.kl_divergence(p, p)), [0.0, 0.0], atol=1e-10)
    # differentiable in q's parameters (p's enter detached, as PyTorch's)
    df_q, cov_q, df_p = t64(5.0, grad=True), t64(sq[0], grad=True), t64(4.0, grad=True)
    D.kl_divergence(D.Wishart(df_p, covariance_matrix=t64(sp[0])), D.Wishart(df_q, covariance_matrix=cov_q)).backward()
    h = 1e-6
    fd = (wishart_kl(4.0, sp[0], 5.0 + h, sq[0]) - wishart_kl(4.0, sp[0], 5.0 - h, sq[0])) / (2 * h)
    assert float(npy(df_q.grad)) == pytest.approx(fd, rel=1e-5)
    assert cov_q.grad is not None and df_p.grad is None


def test_cross_family_kl_is_not_implemented():
    p, q = _family_pairs()["Wishart"][0], D.Normal(0.0, 1.0)
    with pytest.raises(NotImplementedError, match="different exponential families"):
        D.kl_divergence(p, q)
    with pytest.raises(NotImplementedError):
        D.kl_divergence(D.Poisson(t64(1.0)), D.Gamma(t64(1.0), t64(1.0)))


def test_exponential_families_match_torch():
    torch = pytest.importorskip("torch")
    TD = torch.distributions
    ours = {n for n in D.__all__ if isinstance(getattr(D, n), type) and issubclass(getattr(D, n), ExponentialFamily)}
    theirs = {n for n in TD.__all__ if isinstance(getattr(TD, n), type) and issubclass(getattr(TD, n),
                                                                                      TD.ExponentialFamily)}
    assert ours == theirs
    for name, (p, q) in _family_pairs().items():
        tp, tq = _to_torch(torch, p), _to_torch(torch, q)
        if name != "Wishart":     # PyTorch sums a batched Wishart's df term across the batch
            np.testing.assert_allclose(npy(_kl_expfamily_expfamily(p, q)),
                                       torch.distributions.kl._kl_expfamily_expfamily(tp, tq).detach().numpy(),
                                       rtol=1e-9, atol=1e-12, err_msg=name)
        for nat, tnat in zip(p._natural_params, tp._natural_params):
            np.testing.assert_allclose(npy(nat), tnat.detach().numpy(), rtol=1e-12, err_msg=name)
        try:
            ref = TD.ExponentialFamily.entropy(tp).detach().numpy()
        except NotImplementedError:
            with pytest.raises(NotImplementedError):
                ExponentialFamily.entropy(p)
            continue
        np.testing.assert_allclose(npy(ExponentialFamily.entropy(p)), ref, rtol=1e-10, err_msg=name)


def _to_torch(torch, d):
    tt = lambda x: torch.tensor(npy(x))  # noqa: E731
    TD = torch.distributions
    name = type(d).__name__
    if name == "Wishart":
        return TD.Wishart(tt(d.df), covariance_matrix=tt(d.covariance_matrix))
    if name in ("Bernoulli", "ContinuousBernoulli"):
        return getattr(TD, name)(tt(d.probs))
    params = {"Normal": ("loc", "scale"), "Exponential": ("rate",), "Gamma": ("concentration", "rate"),
              "Beta": ("concentration1", "concentration0"), "Dirichlet": ("concentration",), "Poisson": ("rate",)}
    return getattr(TD, name)(*[tt(getattr(d, a)) for a in params[name]])
