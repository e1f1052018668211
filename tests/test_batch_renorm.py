"""Batch Renormalization: the forward against an independent NumPy formula (reference and Numba
implementations), the closed-form backward by gradcheck (float64, random cotangents) with r and
d frozen and, where both clips hold, of the whole forward; the identities (r_max = 1, d_max = 0
is BatchNorm; unclipped training output equals eval mode), running statistics as BatchNorm's,
the module's ramp schedule, errors, empty batches and the cuda path (simulator)."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl import backends
from minidl.autograd import gradcheck
from minidl.ops.normalization import implementation
from minidl.ops.normalization.batch_renorm import BatchRenormFunction

IMPLS = ["reference", "numba"]


def naive_renorm(x, rm, rv, w, b, r_max, d_max, eps=1e-5):
    """Ioffe's Algorithm 1, written out independently of the package: (y, r, d)."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    mu, sigma_b = x.mean(axis=axes), np.sqrt(x.var(axis=axes) + eps)
    sigma = np.sqrt(rv + eps)
    r = np.clip(sigma_b / sigma, 1 / r_max, r_max)
    d = np.clip((mu - rm) / sigma, -d_max, d_max)
    xhat = (x - mu.reshape(shape)) / sigma_b.reshape(shape)
    return w.reshape(shape) * (xhat * r.reshape(shape) + d.reshape(shape)) + b.reshape(shape), r, d


def _inputs(shape=(4, 3, 2, 2), seed=0, spread=1.0):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = rng.standard_normal(shape) * rng.uniform(0.5, 2.0, (1, c) + (1,) * (len(shape) - 2)) + 0.3
    rm = rng.standard_normal(c) * 0.3 * spread
    rv = rng.uniform(0.5, 2.0, c) ** spread
    return x, rm, rv, rng.standard_normal(c), rng.standard_normal(c)


def _t(a, dtype=np.float64, grad=False):
    return md.tensor(np.asarray(a, dtype=dtype), requires_grad=grad)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float32, 2e-5)])
@pytest.mark.parametrize("shape", [(4, 3, 2, 2), (8, 5), (3, 4, 6), (6, 40, 5, 5)])
def test_forward_matches_ioffes_formula(impl, dtype, tol, shape):
    x, rm, rv, w, b = _inputs(shape, spread=3.0)      # a spread that clips some channels and not others
    want, r, d = naive_renorm(x, rm, rv, w, b, 1.5, 0.5)
    assert (np.abs(r) == 1.5).any() or (np.abs(d) == 0.5).any()
    with implementation(impl):
        y = F.batch_renorm(_t(x, dtype), _t(rm, dtype), _t(rv, dtype), _t(w, dtype), _t(b, dtype), True, 0.0,
                           1e-5, 1.5, 0.5)
    assert y.dtype == dtype
    np.testing.assert_allclose(y.numpy(), want, rtol=tol, atol=tol)


def _frozen(r, d, rm, rv):
    """The layer as a function of (x, weight, bias) with r and d given: what the backward differentiates."""
    def f(x, w, b):
        return BatchRenormFunction.apply(x, w, b, _t(rm), _t(rv), 3.0, 5.0, 0.0, 1e-5, (r, d))
    return f


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", [(4, 3, 2, 2), (6, 3), (2, 2, 5)])
def test_gradcheck_with_r_and_d_frozen(impl, shape):
    x, rm, rv, w, b = _inputs(shape, seed=1)
    rng = np.random.default_rng(2)
    r, d = rng.uniform(0.5, 2.0, shape[1]), rng.uniform(-1, 1, shape[1])
    with implementation(impl):
        assert gradcheck(_frozen(r, d, rm, rv), (_t(x, grad=True), _t(w, grad=True), _t(b, grad=True)), seed=3)


@pytest.mark.parametrize("impl", IMPLS)
def test_gradcheck_of_the_whole_forward_where_both_clips_hold(impl):
    # the running variance far below the batch's and the running mean far off: r = r_max and
    # d = +-d_max in every channel, so r and d really are constant and the formula is the gradient
    x, rm, rv, w, b = _inputs((4, 3, 2, 2), seed=4)
    rm, rv = np.array([5.0, -5.0, 5.0]), np.full(3, 1e-3)
    _, r, d = naive_renorm(x, rm, rv, w, b, 2.0, 1.0)
    assert np.all(r == 2.0) and np.all(np.abs(d) == 1.0)

    def f(x, w, b):   # momentum 0: the running estimates (and so r, d) stay put across evaluations
        return F.batch_renorm(x, _t(rm), _t(rv), w, b, True, 0.0, 1e-5, 2.0, 1.0)
    with implementation(impl):
        assert gradcheck(f, (_t(x, grad=True), _t(w, grad=True), _t(b, grad=True)), seed=5)


def test_unclipped_gradient_is_batchnorms_times_r_not_the_forwards_derivative():
    # unclipped, the training output equals eval mode's (x - mu) / sigma, whose derivative is
    # diagonal; Ioffe's gradient keeps BatchNorm's coupling, scaled by r
    x, rm, rv, w, b = _inputs((6, 3, 2, 2), seed=6)
    _, r, d = naive_renorm(x, rm, rv, w, b, 100.0, 100.0)
    assert np.all(r < 100) and np.all(r > 0.01)
    xt, wt = _t(x, grad=True), _t(w, grad=True)
    y = F.batch_renorm(xt, _t(rm), _t(rv), wt, _t(b), True, 0.0, 1e-5, 100.0, 100.0)
    y_eval = F.batch_norm(_t(x), _t(rm), _t(rv), _t(w), _t(b), False)
    np.testing.assert_allclose(y.detach().numpy(), y_eval.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = np.random.default_rng(7).standard_normal(x.shape)
    y.backward(_t(g))
    xb, wb = _t(x, grad=True), _t(w * r, grad=True)      # BatchNorm with weight gamma r
    F.batch_norm(xb, None, None, wb, None, True).backward(_t(g))
    np.testing.assert_allclose(xt.grad.numpy(), xb.grad.numpy(), rtol=1e-9, atol=1e-12)
    axes = (0, 2, 3)
    xhat = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + 1e-5)
    want_dw = (g * (xhat * r.reshape(1, -1, 1, 1) + d.reshape(1, -1, 1, 1))).sum(axis=axes)
    np.testing.assert_allclose(wt.grad.numpy(), want_dw, rtol=1e-9)
    assert not np.allclose(xt.grad.numpy(), g * (w / np.sqrt(rv + 1e-5)).reshape(1, -1, 1, 1))


@pytest.mark.parametrize("impl", IMPLS)
def test_with_r_max_1_and_d_max_0_it_is_batchnorm_forward_backward_and_running_stats(impl):
    x, rm, rv, w, b = _inputs((5, 3, 3, 3), seed=8)
    g = np.random.default_rng(9).standard_normal(x.shape)
    grads, runs = [], []
    with implementation(impl):
        for fn in (lambda *a: F.batch_renorm(*a, True, 0.1, 1e-5, 1.0, 0.0),
                   lambda *a: F.batch_norm(*a, True, 0.1, 1e-5)):
            xt, wt, bt, rmt, rvt = _t(x, grad=True), _t(w, grad=True), _t(b, grad=True), _t(rm), _t(rv)
            y = fn(xt, rmt, rvt, wt, bt)
            y.backward(_t(g))
            grads.append([y.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()])
            runs.append([rmt.numpy(), rvt.numpy()])
    for a, bn in zip(grads[0] + runs[0], grads[1] + runs[1]):
        np.testing.assert_allclose(a, bn, rtol=1e-10, atol=1e-12)
    assert not np.allclose(runs[0][0], rm)     # the running estimates moved


def test_module_ramps_the_limits_in_and_counts_steps():
    m = nn.BatchRenorm2d(3, warmup_steps=2, ramp_steps=4, r_max=3.0, d_max=5.0)
    got = [m.limits(s) for s in range(8)]
    assert got[:2] == [(1.0, 0.0), (1.0, 0.0)]
    assert got[2] == (1.5, 1.25) and got[5] == (3.0, 5.0) and got[7] == (3.0, 5.0)
    assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(got, got[1:]))
    x = md.tensor(np.random.default_rng(0).standard_normal((4, 3, 2, 2)).astype(np.float32))
    for _ in range(3):
        m(x)
    assert int(m.num_batches_tracked.item()) == 3 and m.limits() == (2.0, 2.5)
    assert nn.BatchRenorm2d(3).limits() == (3.0, 5.0)          # no schedule: the final limits at once
    assert "r_max=3, d_max=5, warmup_steps=2, ramp_steps=4" in repr(m)


def test_module_training_is_renorm_and_eval_is_batchnorm_with_the_running_statistics():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((8, 4)) * 3 + 1).astype(np.float32)
    m = nn.BatchRenorm1d(4, momentum=0.5, r_max=1.2, d_max=0.1)
    rm, rv = m.running_mean.numpy().copy(), m.running_var.numpy().copy()
    y = m(md.tensor(x))
    want, _, _ = naive_renorm(x.astype(np.float64), rm, rv, np.ones(4), np.zeros(4), 1.2, 0.1)
    np.testing.assert_allclose(y.detach().numpy(), want, rtol=1e-5, atol=1e-5)
    bn = nn.BatchNorm1d(4, momentum=0.5)
    bn(md.tensor(x))
    np.testing.assert_allclose(m.running_mean.numpy(), bn.running_mean.numpy(), rtol=1e-6)
    np.testing.assert_allclose(m.running_var.numpy(), bn.running_var.numpy(), rtol=1e-6)
    m.eval()
    bn.eval()
    np.testing.assert_allclose(m(md.tensor(x)).detach().numpy(), bn(md.tensor(x)).detach().numpy(), rtol=1e-6)
    assert int(m.num_batches_tracked.item()) == 1             # eval does not count


def test_trains_a_tiny_model():
    rng = np.random.default_rng(0)
    x = md.tensor(rng.standard_normal((32, 6)).astype(np.float32))
    y = md.tensor((rng.standard_normal(32) > 0).astype(np.int64))
    md.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchRenorm1d(16, momentum=0.1), nn.ReLU(), nn.Linear(16, 2))
    opt = md.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(30):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]


def test_errors_name_what_was_expected():
    x = md.tensor(np.zeros((4, 3, 2, 2), np.float32))
    rm, rv = md.zeros(3), md.ones(3)
    with pytest.raises(ValueError, match="running_mean and running_var must be given"):
        F.batch_renorm(x, None, rv, training=True)
    with pytest.raises(ValueError, match=r"expected running_var of shape \(3,\)"):
        F.batch_renorm(x, rm, md.ones(4), training=True)
    with pytest.raises(ValueError, match="r_max to be a number >= 1"):
        F.batch_renorm(x, rm, rv, training=True, r_max=0.5)
    with pytest.raises(ValueError, match="d_max to be a number >= 0"):
        F.batch_renorm(x, rm, rv, training=True, d_max=-1)
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):
        F.batch_renorm(md.zeros(1, 3), rm, rv, training=True)
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchRenorm2d(3)(md.zeros(4, 3))
    with pytest.raises(ValueError, match="r_max must be a number >= 1"):
        nn.BatchRenorm1d(3, r_max=0.9)
    with pytest.raises(ValueError, match="ramp_steps must be a non-negative int"):
        nn.BatchRenorm1d(3, ramp_steps=-2)


@pytest.mark.parametrize("impl", IMPLS)
def test_an_empty_batch_gives_an_empty_output_zero_gradients_and_leaves_the_estimates(impl):
    x = _t(np.zeros((0, 3, 2, 2)), grad=True)
    w, b, rm, rv = _t(np.ones(3), grad=True), _t(np.zeros(3), grad=True), _t(np.full(3, 0.5)), _t(np.full(3, 2.0))
    with implementation(impl):
        y = F.batch_renorm(x, rm, rv, w, b, True, 0.1)
        y.sum().backward()
    assert y.shape == (0, 3, 2, 2)
    assert np.array_equal(w.grad.numpy(), np.zeros(3)) and np.array_equal(b.grad.numpy(), np.zeros(3))
    assert np.array_equal(rm.numpy(), np.full(3, 0.5)) and np.array_equal(rv.numpy(), np.full(3, 2.0))


def test_cuda_matches_the_cpu():
    try:
        backends.get("cuda")
    except RuntimeError as exc:   # pragma: no cover
        pytest.skip(f"cuda device unavailable: {exc}")
    x, rm, rv, w, b = _inputs((4, 3, 2, 2), seed=10, spread=3.0)
    g = np.random.default_rng(11).standard_normal(x.shape)
    out = {}
    for device in ("cpu", "cuda"):
        xt = md.tensor(x, requires_grad=True, device=device)
        wt = md.tensor(w, requires_grad=True, device=device)
        bt = md.tensor(b, requires_grad=True, device=device)
        rmt, rvt = md.tensor(rm, device=device), md.tensor(rv, device=device)
        y = F.batch_renorm(xt, rmt, rvt, wt, bt, True, 0.1, 1e-5, 1.5, 0.5)
        y.backward(md.tensor(g, device=device))
        out[device] = [a.to("cpu").detach().numpy() for a in (y, xt.grad, wt.grad, bt.grad, rmt, rvt)]
    for a, c in zip(out["cuda"], out["cpu"]):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)
