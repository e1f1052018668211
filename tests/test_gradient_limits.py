"""Gradients at the points where the textbook formula divides 0 by 0: the value PyTorch picks.

norm, std and pow have derivatives with a 1 / out or log(a) factor; at an all-zero vector, a
constant row or a zero base those are infinite while the other factor is 0, and the product
is taken to be 0 (a subgradient), not NaN. Where the forward itself is undefined (var of one
element with the unbiased correction) the gradient is NaN or infinite, never an exception.
"""
import warnings

import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck


def _grad(f, x):
    t = md.tensor(np.array(x, dtype=np.float64), requires_grad=True)
    out = f(t)
    out.backward(md.tensor(np.random.default_rng(0).standard_normal(out.shape)))
    return t.grad.numpy()


@pytest.mark.parametrize("f", [lambda t: t.norm(), lambda t: md.norm(t, dim=1), lambda t: md.norm(t, p=3, dim=0),
                               lambda t: md.norm(t, p=0.5, dim=1), lambda t: md.norm(t, p=1)],
                         ids=["fro", "dim", "p3", "p0.5", "p1"])
def test_norm_of_zeros_has_zero_gradient(f):
    np.testing.assert_array_equal(_grad(f, np.zeros((2, 3))), 0)


def test_norm_with_a_zero_row_keeps_the_other_rows_gradient():
    x = np.array([[0.0, 0.0], [3.0, 4.0]])
    g = _grad(lambda t: md.norm(t, dim=1), x)
    gout = np.random.default_rng(0).standard_normal(2)
    np.testing.assert_array_equal(g[0], 0)
    np.testing.assert_allclose(g[1], gout[1] * x[1] / 5.0)


def test_p_norm_below_one_is_zero_at_zero_entries():
    g = _grad(lambda t: md.norm(t, p=0.5), [0.0, 4.0])
    assert g[0] == 0 and np.isfinite(g[1]) and g[1] != 0


@pytest.mark.parametrize("p", [2, 3, 1.5, 0.7])
def test_norm_gradchecks_away_from_zero(p):
    x = md.tensor(np.random.default_rng(1).standard_normal((3, 4)), requires_grad=True)
    assert gradcheck(lambda t: md.norm(t, p=p, dim=1, keepdim=True), (x,))


def test_std_of_a_constant_row_has_zero_gradient():
    g = _grad(lambda t: t.std(dim=1), np.array([[2.0, 2.0, 2.0], [1.0, 2.0, 4.0]]))
    np.testing.assert_array_equal(g[0], 0)
    assert np.all(np.isfinite(g[1])) and np.any(g[1] != 0)


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_std_and_var_take_a_correction(correction):
    x = np.random.default_rng(2).standard_normal((3, 5))
    t = md.tensor(x, requires_grad=True)
    want = ((x - x.mean(1, keepdims=True)) ** 2).sum(1) / (5 - correction)
    np.testing.assert_allclose(t.var(1, correction=correction).detach().numpy(), want)
    np.testing.assert_allclose(md.std(t, 1, correction=correction).detach().numpy(), np.sqrt(want))
    v, m = md.var_mean(t, 1, correction=correction)
    np.testing.assert_allclose(v.detach().numpy(), want)
    np.testing.assert_allclose(m.detach().numpy(), x.mean(1))
    assert gradcheck(lambda a: a.std(1, correction=correction), (t,))
    assert gradcheck(lambda a: md.var(a, 1, correction=correction), (t,))


def test_var_with_too_few_elements_gives_a_non_finite_gradient_not_an_exception():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for f in (lambda t: t.var(0), lambda t: t.std(0), lambda t: t.var(1, correction=3)):
            assert not np.any(np.isfinite(_grad(f, [[2.0, 3.0, 4.0]])))   # 0 / 0 or x / 0, as PyTorch


def test_correction_must_be_a_non_negative_number():
    with pytest.raises(TypeError, match="correction must be a number >= 0, got -1"):
        md.randn(3).var(correction=-1)


def test_zero_power_and_zero_base_have_zero_gradients():
    x = md.tensor(np.array([0.0, 2.0]), requires_grad=True)
    (x ** 0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])
    base, e = md.zeros(3, dtype=md.float64, requires_grad=True), md.tensor([0.0, 1.5, -1.0], requires_grad=True)
    with np.errstate(divide="ignore"):
        md.pow(base, e).sum().backward()
    np.testing.assert_array_equal(e.grad.numpy()[:2], 0)      # 0**b for b >= 0 does not move with b
    assert not np.isfinite(e.grad.numpy()[2])                 # 0**-1 is inf: no limit there


def test_the_same_gradients_as_pytorch():
    torch = pytest.importorskip("torch")
    cases = [(lambda m, t: m.norm(t), np.zeros((2, 3))),
             (lambda m, t: m.norm(t, p=3, dim=1), np.array([[0.0, 0.0], [1.0, -2.0]])),
             (lambda m, t: t.std(1), np.array([[1.0, 1.0], [1.0, 3.0]])),
             (lambda m, t: m.pow(t, 0.0), np.array([0.0, 1.0])),
             (lambda m, t: m.pow(m.zeros(2, dtype=m.float64), t), np.array([0.0, 2.0]))]
    for f, x in cases:
        a, b = md.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        f(md, a).sum().backward()
        f(torch, b).sum().backward()
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())


def test_clamp_sends_the_gradient_to_whichever_bound_is_the_result():
    x = md.tensor([0.5, -2.0, 3.0, 0.0], requires_grad=True)
    lo = md.tensor([0.0, 0.0, 0.0, 1.0], requires_grad=True)
    hi = md.tensor([1.0, 1.0, 1.0, -1.0], requires_grad=True)       # the last: lo > hi, so y = hi
    y = x.clamp(min=lo, max=hi)
    np.testing.assert_array_equal(y.detach().numpy(), [0.5, 0.0, 1.0, -1.0])
    y.backward(md.tensor([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(lo.grad.numpy(), [0.0, 2.0, 0.0, 0.0])
    np.testing.assert_array_equal(hi.grad.numpy(), [0.0, 0.0, 3.0, 4.0])


def test_clamp_bound_gradients_sum_back_to_broadcast_shapes():
    rng = np.random.default_rng(3)
    x = md.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    lo = md.tensor(rng.standard_normal(4) - 1, requires_grad=True)
    hi = md.tensor(rng.standard_normal((3, 1)) + 1, requires_grad=True)
    assert gradcheck(lambda a, b, c: a.clamp(b, c), (x, lo, hi))
    assert lo.grad is None and hi.grad is None   # gradcheck works on copies
    y = x.clamp(lo, hi)
    y.sum().backward()
    assert lo.grad.shape == (4,) and hi.grad.shape == (3, 1)
    xa, la, ha = x.detach().numpy(), lo.detach().numpy(), hi.detach().numpy()
    np.testing.assert_array_equal(x.grad.numpy() + (xa < la) + (xa > ha), 1)
