"""conv2d and pooling: forward against independent NumPy references, gradcheck in float64 on
both implementations (Numba kernels and the NumPy reference), kernels against references,
and PyTorch as an optional oracle."""
import re

import numpy as np
import pytest

import minidl as md
import minidl.nn as nn
import minidl.nn.functional as F
from minidl.kernels.cpu import im2col as k_im2col
from minidl.kernels.cpu import pooling as k_pool
from minidl.ops import conv as conv_ops
from minidl.ops import pooling as pool_ops
from minidl.ops._kernel_switch import implementation
from minidl.testing import OpSpec, check_forward, check_gradcheck, check_implementations, forward_cases, spec_id

IMPLS = ("numba", "reference")


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


# independent references ----------------------------------------------------------------------

def conv_direct(x, w, b, stride, padding, dilation, groups):
    """Direct summation over kernel offsets (no im2col)."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    N, C, H, W = x.shape
    O, Cg, kh, kw = w.shape
    OH = (H + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    OW = (W + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xpad = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    out = np.zeros((N, O, OH, OW))
    Og = O // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                patch = xpad[:, g * Cg:(g + 1) * Cg, i * dh: i * dh + sh * (OH - 1) + 1: sh,
                             j * dw: j * dw + sw * (OW - 1) + 1: sw]
                out[:, g * Og:(g + 1) * Og] += np.einsum("nchw,oc->nohw", patch, w[g * Og:(g + 1) * Og, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def pool_loops(x, kernel, stride, padding, dilation=1, ceil_mode=False, kind="max", count_include_pad=True,
               divisor_override=None):
    """Pooling by explicit loops over output positions (PyTorch's window rules)."""
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = _pair(kernel), _pair(stride), _pair(padding), _pair(dilation)
    N, C, H, W = x.shape
    OH = pool_ops.pool_output_size(H, kh, sh, ph, dh, ceil_mode)
    OW = pool_ops.pool_output_size(W, kw, sw, pw, dw, ceil_mode)
    out = np.zeros((N, C, OH, OW))
    idx = np.zeros((N, C, OH, OW), dtype=np.int64)
    for oh in range(OH):
        for ow in range(OW):
            h0, w0 = oh * sh - ph, ow * sw - pw
            if kind == "max":
                best, arg = np.full((N, C), -np.inf), np.zeros((N, C), np.int64)
                for i in range(kh):
                    for j in range(kw):
                        h, w = h0 + i * dh, w0 + j * dw
                        if 0 <= h < H and 0 <= w < W:
                            better = x[:, :, h, w] > best
                            best = np.where(better, x[:, :, h, w], best)
                            arg = np.where(better, h * W + w, arg)
                out[:, :, oh, ow], idx[:, :, oh, ow] = best, arg
            else:
                h1, w1 = min(h0 + kh, H + ph), min(w0 + kw, W + pw)
                size = (h1 - h0) * (w1 - w0)
                hs, ws, he, we = max(h0, 0), max(w0, 0), min(h1, H), min(w1, W)
                total = x[:, :, hs:he, ws:we].sum(axis=(2, 3))
                div = divisor_override or (size if count_include_pad else (he - hs) * (we - ws))
                out[:, :, oh, ow] = total / div
    return (out, idx) if kind == "max" else out


def adaptive_loops(x, out_size):
    N, C, H, W = x.shape
    OH, OW = out_size
    out = np.zeros((N, C, OH, OW))
    for i in range(OH):
        for j in range(OW):
            h0, h1 = (i * H) // OH, -(-((i + 1) * H) // OH)
            w0, w1 = (j * W) // OW, -(-((j + 1) * W) // OW)
            out[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return out


# conv specs ------------------------------------------------------------------------------------

CONV_CASES = [
    # name, (N, C, H, W), (O, kh, kw), stride, padding, dilation, groups, bias
    ("basic3x3", (2, 3, 5, 5), (4, 3, 3), 1, 1, 1, 1, True),
    ("stride2_odd", (2, 3, 7, 6), (2, 3, 3), 2, 1, 1, 1, True),
    ("rect_kernel_mixed", (1, 2, 6, 7), (3, 2, 3), (2, 1), (1, 0), (1, 2), 1, True),
    ("dilation2", (1, 2, 7, 7), (2, 3, 3), 1, 2, 2, 1, False),
    ("groups2", (2, 4, 5, 4), (6, 3, 3), 1, 1, 1, 2, True),
    ("depthwise_stride2", (1, 4, 6, 5), (4, 3, 3), 2, 1, 1, 4, True),
    ("1x1", (2, 3, 4, 5), (5, 1, 1), 1, 0, 1, 1, True),
    ("1x1_stride2", (2, 3, 5, 5), (4, 1, 1), 2, 0, 1, 1, False),
    ("big_pad_stride3", (1, 2, 5, 5), (2, 2, 2), 3, 2, 1, 1, True),
]


def _conv_spec(name, xs, ws, stride, padding, dilation, groups, bias):
    O, kh, kw = ws
    Cg = xs[1] // groups

    def inputs(rng):
        arrays = (rng.standard_normal(xs), rng.standard_normal((O, Cg, kh, kw)))
        return arrays + ((rng.standard_normal(O),) if bias else ())

    def op(x, w, b=None):
        return F.conv2d(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)

    def reference(x, w, b=None):
        return conv_direct(x, w, b, stride, padding, dilation, groups)

    return OpSpec(name=f"conv2d_{name}", op=op, reference=reference, inputs=inputs)


CONV_SPECS = [_conv_spec(*c) for c in CONV_CASES]


@pytest.mark.parametrize("spec,dtype,device", forward_cases(CONV_SPECS))
def test_conv2d_forward(spec, dtype, device):
    check_forward(spec, dtype, device)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("spec", CONV_SPECS, ids=spec_id)
def test_conv2d_gradcheck(spec, impl):
    with implementation(impl):
        assert check_gradcheck(spec)


@pytest.mark.parametrize("groups", [1, 2])
def test_conv2d_backward_same_whether_cols_are_kept_or_rebuilt(monkeypatch, groups):
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((3, 4, 6, 5))
    w0 = rng.standard_normal((6, 4 // groups, 3, 3))
    g = rng.standard_normal((3, 6, 3, 3))
    grads = []
    for keep in (1 << 30, 0):                 # every cols kept from forward / none (rebuilt in backward)
        monkeypatch.setattr(conv_ops, "KEEP_COLS_BYTES", keep)
        monkeypatch.setattr(conv_ops, "BLOCK_BYTES", 4 * 9 * 4 * 8)   # several blocks of images
        x, w = md.tensor(x0, requires_grad=True), md.tensor(w0, requires_grad=True)
        F.conv2d(x, w, stride=2, padding=1, groups=groups).backward(md.tensor(g))
        grads.append((x.grad.numpy(), w.grad.numpy()))
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)


def _im2col_spec(xs, kh, kw, s, p, d, groups=1):
    (sh, sw), (ph, pw), (dh, dw) = _pair(s), _pair(p), _pair(d)
    OH = conv_ops.conv_output_size(xs[2], kh, sh, ph, dh)
    OW = conv_ops.conv_output_size(xs[3], kw, sw, pw, dw)
    geom = (kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups)
    return OpSpec(name=f"im2col_{xs}_{kh}x{kw}_s{s}_p{p}_d{d}_g{groups}", op=None,
                  reference=lambda x: conv_ops.im2col_reference(x, *geom),
                  inputs=lambda rng: (rng.standard_normal(xs),),
                  implementations={"numba": lambda x: k_im2col.im2col(x, *geom)}), geom


IM2COL_CASES = [((2, 3, 5, 6), 3, 3, 1, 1, 1), ((1, 2, 7, 6), 3, 2, (2, 1), (1, 2), (1, 2)),
                ((2, 2, 9, 8), 3, 3, (3, 2), (2, 1), (2, 1)), ((1, 1, 4, 4), 1, 1, 2, 0, 1),
                ((1, 2, 3, 3), 3, 3, 1, 3, 1), ((2, 4, 5, 5), 3, 3, 1, 1, 1, 2), ((1, 3, 4, 6), 2, 3, 2, 1, 1, 3),
                # channels in runs of eight, with and without a remainder, dense and grouped
                ((2, 16, 5, 6), 3, 3, 2, 1, 1), ((1, 11, 6, 5), 3, 2, 1, (1, 2), 1), ((2, 18, 4, 4), 3, 3, 1, 1, 1, 2)]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", IM2COL_CASES, ids=str)
def test_im2col_kernel_matches_reference(case, dtype):
    spec, _ = _im2col_spec(*case)
    check_implementations(spec, dtype)


@pytest.mark.parametrize("case", IM2COL_CASES, ids=str)
def test_col2im_is_adjoint_of_im2col_and_kernel_matches_reference(case):
    spec, geom = _im2col_spec(*case)
    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G = geom
    rng = np.random.default_rng(1)
    x = rng.standard_normal(case[0])
    N, C, H, W = x.shape
    cols = rng.standard_normal((N, OH, OW, C * kh * kw))
    ref = conv_ops.col2im_reference(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, G)
    ker = k_im2col.col2im(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, G)
    np.testing.assert_allclose(ker, ref, rtol=1e-12, atol=1e-12)
    # <im2col(x), cols> == <x, col2im(cols)>: col2im is the transpose of im2col
    lhs = np.sum(k_im2col.im2col(x, *geom) * cols)
    np.testing.assert_allclose(lhs, np.sum(x * ker), rtol=1e-10)


def test_conv2d_padding_same_and_valid():
    rng = np.random.default_rng(2)
    x = md.tensor(rng.standard_normal((1, 2, 6, 5)))
    for k in (3, 4):
        w = md.tensor(rng.standard_normal((3, 2, k, k)))
        y = F.conv2d(x, w, padding="same")
        assert y.shape == (1, 3, 6, 5)
        lo, hi = (k - 1) // 2, (k - 1) - (k - 1) // 2   # the extra row/column goes bottom/right
        xpad = np.pad(x.numpy(), ((0, 0), (0, 0), (lo, hi), (lo, hi)))
        np.testing.assert_allclose(y.numpy(), conv_direct(xpad, w.numpy(), None, 1, 0, 1, 1), atol=1e-10)
    w = md.tensor(rng.standard_normal((3, 2, 3, 3)))
    assert F.conv2d(x, w, padding="valid").shape == (1, 3, 4, 3)


def test_conv2d_gradcheck_same_padding_even_kernel():
    rng = np.random.default_rng(3)
    x = md.tensor(rng.standard_normal((1, 2, 4, 5)), requires_grad=True)
    w = md.tensor(rng.standard_normal((2, 2, 2, 4)), requires_grad=True)
    assert md.autograd.gradcheck(lambda a, b: F.conv2d(a, b, padding="same"), (x, w))


def test_conv2d_unbatched_input():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 5, 5))
    w = rng.standard_normal((3, 2, 3, 3))
    y = F.conv2d(md.tensor(x), md.tensor(w), padding=1)
    assert y.shape == (3, 5, 5)
    np.testing.assert_allclose(y.numpy(), conv_direct(x[None], w, None, 1, 1, 1, 1)[0], atol=1e-10)


def test_conv2d_bad_inputs_name_what_was_expected():
    x = md.randn(1, 3, 5, 5)
    with pytest.raises(ValueError, match="to have 4 channels, but got 3 channels"):
        F.conv2d(x, md.randn(2, 4, 3, 3))
    with pytest.raises(ValueError, match="larger than the padded input"):
        F.conv2d(x, md.randn(2, 3, 7, 7))
    with pytest.raises(ValueError, match="not divisible by groups"):
        F.conv2d(md.randn(1, 4, 5, 5), md.randn(3, 2, 3, 3), groups=2)
    with pytest.raises(ValueError, match="bias must have shape"):
        F.conv2d(x, md.randn(2, 3, 3, 3), md.randn(3))
    with pytest.raises(ValueError, match="4-D"):
        F.conv2d(md.randn(5, 5), md.randn(2, 3, 3, 3))
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(x, md.randn(2, 3, 3, 3), stride=2, padding="same")


def test_conv2d_module_shapes_init_and_repr():
    md.manual_seed(0)
    m = nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2)
    assert m.weight.shape == (8, 2, 3, 3) and m.bias.shape == (8,)
    bound = 1 / np.sqrt(2 * 9)     # kaiming_uniform(a=sqrt 5) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert np.abs(m.weight.detach().numpy()).max() <= bound and np.abs(m.weight.detach().numpy()).max() > 0.8 * bound
    assert np.abs(m.bias.detach().numpy()).max() <= bound
    assert m(md.randn(2, 4, 9, 9)).shape == (2, 8, 5, 5)
    assert "Conv2d(4, 8, kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), groups=2)" == repr(m)
    assert nn.Conv2d(2, 2, 1, bias=False).bias is None
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)


# pooling -----------------------------------------------------------------------------------------

MAX_CASES = [
    # name, shape, kernel, stride, padding, dilation, ceil_mode
    ("k2s2", (2, 3, 6, 6), 2, 2, 0, 1, False),
    ("k3s2p1_odd", (2, 2, 7, 6), 3, 2, 1, 1, False),
    ("ceil", (1, 2, 7, 6), 3, 2, 1, 1, True),
    ("rect_dilated", (1, 2, 9, 7), (3, 2), (2, 1), (1, 1), (2, 1), True),
    ("overlap_s1", (1, 2, 5, 5), 3, 1, 1, 1, False),
]


def _max_spec(name, shape, k, s, p, d, ceil):
    return OpSpec(name=f"max_pool2d_{name}",
                  op=lambda x: F.max_pool2d(x, k, s, p, d, ceil_mode=ceil),
                  reference=lambda x: pool_loops(x, k, s, p, d, ceil, "max")[0],
                  inputs=lambda rng: (rng.standard_normal(shape),))


AVG_CASES = [
    # name, shape, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
    ("k2s2", (2, 3, 6, 6), 2, 2, 0, False, True, None),
    ("k3s2p1_incl", (2, 2, 7, 6), 3, 2, 1, False, True, None),
    ("k3s2p1_excl", (2, 2, 7, 6), 3, 2, 1, False, False, None),
    ("ceil_incl", (1, 2, 7, 6), 3, 2, 1, True, True, None),
    ("ceil_excl", (1, 2, 5, 5), 3, 3, 1, True, False, None),
    ("divisor_override", (1, 2, 6, 5), (3, 2), (2, 1), (1, 1), False, True, 5),
]


def _avg_spec(name, shape, k, s, p, ceil, cip, dov):
    return OpSpec(name=f"avg_pool2d_{name}",
                  op=lambda x: F.avg_pool2d(x, k, s, p, ceil, cip, dov),
                  reference=lambda x: pool_loops(x, k, s, p, 1, ceil, "avg", cip, dov),
                  inputs=lambda rng: (rng.standard_normal(shape),))


ADAPTIVE_CASES = [((2, 3, 7, 6), (3, 4)), ((1, 2, 5, 5), 1), ((1, 2, 4, 6), (6, 2)), ((1, 1, 5, 9), (None, 4))]


def _adaptive_spec(shape, out):
    size = (out, out) if isinstance(out, int) else tuple(shape[2 + i] if o is None else o for i, o in enumerate(out))
    return OpSpec(name=f"adaptive_avg_pool2d_{shape}_{out}",
                  op=lambda x: F.adaptive_avg_pool2d(x, out),
                  reference=lambda x: adaptive_loops(x, size),
                  inputs=lambda rng: (rng.standard_normal(shape),))


POOL_SPECS = ([_max_spec(*c) for c in MAX_CASES] + [_avg_spec(*c) for c in AVG_CASES]
              + [_adaptive_spec(*c) for c in ADAPTIVE_CASES])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("spec,dtype,device", forward_cases(POOL_SPECS))
def test_pool_forward(spec, dtype, device, impl):
    with implementation(impl):
        check_forward(spec, dtype, device)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("spec", POOL_SPECS, ids=spec_id)
def test_pool_gradcheck(spec, impl):
    with implementation(impl):
        assert check_gradcheck(spec)


@pytest.mark.parametrize("case", MAX_CASES, ids=lambda c: c[0])
def test_max_pool_kernels_match_reference(case):
    _, shape, k, s, p, d, ceil = case
    x = np.random.default_rng(5).standard_normal(shape)
    kernel = pool_ops._geometry(md.tensor(x), k, s, p, d, ceil, "t")
    out_k, idx_k = k_pool.max_pool2d_forward(x, *kernel)
    out_r, idx_r = pool_ops.max_pool2d_forward_reference(x, *kernel)
    np.testing.assert_array_equal(out_k, out_r)
    np.testing.assert_array_equal(idx_k, idx_r)
    np.testing.assert_array_equal(idx_k, pool_loops(x, k, s, p, d, ceil, "max")[1])
    g = np.random.default_rng(6).standard_normal(out_k.shape)
    np.testing.assert_allclose(k_pool.max_pool2d_backward(g, idx_k, *shape[2:]),
                               pool_ops.max_pool2d_backward_reference(g, idx_r, *shape[2:]), atol=1e-12)


@pytest.mark.parametrize("case", AVG_CASES, ids=lambda c: c[0])
def test_avg_pool_kernels_match_reference(case):
    _, shape, k, s, p, ceil, cip, dov = case
    x = np.random.default_rng(7).standard_normal(shape)
    kh, kw, sh, sw, ph, pw, _, _, OH, OW = pool_ops._geometry(md.tensor(x), k, s, p, 1, ceil, "t")
    args = (kh, kw, sh, sw, ph, pw, OH, OW, cip, dov or 0)
    np.testing.assert_allclose(k_pool.avg_pool2d_forward(x, *args), pool_ops.avg_pool2d_forward_reference(x, *args),
                               atol=1e-12)
    g = np.random.default_rng(8).standard_normal((shape[0], shape[1], OH, OW))
    bargs = (shape[2], shape[3], kh, kw, sh, sw, ph, pw, cip, dov or 0)
    np.testing.assert_allclose(k_pool.avg_pool2d_backward(g, *bargs),
                               pool_ops.avg_pool2d_backward_reference(g, *bargs), atol=1e-12)


def test_max_pool_return_indices_ties_and_nan():
    x = md.tensor(np.array([[[[1.0, 1.0], [0.0, 1.0]]]]))
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    assert out.item() == 1.0 and idx.item() == 0          # first maximum in window order
    y = md.tensor(np.array([[[[1.0, np.nan], [5.0, 1.0]]]]))
    assert np.isnan(F.max_pool2d(y, 2).item())               # NaN propagates, as PyTorch


def test_pool_modules_and_errors():
    x = md.randn(2, 3, 8, 8)
    assert nn.MaxPool2d(2)(x).shape == (2, 3, 4, 4)
    assert nn.MaxPool2d(3, stride=2, padding=1)(x).shape == (2, 3, 4, 4)
    assert nn.AvgPool2d(2)(x).shape == (2, 3, 4, 4)
    assert nn.AdaptiveAvgPool2d((1, 1))(x).shape == (2, 3, 1, 1)
    assert nn.AdaptiveAvgPool2d(1)(md.randn(3, 5, 5)).shape == (3, 1, 1)    # unbatched
    out, idx = nn.MaxPool2d(2, return_indices=True)(x)
    assert idx.dtype == md.int64 and idx.shape == out.shape
    with pytest.raises(ValueError, match="at most half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="4-D"):
        F.avg_pool2d(md.randn(8, 8), 2)


def test_adaptive_avg_pool_equals_avg_pool_when_divisible():
    x = md.randn(2, 3, 8, 6)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(x, (4, 3)).numpy(), F.avg_pool2d(x, 2).numpy(),
                               rtol=1e-5, atol=1e-6)


# PyTorch as an oracle ----------------------------------------------------------------------------

@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: c[0])
def test_conv2d_matches_torch(case):
    torch = pytest.importorskip("torch")
    name, xs, (O, kh, kw), stride, padding, dilation, groups, bias = case
    rng = np.random.default_rng(9)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((O, xs[1] // groups, kh, kw)).astype(np.float32)
    b = rng.standard_normal(O).astype(np.float32) if bias else None
    mx, mw = md.tensor(x, requires_grad=True), md.tensor(w, requires_grad=True)
    mb = md.tensor(b, requires_grad=True) if bias else None
    tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    tb = torch.tensor(b, requires_grad=True) if bias else None
    y = F.conv2d(mx, mw, mb, stride, padding, dilation, groups)
    ty = torch.nn.functional.conv2d(tx, tw, tb, stride, padding, dilation, groups)
    g = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(g)
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mw.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)
    if bias:
        np.testing.assert_allclose(mb.grad.numpy(), tb.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_pooling_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 3, 9, 7))
    cases = [
        (lambda f, a: f.max_pool2d(a, 3, 2, 1, ceil_mode=True)),
        (lambda f, a: f.max_pool2d(a, (3, 2), (2, 1), (1, 1), (2, 1))),
        (lambda f, a: f.avg_pool2d(a, 3, 2, 1, ceil_mode=True)),
        (lambda f, a: f.avg_pool2d(a, 3, 2, 1, count_include_pad=False)),
        (lambda f, a: f.avg_pool2d(a, 2, 1, 1, divisor_override=3)),
        (lambda f, a: f.adaptive_avg_pool2d(a, (4, 5))),
    ]
    for fn in cases:
        mx, tx = md.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        y, ty = fn(F, mx), fn(torch.nn.functional, tx)
        g = rng.standard_normal(y.shape)
        y.backward(g)
        ty.backward(torch.tensor(g))
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), atol=1e-12)
        np.testing.assert_allclose(mx.grad.numpy(), tx.grad.numpy(), atol=1e-12)
    _, ti = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    _, mi = F.max_pool2d(md.tensor(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(mi.numpy(), ti.numpy())


def test_torch_state_dict_loads_into_same_cnn():
    torch = pytest.importorskip("torch")
    tnn = torch.nn

    def build(lib):
        return lib.Sequential(lib.Conv2d(1, 4, 3, padding=1), lib.ReLU(), lib.MaxPool2d(2),
                              lib.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), lib.GELU(),
                              lib.AvgPool2d(2), lib.Flatten(), lib.Linear(6, 5), lib.Tanh(), lib.Linear(5, 3))
    torch.manual_seed(0)
    tm = build(tnn)
    mm = build(nn)
    assert list(mm.state_dict()) == list(tm.state_dict())
    mm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    x = np.random.default_rng(11).standard_normal((2, 1, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(mm(md.tensor(x)).detach().numpy(), tm(torch.tensor(x)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("impl", IMPLS)
def test_conv2d_in_several_image_blocks(monkeypatch, impl):
    """Batches bigger than one cache block are split into blocks of images: same result."""
    monkeypatch.setattr(conv_ops, "BLOCK_BYTES", 1)          # the smallest blocks the thread count allows
    rng = np.random.default_rng(12)
    for groups in (1, 2):
        x = rng.standard_normal((7, 4, 5, 6))
        w = rng.standard_normal((6, 4 // groups, 3, 2))
        b = rng.standard_normal(6)
        assert len(conv_ops._blocks(7, 10)) > 1
        with implementation(impl):
            y = F.conv2d(md.tensor(x), md.tensor(w), md.tensor(b), stride=(2, 1), padding=1, groups=groups)
            np.testing.assert_allclose(y.numpy(), conv_direct(x, w, b, (2, 1), 1, 1, groups), atol=1e-10)
            xs = md.tensor(x[:5, :, :4, :4], requires_grad=True)
            ws = md.tensor(w, requires_grad=True)
            assert md.autograd.gradcheck(lambda a, c: F.conv2d(a, c, stride=(2, 1), padding=1, groups=groups),
                                         (xs, ws))


def test_parallel_kernel_variants_match_reference(monkeypatch):
    """The prange variants (off unless minidl/runtime/layer_threads.py allows them) compute the same."""
    from minidl.runtime import layer_threads
    monkeypatch.setattr(layer_threads, "PARALLEL", True)
    from minidl.kernels.cpu import _threads
    monkeypatch.setattr(_threads, "SERIAL_BELOW", 0)
    rng = np.random.default_rng(13)
    x = rng.standard_normal((5, 4, 7, 6))
    geom = (3, 2, 2, 1, 1, 1, 1, 2, 4, 4, 2)                 # kh kw sh sw ph pw dh dw OH OW groups
    np.testing.assert_array_equal(k_im2col.im2col(x, *geom), conv_ops.im2col_reference(x, *geom))
    cols = rng.standard_normal((5, 4, 4, 4 * 3 * 2))
    args = (5, 4, 7, 6, 3, 2, 2, 1, 1, 1, 1, 2, 2)
    np.testing.assert_allclose(k_im2col.col2im(cols, *args), conv_ops.col2im_reference(cols, *args), atol=1e-12)
    pgeom = pool_ops._geometry(md.tensor(x), 3, 2, 1, 1, False, "t")
    out, idx = k_pool.max_pool2d_forward(x, *pgeom)
    ref_out, ref_idx = pool_ops.max_pool2d_forward_reference(x, *pgeom)
    np.testing.assert_array_equal(idx, ref_idx)
    g = rng.standard_normal(out.shape)
    np.testing.assert_allclose(k_pool.max_pool2d_backward(g, idx, 7, 6),
                               pool_ops.max_pool2d_backward_reference(g, idx, 7, 6), atol=1e-12)
    a = (3, 3, 2, 2, 1, 1, 4, 3, True, 0)
    np.testing.assert_allclose(k_pool.avg_pool2d_forward(x, *a), pool_ops.avg_pool2d_forward_reference(x, *a),
                               atol=1e-12)
    gb = rng.standard_normal((5, 4, 4, 3))
    b = (7, 6, 3, 3, 2, 2, 1, 1, True, 0)
    np.testing.assert_allclose(k_pool.avg_pool2d_backward(gb, *b), pool_ops.avg_pool2d_backward_reference(gb, *b),
                               atol=1e-12)


def test_conv2d_and_pooling_accept_non_contiguous_input():
    rng = np.random.default_rng(14)
    base = rng.standard_normal((2, 6, 5, 3))
    x = md.tensor(base).permute(0, 3, 1, 2)              # (2, 3, 6, 5), not C-contiguous
    assert not x.numpy().flags.c_contiguous
    w = rng.standard_normal((4, 3, 3, 3))
    xc = np.ascontiguousarray(base.transpose(0, 3, 1, 2))
    np.testing.assert_allclose(F.conv2d(x, md.tensor(w), padding=1).numpy(), conv_direct(xc, w, None, 1, 1, 1, 1),
                               atol=1e-10)
    np.testing.assert_allclose(F.max_pool2d(x, 2).numpy(), pool_loops(xc, 2, 2, 0)[0])
    np.testing.assert_allclose(F.avg_pool2d(x, 2).numpy(), pool_loops(xc, 2, 2, 0, kind="avg"), atol=1e-12)


@pytest.mark.parametrize("name", ["stride", "padding", "dilation"])
def test_conv_float_options_are_type_errors_naming_them(name):
    x, w = md.randn(1, 1, 5, 5), md.randn(1, 1, 3, 3)
    with pytest.raises(TypeError, match=f"conv2d\\(\\): argument '{name}' must be an int or a tuple of ints, got "
                                        f"float \\(1.5\\)"):
        F.conv2d(x, w, **{name: 1.5})
    with pytest.raises(TypeError, match=f"conv2d\\(\\): argument '{name}' must be a tuple of ints, but found element "
                                        f"of type float"):
        F.conv2d(x, w, **{name: (1, 1.5)})   # not truncated to (1, 1)
    with pytest.raises(TypeError, match=f"conv1d\\(\\): argument '{name}'.*float"):
        F.conv1d(md.randn(1, 1, 5), md.randn(1, 1, 3), **{name: 1.5})
    with pytest.raises(TypeError, match="max_pool2d\\(\\): argument 'kernel_size'.*float"):
        F.max_pool2d(x, 2.0)


@pytest.mark.parametrize("call, error, message", [
    (lambda x: F.conv1d(x, md.randn(3, 4, 3)), RuntimeError,
     r"conv1d: Given groups=1, weight of size \[3, 4, 3\], expected input\[1, 2, 8\] to have 4 channels, but got 2"),
    (lambda x: F.conv1d(x, md.randn(3, 2, 20)), RuntimeError,
     r"conv1d: kernel size 20 \(dilation 1\) is larger than the padded input length 8"),
    (lambda x: F.conv1d(x, md.randn(3, 2, 3), md.zeros(2)), RuntimeError, r"conv1d: bias must have shape \[3\]"),
    (lambda x: F.conv1d(x, md.randn(3, 2, 3), stride=0), ValueError, "conv1d: stride and dilation must be >= 1"),
    (lambda x: F.max_pool1d(x, 20), RuntimeError, r"max_pool1d: input of length 8 \(shape \[1, 2, 8\]\) is too small "
                                                  r"for kernel_size=20"),
    (lambda x: F.avg_pool1d(x, 20), RuntimeError, "avg_pool1d: input of length 8 .* kernel_size=20"),
    (lambda x: F.max_pool1d(x, 2, padding=2), ValueError, "max_pool1d: padding should be at most half of the "
                                                          "effective kernel size, got padding=2 for kernel_size=2"),
    (lambda x: F.avg_pool1d(x, 2, padding=2), ValueError, "avg_pool1d: padding should be at most half"),
    (lambda x: F.max_pool1d(x, 0), ValueError, "max_pool1d: kernel_size, stride and dilation must be >= 1"),
])
def test_1d_conv_and_pool_errors_name_the_1d_op_and_shapes(call, error, message):
    """Not conv2d's or max_pool2d's message about a 1xk kernel over a height-1 image."""
    with pytest.raises(error, match=message) as info:
        call(md.randn(1, 2, 8))
    assert "2d" not in str(info.value) and "1x" not in str(info.value)


def test_interpolate_with_an_infinite_scale_factor_is_a_clear_error():
    torch = pytest.importorskip("torch")
    x = md.randn(1, 1, 4, 4)
    for f in (float("inf"), float("nan"), 1e30):
        with pytest.raises(RuntimeError):
            torch.nn.functional.interpolate(torch.randn(1, 1, 4, 4), scale_factor=f)
        with pytest.raises(RuntimeError, match=re.escape(f"interpolate: scale_factor {f!r} for input of spatial size "
                                                         "[4, 4] gives an output size that cannot be converted to int64")):
            F.interpolate(x, scale_factor=f)
    with pytest.raises(RuntimeError, match="interpolate: expected positive scale factors, got -1.0"):
        F.interpolate(x, scale_factor=-1.0)
