"""Weight Standardization and WSConv2d: the forward against a plain NumPy formula, the closed-form
backward by gradcheck (float64, random cotangents) alone and through the convolution, the
invariances it promises, errors, and PyTorch (when installed) for the convolution it feeds."""
import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.autograd import gradcheck


def naive_ws(w, eps=1e-5):
    rows = w.reshape(w.shape[0], -1)
    mu, var = rows.mean(axis=1, keepdims=True), rows.var(axis=1, keepdims=True)
    return ((rows - mu) / np.sqrt(var + eps)).reshape(w.shape)


@pytest.mark.parametrize("shape", [(4, 3, 3, 3), (5, 7), (2, 1, 1, 3)])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_forward_matches_numpy(shape, dtype, tol):
    w = np.random.default_rng(0).standard_normal(shape) * 0.1 + 0.05
    got = F.weight_standardization(md.tensor(w.astype(dtype)))
    assert got.dtype == dtype and got.shape == shape
    np.testing.assert_allclose(got.numpy(), naive_ws(w), rtol=tol, atol=tol)
    rows = got.numpy().reshape(shape[0], -1).astype(np.float64)
    if rows.shape[1] > 1:
        np.testing.assert_allclose(rows.mean(axis=1), 0, atol=10 * tol)
        var = w.reshape(shape[0], -1).var(axis=1)
        np.testing.assert_allclose(rows.var(axis=1), var / (var + 1e-5), rtol=1e-4)   # 1, less eps's share


@pytest.mark.parametrize("shape", [(4, 3, 2, 2), (3, 5)])
def test_gradcheck(shape):
    w = md.tensor(np.random.default_rng(1).standard_normal(shape), requires_grad=True)
    assert gradcheck(lambda w: F.weight_standardization(w), (w,), seed=2)


def test_gradcheck_through_the_convolution():
    rng = np.random.default_rng(3)
    x = md.tensor(rng.standard_normal((2, 3, 5, 5)), requires_grad=True)
    w = md.tensor(rng.standard_normal((4, 3, 3, 3)), requires_grad=True)
    b = md.tensor(rng.standard_normal(4), requires_grad=True)
    assert gradcheck(lambda x, w, b: F.conv2d(x, F.weight_standardization(w), b, padding=1), (x, w, b), seed=4)


def test_gradient_is_orthogonal_to_shifting_and_scaling_each_filter():
    rng = np.random.default_rng(5)
    w = md.tensor(rng.standard_normal((6, 2, 3, 3)), requires_grad=True)
    # exactly so with eps = 0 (eps makes a filter's scale slightly visible)
    F.weight_standardization(w, eps=0.0).backward(md.tensor(rng.standard_normal((6, 2, 3, 3))))
    g = w.grad.numpy().reshape(6, -1)
    rows = w.detach().numpy().reshape(6, -1)
    np.testing.assert_allclose(g.sum(axis=1), 0, atol=1e-12)                                  # shift
    np.testing.assert_allclose((g * (rows - rows.mean(axis=1, keepdims=True))).sum(axis=1), 0, atol=1e-12)  # scale


def test_wsconv2d_is_conv2d_of_the_standardized_weight_and_ignores_filter_scale():
    md.manual_seed(0)
    conv = nn.WSConv2d(3, 4, 3, padding=1, bias=False, eps=1e-12).double()   # eps would make the scale visible
    x = md.tensor(np.random.default_rng(6).standard_normal((2, 3, 6, 6)))
    want = F.conv2d(x, md.tensor(naive_ws(conv.weight.detach().numpy(), 1e-12)), None, padding=1)
    np.testing.assert_allclose(conv(x).detach().numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-10)
    with md.no_grad():
        conv.weight.mul_(7.0).add_(3.0)                   # a filter's scale and offset are invisible
    np.testing.assert_allclose(conv(x).detach().numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-9)
    assert "eps=1e-05" in repr(nn.WSConv2d(3, 4, 3)) and isinstance(conv, nn.Conv2d)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_wsconv2d_pads_with_its_padding_mode(mode):
    md.manual_seed(0)
    conv = nn.WSConv2d(3, 4, 3, padding=1, bias=False, padding_mode=mode).double()
    x = md.tensor(np.random.default_rng(8).standard_normal((2, 3, 5, 5)))
    padded = np.pad(x.numpy(), ((0, 0), (0, 0), (1, 1), (1, 1)), mode={"reflect": "reflect", "replicate": "edge",
                                                                       "circular": "wrap"}[mode])
    want = F.conv2d(md.tensor(padded), md.tensor(naive_ws(conv.weight.detach().numpy())), None)
    np.testing.assert_allclose(conv(x).detach().numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-9)


def test_wsconv2d_trains_with_groupnorm_at_batch_one():
    rng = np.random.default_rng(7)
    x = md.tensor(rng.standard_normal((8, 2, 6, 6)).astype(np.float32))
    y = md.tensor((np.arange(8) % 2).astype(np.int64))
    x.numpy()[y.numpy() == 1, 0] += 1.0
    md.manual_seed(0)
    model = nn.Sequential(nn.WSConv2d(2, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                          nn.Flatten(), nn.Linear(8, 2))
    opt = md.optim.SGD(model.parameters(), lr=0.05)
    first = F.cross_entropy(model(x), y).item()
    for epoch in range(15):
        for i in range(8):
            loss = F.cross_entropy(model(x[i:i + 1]), y[i:i + 1])
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert F.cross_entropy(model(x), y).item() < 0.5 * first


def test_errors_and_empty_weights():
    with pytest.raises(ValueError, match=r"at least 2 dims, got shape \(3,\)"):
        F.weight_standardization(md.zeros(3))
    with pytest.raises(TypeError, match="floating point weight"):
        F.weight_standardization(md.tensor(np.zeros((2, 2), np.int64)))
    with pytest.raises(TypeError, match="expected a Tensor"):
        F.weight_standardization(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="eps >= 0"):
        F.weight_standardization(md.zeros(2, 2), eps=-1.0)
    w = md.tensor(np.zeros((3, 0, 3, 3)), requires_grad=True)
    out = F.weight_standardization(w)
    out.sum().backward()
    assert out.shape == (3, 0, 3, 3) and w.grad.shape == (3, 0, 3, 3)


def test_matches_pytorch_standardized_convolution():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3))
    g = rng.standard_normal((2, 4, 5, 5))
    xt, wt = md.tensor(x, requires_grad=True), md.tensor(w, requires_grad=True)
    F.conv2d(xt, F.weight_standardization(wt), padding=1).backward(md.tensor(g))
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    mean = tw.mean(dim=(1, 2, 3), keepdim=True)
    var = tw.var(dim=(1, 2, 3), keepdim=True, unbiased=False)
    torch.nn.functional.conv2d(tx, (tw - mean) / torch.sqrt(var + 1e-5), padding=1).backward(torch.tensor(g))
    np.testing.assert_allclose(wt.grad.numpy(), tw.grad.numpy(), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(xt.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-10)
