"""Gradients of gradients through the CNN ops: convolutions (every conv2d implementation,
transposed, 1-D and 3-D), max/average/adaptive pooling, padding and interpolation, as a
WGAN-GP gradient penalty on a conv critic and Hessian-vector products of small CNNs need."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl import autograd
from minidl.autograd import gradcheck, gradgradcheck
from minidl.ops import conv, conv_direct, conv_winograd

RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape)


def T(a, grad=True):
    return md.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


# name -> (function of tensors, input arrays); tiny shapes, each op with its main options
CASES = {
    "conv2d_stride_pad_dilation": (lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2)),
                                   [rand(2, 2, 5, 6), rand(3, 2, 2, 3), rand(3)]),
    "conv2d_groups": (lambda x, w: F.conv2d(x, w, stride=2, padding=1, groups=2), [rand(2, 4, 5, 5), rand(6, 2, 3, 3)]),
    "conv2d_same": (lambda x, w: F.conv2d(x, w, padding="same"), [rand(1, 2, 4, 4), rand(2, 2, 2, 2)]),
    "conv2d_unbatched": (lambda x, w: F.conv2d(x, w, stride=2), [rand(2, 5, 5), rand(2, 2, 2, 2)]),
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2),
               [rand(2, 2, 7), rand(3, 2, 3), rand(3)]),
    "conv1d_groups": (lambda x, w: F.conv1d(x, w, groups=2, padding="same"), [rand(1, 4, 5), rand(2, 2, 2)]),
    "conv_transpose2d": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2),
                         [rand(2, 4, 3, 3), rand(4, 1, 3, 3), rand(2)]),
    "conv_transpose2d_dilation": (lambda x, w: F.conv_transpose2d(x, w, output_padding=1, dilation=2),
                                  [rand(1, 2, 3, 3), rand(2, 2, 2, 2)]),
    "conv_transpose1d": (lambda x, w: F.conv_transpose1d(x, w, stride=3, padding=1), [rand(2, 2, 4), rand(2, 3, 3)]),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=1, groups=2),
               [rand(1, 2, 3, 4, 3), rand(4, 1, 2, 2, 2), rand(4)]),
    "conv_transpose3d": (lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1),
                         [rand(1, 2, 2, 2, 2), rand(2, 3, 2, 2, 2)]),
    "max_pool2d_ceil": (lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), [rand(2, 2, 6, 5)]),
    "max_pool2d_dilation": (lambda x: F.max_pool2d(x, 2, 1, 1, dilation=2), [rand(1, 2, 5, 5)]),
    "relu_max_pool2d": (lambda x: F.relu_max_pool2d(x, 2), [rand(2, 2, 4, 4)]),
    "max_pool1d": (lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True), [rand(2, 2, 7)]),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2, 1, 1), [rand(1, 2, 3, 3, 3)]),
    "avg_pool2d_ceil_exclude_pad": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                                    [rand(2, 2, 6, 5)]),
    "avg_pool2d_ceil_include_pad": (lambda x: F.avg_pool2d(x, (2, 3), (2, 1), (1, 1), ceil_mode=True),
                                    [rand(1, 2, 5, 4)]),
    "avg_pool2d_divisor_override": (lambda x: F.avg_pool2d(x, 2, divisor_override=3), [rand(1, 2, 4, 4)]),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True), [rand(2, 2, 6)]),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, 2, 1, ceil_mode=True, count_include_pad=False),
                   [rand(1, 2, 3, 4, 3)]),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 2)), [rand(2, 2, 5, 7)]),
    "adaptive_avg_pool2d_up": (lambda x: F.adaptive_avg_pool2d(x, (5, 1)), [rand(1, 2, 2, 3)]),
    "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x, 3), [rand(2, 2, 5)]),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (2, 1, 3)), [rand(1, 2, 3, 3, 4)]),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (3, 2)), [rand(2, 2, 5, 7)]),
    "adaptive_max_pool3d": (lambda x: F.adaptive_max_pool3d(x, 2), [rand(1, 2, 3, 3, 4)]),
    "pad_constant_crop": (lambda x: F.pad(x, (1, 2, -1, 1), value=0.5), [rand(1, 2, 3, 4)]),
    "pad_reflect": (lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"), [rand(1, 2, 3, 4)]),
    "pad_replicate": (lambda x: F.pad(x, (2, 1, 1, 2), mode="replicate"), [rand(1, 2, 3, 4)]),
    "pad_circular": (lambda x: F.pad(x, (2, 1), mode="circular"), [rand(1, 2, 4)]),
    "upsample_nearest": (lambda x: F.interpolate(x, scale_factor=2), [rand(1, 2, 3, 3)]),
    "upsample_bilinear": (lambda x: F.interpolate(x, size=(5, 4), mode="bilinear", align_corners=False),
                          [rand(1, 2, 3, 3)]),
    "upsample_bicubic": (lambda x: F.interpolate(x, size=(5, 4), mode="bicubic", align_corners=True),
                         [rand(1, 2, 3, 3)]),
    "interpolate_area": (lambda x: F.interpolate(x, size=(2, 3), mode="area"), [rand(1, 2, 5, 4)]),
    "flatten_unflatten": (lambda x: F.avg_pool2d(x, 2).flatten(1).unflatten(1, (2, 2)), [rand(2, 2, 2, 4)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradgradcheck(name):
    fn, arrays = CASES[name]
    inputs = tuple(T(a) for a in arrays)
    assert gradgradcheck(fn, inputs, atol=1e-6, rtol=1e-4)
    # the recorded gradient has the values of the plain backward's
    out = fn(*inputs)
    v = T(RNG.standard_normal(tuple(out.shape)))     # (requiring grad: a linear op's gradient is a function of it)
    plain = autograd.grad(out, inputs, v, retain_graph=True)
    recorded = autograd.grad(out, inputs, v, create_graph=True)
    for p, r in zip(plain, recorded):
        assert r.requires_grad
        np.testing.assert_allclose(r.detach().numpy(), p.numpy(), rtol=1e-12, atol=1e-12)


NO_SUMS = {(conv_winograd, "USE_WINOGRAD"): False, (conv_direct, "USE_DIRECT"): False}
PATHS = {   # conv2d's implementations, chosen by its switches: (what to set, what the node records)
    "direct": ({}, lambda n: n.direct),
    "winograd": ({(conv_winograd, "WINOGRAD_MIN_CHANNELS"): 1, (conv_direct, "USE_DIRECT"): False},
                 lambda n: n.winograd),
    "unfold": (NO_SUMS, lambda n: not n.direct and not n.winograd and n.path is conv.UNFOLD_COLUMNS),
    "im2col": ({**NO_SUMS, (conv, "USE_UNFOLD"): False},
               lambda n: not n.direct and not n.winograd and n.path is conv.IM2COL_COLUMNS),
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_gradgradcheck_conv2d_every_implementation(path, monkeypatch):
    switches, taken = PATHS[path]
    for (module, name), value in switches.items():
        monkeypatch.setattr(module, name, value)
    x, w, b = T(rand(2, 2, 5, 4)), T(rand(3, 2, 3, 3)), T(rand(3))
    assert taken(F.conv2d(x, w, b, padding=1).grad_fn)
    assert gradgradcheck(lambda x, w, b: F.conv2d(x, w, b, padding=1), (x, w, b), atol=1e-6, rtol=1e-4)


def _critic(lib, nn_fn, params, z):
    """A DCGAN-style critic: strided conv, leaky ReLU, conv, leaky ReLU, average and max pooling, linear."""
    w1, b1, w2, b2, w3, b3 = params
    h = nn_fn.leaky_relu(nn_fn.conv2d(z, w1, b1, stride=2, padding=1), 0.2)
    h = nn_fn.leaky_relu(nn_fn.conv2d(h, w2, b2, padding=1), 0.2)
    h = nn_fn.max_pool2d(nn_fn.avg_pool2d(h, 3, 1, 1, count_include_pad=False), 2)
    return nn_fn.linear(h.reshape(h.shape[0], -1), w3, b3)


def _penalty(lib, nn_fn, params, real, fake, alpha, lam=10.0):
    inter = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
    d = _critic(lib, nn_fn, params, inter)
    (grads,) = lib.autograd.grad(d, inter, grad_outputs=lib.ones_like(d), create_graph=True)
    return ((grads.reshape(grads.shape[0], -1).norm(2, dim=1) - 1) ** 2).mean() * lam


CRITIC_SHAPES = [(3, 2, 4, 4), (3,), (4, 3, 3, 3), (4,), (1, 16), (1,)]


def _critic_data():
    params = [rand(*s) * 0.5 for s in CRITIC_SHAPES]
    real, fake, alpha = rand(2, 2, 8, 8), rand(2, 2, 8, 8), RNG.uniform(size=(2, 1, 1, 1))
    return params, real, fake, alpha


def test_wgan_gp_penalty_gradient_matches_finite_differences():
    params, real, fake, alpha = _critic_data()
    data = [T(a, grad=False) for a in (real, fake, alpha)]

    def penalty(*p):
        with md.enable_grad():      # (gradcheck's finite differences run without grad mode)
            return _penalty(md, F, p, *data)
    assert gradcheck(penalty, tuple(T(p) for p in params), atol=1e-6, rtol=1e-4)


def test_wgan_gp_critic_step_matches_torch():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    params, real, fake, alpha = _critic_data()

    def step(lib, nn_fn, wrap):
        p = [wrap(a).requires_grad_(True) for a in params]
        r, f, a = (wrap(v) for v in (real, fake, alpha))
        penalty = _penalty(lib, nn_fn, p, r, f, a)
        loss = _critic(lib, nn_fn, p, f).mean() - _critic(lib, nn_fn, p, r).mean() + penalty
        loss.backward()
        return penalty.item(), loss.item(), [q.grad.numpy() for q in p]
    m_pen, m_loss, m_grads = step(md, F, md.tensor)
    t_pen, t_loss, t_grads = step(torch, TF, torch.tensor)
    np.testing.assert_allclose(m_pen, t_pen, rtol=1e-10)
    np.testing.assert_allclose(m_loss, t_loss, rtol=1e-10)
    for m, t in zip(m_grads, t_grads):
        np.testing.assert_allclose(m, t, rtol=1e-8, atol=1e-12)


def _tiny_cnn(params, x, y):
    w1, b1, w2, w3, b3 = params
    h = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), w1, b1, stride=2).tanh()      # (N, 3, 4, 4)
    h = F.max_pool2d(F.interpolate(h, scale_factor=2, mode="bilinear"), 2, 2, 1)         # (N, 3, 5, 5)
    h = F.conv_transpose2d(h, w2, stride=2, padding=2).tanh()                             # (N, 2, 7, 7)
    h = F.adaptive_avg_pool2d(F.avg_pool2d(h, 2, 2, ceil_mode=True), 2).flatten(1)      # (N, 8)
    return F.cross_entropy(F.linear(h, w3, b3), y)


def _hvp_against_finite_differences(loss, params, eps=1e-5):
    """H v by the double backward, against the central difference of the gradient along v."""
    v = [RNG.standard_normal(tuple(p.shape)) for p in params]
    grads = autograd.grad(loss(), params, create_graph=True)
    hv = autograd.grad(sum((g * T(u, grad=False)).sum() for g, u in zip(grads, v)), params)

    def grad_at(step):
        with md.no_grad():
            for p, u in zip(params, v):
                p.add_(md.tensor(step * u))
        g = [a.numpy() for a in autograd.grad(loss(), params)]
        with md.no_grad():
            for p, u in zip(params, v):
                p.sub_(md.tensor(step * u))
        return g
    fd = [(a - b) / (2 * eps) for a, b in zip(grad_at(eps), grad_at(-eps))]
    assert any(np.abs(f).max() > 1e-3 for f in fd)
    for h, f in zip(hv, fd):
        np.testing.assert_allclose(h.numpy(), f, atol=1e-6, rtol=1e-5)


def test_hessian_vector_product_of_a_tiny_cnn_matches_finite_differences():
    params = [T(rand(*s) * 0.7) for s in [(3, 2, 3, 3), (3,), (3, 2, 3, 3), (4, 8), (4,)]]
    x, y = T(rand(2, 2, 6, 6), grad=False), md.tensor([1, 3])
    _hvp_against_finite_differences(lambda: _tiny_cnn(params, x, y), params)


def test_hessian_vector_product_of_lenet_matches_finite_differences():
    """The zoo's LeNet runs its ReLU + max-pool pairs as one fused op (zoo/fused.py)."""
    from minidl.zoo import LeNet
    md.manual_seed(0)
    model = LeNet(1, 3, input_size=8).double()
    x, y = T(rand(2, 1, 8, 8), grad=False), md.tensor([0, 2])
    _hvp_against_finite_differences(lambda: F.cross_entropy(model(x), y), list(model.parameters()))


def test_in_place_write_to_a_conv_input_is_an_error_with_create_graph():
    x, w = T(rand(1, 1, 4, 4)), T(rand(2, 1, 3, 3))
    h = x * 1.0
    y = F.conv2d(h, w).sum()
    h.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        autograd.grad(y, w, create_graph=True)
