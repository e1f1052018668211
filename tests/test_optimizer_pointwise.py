"""The pointwise ops custom optimizers and EMA code are written with: add/sub with ``alpha=``,
addcmul, addcdiv, lerp (out of place and in place), clamp_min/clamp_max; against PyTorch's
values, gradients and in-place rules."""
import numpy as np
import pytest

import minidl as md
from minidl.autograd import gradcheck

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
X, Y, Z = (RNG.standard_normal((3, 4)).astype(np.float32) for _ in range(3))
W = RNG.uniform(-0.2, 1.2, (3, 4)).astype(np.float32)


def _pair(a):
    return md.tensor(a), torch.tensor(a)


def _close(mine, theirs, rtol=1e-6):
    np.testing.assert_allclose(mine.numpy(), theirs.detach().numpy(), rtol=rtol, atol=1e-7)


# add / sub with alpha -----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["add", "sub"])
@pytest.mark.parametrize("alpha", [1, 2, -0.5, 0.1])
def test_alpha_scales_the_other_operand(name, alpha):
    (a, ta), (b, tb) = _pair(X), _pair(Y[0])
    _close(getattr(a, name)(b, alpha=alpha), getattr(ta, name)(tb, alpha=alpha))
    _close(getattr(md, name)(a, b, alpha=alpha), getattr(torch, name)(ta, tb, alpha=alpha))
    _close(getattr(a, name)(3.0, alpha=alpha), getattr(ta, name)(3.0, alpha=alpha))
    _close(md.subtract(a, b, alpha=alpha), torch.subtract(ta, tb, alpha=alpha))


def test_alpha_gradients():
    a, b = (md.tensor(RNG.standard_normal((3, 4)), requires_grad=True) for _ in range(2))
    assert gradcheck(lambda x, y: x.add(y, alpha=2.5), (a, b))
    assert gradcheck(lambda x, y: md.sub(x, y[0], alpha=-0.7), (a, b))


def test_alpha_is_checked_against_integer_results_as_pytorch():
    i = md.tensor([1, 2])
    np.testing.assert_array_equal(i.add(i, alpha=3).numpy(), [4, 8])
    np.testing.assert_allclose(md.tensor([1.0, 2.0]).add(i, alpha=0.5).numpy(), [1.5, 3.0])
    with pytest.raises(RuntimeError, match="argument alpha must not be a floating point number"):
        i.add(i, alpha=0.5)
    with pytest.raises(RuntimeError, match="argument alpha must not be a floating point number"):
        i.sub_(1, alpha=1.0)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
        md.tensor([1.0]).add(md.tensor([1.0]), alpha=True)


def test_in_place_add_and_sub_keep_alpha():
    (a, ta), (b, tb) = _pair(X.copy()), _pair(Y)
    out = a.add_(b, alpha=0.3)
    assert out is a
    ta.add_(tb, alpha=0.3)
    a.sub_(b, alpha=2)
    ta.sub_(tb, alpha=2)
    _close(a, ta)


# addcmul / addcdiv ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
@pytest.mark.parametrize("value", [1, 0.5, -2e-3])
def test_addc_values_match_pytorch(name, value):
    (a, ta), (b, tb), (c, tc) = _pair(X), _pair(Y), _pair(np.abs(Z[:1]) + 0.1)
    _close(getattr(md, name)(a, b, c, value=value), getattr(torch, name)(ta, tb, tc, value=value))
    _close(getattr(a, name)(b, c, value=value), getattr(ta, name)(tb, tc, value=value))


@pytest.mark.parametrize("name", ["addcmul", "addcdiv"])
def test_addc_gradients(name):
    a, b = (md.tensor(RNG.standard_normal((2, 3)), requires_grad=True) for _ in range(2))
    c = md.tensor(RNG.uniform(0.5, 2.0, (1, 3)), requires_grad=True)
    assert gradcheck(lambda x, y, z: getattr(md, name)(x, y, z, value=-0.7), (a, b, c))


@pytest.mark.parametrize("name", ["addcmul_", "addcdiv_"])
def test_addc_in_place_is_an_adam_step(name):
    """exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2) and p.addcdiv_(m, denom, value=-lr)."""
    (p, tp), (m, tm), (d, td) = _pair(X.copy()), _pair(Y), _pair(np.abs(Z) + 1e-3)
    view = p[1]
    with md.no_grad():
        out = getattr(p, name)(m, d, value=-1e-3)
    assert out is p and p._version == 1
    getattr(tp, name)(tm, td, value=-1e-3)
    _close(p, tp)
    _close(view, tp[1])


def test_addcdiv_of_integer_tensors_is_refused_as_pytorch():
    i = md.tensor([1, 2])
    with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
        md.addcdiv(i, i, i)


# lerp ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("weight", [0.0, 0.25, 0.5, 0.999, 1.0, -0.3, 1.7])
def test_lerp_with_a_float_weight_matches_pytorch(weight):
    (a, ta), (b, tb) = _pair(X), _pair(Y)
    _close(md.lerp(a, b, weight), torch.lerp(ta, tb, weight))
    _close(a.lerp(b, weight), ta.lerp(tb, weight))
    np.testing.assert_array_equal(md.lerp(a, b, 1.0).numpy(), Y)      # the end exactly, as PyTorch


def test_lerp_with_a_tensor_weight_broadcasts():
    (a, ta), (b, tb), (w, tw) = _pair(X), _pair(Y[:1]), _pair(W)
    _close(md.lerp(a, b, w), torch.lerp(ta, tb, tw))


def test_lerp_gradients_equal_pytorchs_and_pass_gradcheck():
    a, b, w = (md.tensor(v.astype(np.float64), requires_grad=True) for v in (X, Y, W))
    assert gradcheck(md.lerp, (a, b, w))
    assert gradcheck(lambda x, y: md.lerp(x, y, 0.8), (a, b))
    assert gradcheck(lambda x, y: x.lerp(y, 0.2), (a, b))
    ta, tb, tw = (torch.tensor(v.astype(np.float64), requires_grad=True) for v in (X, Y, W))
    g = RNG.standard_normal((3, 4))
    md.lerp(a, b, w).backward(md.tensor(g))
    torch.lerp(ta, tb, tw).backward(torch.tensor(g))
    for mine, theirs in ((a, ta), (b, tb), (w, tw)):
        np.testing.assert_allclose(mine.grad.numpy(), theirs.grad.numpy(), rtol=1e-12)


def test_lerp_in_place_is_an_ema_update():
    (ema, tema), (p, tp) = _pair(X.copy()), _pair(Y)
    with md.no_grad():
        for _ in range(3):
            assert ema.lerp_(p, 1 - 0.9) is ema
    for _ in range(3):
        tema.lerp_(tp, 1 - 0.9)
    assert ema._version == 3
    _close(ema, tema)
    w = md.tensor(W)
    ema.lerp_(p, w)
    tema.lerp_(tp, torch.tensor(W))
    _close(ema, tema)


def test_in_place_lerp_follows_the_in_place_rules():
    leaf = md.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        leaf.lerp_(md.tensor(Y), 0.5)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        md.tensor(X[0]).lerp_(md.tensor(Y), 0.5)
    a = md.tensor(X.astype(np.float64), requires_grad=True)
    b = md.tensor(Y.astype(np.float64), requires_grad=True)
    x = a * 2
    x.lerp_(b, 0.3)
    x.backward(md.ones_like(x))
    np.testing.assert_allclose(a.grad.numpy(), 2 * 0.7)
    np.testing.assert_allclose(b.grad.numpy(), 0.3)


# clamp_min / clamp_max ----------------------------------------------------------------------------
def test_clamp_min_and_max_at_both_levels():
    a, ta = _pair(X)
    _close(a.clamp_min(0.1), ta.clamp_min(0.1))
    _close(md.clamp_max(a, -0.2), torch.clamp_max(ta, -0.2))
    b = md.tensor(X.copy())
    assert b.clamp_min_(0.0) is b and b.min().item() >= 0
    x = md.tensor(RNG.standard_normal(5) * 2, requires_grad=True)
    assert gradcheck(lambda t: t.clamp_min(0.5) + md.clamp_max(t, -0.5), (x,))
