"""conv2d by Winograd F(4x4, 3x3): the tile transforms (Numba kernels against their NumPy
references, float32 and float64, and each reference against its adjoint), the convolution
against direct summation (float64 tightly, float32 within the error Winograd's transforms add),
gradcheck of its backward, and the choice between Winograd and im2col."""
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import winograd as k_wino
from minidl.ops import conv_winograd as wino_ops
from minidl.ops import conv_direct as conv_direct_ops
from minidl.ops._kernel_switch import implementation
from test_nn_conv_pool import conv_direct


@pytest.fixture(autouse=True)
def _no_direct_sums(monkeypatch):
    """These tests are about the Winograd and column paths: at their channel counts conv2d would
    otherwise take the direct sums (minidl.ops.conv_direct, tested in test_conv_direct.py)."""
    monkeypatch.setattr(conv_direct_ops, "USE_DIRECT", False)

IMPLS = ("numba", "reference")
# (N, C, H, W), O, padding: odd and even outputs (cropped tiles), rectangular, padding 0, 1, 2, (1, 0)
SHAPES = [((2, 3, 5, 6), 4, 1), ((3, 2, 8, 7), 5, 0), ((1, 4, 6, 6), 3, 2), ((2, 3, 3, 4), 2, (1, 0)),
          ((1, 1, 3, 3), 1, 0)]
# channel counts that take the kernels' eight-channel copies, with and without a remainder
WIDE_SHAPES = [((2, 9, 6, 7), 12, 1), ((1, 16, 5, 4), 8, 0), ((2, 19, 4, 5), 17, (1, 0))]


@pytest.fixture
def winograd_for_small_channels(monkeypatch):
    """Route every 3x3 stride-1 convolution through Winograd, whatever its channel count."""
    monkeypatch.setattr(wino_ops, "WINOGRAD_MIN_CHANNELS", 1)


def _geometry(xs, padding):
    N, C, H, W = xs
    ph, pw = (padding, padding) if isinstance(padding, int) else padding
    OH, OW = H + 2 * ph - 2, W + 2 * pw - 2
    return N, C, H, W, ph, pw, OH, OW, *wino_ops.winograd_tiles(OH, OW)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("xs,O,padding", SHAPES + WIDE_SHAPES)
def test_transform_kernels_match_references(xs, O, padding, dtype):
    N, C, H, W, ph, pw, OH, OW, TH, TW = _geometry(xs, padding)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(dtype)
    M = rng.standard_normal((wino_ops.WINOGRAD_PLANES, N * TH * TW, O)).astype(dtype)
    g = rng.standard_normal((N, O, OH, OW)).astype(dtype)
    dV = rng.standard_normal((wino_ops.WINOGRAD_PLANES, N * TH * TW, C)).astype(dtype)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    pairs = [
        (k_wino.winograd_input(x, ph, pw, TH, TW), wino_ops.winograd_input_reference(x, ph, pw, TH, TW)),
        (k_wino.winograd_output(M, N, O, OH, OW, TH, TW), wino_ops.winograd_output_reference(M, N, O, OH, OW, TH, TW)),
        (k_wino.winograd_output_adjoint(g, TH, TW), wino_ops.winograd_output_adjoint_reference(g, TH, TW)),
        (k_wino.winograd_input_adjoint(dV, N, C, H, W, ph, pw, TH, TW),
         wino_ops.winograd_input_adjoint_reference(dV, N, C, H, W, ph, pw, TH, TW)),
    ]
    for kernel, reference in pairs:
        assert kernel.dtype == dtype and kernel.shape == reference.shape
        np.testing.assert_allclose(kernel, reference, **tol)


@pytest.mark.parametrize("xs,O,padding", SHAPES)
def test_backward_transforms_are_the_adjoints(xs, O, padding):
    """<T a, b> == <a, T* b> for the input and output transforms and the filter transform."""
    N, C, H, W, ph, pw, OH, OW, TH, TW = _geometry(xs, padding)
    rng = np.random.default_rng(1)
    x, dV = rng.standard_normal(xs), rng.standard_normal((wino_ops.WINOGRAD_PLANES, N * TH * TW, C))
    lhs = np.sum(wino_ops.winograd_input_reference(x, ph, pw, TH, TW) * dV)
    assert np.isclose(lhs, np.sum(x * wino_ops.winograd_input_adjoint_reference(dV, N, C, H, W, ph, pw, TH, TW)))
    M, g = rng.standard_normal((wino_ops.WINOGRAD_PLANES, N * TH * TW, O)), rng.standard_normal((N, O, OH, OW))
    lhs = np.sum(wino_ops.winograd_output_reference(M, N, O, OH, OW, TH, TW) * g)
    assert np.isclose(lhs, np.sum(M * wino_ops.winograd_output_adjoint_reference(g, TH, TW)))
    w, dU = rng.standard_normal((O, C, 3, 3)), rng.standard_normal((wino_ops.WINOGRAD_PLANES, O, C))
    assert np.isclose(np.sum(wino_ops.winograd_filter(w) * dU), np.sum(w * wino_ops.winograd_filter_adjoint(dU)))


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("xs,O,padding", SHAPES)
def test_winograd_conv_matches_direct_in_float64_and_gradchecks(winograd_for_small_channels, xs, O, padding, impl):
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal(xs), rng.standard_normal((O, xs[1], 3, 3)), rng.standard_normal(O)
    with implementation(impl):
        assert wino_ops.use_winograd(x, w, (1, 1), (1, 1), 1)
        y = F.conv2d(md.tensor(x), md.tensor(w), md.tensor(b), padding=padding)
        np.testing.assert_allclose(y.numpy(), conv_direct(x, w, b, 1, padding, 1, 1), rtol=1e-12, atol=1e-12)
        args = (md.tensor(x, requires_grad=True), md.tensor(w, requires_grad=True), md.tensor(b, requires_grad=True))
        assert md.autograd.gradcheck(lambda a, c, d: F.conv2d(a, c, d, padding=padding), args)


@pytest.mark.parametrize("block_bytes", [4 << 20, 1])
def test_winograd_gradients_equal_im2col_gradients(monkeypatch, block_bytes):
    """The same output and gradients as the im2col path (float64), whether V is kept for dW or
    rebuilt, with only some inputs requiring a gradient, in one block of images or several."""
    monkeypatch.setattr(wino_ops, "WINOGRAD_BLOCK_BYTES", block_bytes)
    if block_bytes == 1:
        assert len(wino_ops.winograd_blocks(3, 100)) > 1
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((3, 8, 7, 6)), rng.standard_normal((5, 8, 3, 3))
    g = rng.standard_normal((3, 5, 7, 6))

    def grads(use, keep, needs):
        monkeypatch.setattr(wino_ops, "USE_WINOGRAD", use)
        monkeypatch.setattr(wino_ops, "KEEP_V_BYTES", keep)
        tx, tw = md.tensor(x, requires_grad=needs[0]), md.tensor(w, requires_grad=needs[1])
        y = F.conv2d(tx, tw, padding=1)
        y.backward(md.tensor(g))
        return [y.detach().numpy()] + [t.grad.numpy() if t.grad is not None else None for t in (tx, tw)]

    for needs in ((True, True), (True, False), (False, True)):
        expected = grads(False, 64 << 20, needs)
        for keep in (64 << 20, 0):
            for got, want in zip(grads(True, keep, needs), expected):
                assert (got is None) == (want is None)
                if want is not None:
                    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)


def test_float32_error_stays_near_im2col():
    """float32 Winograd F(4x4, 3x3) against direct summation in float64: its transforms (entries
    up to 8 and 1/24) add rounding, measured at 7-13 times im2col's error and below 1e-5 of the
    output's scale (docs/performance.md); a wrong coefficient would give errors of order one."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((4, 16, 12, 12)), rng.standard_normal((16, 16, 3, 3)) / 12
    exact = conv_direct(x, w, None, 1, 1, 1, 1)
    errors = {}
    for use in (True, False):
        wino_ops.USE_WINOGRAD = use
        try:
            y = F.conv2d(md.tensor(x.astype(np.float32)), md.tensor(w.astype(np.float32)), padding=1).numpy()
        finally:
            wino_ops.USE_WINOGRAD = True
        errors[use] = np.abs(y - exact).max() / np.abs(exact).max()
    assert errors[True] < 1e-5
    assert errors[True] < 20 * errors[False]


def test_which_convolutions_take_winograd():
    x = np.zeros((1, 8, 5, 5), np.float32)
    w = np.zeros((4, 8, 3, 3), np.float32)
    assert wino_ops.use_winograd(x, w, (1, 1), (1, 1), 1)
    assert not wino_ops.use_winograd(x, w, (2, 1), (1, 1), 1)                           # strided
    assert not wino_ops.use_winograd(x, w, (1, 1), (2, 2), 1)                           # dilated
    assert not wino_ops.use_winograd(x, np.zeros((4, 4, 3, 3), np.float32), (1, 1), (1, 1), 2)   # groups
    assert not wino_ops.use_winograd(x, np.zeros((4, 8, 5, 5), np.float32), (1, 1), (1, 1), 1)   # 5x5
    assert not wino_ops.use_winograd(x[:, :3], w[:, :3], (1, 1), (1, 1), 1)             # few channels
    assert not wino_ops.use_winograd(x.astype(np.float16), w.astype(np.float16), (1, 1), (1, 1), 1)


def test_winograd_empty_batch_and_no_channels(winograd_for_small_channels):
    w = md.tensor(np.ones((3, 2, 3, 3)), requires_grad=True)
    x = md.tensor(np.ones((0, 2, 4, 4)), requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    assert y.shape == (0, 3, 4, 4)
    y.sum().backward()
    assert x.grad.shape == (0, 2, 4, 4) and np.all(w.grad.numpy() == 0)
    b = np.arange(3.0)
    out = F.conv2d(md.tensor(np.ones((2, 0, 4, 4))), md.tensor(np.ones((3, 0, 3, 3))), md.tensor(b))
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(b.reshape(1, 3, 1, 1), (2, 3, 2, 2)))


def test_winograd_parallel_kernel_variants_match_reference(monkeypatch):
    from minidl.kernels.cpu import _threads
    from minidl.runtime import layer_threads
    monkeypatch.setattr(layer_threads, "PARALLEL", True)
    monkeypatch.setattr(_threads, "SERIAL_BELOW", 0)
    test_transform_kernels_match_references((5, 3, 7, 6), 4, 1, np.float64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transform_kernels_read_and_write_a_slice_of_tiles(dtype):
    """conv2d's blocks pass slices V[:, t0:t1] of the batch's planes: the kernels write exactly
    those tiles (nothing around them) and read such slices as they read whole arrays."""
    N, C, H, W, ph, pw, OH, OW, TH, TW = _geometry((5, 6, 7, 8), 1)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    full = np.full((wino_ops.WINOGRAD_PLANES, N * TH * TW, C), 7.0, dtype=dtype)
    eps = 1e-5 if dtype == np.float32 else 1e-12   # of each result's scale: the transforms' entries reach 8

    def close(got, want):
        np.testing.assert_allclose(got, want, rtol=eps, atol=eps * np.abs(want).max())
    n0, n1 = 2, 4
    t0, t1 = n0 * TH * TW, n1 * TH * TW
    k_wino.winograd_input(x[n0:n1], ph, pw, TH, TW, out=full[:, t0:t1])
    want = wino_ops.winograd_input_reference(x, ph, pw, TH, TW)
    close(full[:, t0:t1], want[:, t0:t1])
    assert np.all(full[:, :t0] == 7.0) and np.all(full[:, t1:] == 7.0)
    dx = k_wino.winograd_input_adjoint_serial(full[:, t0:t1], n1 - n0, C, H, W, ph, pw, TH, TW)
    close(dx, wino_ops.winograd_input_adjoint_reference(np.ascontiguousarray(full[:, t0:t1]), n1 - n0, C, H, W,
                                                        ph, pw, TH, TW))
    with pytest.raises(ValueError, match="contiguous rows"):
        k_wino.winograd_input(x, ph, pw, TH, TW, out=np.empty((wino_ops.WINOGRAD_PLANES, C, N * TH * TW), dtype=dtype).transpose(0, 2, 1))


def test_kernels_refuse_shapes_their_tiles_do_not_hold():
    """Every size is checked before a kernel indexes without bounds checks: the planes' shape,
    an output given to write into, and images too big for the tiles named."""
    assert k_wino.PLANES == wino_ops.WINOGRAD_PLANES
    N, C, H, W, ph, pw, OH, OW, TH, TW = _geometry((2, 3, 9, 9), 1)      # 9 x 9 output: 3 x 3 tiles
    x = np.ones((N, C, H, W), np.float32)
    P = wino_ops.WINOGRAD_PLANES
    with pytest.raises(ValueError, match=r"expected x .* got shape \(2, 3, 9, 9\)"):
        k_wino.winograd_input(x, ph, pw, 1, TW)
    with pytest.raises(ValueError, match=r"expected V of shape \(36, 18, 3\), got \(36, 17, 3\)"):
        k_wino.winograd_input(x, ph, pw, TH, TW, out=np.empty((P, N * TH * TW - 1, C), np.float32))
    dV = np.ones((P, N * TH * TW, C), np.float32)
    with pytest.raises(ValueError, match="expected dV of shape"):
        k_wino.winograd_input_adjoint(dV[:, 1:], N, C, H, W, ph, pw, TH, TW)
    with pytest.raises(ValueError, match="expected dx of shape"):
        k_wino.winograd_input_adjoint(dV, N, C, H, W, ph, pw, TH, TW, out=np.empty((N, C, H, W + 1), np.float32))
    with pytest.raises(ValueError, match="expected dx"):
        k_wino.winograd_input_adjoint(dV[:, :N * TW], N, C, H, W, ph, pw, 1, TW)
    M = np.ones((P, N * TH * TW, 4), np.float32)
    with pytest.raises(ValueError, match="expected y"):
        k_wino.winograd_output(M[:, :N * TW * 2], N, 4, OH, OW, 2, TW)
    with pytest.raises(ValueError, match="expected M of shape"):
        k_wino.winograd_output(M, N, 5, OH, OW, TH, TW)
    g = np.ones((N, 4, OH, OW), np.float32)
    with pytest.raises(ValueError, match="expected g"):
        k_wino.winograd_output_adjoint(g, TH, TW - 1)
    with pytest.raises(ValueError, match="expected dM of shape"):
        k_wino.winograd_output_adjoint(g, TH, TW, out=np.empty((P, N * TH * TW, 5), np.float32))
