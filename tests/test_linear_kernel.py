"""A Linear layer's GEMMs in one parallel region (kernels/cpu/linear.py): each thread of Numba's
pool runs its share's single-threaded BLAS product and its epilogue (bias, bias + GELU; in the
MLP's backward, GELU's backward on blocks of the second layer's dX product).

The region against the NumPy reference (ops/linear.py, ops/linear_gelu.py) in float32 and
float64, forward and backward with every subset of the gradients; which operands take the
region and which fall back to NumPy's matmul; the checks before the kernel; no rows; and the
Linear and LinearGelu ops giving the same values and gradients under either implementation."""
import numba
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import _cblas
from minidl.kernels.cpu import linear as K
from minidl.ops import linear as L
from minidl.ops import linear_gelu as LG
from minidl.ops import mlp as MLP
from minidl.ops._kernel_switch import implementation

pytestmark = pytest.mark.skipif(not _cblas.AVAILABLE, reason="needs NumPy's OpenBLAS, which the region calls")
SHAPES = [(300, 40, 70), (257, 129, 33), (64, 512, 128)]   # (M, in, out): odd splits of rows and features
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


@pytest.fixture
def region(monkeypatch):
    """The region taken at these sizes (on two threads or more) and the fallback refused."""
    if numba.get_num_threads() < 2:
        pytest.skip("the region needs two threads")
    monkeypatch.setattr(K, "layer_parallel", lambda n: n >= 1 << 10)
    monkeypatch.setattr(K, "bias_add", _refuse)
    monkeypatch.setattr(K, "bias_grad", _refuse)
    monkeypatch.setattr(K, "bias_gelu_forward", _refuse)


def _refuse(*args):
    raise AssertionError("the fallback ran")


def _operands(rng, shape, dtype):
    M, n_in, n_out = shape
    x, w = rng.standard_normal((M, n_in)).astype(dtype), rng.standard_normal((n_out, n_in)).astype(dtype)
    return x, w, rng.standard_normal(n_out).astype(dtype), rng.standard_normal((M, n_out)).astype(dtype)


def _close(got, expected, dtype):
    assert got.dtype == dtype and got.shape == expected.shape
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(got, expected, rtol=TOL[dtype]["rtol"], atol=TOL[dtype]["atol"] * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_the_forward_region_matches_the_reference(shape, dtype, with_bias, region):
    x, w, b, _ = _operands(np.random.default_rng(0), shape, dtype)
    b = b if with_bias else None
    _close(K.linear_forward(x, w, b), L.linear_forward_reference(x, w, b), dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_the_gelu_epilogue_matches_the_reference(shape, dtype, approximate, region):
    x, w, b, _ = _operands(np.random.default_rng(1), shape, dtype)
    a, u = K.linear_gelu_forward(x, w, b, approximate)
    a_ref, u_ref = LG.linear_gelu_forward_reference(x, w, b, approximate)
    _close(u, u_ref, dtype)       # the product without the bias, which backward reads
    _close(a, a_ref, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False), (False, True, False),
                                   (False, False, True), (True, True, False)], ids=str)
def test_the_backward_region_gives_each_needed_gradient(shape, dtype, needs, region):
    x, w, _, g = _operands(np.random.default_rng(2), shape, dtype)
    nx, nw, nb = needs
    got = K.linear_backward(g, x if nw else None, w if nx else None, nb)
    expected = L.linear_backward_reference(g, x if nw else None, w if nx else None, nb)
    for have, want, needed in zip(got, expected, needs):
        assert (have is None) == (not needed)
        if needed:
            _close(have, want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("needs", [(True, True, True), (True, False, False), (False, True, True)], ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
def test_the_gelu_backward_matches_the_reference(shape, dtype, approximate, needs, with_bias, region):
    x, w, b, g = _operands(np.random.default_rng(5), shape, dtype)
    b = b if with_bias else None
    u = x @ w.T
    nx, nw, nb = needs
    got = K.linear_gelu_backward(g, u, b, x if nw else None, w if nx else None, approximate, nb)
    expected = LG.linear_gelu_backward_reference(g, u, b, x if nw else None, w if nx else None, approximate, nb)
    for have, want, needed in zip(got, expected, needs):
        assert (have is None) == (not needed)
        if needed and want.dtype == np.float64 and have.dtype == np.float64 and want.ndim == 1:
            np.testing.assert_allclose(have, want, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                       atol=(1e-5 if dtype == np.float32 else 1e-12) * np.abs(want).max())
        elif needed:
            _close(have, want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("needs", [(True, True, True), (False, False, True), (True, False, False),
                                   (False, True, False)], ids=str)
@pytest.mark.parametrize("with_bias", [True, False])
def test_the_mlp_backward_region_matches_the_reference(shape, dtype, approximate, needs, with_bias, region,
                                                       monkeypatch):
    """fc2's backward with GELU's as the epilogue of its dX product, in blocks of BLOCK_ROWS rows
    (SHAPES' row counts split into partial blocks), against fc2's then GELU's reference."""
    monkeypatch.setattr(K, "_bias_gelu_backward", _refuse)
    rng = np.random.default_rng(6)
    M, hidden, out = shape
    a, w, b, g = _operands(rng, (M, hidden, out), dtype)         # a (M, hidden), w (out, hidden), g (M, out)
    u = (2 * rng.standard_normal((M, hidden))).astype(dtype)
    b1 = rng.standard_normal(hidden).astype(dtype) if with_bias else None
    need_dw, need_db, need_dub = needs
    got = K.gelu_linear_backward(g, a if need_dw else None, w, u, b1, approximate, *needs)
    want = MLP.gelu_linear_backward_reference(g, a, w, u, b1, approximate, *needs)
    _close(got[0], want[0], dtype)
    for have, expected, needed in zip(got[1:], want[1:], needs):
        assert (have is None) == (not needed)
        if needed:
            assert have.dtype == expected.dtype
            _close(have.astype(dtype), expected.astype(dtype), dtype)


def test_the_mlp_backward_falls_back_where_the_region_cannot_run(monkeypatch):
    """A column-major gradient, or too few rows for two threads: fc2's and GELU's backward as two
    passes, the same values."""
    monkeypatch.setattr(K, "layer_parallel", lambda n: n >= 1 << 10)
    monkeypatch.setattr(K, "_gelu_backward_shares", _refuse)
    rng = np.random.default_rng(7)
    a, w, _, g = _operands(rng, (300, 40, 70), np.float32)
    u, b1 = rng.standard_normal((300, 40)).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    for gg, aa, uu in ((np.asfortranarray(g), a, u), (g[:3], a[:3], u[:3])):
        got = K.gelu_linear_backward(gg, aa, w, uu, b1, "tanh", True, True, True)
        want = MLP.gelu_linear_backward_reference(np.ascontiguousarray(gg), aa, w, uu, b1, "tanh", True, True, True)
        for have, expected in zip(got, want):
            np.testing.assert_allclose(have, expected, rtol=2e-5, atol=2e-5 * np.abs(expected).max())
    with pytest.raises(ValueError, match=r"output gradient \(300, 70\), weight \(70, 41\), product \(300, 40\)"):
        K.gelu_linear_backward(g, a, np.zeros((70, 41), np.float32), u, b1, "tanh", True, True, True)
    with pytest.raises(ValueError, match=r"bias \(39,\) and input \(300, 40\) do not match"):
        K.gelu_linear_backward(g, a, w, u, b1[:39], "none", True, False, False)
    with pytest.raises(ValueError, match=r"and input None do not match"):
        K.gelu_linear_backward(g, None, w, u, b1, "none", True, False, False)


def test_the_bias_gradient_sums_in_float64_across_row_blocks(region):
    # 2^15 rows of 1 + 2^-12: a block of 32 rows sums them exactly in float32; a running float32
    # sum of every row drops the small parts once it passes 2^11
    g = np.full((1 << 15, 4), 1 + 2.0 ** -12, np.float32)
    _, _, db = K.linear_backward(g, None, None, True)
    assert np.array_equal(db, np.full(4, (1 << 15) + (1 << 3), np.float32))


def test_operands_the_region_cannot_take_fall_back_to_numpy(monkeypatch):
    monkeypatch.setattr(K, "layer_parallel", lambda n: n >= 1 << 10)
    rng = np.random.default_rng(3)
    x, w, b, g = _operands(rng, (300, 40, 70), np.float32)
    u = x @ w.T            # a column-major g: GELU's backward on NumPy's side, dU's GEMMs in the region
    for have, want in zip(K.linear_gelu_backward(np.asfortranarray(g), u, b, x, w, "tanh", True),
                          LG.linear_gelu_backward_reference(g, u, b, x, w, "tanh", True)):
        np.testing.assert_allclose(have, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())
    monkeypatch.setattr(K, "_forward_shares", _refuse)
    monkeypatch.setattr(K, "_backward_shares", _refuse)
    cases = [(np.asfortranarray(x), w, g), (x, np.asfortranarray(w), g), (x, w, np.asfortranarray(g)),
             (x[:5], w, g[:5])]                 # column-major x, w or g; too few rows
    for xx, ww, gg in cases:
        if gg is g or gg.shape[0] < 300:            # g plays no part in the forward
            _close(K.linear_forward(xx, ww, b), xx @ ww.T + b, np.float32)
        for have, want in zip(K.linear_backward(gg, xx, ww, True), L.linear_backward_reference(gg, xx, ww, True)):
            _close(have, want, np.float32)
    half = [a.astype(np.float16) for a in (x, w, b)]
    assert K.linear_forward(*half).dtype == np.float16


def test_the_shapes_are_checked_before_the_kernel(region):
    x, w = np.zeros((300, 40), np.float32), np.zeros((70, 40), np.float32)
    with pytest.raises(ValueError, match=r"same in, got \(300, 41\) and \(70, 40\)"):
        K.linear_forward(np.zeros((300, 41), np.float32), w, None)
    with pytest.raises(ValueError, match=r"bias of shape \(70,\), got \(69,\)"):
        K.linear_gelu_forward(x, w, np.zeros(69, np.float32), "none")
    with pytest.raises(ValueError, match=r"output gradient \(300, 71\) does not match"):
        K.linear_backward(np.zeros((300, 71), np.float32), x, w, True)
    with pytest.raises(ValueError, match=r"output gradient \(299, 70\) does not match"):
        K.linear_backward(np.zeros((299, 70), np.float32), x, None, False)
    g = np.zeros((300, 70), np.float32)
    with pytest.raises(ValueError, match=r"does not match the product \(300, 69\) and the bias None"):
        K.linear_gelu_backward(g, np.zeros((300, 69), np.float32), None, x, w, "none", True)
    with pytest.raises(ValueError, match=r"does not match the product \(300, 70\) and the bias \(71,\)"):
        K.linear_gelu_backward(g, g, np.zeros(71, np.float32), x, w, "none", True)
    with pytest.raises(ValueError, match=r"output gradient \(300, 70\) does not match x \(299, 40\)"):
        K.linear_gelu_backward(g, g, None, np.zeros((299, 40), np.float32), w, "tanh", False)


def test_no_rows():
    x, w, b = np.zeros((0, 4), np.float32), np.ones((3, 4), np.float32), np.ones(3, np.float32)
    assert K.linear_forward(x, w, b).shape == (0, 3)
    dx, dw, db = K.linear_backward(np.zeros((0, 3), np.float32), x, w, True)
    assert dx.shape == (0, 4) and np.array_equal(dw, np.zeros((3, 4))) and np.array_equal(db, np.zeros(3))


def test_no_input_features(monkeypatch):
    """in_features = 0 at sizes the region takes otherwise: NumPy's matmul runs, and the products
    are zeros (BLAS refuses a leading dimension of 0 and would leave the output unwritten)."""
    monkeypatch.setattr(K, "layer_parallel", lambda n: n >= 1 << 10)
    x, w, b = np.zeros((300, 0), np.float32), np.zeros((70, 0), np.float32), np.arange(70, dtype=np.float32)
    np.testing.assert_array_equal(K.linear_forward(x, w, None), np.zeros((300, 70)))
    a, u = K.linear_gelu_forward(x, w, b, "tanh")
    np.testing.assert_array_equal(u, np.zeros((300, 70)))
    np.testing.assert_allclose(a, LG.bias_gelu_forward_reference(u, b, "tanh"), rtol=1e-6)
    g = np.ones((300, 70), np.float32)
    dx, dw, db = K.linear_backward(g, x, w, True)
    assert dx.shape == (300, 0) and dw.shape == (70, 0)
    np.testing.assert_array_equal(db, np.full(70, 300.0))


@pytest.mark.parametrize("op", ["linear", "linear_gelu", "linear_gelu_linear"])
def test_the_ops_agree_under_either_implementation(op, region):
    rng = np.random.default_rng(4)
    x0, w0, b0, g = _operands(rng, (6, 50, 96), np.float32)   # (6, 50) rows of a 3-D input
    x0 = np.concatenate([x0] * 50).reshape(6, 50, 50)
    g = np.concatenate([g] * 50).reshape(6, 50, 96)
    results = []
    for impl in ("reference", "numba"):
        x, w, b = (md.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        with implementation(impl):
            if op == "linear_gelu_linear":        # a second layer of (96, 96): the same shapes out
                y = MLP.linear_gelu_linear(x, w, b, md.tensor(np.eye(96, dtype=np.float32) * 0.5), None, "tanh")
            else:
                y = F.linear(x, w, b) if op == "linear" else LG.linear_gelu(x, w, b, "tanh")
            y.backward(md.tensor(g))
        results.append([t.detach().numpy() for t in (y, x.grad, w.grad, b.grad)])
    for have, want in zip(*results):
        _close(have, want, np.float32)
