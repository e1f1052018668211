"""Losses, pooling, padding and interpolation against PyTorch's behaviour: values, gradients,
dtypes and error types. The first tests check by hand-computed values (no torch needed); the
ones at the end compare with torch when it is installed."""
import warnings

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F


def t64(a, grad=False):
    x = md.tensor(np.asarray(a, dtype=np.float64))
    return x.requires_grad_(True) if grad else x


# error types: PyTorch raises RuntimeError; minidl's are also the ValueError they used to be -----------------

@pytest.mark.parametrize("call", [
    lambda x: F.max_pool2d(x, 2, 2, 2),                      # padding over half the kernel
    lambda x: F.max_pool2d(x, 9),                            # output of size 0
    lambda x: F.max_pool2d(x[0, 0], 2),                      # 2-D input
    lambda x: F.max_pool2d(x, 2, 0),                         # stride 0
    lambda x: F.avg_pool2d(x, 2, 2, 2),
    lambda x: F.avg_pool2d(x, 2, divisor_override=0),
    lambda x: F.adaptive_avg_pool2d(x[0, 0], 2),
    lambda x: F.max_pool1d(x[0], 2, 2, 2),
    lambda x: F.avg_pool1d(x[0], 2, 2, 2),
    lambda x: F.cross_entropy(x[:, :, 0, 0], md.tensor(np.zeros(2, np.int64)), weight=md.ones(4)),
    lambda x: F.nll_loss(x[:, :, 0, 0], md.tensor(np.zeros(2, np.int64)), weight=md.ones(2)),
    lambda x: F.cross_entropy(x[:, :, 0, 0], md.tensor(np.zeros(2, np.int64)), label_smoothing=1.5),
    lambda x: F.cross_entropy(x[:, :, 0, 0], x[:, :2, 0, 0]),   # probabilities of the wrong shape
], ids=["mp_pad", "mp_small", "mp_2d", "mp_stride0", "ap_pad", "ap_div0", "aap_2d", "mp1_pad", "ap1_pad",
        "ce_weight", "nll_weight", "ce_smoothing", "ce_probs_shape"])
def test_bad_arguments_raise_runtime_error_as_pytorch(call):
    x = t64(np.random.RandomState(0).randn(2, 3, 7, 8))
    with pytest.raises(RuntimeError) as info:
        call(x)
    assert isinstance(info.value, ValueError)


# pointwise losses -----------------------------------------------------------------------------------------

def test_bce_target_gradient_is_minus_logit_unclamped():
    p = t64([0.0, 1.0, 0.25, 0.5])
    y = t64([0.0, 1.0, 1.0, 0.5], grad=True)
    F.binary_cross_entropy(p, y, reduction="sum").backward()
    # d/dy = log(1 - p) - log(p); PyTorch does not clamp these logs (its loss's logs are clamped at -100)
    np.testing.assert_array_equal(y.grad.numpy(), [np.inf, -np.inf, np.log(0.75) - np.log(0.25), 0.0])


def test_kl_div_target_gradient_is_nan_at_zero_target():
    x = t64(np.log([0.2, 0.3, 0.5]), grad=True)
    y = t64([0.0, 0.4, 0.6], grad=True)
    F.kl_div(x, y, reduction="sum").backward()
    g = y.grad.numpy()
    assert np.isnan(g[0])   # 0 / 0 in the derivative of y log y, as PyTorch's xlogy
    np.testing.assert_allclose(g[1:], np.log([0.4, 0.6]) + 1 - np.log([0.3, 0.5]))
    np.testing.assert_allclose(x.grad.numpy(), [-0.0, -0.4, -0.6])


def test_kl_div_refuses_integer_targets_and_warns_on_mean():
    x = t64(np.log([[0.5, 0.5]]))
    with pytest.raises(RuntimeError, match="Integral"):
        F.kl_div(x, md.tensor(np.array([[1, 0]])), reduction="sum")
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, t64([[0.5, 0.5]]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.kl_div(x, t64([[0.5, 0.5]]), reduction="batchmean")


@pytest.mark.parametrize("loss", [lambda a, b: F.l1_loss(a, b, reduction="sum"),
                                  lambda a, b: F.smooth_l1_loss(a, b, reduction="sum", beta=0.0)],
                         ids=["l1", "smooth_l1_beta0"])
def test_l1_gradient_is_zero_at_nan_as_pytorch_sign(loss):
    x = t64([np.nan, 1.0, 0.5, -2.0], grad=True)
    out = loss(x, t64([0.5, 0.5, 0.5, 0.5]))
    assert np.isnan(out.item())
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 0.0, -1.0])


def test_elementwise_weight_of_l1_mse_huber():
    x = t64([[1.0, -2.0], [0.5, 3.0]], grad=True)
    y = t64([[0.0, 0.0], [0.0, 1.0]])
    w = t64([[1.0, 2.0], [0.5, 0.0]], grad=True)
    d = x.detach().numpy() - y.detach().numpy()
    W = w.detach().numpy()
    np.testing.assert_allclose(F.l1_loss(x, y, weight=w).item(), (W * abs(d)).sum() / W.sum())
    np.testing.assert_allclose(F.mse_loss(x, y, weight=w).item(), (W * d ** 2).sum() / W.sum())
    np.testing.assert_allclose(F.mse_loss(x, y, weight=w, reduction="none").detach().numpy(), W * d ** 2)
    hub = np.where(abs(d) < 1, 0.5 * d ** 2, abs(d) - 0.5)
    out = F.huber_loss(x, y, weight=w)
    np.testing.assert_allclose(out.item(), (W * hub).mean())   # huber's mean is over elements, not weights
    out.backward()
    np.testing.assert_allclose(w.grad.numpy(), hub / 4)        # the weight is differentiable, as PyTorch's
    np.testing.assert_allclose(x.grad.numpy(), W * np.clip(d, -1, 1) / 4)
    for f in (F.l1_loss, F.mse_loss, F.huber_loss):   # a weight must have the input's shape, not broadcast to it
        with pytest.raises(ValueError, match="same size"):
            f(x, y, weight=t64([1.0, 2.0]))


def test_mse_loss_takes_pytorch_legacy_flags():
    x, y = t64([1.0, 2.0]), t64([0.0, 0.0])
    assert F.mse_loss(x, y, size_average=False).item() == 5.0
    np.testing.assert_array_equal(F.mse_loss(x, y, reduce=False).numpy(), [1.0, 4.0])


# pooling ---------------------------------------------------------------------------------------------------

def test_adaptive_avg_pool2d_keeps_inf_and_nan_in_their_bins():
    x = np.arange(16.0).reshape(1, 1, 4, 4)
    x[0, 0, 0, 0] = np.inf
    x[0, 0, 3, 3] = np.nan
    out = F.adaptive_avg_pool2d(t64(x), 2).numpy()[0, 0]
    assert out[0, 0] == np.inf and np.isnan(out[1, 1])
    np.testing.assert_allclose([out[0, 1], out[1, 0]], [x[0, 0, :2, 2:].mean(), x[0, 0, 2:, :2].mean()])
    y = t64(np.arange(15.0).reshape(1, 1, 3, 5), grad=True)
    out = F.adaptive_avg_pool2d(y, (2, 3))   # overlapping bins: rows [0, 2), [1, 3); columns [0, 2), [1, 4), [3, 5)
    means = [y.detach().numpy()[0, 0, :2, a:b].mean() for a, b in ((0, 2), (1, 4), (3, 5))]
    np.testing.assert_allclose(out.detach().numpy()[0, 0, 0], means)
    out.sum().backward()
    rows, cols = np.array([1 / 2, 1.0, 1 / 2]), np.array([1 / 2, 1 / 2 + 1 / 3, 1 / 3, 1 / 3 + 1 / 2, 1 / 2])
    np.testing.assert_allclose(y.grad.numpy()[0, 0], rows[:, None] * cols[None, :])


# padding ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,pad,expected", [
    ("reflect", (-1, 2), [1, 2, 3, 4, 3, 2]),
    ("reflect", (2, -1), [2, 1, 0, 1, 2, 3]),
    ("reflect", (-5, 1), [3]),
    ("replicate", (-1, 2), [1, 2, 3, 4, 4, 4]),
    ("replicate", (4, -3), [0, 0, 0, 0, 0, 1]),
    ("replicate", (-2, -2), [2]),
    ("circular", (-1, 2), [1, 2, 3, 4, 1, 2]),
    ("circular", (2, -1), [2, 3, 0, 1, 2, 3]),    # wraps around the cropped input, as PyTorch
    ("circular", (4, -1), [0, 1, 2, 3, 0, 1, 2, 3]),
    ("circular", (-1, -4), []),
])
def test_negative_padding_crops_in_every_mode(mode, pad, expected):
    x = t64(np.arange(5.0).reshape(1, 1, 5), grad=True)
    out = F.pad(x, pad, mode=mode)
    np.testing.assert_array_equal(out.detach().numpy().reshape(-1), expected)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy().reshape(-1), np.bincount(np.asarray(expected, int), minlength=5))


@pytest.mark.parametrize("mode,pad", [("reflect", (-1, -4)), ("replicate", (-3, -2)), ("circular", (-3, 4)),
                                      ("circular", (-5, 1))])
def test_padding_that_leaves_nothing_to_read_raises(mode, pad):
    with pytest.raises(RuntimeError):
        F.pad(t64(np.arange(5.0).reshape(1, 1, 5)), pad, mode=mode)


def test_constant_pad_keeps_a_bool_dtype():
    out = F.pad(md.tensor(np.ones((1, 2, 3), dtype=bool)), (1, 1), value=0)
    assert out.dtype == md.bool
    np.testing.assert_array_equal(out.numpy()[0, 0], [False, True, True, True, False])


# interpolation ---------------------------------------------------------------------------------------------

def test_interpolate_area_is_adaptive_average_pooling():
    x = np.arange(35.0).reshape(1, 1, 5, 7)
    x[0, 0, 0, 0] = np.inf
    out = F.interpolate(t64(x), size=(3, 4), mode="area").numpy()
    np.testing.assert_array_equal(out, F.adaptive_avg_pool2d(t64(x), (3, 4)).numpy())
    assert out[0, 0, 0, 0] == np.inf and np.isfinite(out[0, 0, 1:]).all()
    out1 = F.interpolate(t64(np.arange(7.0).reshape(1, 1, 7)), scale_factor=0.5, mode="area").numpy()
    np.testing.assert_allclose(out1.reshape(-1), [1.0, 3.0, 5.0])   # bins [0, 3), [2, 5), [4, 7)


def test_interpolate_bicubic_values():
    x = t64(np.random.RandomState(0).randn(1, 2, 4, 5), grad=True)
    same = F.interpolate(x, size=(4, 5), mode="bicubic", align_corners=True)
    np.testing.assert_allclose(same.detach().numpy(), x.detach().numpy(), atol=1e-12)
    const = F.interpolate(t64(np.full((1, 1, 3, 3), 2.5)), scale_factor=2.5, mode="bicubic")
    np.testing.assert_allclose(const.numpy(), 2.5)   # the cubic weights sum to 1
    # one axis: upsampling [0, 0, 1, 0] by 2; output 3 sits at x = 3.5 * 0.5 - 0.5 = 1.25, t = 0.25
    a = -0.75
    near = lambda d: ((a + 2) * d - (a + 3)) * d * d + 1   # noqa: E731
    far = lambda d: ((a * d - 5 * a) * d + 8 * a) * d - 4 * a   # noqa: E731
    line = F.interpolate(t64([[[[0.0, 0.0, 1.0, 0.0]]]]), size=(1, 8), mode="bicubic").numpy()[0, 0, 0]
    assert line[3] == pytest.approx(near(0.75))   # taps 0, 1, 2, 3 at distances 1.25, 0.25, 0.75, 1.75
    assert line[0] == pytest.approx(0.0) and line[4] == pytest.approx(near(0.25))
    assert far(1.0) == pytest.approx(0.0) and near(1.0) == pytest.approx(0.0)
    F.interpolate(x, scale_factor=1.5, mode="bicubic").sum().backward()
    np.testing.assert_allclose(x.grad.numpy().sum(), 2 * 6 * 7)   # each output spreads a total weight of 1


def test_upsample_module_bicubic():
    up = nn.Upsample(scale_factor=2, mode="bicubic", align_corners=False)
    assert up(t64(np.ones((1, 1, 3, 3)))).shape == (1, 1, 6, 6)


# against PyTorch -------------------------------------------------------------------------------------------

def _compare(fn, arrays, grads=(0,), rtol=1e-10, atol=1e-12):
    torch = pytest.importorskip("torch")
    tt = [torch.tensor(a, requires_grad=(i in grads)) for i, a in enumerate(arrays)]
    mt = [md.tensor(a).requires_grad_(i in grads) for i, a in enumerate(arrays)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        to, mo = fn(torch, torch.nn.functional, *tt), fn(md, F, *mt)
    np.testing.assert_allclose(mo.detach().numpy(), to.detach().numpy(), rtol=rtol, atol=atol)
    assert mo.detach().numpy().dtype == to.detach().numpy().dtype
    gw = np.random.RandomState(1).rand(*to.shape)
    (to * torch.tensor(gw)).sum().backward()
    (mo * md.tensor(gw)).sum().backward()
    for i in grads:
        np.testing.assert_allclose(mt[i].grad.numpy(), tt[i].grad.numpy(), rtol=rtol, atol=atol)


R = np.random.RandomState(0)
X4 = R.randn(2, 3, 5, 6)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(-1, 2, 2, -1), (2, -1, -1, 1), (-2, -2, 0, 1), (1, 1, -3, 2)])
def test_negative_pad_matches_torch(mode, pad):
    _compare(lambda m, f, a: f.pad(a, pad, mode=mode), [X4])


@pytest.mark.parametrize("kw", [dict(size=(7, 9)), dict(size=(3, 4)), dict(scale_factor=1.7),
                                dict(scale_factor=(0.5, 2.5)), dict(scale_factor=0.3, recompute_scale_factor=True)])
@pytest.mark.parametrize("mode,ac", [("bicubic", False), ("bicubic", True), ("area", None)])
def test_interpolate_bicubic_and_area_match_torch(kw, mode, ac):
    _compare(lambda m, f, a: f.interpolate(a, mode=mode, align_corners=ac, **kw), [X4])


@pytest.mark.parametrize("out", [(3, 5), (4, 4), (7, 11), (1, 3)])
def test_adaptive_avg_pool2d_matches_torch_with_inf(out):
    x = X4.copy()
    x[0, 0, 1, 2] = np.inf
    x[1, 2, 4, 0] = np.nan
    _compare(lambda m, f, a: f.adaptive_avg_pool2d(a, out), [x])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "huber_loss"])
def test_weighted_elementwise_losses_match_torch(name, reduction):
    _compare(lambda m, f, a, b, w: getattr(f, name)(a, b, reduction=reduction, weight=w),
             [R.randn(4, 5), R.randn(4, 5), R.rand(4, 5)], grads=(0, 1, 2))


def test_pointwise_target_gradients_match_torch():
    p = np.array([0.0, 1.0, 0.3, 0.5, 1e-13])
    _compare(lambda m, f, a, b: f.binary_cross_entropy(a, b, reduction="sum"), [p, np.array([0.0, 1.0, 0.2, 0.5, 0.0])],
             grads=(1,))
    _compare(lambda m, f, a, b: f.kl_div(a, b, reduction="batchmean"),
             [np.log([[0.2, 0.3, 0.5]]), np.array([[0.0, 0.4, 0.6]])], grads=(0, 1))
    nan = np.array([np.nan, 1.0, -1.0])
    _compare(lambda m, f, a, b: f.l1_loss(a, b), [nan, np.zeros(3)], grads=(0, 1))
    _compare(lambda m, f, a, b: f.smooth_l1_loss(a, b, beta=0.0), [nan, np.zeros(3)], grads=(0, 1))
