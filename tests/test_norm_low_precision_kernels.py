"""The CPU row-norm kernels read and write float16 and bfloat16 in their own format (no float32
copy of an (N, D) array): their results are the float32 kernel's on the widened input, rounded
once, to within one unit in the last place of the 2-byte format (almost always bit for bit).
Covers LayerNorm, RMSNorm, ScaleNorm and the fused residual add + LayerNorm / RMSNorm, forward and
backward, with and without streaming stores, and the wrappers' calling convention."""
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

from minidl.kernels.cpu import _row_norm, residual_norm
from minidl.kernels.cpu import layer_norm as ln
from minidl.kernels.cpu import rms_norm as rms
from minidl.kernels.cpu import scale_norm as sn

BF16 = np.dtype(ml_dtypes.bfloat16)
LOW = {"float16": np.dtype(np.float16), "bfloat16": BF16}
SHAPES = [(1, 5), (7, 37), (33, 300), (130, 768)]
ROW_SLACK = 16   # float32 ulps of a row's largest value: a reordered sum's error, cancelled
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ordinal(a):
    """The 2-byte patterns of ``a`` as integers in the order of their values (sign-magnitude to
    two's complement), so that neighbouring values differ by one."""
    b = a.view(np.uint16).astype(np.int32)
    return np.where(b & 0x8000, -(b & 0x7fff), b)


def assert_rounded_once(got, want32, dtype):
    """got (2-byte) is want32 (float32) rounded to ``dtype``, to within one ulp, and equal to it in
    all but a few elements (a different summation order may move a statistic by a float32 ulp).

    Where an element is the small difference of terms as large as the row's biggest values (a
    gradient's three terms cancelling), such a float32 ulp is many 2-byte ulps of the element
    itself: there, the two may differ by what reordering float32 sums moves a row's values
    (ROW_SLACK float32 ulps of the row's largest value). A second rounding still shows in the
    elements that do not cancel: there it is half a 2-byte ulp, thousands of float32 ulps."""
    assert got.dtype == dtype and got.shape == want32.shape
    with np.errstate(over="ignore"):            # past the format's range: inf, as intended
        want = want32.astype(dtype)
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    with np.errstate(invalid="ignore"):
        finite = np.where(np.isfinite(want32), np.abs(want32), 0)
        scale = finite.max(axis=-1, keepdims=True, initial=0) if want32.ndim else finite
        off = np.abs(got.astype(np.float32) - want32) > ROW_SLACK * np.finfo(np.float32).eps * scale
    dist = np.abs(ordinal(got) - ordinal(want))
    far = (dist > 1) & off & ~nan
    assert not far.any(), f"{dist[far].max()} ulps apart at {np.argwhere(far)[:5].tolist()}"
    dist = dist[~nan]
    assert np.mean(dist == 0) >= 0.999 if dist.size >= 1000 else True


def data(shape, dtype, seed=0, scale=2.0, offset=1.0):
    rng = np.random.default_rng(seed)
    n, d = shape
    x = (rng.standard_normal(shape) * scale + offset).astype(dtype)
    r = rng.standard_normal(shape).astype(dtype)
    dy = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal(d).astype(np.float32)
    b = rng.standard_normal(d).astype(np.float32)
    return x, r, dy, w, b


def f32(a):
    return a.astype(np.float32)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("low", LOW)
def test_layer_norm(low, shape, stream):
    dtype = LOW[low]
    x, _, dy, w, b = data(shape, dtype)
    y, mean, rstd = ln.layer_norm_forward(x, w, b, 1e-5, stream=stream)
    y32, mean32, rstd32 = ln.layer_norm_forward(f32(x), w, b, 1e-5, stream=stream)
    assert_rounded_once(y, y32, dtype)
    np.testing.assert_allclose(mean, mean32, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(rstd, rstd32, rtol=1e-6)
    dx, dw, db = ln.layer_norm_backward(dy, x, mean, rstd, w, stream=stream)
    dx32, dw32, db32 = ln.layer_norm_backward(f32(dy), f32(x), mean, rstd, w, stream=stream)
    assert_rounded_once(dx, dx32, dtype)
    np.testing.assert_allclose(dw, dw32, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, db32, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("low", LOW)
def test_rms_norm(low, shape, stream):
    dtype = LOW[low]
    x, _, dy, w, _ = data(shape, dtype, seed=1)
    y, rstd = rms.rms_norm_forward(x, w, 1e-5, stream=stream)
    y32, rstd32 = rms.rms_norm_forward(f32(x), w, 1e-5, stream=stream)
    assert_rounded_once(y, y32, dtype)
    np.testing.assert_allclose(rstd, rstd32, rtol=1e-6)
    for need_dw in (True, False):
        dx, dw = rms.rms_norm_backward(dy, x, rstd, w, need_dweight=need_dw, stream=stream)
        dx32, dw32 = rms.rms_norm_backward(f32(dy), f32(x), rstd, w, need_dweight=need_dw, stream=stream)
        assert_rounded_once(dx, dx32, dtype)
        if need_dw:
            np.testing.assert_allclose(dw, dw32, rtol=1e-5, atol=1e-5)
    dx_none, dw_only = rms.rms_norm_backward(dy, x, rstd, w, need_dx=False)
    assert dx_none is None
    np.testing.assert_allclose(dw_only, rms.rms_norm_backward(f32(dy), f32(x), rstd, w)[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("low", LOW)
def test_scale_norm(low, shape, stream):
    dtype = LOW[low]
    x, _, dy, _, _ = data(shape, dtype, seed=2)
    y, inv = sn.scale_norm_forward(x, 1.7, 1e-5, stream=stream)
    y32, inv32 = sn.scale_norm_forward(f32(x), 1.7, 1e-5, stream=stream)
    assert_rounded_once(y, y32, dtype)
    np.testing.assert_allclose(inv, inv32, rtol=1e-6)
    dx, dg = sn.scale_norm_backward(dy, x, inv, 1.7, 1e-5, stream=stream)
    dx32, dg32 = sn.scale_norm_backward(f32(dy), f32(x), inv, 1.7, 1e-5, stream=stream)
    assert_rounded_once(dx, dx32, dtype)
    np.testing.assert_allclose(dg, dg32, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("low", LOW)
def test_residual_layer_norm_and_rms_norm(low, shape, stream):
    """s = x + r rounded as NumPy / ml_dtypes add; y and the statistics are those of that rounded s."""
    dtype = LOW[low]
    x, r, dy, w, b = data(shape, dtype, seed=3)
    ds = (np.random.default_rng(9).standard_normal(shape)).astype(dtype)
    zeros = np.zeros(shape, np.float32)
    s, y, mean, rstd = residual_norm.add_layer_norm_forward(x, r, w, b, 1e-5, stream=stream)
    np.testing.assert_array_equal(s.view(np.uint16), (x + r).view(np.uint16))
    _, y32, mean32, rstd32 = residual_norm.add_layer_norm_forward(f32(s), zeros, w, b, 1e-5, stream=stream)
    assert_rounded_once(y, y32, dtype)
    np.testing.assert_allclose(mean, mean32, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(rstd, rstd32, rtol=1e-6)
    for stream_grad in (ds, None):
        dx, dw, db = residual_norm.add_layer_norm_backward(dy, stream_grad, s, mean, rstd, w, stream=stream)
        dx32, dw32, db32 = residual_norm.add_layer_norm_backward(
            f32(dy), None if stream_grad is None else f32(stream_grad), f32(s), mean, rstd, w, stream=stream)
        assert_rounded_once(dx, dx32, dtype)
        np.testing.assert_allclose(dw, dw32, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(db, db32, rtol=1e-5, atol=1e-5)

    s, y, rstd = residual_norm.add_rms_norm_forward(x, r, w, 1e-5, stream=stream)
    np.testing.assert_array_equal(s.view(np.uint16), (x + r).view(np.uint16))
    _, y32, rstd32 = residual_norm.add_rms_norm_forward(f32(s), zeros, w, 1e-5, stream=stream)
    assert_rounded_once(y, y32, dtype)
    np.testing.assert_allclose(rstd, rstd32, rtol=1e-6)
    dx, dw = residual_norm.add_rms_norm_backward(dy, ds, s, rstd, w, stream=stream)
    dx32, dw32 = residual_norm.add_rms_norm_backward(f32(dy), f32(ds), f32(s), rstd, w, stream=stream)
    assert_rounded_once(dx, dx32, dtype)
    np.testing.assert_allclose(dw, dw32, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("low", LOW)
def test_overflow_nan_and_large_mean(low):
    """A weight that pushes outputs past float16's range gives inf as the rounded float32 result
    does; a NaN in a row makes that row NaN and no other; a large mean with a small spread is
    normalized as accurately as in float32."""
    dtype = LOW[low]
    x, _, dy, w, b = data((9, 64), dtype, seed=4)
    w = w * np.float32(3e4 if low == "float16" else 1e38)
    x.view(np.uint16)[3, 5] = 0x7c01 if low == "float16" else 0x7f81     # a signalling NaN, payload 1
    y, mean, rstd = ln.layer_norm_forward(x, w, b, 1e-5)
    y32, _, _ = ln.layer_norm_forward(f32(x), w, b, 1e-5)
    assert np.isinf(y.astype(np.float32)).any()
    assert_rounded_once(y, y32, dtype)
    assert np.isnan(y[3].astype(np.float32)).all() and not np.isnan(np.delete(y, 3, 0).astype(np.float32)).any()
    # the NaN's bits too: widening quiets it where the float32 path's arithmetic does
    np.testing.assert_array_equal(y[3].view(np.uint16), y32[3].astype(dtype).view(np.uint16))
    big = (np.float32(100.0) + np.float32(0.5) * np.random.default_rng(5).standard_normal((4, 256))).astype(dtype)
    yb, _, _ = ln.layer_norm_forward(big, None, None, 1e-5)
    yb32, _, _ = ln.layer_norm_forward(f32(big), None, None, 1e-5)
    assert_rounded_once(yb, yb32, dtype)


class _Spy:
    """Records the arrays a kernel is launched with."""

    def __init__(self, monkeypatch, module):
        self.calls = []
        real = module.launch

        def launch(kernel, work, *args):
            self.calls.append(args)
            return real(kernel, work, *args)
        monkeypatch.setattr(module, "launch", launch)


@pytest.mark.parametrize("low", LOW)
def test_kernels_take_the_2_byte_arrays_themselves(low, monkeypatch):
    """No float32 copy: the kernel is handed x, dy and the output's own memory as 2-byte
    storage, and writes into the ``out``/``dx_out`` arrays given."""
    dtype = LOW[low]
    x, r, dy, w, b = data((64, 96), dtype, seed=6)
    spy = _Spy(monkeypatch, _row_norm)
    out = np.empty_like(x)
    y, mean, rstd = ln.layer_norm_forward(x, w, b, 1e-5, out=out)
    assert y is out
    args = spy.calls[-1]
    assert np.shares_memory(args[0], x) and np.shares_memory(args[4], out)
    assert args[0].dtype.itemsize == 2 and args[4].dtype.itemsize == 2
    dx_out = np.empty_like(x)
    dx, _, _ = ln.layer_norm_backward(dy, x, mean, rstd, w, dx_out=dx_out)
    assert dx is dx_out
    args = spy.calls[-1]
    assert np.shares_memory(args[0], dy) and np.shares_memory(args[1], x) and np.shares_memory(args[5], dx_out)
    spy = _Spy(monkeypatch, residual_norm)
    s_out, y_out = np.empty_like(x), np.empty_like(x)
    s, y, _, _ = residual_norm.add_layer_norm_forward(x, r, w, b, 1e-5, out=y_out, sum_out=s_out)
    assert s is s_out and y is y_out
    args = spy.calls[-1]
    assert all(np.shares_memory(a, m) for a, m in zip((args[0], args[1], args[5], args[6]), (x, r, s_out, y_out)))


@pytest.mark.parametrize("low", LOW)
def test_mixed_dtypes_and_odd_layouts(low):
    """A float32 dy for a 2-byte x is used at float32 precision; a non-contiguous x and an out of
    another layout still give the contiguous result."""
    dtype = LOW[low]
    x, _, dy, w, b = data((20, 48), dtype, seed=7)
    y, mean, rstd = ln.layer_norm_forward(x, w, b, 1e-5)
    dy32 = np.random.default_rng(8).standard_normal(x.shape).astype(np.float32)
    dx, dw, _ = ln.layer_norm_backward(dy32, x, mean, rstd, w)
    dx32, dw32, _ = ln.layer_norm_backward(dy32, f32(x), mean, rstd, w)
    assert dx.dtype == dtype
    assert_rounded_once(dx, dx32, dtype)
    np.testing.assert_allclose(dw, dw32, rtol=1e-5, atol=1e-5)
    xt = np.asfortranarray(x)
    out = np.empty((48, 20), dtype).T           # (20, 48), not C-contiguous
    y2, _, _ = ln.layer_norm_forward(xt, w, b, 1e-5, out=out)
    assert y2 is out
    np.testing.assert_array_equal(out.view(np.uint16), y.view(np.uint16))


@pytest.mark.parametrize("low", LOW)
def test_empty_inputs(low):
    dtype = LOW[low]
    for shape in ((0, 8), (3, 0)):
        x = np.zeros(shape, dtype)
        y, mean, rstd = ln.layer_norm_forward(x, None, None, 1e-5)
        assert y.shape == shape and y.dtype == dtype and mean.shape == (shape[0],)
        dx, dw, db = ln.layer_norm_backward(x, x, mean, rstd, None)
        assert dx.shape == shape and dx.dtype == dtype and dw.shape == (shape[1],) and not dw.any()
        s, y, r = residual_norm.add_rms_norm_forward(x, x, None, 1e-5)
        assert s.shape == y.shape == shape and s.dtype == dtype


def test_python_mode_under_disable_jit():
    """With NUMBA_DISABLE_JIT=1 the same kernels run as Python on the 2-byte storage."""
    script = textwrap.dedent("""
        import ml_dtypes, numpy as np
        from minidl.kernels.cpu import layer_norm as ln, residual_norm as rn
        rng = np.random.default_rng(0)
        for dtype in (np.float16, ml_dtypes.bfloat16):
            x, r, dy = (rng.standard_normal((3, 7)).astype(dtype) for _ in range(3))
            w = rng.standard_normal(7).astype(np.float32)
            f = lambda a: a.astype(np.float32)
            y, m, s = ln.layer_norm_forward(x, w, None, 1e-5)
            y32, _, _ = ln.layer_norm_forward(f(x), w, None, 1e-5)
            assert y.dtype == np.dtype(dtype) and np.array_equal(f(y), f(y32.astype(dtype))), dtype
            dx, dw, db = ln.layer_norm_backward(dy, x, m, s, w)
            dx32, _, _ = ln.layer_norm_backward(f(dy), f(x), m, s, w)
            assert np.array_equal(f(dx), f(dx32.astype(dtype))), dtype
            sm, y, rs = rn.add_rms_norm_forward(x, r, w, 1e-5)
            assert np.array_equal(f(sm), f(x + r)), dtype
        print("ok")
    """)
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-2000:]
