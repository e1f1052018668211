"""unfold / fold (PyTorch's column layout, (N, C*kh*kw, OH*OW)) and conv2d on it.

The Numba kernels agree with the NumPy references in float32 and float64, serial and parallel;
fold is unfold's adjoint; bad geometry, shapes and layouts are refused before a kernel runs;
empty batches, channels and pixels give empty (or zero) results. The weight gradient on columns
(``unfold_weight_grad``) agrees with its reference for every remainder of its 2 x 4 register
block and adds to the array it is given. conv2d takes unfold's layout
on the CPU for 1x1 kernels and short receptive fields, im2col's otherwise, and both layouts give
the same outputs and gradients."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import unfold as k_unfold
from minidl.ops import conv as conv_ops
from minidl.ops import conv_direct as conv_direct_ops
from minidl.ops import conv_blocks
from minidl.ops import fold as fold_ops
from minidl.testing import OpSpec, check_implementations


@pytest.fixture(autouse=True)
def _no_direct_sums(monkeypatch):
    """These tests are about the Winograd and column paths: at their channel counts conv2d would
    otherwise take the direct sums (minidl.ops.conv_direct, tested in test_conv_direct.py)."""
    monkeypatch.setattr(conv_direct_ops, "USE_DIRECT", False)

CASES = [  # (N, C, H, W), (kh, kw), (sh, sw), (ph, pw), (dh, dw)
    ((2, 3, 5, 6), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 2, 7, 6), (3, 2), (2, 1), (1, 2), (1, 2)),
    ((2, 2, 9, 8), (3, 3), (3, 2), (2, 1), (2, 1)),
    ((1, 1, 4, 4), (1, 1), (2, 2), (0, 0), (1, 1)),
    ((1, 2, 3, 3), (3, 3), (1, 1), (3, 3), (1, 1)),          # more padding than image
    ((3, 1, 28, 28), (5, 5), (1, 1), (2, 2), (1, 1)),        # LeNet's first layer
]


def _geom(case):
    xs, (kh, kw), (sh, sw), (ph, pw), (dh, dw) = case
    OH = conv_ops.conv_output_size(xs[2], kh, sh, ph, dh)
    OW = conv_ops.conv_output_size(xs[3], kw, sw, pw, dw)
    return xs, (kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_unfold_kernel_matches_reference(case, dtype, threads):
    xs, geom = _geom(case)
    spec = OpSpec(name=f"unfold_{case}", op=None, reference=lambda x: fold_ops.unfold_reference(x, *geom),
                  inputs=lambda rng: (rng.standard_normal(xs),),
                  implementations={"numba": lambda x: k_unfold.unfold(x, *geom),
                                   "numba serial": lambda x: k_unfold.unfold_serial(x, *geom)})
    check_implementations(spec, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_fold_kernel_matches_reference_and_is_the_adjoint_of_unfold(case, dtype, threads):
    (N, C, H, W), geom = _geom(case)
    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW = geom
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    cols = rng.standard_normal((N, C * kh * kw, OH * OW)).astype(dtype)
    args = (N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw)
    ref = fold_ops.fold_reference(cols.astype(np.float64), *args)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for fold in (k_unfold.fold, k_unfold.fold_serial):
        np.testing.assert_allclose(fold(cols, *args), ref, rtol=tol, atol=tol)
    # <unfold(x), cols> == <x, fold(cols)>: fold is the transpose of unfold
    lhs = np.sum(k_unfold.unfold(x, *geom).astype(np.float64) * cols)
    np.testing.assert_allclose(lhs, np.sum(x * ref), rtol=tol)


def test_kernels_write_into_out_and_nothing_else():
    (N, C, H, W), geom = _geom(CASES[0])
    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW = geom
    x = np.random.default_rng(2).standard_normal((N, C, H, W))
    big = np.full((N + 2, C * kh * kw, OH * OW), 7.0)
    out = k_unfold.unfold(x, *geom, out=big[1:N + 1])
    assert np.shares_memory(out, big)
    np.testing.assert_array_equal(big[1:N + 1], fold_ops.unfold_reference(x, *geom))
    assert (big[0] == 7).all() and (big[-1] == 7).all()
    dx = np.full((N + 1, C, H, W), 7.0)
    k_unfold.fold(big[1:N + 1], N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, out=dx[:N])
    assert (dx[N] == 7).all()


def test_bad_geometry_shapes_and_layouts_are_refused():
    x = np.ones((2, 3, 5, 5), np.float32)
    good = (3, 3, 1, 1, 1, 1, 1, 1, 5, 5)
    with pytest.raises(ValueError, match="output size \\(6, 5\\) does not match input \\(5, 5\\)"):
        k_unfold.unfold(x, 3, 3, 1, 1, 1, 1, 1, 1, 6, 5)
    with pytest.raises(ValueError, match="stride and dilation >= 1 and padding >= 0"):
        k_unfold.unfold(x, 3, 3, 0, 1, 1, 1, 1, 1, 5, 5)
    with pytest.raises(ValueError, match="stride and dilation >= 1 and padding >= 0"):
        k_unfold.unfold(x, 3, 3, 1, 1, -1, 1, 1, 1, 3, 5)
    with pytest.raises(ValueError, match=r"expected columns of shape \(2, 27, 25\), got \(2, 27, 24\)"):
        k_unfold.unfold(x, *good, out=np.empty((2, 27, 24), np.float32))
    with pytest.raises(ValueError, match="expected columns of dtype float32, got float64"):
        k_unfold.unfold(x, *good, out=np.empty((2, 27, 25)))
    with pytest.raises(ValueError, match="C-contiguous"):
        k_unfold.unfold(np.ones((2, 3, 5, 10), np.float32)[..., ::2], *good)
    with pytest.raises(ValueError, match="C-contiguous"):
        k_unfold.fold(np.ones((2, 27, 50), np.float32)[..., ::2], 2, 3, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match=r"expected an output of shape \(2, 3, 5, 5\)"):
        k_unfold.fold(np.ones((2, 27, 25), np.float32), 2, 3, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1,
                      out=np.empty((2, 3, 5, 6), np.float32))
    with pytest.raises(ValueError, match=r"expected columns of shape \(2, 27, 25\)"):
        k_unfold.fold(np.ones((2, 27, 24), np.float32), 2, 3, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1)


def test_empty_batches_channels_and_pixels():
    cols = k_unfold.unfold(np.ones((0, 3, 4, 4), np.float32), 3, 3, 1, 1, 1, 1, 1, 1, 4, 4)
    assert cols.shape == (0, 27, 16)
    padded = k_unfold.unfold(np.ones((2, 1, 0, 0), np.float32), 1, 1, 1, 1, 1, 1, 1, 1, 2, 2)
    assert padded.shape == (2, 1, 4) and not padded.any()      # only padding: zeros
    assert k_unfold.unfold(np.ones((2, 0, 4, 4)), 3, 3, 1, 1, 1, 1, 1, 1, 4, 4).shape == (2, 0, 16)
    dx = k_unfold.fold(np.ones((0, 27, 16), np.float32), 0, 3, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1)
    assert dx.shape == (0, 3, 4, 4)
    dx = k_unfold.fold(np.ones((2, 1, 4), np.float32), 2, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
    assert dx.shape == (2, 1, 0, 0)


WEIGHT_GRAD_CASES = [  # N, G, O/G, K, L: every O/G mod 2 and K mod 4, groups, one image, one pixel
    (3, 1, 6, 25, 784),      # LeNet's first layer
    (2, 1, 5, 27, 33),
    (2, 2, 3, 6, 17),
    (1, 3, 1, 1, 5),
    (4, 1, 2, 4, 1),
    (2, 1, 7, 3, 64),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", WEIGHT_GRAD_CASES, ids=str)
def test_weight_grad_kernel_matches_reference(case, dtype, threads):
    N, G, Og, K, L = case
    spec = OpSpec(name=f"unfold_weight_grad_{case}", op=None, reference=fold_ops.unfold_weight_grad_reference,
                  inputs=lambda rng: (rng.standard_normal((N, G, Og, L)), rng.standard_normal((N, G, K, L)),
                                      rng.standard_normal((G, Og, K))),
                  implementations={"numba": k_unfold.unfold_weight_grad,
                                   "numba serial": k_unfold.unfold_weight_grad_serial})
    check_implementations(spec, dtype)


def test_weight_grad_adds_into_its_output_and_refuses_bad_arrays():
    rng = np.random.default_rng(5)
    g, cols = rng.standard_normal((2, 1, 3, 10)), rng.standard_normal((2, 1, 5, 10))
    dw = np.full((1, 3, 5), 2.0)
    assert k_unfold.unfold_weight_grad(g, cols, dw) is dw
    np.testing.assert_allclose(dw, 2.0 + np.einsum("nol,nkl->ok", g[:, 0], cols[:, 0])[None], rtol=1e-12)
    with pytest.raises(ValueError, match=r"matching sizes, got \(2, 1, 3, 10\), \(2, 1, 5, 9\) and \(1, 3, 5\)"):
        k_unfold.unfold_weight_grad(g, cols[..., :9].copy(), dw)
    with pytest.raises(ValueError, match=r"got \(2, 1, 3, 10\), \(2, 1, 5, 10\) and \(1, 3, 4\)"):
        k_unfold.unfold_weight_grad(g, cols, np.zeros((1, 3, 4)))
    with pytest.raises(ValueError, match="float32 or float64 arrays of one dtype, got float64, float32 and float64"):
        k_unfold.unfold_weight_grad(g, cols.astype(np.float32), dw)
    with pytest.raises(ValueError, match="float32 or float64 arrays of one dtype, got float16"):
        k_unfold.unfold_weight_grad(*(a.astype(np.float16) for a in (g, cols, dw)))
    with pytest.raises(ValueError, match="C-contiguous"):
        k_unfold.unfold_weight_grad(np.ones((2, 1, 3, 20))[..., ::2], cols, dw)
    with pytest.raises(ValueError, match=r"expected 4-D g and cols and a 3-D dw, got shapes \(2, 3, 10\)"):
        k_unfold.unfold_weight_grad(g[:, 0], cols, dw)
    empty = np.full((1, 3, 5), 2.0)     # no image, no pixel: nothing added
    k_unfold.unfold_weight_grad(np.ones((0, 1, 3, 10)), np.ones((0, 1, 5, 10)), empty)
    k_unfold.unfold_weight_grad(np.ones((2, 1, 3, 0)), np.ones((2, 1, 5, 0)), empty)
    assert (empty == 2.0).all()


def _conv(x, w, b, g, **kw):
    tx, tw, tb = (md.tensor(a, requires_grad=True) for a in (x, w, b))
    y = F.conv2d(tx, tw, tb, **kw)
    y.backward(md.tensor(g))
    return [y.detach().numpy(), tx.grad.numpy(), tw.grad.numpy(), tb.grad.numpy()]


CONV_CASES = [  # (N, C, H, W), weight shape, conv2d keywords
    ((3, 3, 9, 9), (6, 3, 3, 3), dict(padding=1)),
    ((2, 16, 8, 8), (8, 16, 1, 1), dict(stride=2)),
    ((2, 16, 8, 8), (8, 16, 1, 1), dict()),                                   # unfold(x) is x itself
    ((2, 8, 7, 7), (6, 4, 3, 3), dict(padding=1, groups=2)),
    ((2, 4, 11, 10), (5, 4, 5, 5), dict(padding=2, dilation=(1, 2), stride=(2, 1))),
    ((3, 1, 12, 12), (4, 1, 5, 5), dict(padding=2)),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("keep,dw_kernel", [(64 << 20, True), (0, True), (64 << 20, False)])
@pytest.mark.parametrize("xs,ws,kw", CONV_CASES)
def test_conv2d_in_unfolds_layout_equals_im2cols(monkeypatch, xs, ws, kw, keep, dw_kernel, dtype):
    """Forward and every gradient, with the columns kept for dW or rebuilt, and dW by the
    kernels' dot products or by BLAS."""
    monkeypatch.setattr(conv_ops, "KEEP_COLS_BYTES", keep)
    if not dw_kernel:
        monkeypatch.setattr(conv_blocks, "UNFOLD_DW_KERNEL_MAX", 0)
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    g = rng.standard_normal(F.conv2d(md.tensor(x), md.tensor(w), **kw).shape).astype(dtype)
    results = {}
    for layout in ("unfold", "im2col"):
        monkeypatch.setattr(conv_ops, "USE_UNFOLD", layout == "unfold")
        monkeypatch.setattr(conv_ops, "UNFOLD_MAX_K", 1 << 30)
        results[layout] = _conv(x, w, b, g, **kw)
    tol = 1e-12 if dtype == np.float64 else 2e-5
    for a, c in zip(results["unfold"], results["im2col"]):
        scale = max(1.0, float(np.abs(c).max()))
        np.testing.assert_allclose(a / scale, c / scale, rtol=tol, atol=tol)


@pytest.mark.parametrize("ws,groups,layout", [
    ((16, 3, 3, 3), 1, "unfold"), ((6, 1, 5, 5), 1, "unfold"),     # short receptive fields
    ((32, 64, 1, 1), 1, "unfold"),                                  # 1x1
    ((16, 6, 5, 5), 1, "unfold"), ((64, 16, 3, 3), 4, "unfold"),    # few output channels per group
    ((32, 16, 3, 3), 1, "im2col"), ((64, 32, 3, 3), 1, "im2col"), ((64, 16, 3, 3), 2, "im2col")])
def test_cpu_layout_follows_the_receptive_field_and_output_channels(ws, groups, layout):
    """1x1 kernels, receptive fields of at most UNFOLD_MAX_K values and at most UNFOLD_MAX_O output
    channels per group in unfold's layout; the rest in im2col's, as on other devices."""
    x = np.zeros((1, ws[1] * groups, 8, 8), np.float32)
    assert conv_ops._columns(x, np.zeros(ws, np.float32), groups).name == layout


def test_functional_unfold_and_fold_run_the_kernels(monkeypatch):
    seen = []
    for name in ("unfold", "fold"):
        original = getattr(k_unfold, name)
        monkeypatch.setattr(k_unfold, name, lambda *a, _f=original, _n=name, **k: seen.append(_n) or _f(*a, **k))
    x = md.tensor(np.random.default_rng(4).standard_normal((2, 3, 6, 5)), requires_grad=True)
    cols = F.unfold(x, 3, padding=1)
    F.fold(cols, (6, 5), 3, padding=1).sum().backward()
    assert seen == ["unfold", "fold", "unfold", "fold"]
    np.testing.assert_allclose(cols.detach().numpy(),
                               fold_ops.unfold_reference(x.detach().numpy(), 3, 3, 1, 1, 1, 1, 1, 1, 6, 5))


@pytest.mark.parametrize("ws,expected", [((6, 1, 5, 5), True), ((16, 6, 5, 5), False)])
def test_conv2d_weight_gradient_takes_the_kernel_for_a_small_dw(monkeypatch, ws, expected):
    """dW by ``unfold_weight_grad`` where O/G * K <= UNFOLD_DW_KERNEL_MAX (LeNet's first layer),
    by BLAS above (its second), with the same result as the im2col layout."""
    seen = []
    for name in ("unfold_weight_grad", "unfold_weight_grad_serial"):
        original = getattr(k_unfold, name)
        monkeypatch.setattr(k_unfold, name, lambda *a, _f=original: seen.append(1) or _f(*a))
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, ws[1], 12, 12)).astype(np.float32)
    w, b = rng.standard_normal(ws).astype(np.float32), np.zeros(ws[0], np.float32)
    g = rng.standard_normal((2, ws[0], 8, 8)).astype(np.float32)
    got = _conv(x, w, b, g)
    assert bool(seen) == expected
    monkeypatch.setattr(conv_ops, "USE_UNFOLD", False)
    np.testing.assert_allclose(got[2], _conv(x, w, b, g)[2], rtol=2e-5, atol=2e-5)
