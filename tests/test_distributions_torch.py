"""minidl.distributions' core families against torch.distributions (skipped without torch): values,
gradients, samples' statistics and KL divergences of the families test_distributions.py checks against
NumPy closed forms."""
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


CASES = {
    "normal": (lambda P: P.Normal, [[0.3, -1.0, 2.0], [0.5, 1.5, 0.2]], {}, [0.1, 0.7, 2.3]),
    "lognormal": (lambda P: P.LogNormal, [[0.3, -1.0, 0.2], [0.5, 1.5, 0.2]], {}, [0.1, 0.7, 2.3]),
    "laplace": (lambda P: P.Laplace, [[0.3, -1.0, 2.0], [0.5, 1.5, 0.2]], {}, [0.1, 0.7, 2.3]),
    "gumbel": (lambda P: P.Gumbel, [[0.3, -1.0, 2.0], [0.5, 1.5, 0.2]], {}, [0.1, 0.7, 2.3]),
    "uniform": (lambda P: P.Uniform, [[0.0, -1.0, 2.0], [0.5, 1.5, 2.5]], {}, [0.1, 0.7, 2.3]),
    "exponential": (lambda P: P.Exponential, [[0.5, 1.5, 0.2]], {}, [0.1, 0.7, 2.3]),
    "gamma": (lambda P: P.Gamma, [[0.5, 1.5, 4.0], [2.0, 0.7, 1.0]], {}, [0.1, 0.7, 2.3]),
    "beta": (lambda P: P.Beta, [[0.5, 1.5, 4.0], [2.0, 0.7, 1.0]], {}, [0.1, 0.7, 0.3]),
    "poisson": (lambda P: P.Poisson, [[0.5, 1.5, 4.0]], {}, [0.0, 2.0, 3.0]),
    "bernoulli": (lambda P: P.Bernoulli, [[0.2, 0.5, 0.9]], {}, [0.0, 1.0, 1.0]),
    "bernoulli_logits": (lambda P: (lambda l: P.Bernoulli(logits=l)), [[0.2, -3.0, 4.0]], {}, [0.0, 1.0, 1.0]),
    "geometric": (lambda P: P.Geometric, [[0.2, 0.5, 0.9]], {}, [0.0, 3.0, 1.0]),
    "binomial": (lambda P: (lambda p: P.Binomial(5, p)), [[0.2, 0.5, 0.9]], {}, [0.0, 3.0, 5.0]),
    "binomial_logits": (lambda P: (lambda l: P.Binomial(7, logits=l)), [[0.2, -1.5, 2.0]], {}, [0.0, 3.0, 5.0]),
    "categorical": (lambda P: P.Categorical, [[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]], {}, [2.0, 0.0]),
    "categorical_logits": (lambda P: (lambda l: P.Categorical(logits=l)), [[[0.2, -0.3, 1.5]]], {}, [1.0]),
    "onehot": (lambda P: P.OneHotCategorical, [[[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]], {}, [[0, 0, 1.0], [1.0, 0, 0]]),
    "dirichlet": (lambda P: P.Dirichlet, [[[0.5, 1.5, 4.0], [2.0, 0.7, 1.0]]], {}, [[0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]),
    "mvn": (lambda P: (lambda m, L: P.MultivariateNormal(m, scale_tril=L)),
            [[0.3, -1.0], [[1.2, 0.0], [0.4, 0.7]]], {}, [[0.1, 0.7], [2.0, -1.0]]),
    "independent": (lambda P: (lambda m, s: P.Independent(P.Normal(m, s), 1)), [[0.3, -1.0], [0.5, 2.0]], {},
                    [0.1, 0.7]),
}
INTEGER_VALUES = {"categorical", "categorical_logits"}


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    import torch.distributions as TD
    ctor, params, _, value = CASES[name]
    mp = [t64(p, True) for p in params]
    tp = [torch.tensor(p, dtype=torch.float64, requires_grad=True) for p in params]
    dm, dt = ctor(D)(*mp), ctor(TD)(*tp)
    if name in INTEGER_VALUES:
        vm, vt = md.tensor(np.array(value, np.int64)), torch.tensor(value, dtype=torch.int64)
    else:
        vm, vt = t64(value), torch.tensor(value, dtype=torch.float64)
    assert tuple(dm.batch_shape) == tuple(dt.batch_shape) and tuple(dm.event_shape) == tuple(dt.event_shape)
    assert dm.has_rsample == dt.has_rsample and dm.has_enumerate_support == dt.has_enumerate_support
    lm, lt = dm.log_prob(vm), dt.log_prob(vt)
    np.testing.assert_allclose(npy(lm), lt.detach().numpy(), rtol=1e-9, atol=1e-12)
    lm.sum().backward()
    lt.sum().backward()
    for a, b in zip(mp, tp):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-7, atol=1e-10)
    for attr in ("mean", "variance", "stddev", "mode"):
        try:
            want = getattr(dt, attr).detach().numpy()
        except NotImplementedError:
            continue
        np.testing.assert_allclose(npy(getattr(dm, attr)), want, rtol=1e-9, atol=1e-12, equal_nan=True,
                                   err_msg=attr)
    for method in ("entropy", "cdf"):
        try:
            want = (getattr(dt, method)(vt) if method == "cdf" else dt.entropy()).detach().numpy()
        except NotImplementedError:
            with pytest.raises(NotImplementedError):
                getattr(dm, method)(vm) if method == "cdf" else dm.entropy()
            continue
        got = getattr(dm, method)(vm) if method == "cdf" else dm.entropy()
        np.testing.assert_allclose(npy(got), want, rtol=1e-9, atol=1e-12, err_msg=method)
    if dt.has_enumerate_support:
        np.testing.assert_allclose(npy(dm.enumerate_support()), dt.enumerate_support().numpy())


KL_PAIRS = {
    "normal": (lambda P: P.Normal, [[0.3, -1.0], [0.5, 2.0]], [[1.0, 0.0], [1.5, 0.3]]),
    "bernoulli": (lambda P: P.Bernoulli, [[0.3, 0.9]], [[0.5, 0.2]]),
    "categorical": (lambda P: P.Categorical, [[[0.2, 0.3, 0.5]]], [[[0.4, 0.4, 0.2]]]),
    "onehot": (lambda P: P.OneHotCategorical, [[[0.2, 0.3, 0.5]]], [[[0.4, 0.4, 0.2]]]),
    "uniform": (lambda P: P.Uniform, [[0.0, 1.0], [1.0, 2.0]], [[-1.0, 0.5], [3.0, 2.5]]),
    "exponential": (lambda P: P.Exponential, [[0.5, 2.0]], [[1.5, 0.3]]),
    "laplace": (lambda P: P.Laplace, [[0.3, -1.0], [0.5, 2.0]], [[1.0, 0.0], [1.5, 0.3]]),
    "gumbel": (lambda P: P.Gumbel, [[0.3, -1.0], [0.5, 2.0]], [[1.0, 0.0], [1.5, 0.3]]),
    "poisson": (lambda P: P.Poisson, [[0.5, 2.0]], [[1.5, 0.3]]),
    "geometric": (lambda P: P.Geometric, [[0.5, 0.2]], [[0.3, 0.7]]),
    "binomial": (lambda P: (lambda p: P.Binomial(6, p)), [[0.5, 0.2]], [[0.3, 0.7]]),
    "beta": (lambda P: P.Beta, [[0.5, 2.0], [1.5, 3.0]], [[1.5, 0.3], [2.0, 1.0]]),
    "gamma": (lambda P: P.Gamma, [[0.5, 2.0], [1.5, 3.0]], [[1.5, 0.3], [2.0, 1.0]]),
    "dirichlet": (lambda P: P.Dirichlet, [[[0.5, 2.0, 1.0]]], [[[1.5, 0.3, 2.0]]]),
    "lognormal": (lambda P: P.LogNormal, [[0.3, -1.0], [0.5, 2.0]], [[1.0, 0.0], [1.5, 0.3]]),
    "mvn": (lambda P: (lambda m, L: P.MultivariateNormal(m, scale_tril=L)), [[0.3, -1.0], [[1.2, 0.0], [0.4, 0.7]]],
            [[1.0, 0.5], [[0.8, 0.0], [-0.3, 1.1]]]),
    "independent": (lambda P: (lambda m, s: P.Independent(P.Normal(m, s), 1)), [[0.3, -1.0], [0.5, 2.0]],
                    [[1.0, 0.0], [1.5, 0.3]]),
}


@pytest.mark.parametrize("name", sorted(KL_PAIRS))
def test_kl_against_torch(name):
    torch = pytest.importorskip("torch")
    import torch.distributions as TD
    ctor, pp, qp = KL_PAIRS[name]
    mp, mq = [t64(x, True) for x in pp], [t64(x, True) for x in qp]
    tp, tq = ([torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in ps] for ps in (pp, qp))
    km = D.kl_divergence(ctor(D)(*mp), ctor(D)(*mq))
    kt = TD.kl_divergence(ctor(TD)(*tp), ctor(TD)(*tq))
    np.testing.assert_allclose(npy(km), kt.detach().numpy(), rtol=1e-9, atol=1e-12)
    km.sum().backward()
    kt.sum().backward()
    for a, b in zip(mp + mq, tp + tq):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-7, atol=1e-10)


def test_gamma_sample_gradient_against_torch():
    torch = pytest.importorskip("torch")
    from minidl.distributions._gamma import gamma_sample_grad
    a = np.array([0.05, 0.3, 1.0, 2.5, 10.0, 50.0, 500.0])
    x = np.array([1e-3, 0.1, 2.0, 1.0, 12.0, 45.0, 520.0])
    want = torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy()
    np.testing.assert_allclose(gamma_sample_grad(a, x), want, rtol=5e-4)


def test_transformed_distributions_against_torch():
    torch = pytest.importorskip("torch")
    import torch.distributions as TD
    value = [0.3, -0.6]
    for build in (lambda P, m, s: P.TransformedDistribution(P.Normal(m, s), [P.transforms.TanhTransform()]),
                  lambda P, m, s: P.TransformedDistribution(P.Normal(m, s), [P.transforms.AffineTransform(0.5, -2.0),
                                                                             P.transforms.SigmoidTransform()])):
        mp = [t64([0.3, -1.0], True), t64([0.5, 2.0], True)]
        tp = [torch.tensor([0.3, -1.0], dtype=torch.float64, requires_grad=True),
              torch.tensor([0.5, 2.0], dtype=torch.float64, requires_grad=True)]
        v = [abs(x) for x in value]
        lm = build(D, *mp).log_prob(t64(v))
        lt = build(TD, *tp).log_prob(torch.tensor(v, dtype=torch.float64))
        np.testing.assert_allclose(npy(lm), lt.detach().numpy(), rtol=1e-9)
        lm.sum().backward()
        lt.sum().backward()
        for a, b in zip(mp, tp):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-7)
        np.testing.assert_allclose(npy(build(D, *mp).cdf(t64(v))),
                                   build(TD, *tp).cdf(torch.tensor(v, dtype=torch.float64)).detach().numpy())
