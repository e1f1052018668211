"""hardswish, hardsigmoid, celu, softmin and gumbel_softmax: NumPy references and gradcheck
(float64, random cotangents) through OpSpec, PyTorch as the oracle for values and gradients
(at the kinks too), the modules, inplace=, a few values by hand, and bad input."""
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck
from minidl.testing import OpSpec, check_forward, check_gradcheck, forward_cases, spec_id


def _hardsigmoid(x):
    return np.clip(x + 3, 0, 6) / 6


def _softmax(z, axis):
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


SPECS = [
    OpSpec("hardswish", F.hardswish, lambda x: x * _hardsigmoid(x), lambda rng: (rng.standard_normal((3, 5)) * 4,)),
    OpSpec("hardsigmoid", F.hardsigmoid, _hardsigmoid, lambda rng: (rng.standard_normal((3, 5)) * 4,)),
    OpSpec("celu", lambda x: F.celu(x, alpha=0.5), lambda x: np.where(x > 0, x, 0.5 * np.expm1(x / 0.5)),
           lambda rng: (rng.standard_normal((3, 5)) * 2,)),
    OpSpec("softmin_dim1", lambda x: F.softmin(x, 1), lambda x: _softmax(-x, 1),
           lambda rng: (rng.standard_normal((3, 5)),)),
    OpSpec("softmin_dim0", lambda x: F.softmin(x, dim=0), lambda x: _softmax(-x, 0),
           lambda rng: (rng.standard_normal((4, 2, 3)),)),
]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(SPECS))
def test_forward_matches_numpy_reference(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("spec", SPECS, ids=spec_id)
def test_gradcheck(spec):
    assert check_gradcheck(spec)


def test_values_by_hand():
    x = md.tensor([-4.0, -3.0, 0.0, 1.0, 3.0, 4.0], dtype=md.float64)
    np.testing.assert_allclose(F.hardswish(x).numpy(), [0, 0, 0, 2 / 3, 3, 4])
    np.testing.assert_allclose(F.hardsigmoid(x).numpy(), [0, 0, 0.5, 2 / 3, 1, 1])
    np.testing.assert_allclose(F.celu(md.tensor([-1.0, 2.0], dtype=md.float64), alpha=2.0).numpy(),
                               [2 * (np.exp(-0.5) - 1), 2.0])
    np.testing.assert_allclose(F.softmin(md.tensor([0.0, np.log(3.0)], dtype=md.float64), 0).numpy(), [0.75, 0.25])


# PyTorch as the oracle ---------------------------------------------------------------------

# the kinks of hardswish / hardsigmoid (-3, 3), celu's 0, and values far out
EDGES = np.array([-800.0, -30.0, -4.0, -3.0, -2.999, -1.0, -0.5, 0.0, 0.5, 1.0, 2.999, 3.0, 4.0, 25.0])
# PyTorch rounds some constants to float32 even in float64 (hardsigmoid's 1/6, celu's 1/alpha),
# so where those enter, agreement is to float32's precision (amplified by e**(x/alpha) far out)
TORCH_CALLS = [("hardswish", {}, 1e-12), ("hardsigmoid", {}, 1e-7), ("celu", {}, 1e-12),
               ("celu", {"alpha": 0.3}, 1e-5), ("celu", {"alpha": 2.5}, 1e-12)]


@pytest.mark.parametrize("name,kw,rtol", TORCH_CALLS, ids=[f"{n}{kw}" for n, kw, _ in TORCH_CALLS])
def test_matches_torch_values_and_gradients(name, kw, rtol):
    torch = pytest.importorskip("torch")
    x, tx = md.tensor(EDGES, requires_grad=True), torch.tensor(EDGES, requires_grad=True)
    y, ty = getattr(F, name)(x, **kw), getattr(torch.nn.functional, name)(tx, **kw)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=rtol, atol=1e-300)
    v = np.random.default_rng(0).standard_normal(EDGES.size)
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=rtol, atol=1e-300)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmin_matches_torch(dim):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(1).standard_normal((3, 4)) * 5
    x, tx = md.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = F.softmin(x, dim), torch.nn.functional.softmin(tx, dim)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12)
    v = np.random.default_rng(2).standard_normal(a.shape)
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-15)


def test_softmin_without_dim_warns_and_picks_torchs_dim():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal((2, 3, 4))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin"):
        y = F.softmin(md.tensor(a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = torch.nn.functional.softmin(torch.tensor(a)).numpy()
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-12)


def test_softmin_dtype_computes_in_that_dtype():
    x = md.tensor([1.0, 2.0, 3.0])
    y = F.softmin(x, 0, dtype=md.float64)
    assert y.dtype == md.float64 and x.dtype == md.float32
    np.testing.assert_allclose(y.numpy(), _softmax(-np.array([1.0, 2.0, 3.0]), 0), rtol=1e-12)


# gumbel_softmax ------------------------------------------------------------------------------

def _gumbel(seed, shape):
    """The noise gumbel_softmax draws after md.manual_seed(seed): -log(E), E ~ Exponential(1)."""
    return -np.log(np.random.default_rng(seed).standard_exponential(shape))


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("tau,dim", [(1.0, -1), (0.3, 0)])
def test_gumbel_softmax_matches_torch_given_the_same_noise(hard, tau, dim):
    torch = pytest.importorskip("torch")
    logits = np.random.default_rng(4).standard_normal((3, 5))
    g = _gumbel(7, logits.shape)
    md.manual_seed(7)
    x = md.tensor(logits, requires_grad=True)
    y = F.gumbel_softmax(x, tau=tau, hard=hard, dim=dim)
    tx = torch.tensor(logits, requires_grad=True)
    soft = ((tx + torch.tensor(g)) / tau).softmax(dim)   # PyTorch's own body, with our noise
    if hard:
        one_hot = torch.zeros_like(soft).scatter_(dim, soft.max(dim, keepdim=True)[1], 1.0)
        ty = one_hot - soft.detach() + soft
    else:
        ty = soft
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-15)
    if hard:
        assert set(np.unique(y.detach().numpy())) <= {0.0, 1.0} and np.all(y.detach().numpy().sum(axis=dim) == 1)
    v = np.random.default_rng(5).standard_normal(logits.shape)
    y.backward(md.tensor(v))
    ty.backward(torch.tensor(v))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-15)


def test_gumbel_softmax_gradcheck_with_fixed_noise():
    x = md.tensor(np.random.default_rng(6).standard_normal((2, 4)), requires_grad=True)

    def f(x):
        md.manual_seed(11)   # the same noise at every evaluation
        return F.gumbel_softmax(x, tau=0.7)
    assert gradcheck(f, (x,))


def test_gumbel_softmax_hard_passes_the_soft_gradient_straight_through():
    # the one-hot is piecewise constant (finite differences see 0): its gradient is by definition the soft one's
    a = np.random.default_rng(6).standard_normal((2, 4))
    v = md.tensor(np.random.default_rng(8).standard_normal((2, 4)))
    grads = []
    for hard in (False, True):
        x = md.tensor(a, requires_grad=True)
        md.manual_seed(11)
        F.gumbel_softmax(x, tau=0.7, hard=hard).backward(v)
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-15)


def test_gumbel_softmax_draws_from_minidls_generator_and_samples_the_softmax():
    logits = md.tensor(np.log([0.1, 0.2, 0.7]))
    md.manual_seed(0)
    a = F.gumbel_softmax(logits, hard=True).numpy()
    md.manual_seed(0)
    assert np.array_equal(F.gumbel_softmax(logits, hard=True).numpy(), a)
    counts = sum(F.gumbel_softmax(logits, hard=True).numpy() for _ in range(4000))
    np.testing.assert_allclose(counts / 4000, [0.1, 0.2, 0.7], atol=0.03)   # the Gumbel-max trick


def test_gumbel_softmax_eps_is_deprecated():
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        F.gumbel_softmax(md.randn(2, 3), eps=1e-5)


# modules and inplace -------------------------------------------------------------------------

MODULES = [("Hardswish", ()), ("Hardswish", (True,)), ("Hardsigmoid", ()), ("Hardsigmoid", (True,)),
           ("CELU", ()), ("CELU", (0.5, True)), ("Softmin", (1,)), ("Softmin", (-1,))]


@pytest.mark.parametrize("name,args", MODULES, ids=[f"{n}{a}" for n, a in MODULES])
def test_modules_match_torch_output_and_repr(name, args):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((2, 3, 4)) * 3
    ours, theirs = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert repr(ours) == repr(theirs)
    np.testing.assert_allclose(ours(md.tensor(a)).numpy(), theirs(torch.tensor(a)).numpy(), rtol=1e-12)


INPLACE = {"hardswish": (), "hardsigmoid": (), "celu": (0.7,)}
X = np.array([[-4.0, -3.0, -0.5, 0.0, 0.3, 3.5], [3.0, -7.0, 0.9, -1.1, 6.5, -0.01]])


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_overwrites_the_input_with_the_out_of_place_gradient(name):
    args = INPLACE[name]
    x = md.tensor(X.copy())
    out = getattr(F, name)(x, *args, inplace=True)
    assert out is x and x._version == 1
    np.testing.assert_allclose(x.numpy(), getattr(F, name)(md.tensor(X), *args).numpy(), rtol=1e-12)
    w = md.tensor(np.random.default_rng(0).uniform(0.5, 1.5, X.shape), requires_grad=True)
    assert gradcheck(lambda w: getattr(F, name)(w * md.tensor(X), *args, inplace=True), (w,))
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        getattr(F, name)(md.tensor(X, requires_grad=True), *args, inplace=True)


def test_celu_underscore_form_and_module_inplace():
    x = md.tensor(X.copy())
    assert F.celu_(x, 0.7) is x
    np.testing.assert_allclose(x.numpy(), np.where(X > 0, X, 0.7 * np.expm1(X / 0.7)), rtol=1e-6)
    y = md.tensor(X.copy())
    assert nn.Hardswish(inplace=True)(y) is y


# bad input -----------------------------------------------------------------------------------

@pytest.mark.parametrize("call,exc,match", [
    (lambda: F.celu(md.randn(3), alpha=0.0), RuntimeError, "alpha cannot be 0 for CELU"),
    (lambda: F.hardswish(md.tensor([1, 2])), NotImplementedError, "hardswish: .*int64; expected a floating"),
    (lambda: F.hardsigmoid([1.0]), TypeError, "expected input to be a Tensor, got list"),
    (lambda: F.softmin(md.tensor([1, 2]), 0), NotImplementedError, "softmin: .*int64"),
    (lambda: F.softmin(md.randn(2, 3), 2), IndexError, "dim 2 out of range"),
    (lambda: F.gumbel_softmax(md.tensor([1, 2])), NotImplementedError, "gumbel_softmax: .*int64"),
])
def test_bad_input_raises_naming_expected_and_got(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
