"""float16 and bfloat16 in the CPU channel-norm kernels (BatchNorm, masked BatchNorm1d, GroupNorm,
InstanceNorm, SyncBatchNorm's local passes): read and written as stored, through their 2-byte
integer views, computed in float32, each output rounded once. The results equal the float64
reference of the rounded input within one ulp of the low dtype (training and eval, affine or
not, forward and backward, every kernel layout), and no float32 copy of an activation is made."""
import tracemalloc

import ml_dtypes
import numba
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import _channel_rows, _stream
from minidl.kernels.cpu import batch_norm as bn_kernel
from minidl.kernels.cpu import group_norm as gn_kernel
from minidl.kernels.cpu import sync_batch_norm as sbn_kernel
from minidl.ops.normalization import (batch_norm_backward_reference, batch_norm_forward_reference,
                                      group_norm_backward_reference, group_norm_forward_reference)

LOW = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}
VIEW = {"float16": np.dtype(np.uint16), "bfloat16": np.dtype(np.int16)}
JIT = not numba.config.DISABLE_JIT

# shapes that take each kernel layout of BatchNorm (a 2-byte row of 35 values is 70 bytes, at
# least a cache line: the fused per-channel kernels; 16 values, 32 bytes: the chunked rows
# kernels; 2-D: the (N, C) columns kernels); the 300-value rows cross a 256-element block
BN_SHAPES = [(8, 6, 5, 7), (6, 5, 4, 4), (40, 6), (3, 4, 300)]
GN_SHAPES = [((4, 6, 5, 7), 3), ((2, 4, 300), 4), ((3, 6, 16), 1)]


def _ulp(values, low):
    """One ulp of the low dtype at each value."""
    info = ml_dtypes.finfo(LOW[low])
    v = np.abs(np.asarray(values, np.float64))
    return 2.0 ** (np.floor(np.log2(np.maximum(v, float(info.smallest_normal)))) - int(info.nmant))


def _assert_within_ulp(got, exact, low, what):
    """got (low dtype) within one ulp of the float64 ``exact`` (plus 1e-6 of the largest value:
    a gradient element that cancels to nearly 0 carries the float32 error of its terms)."""
    assert got.dtype == LOW[low], what
    err = np.abs(got.astype(np.float64) - exact)
    tol = _ulp(exact, low) + 1e-6 * np.abs(exact).max()
    worst = float((err / tol).max())
    assert worst <= 1.0, f"{what} ({low}): {worst:.2f} x the tolerance from the float64 reference"


def _inputs(rng, shape, low, affine):
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(LOW[low])
    g = rng.standard_normal(shape).astype(LOW[low])
    w = rng.standard_normal(shape[1]).astype(np.float32) if affine else None
    b = rng.standard_normal(shape[1]).astype(np.float32) if affine else None
    return x, g, w, b


def _f64(a):
    return None if a is None else a.astype(np.float64)


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
def test_batch_norm_training(low, affine, shape):
    x, g, w, b = _inputs(np.random.default_rng(1), shape, low, affine)
    y, mean, rstd = bn_kernel.batch_norm_forward(x, w, b)
    y64, mean64, rstd64 = batch_norm_forward_reference(_f64(x), _f64(w), _f64(b))
    _assert_within_ulp(y, y64, low, "y")
    np.testing.assert_allclose(mean, mean64, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rstd, rstd64, rtol=1e-6)
    dx, dw, db = bn_kernel.batch_norm_backward(g, x, mean, rstd, w)
    dx64, dw64, db64 = batch_norm_backward_reference(_f64(g), _f64(x), mean64, rstd64, _f64(w))
    _assert_within_ulp(dx, dx64, low, "dx")
    np.testing.assert_allclose(dw, dw64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, db64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
def test_batch_norm_eval(low, affine, shape):
    """Given statistics: the apply pass, and the backward without the coupling terms."""
    rng = np.random.default_rng(2)
    x, g, w, b = _inputs(rng, shape, low, affine)
    mean = rng.standard_normal(shape[1])
    rstd = rng.uniform(0.5, 2.0, shape[1])
    y = bn_kernel.batch_norm_apply(x, mean, rstd, w, b)
    _assert_within_ulp(y, batch_norm_forward_reference(_f64(x), _f64(w), _f64(b), stats=(mean, rstd))[0], low, "y")
    dx, dw, db = bn_kernel.batch_norm_backward(g, x, mean, rstd, w, training=False)
    dx64, dw64, db64 = batch_norm_backward_reference(_f64(g), _f64(x), mean, rstd, _f64(w), training=False)
    _assert_within_ulp(dx, dx64, low, "dx")
    np.testing.assert_allclose(dw, dw64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, db64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_masked_batch_norm(low):
    rng = np.random.default_rng(3)
    x, g, w, b = _inputs(rng, (3, 4, 9), low, True)
    mask = rng.uniform(size=(3, 9)) < 0.6
    y, mean, rstd = bn_kernel.batch_norm_forward(x, w, b, mask=mask)
    y64, mean64, rstd64 = batch_norm_forward_reference(_f64(x), _f64(w), _f64(b), mask=mask)
    _assert_within_ulp(y, y64, low, "y")
    assert np.all(y.astype(np.float32)[np.broadcast_to(~mask[:, None, :], x.shape)] == 0)
    dx, dw, db = bn_kernel.batch_norm_backward(g, x, mean, rstd, w, mask=mask)
    dx64, dw64, db64 = batch_norm_backward_reference(_f64(g), _f64(x), mean64, rstd64, _f64(w), mask=mask)
    _assert_within_ulp(dx, dx64, low, "dx")
    np.testing.assert_allclose(dw, dw64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape,groups", GN_SHAPES, ids=str)
def test_group_and_instance_norm(low, affine, shape, groups):
    x, g, w, b = _inputs(np.random.default_rng(4), shape, low, affine)
    for G in (groups, shape[1]):         # G = C: InstanceNorm, which runs the same kernels
        y, mean, rstd = gn_kernel.group_norm_forward(x, G, w, b)
        y64, mean64, rstd64 = group_norm_forward_reference(_f64(x), G, _f64(w), _f64(b))
        _assert_within_ulp(y, y64, low, f"y, {G} groups")
        np.testing.assert_allclose(rstd, rstd64, rtol=1e-6)
        dx, dw, db = gn_kernel.group_norm_backward(g, x, mean, rstd, w, G)
        dx64, dw64, db64 = group_norm_backward_reference(_f64(g), _f64(x), mean64, rstd64, _f64(w), G)
        _assert_within_ulp(dx, dx64, low, f"dx, {G} groups")
        np.testing.assert_allclose(dw, dw64, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(db, db64, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(8, 6, 5, 7), (40, 6)], ids=str)
def test_sync_batch_norm_local_passes(low, shape):
    """One rank's passes equal BatchNorm's: moments, gradient sums, dx from the (here local) sums."""
    x, g, w, _ = _inputs(np.random.default_rng(5), shape, low, True)
    count, mean, m2 = sbn_kernel.sync_batch_norm_moments(x)
    _, mean64, rstd64 = batch_norm_forward_reference(_f64(x))
    np.testing.assert_allclose(mean, mean64, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(count / m2, rstd64 ** 2, rtol=1e-5)    # eps aside: var = m2 / count
    rstd = 1 / np.sqrt(m2 / count + 1e-5)
    sdy, sdyx = sbn_kernel.sync_batch_norm_grad_sums(g, x, mean)
    np.testing.assert_allclose(sdy, g.astype(np.float64).sum(axis=(0,) + tuple(range(2, g.ndim))), rtol=1e-5, atol=1e-5)
    dx = sbn_kernel.sync_batch_norm_input_grad(g, x, mean, rstd, w, sdy, sdyx, count)
    _assert_within_ulp(dx, batch_norm_backward_reference(_f64(g), _f64(x), mean, rstd, _f64(w))[0], low, "dx")


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_gradient_of_another_dtype(low):
    """A float32 gradient for a 2-byte input is read as float32 (no rounding to the low dtype)."""
    x, g, w, _ = _inputs(np.random.default_rng(6), (8, 6, 5, 7), low, True)
    g32 = np.random.default_rng(7).standard_normal(x.shape).astype(np.float32)
    _, mean, rstd = bn_kernel.batch_norm_forward(x, w)
    dx = bn_kernel.batch_norm_backward(g32, x, mean, rstd, w)[0]
    _assert_within_ulp(dx, batch_norm_backward_reference(_f64(g32), _f64(x), mean, rstd, _f64(w))[0], low, "bn dx")
    _, mean, rstd = gn_kernel.group_norm_forward(x, 3, w)
    dx = gn_kernel.group_norm_backward(g32, x, mean, rstd, w, 3)[0]
    _assert_within_ulp(dx, group_norm_backward_reference(_f64(g32), _f64(x), mean, rstd, _f64(w), 3)[0], low,
                       "gn dx")


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("norm", ["batch_norm", "group_norm"])
def test_streamed_2_byte_outputs_equal_stored_ones(low, norm, monkeypatch):
    x, g, w, b = _inputs(np.random.default_rng(8), (4, 6, 2, 160), low, True)    # rows of 640 bytes

    def run():
        if norm == "batch_norm":
            y, mean, rstd = bn_kernel.batch_norm_forward(x, w, b)
            return y, bn_kernel.batch_norm_backward(g, x, mean, rstd, w)[0]
        y, mean, rstd = gn_kernel.group_norm_forward(x, 3, w, b)
        return y, gn_kernel.group_norm_backward(g, x, mean, rstd, w, 3)[0]

    monkeypatch.setattr(_stream, "STREAM_MIN_BYTES", 1 << 40)
    stored = run()
    monkeypatch.setattr(_stream, "STREAM_MIN_BYTES", 0)
    assert _stream.should_stream(x.reshape(24, 320))
    for a, e in zip(run(), stored):
        np.testing.assert_array_equal(a.view(VIEW[low]), e.view(VIEW[low]))


# no float32 copy ----------------------------------------------------------------------------------
KERNELS = {bn_kernel: ("_fused_forward_rows", "_fused_backward_rows", "_chunk_stats_rows", "_chunk_stats_cols",
                       "_apply_rows", "_apply_cols", "_chunk_grad_sums_rows", "_chunk_grad_sums_cols", "_dx_rows",
                       "_dx_cols"),
           gn_kernel: ("_rows_forward", "_rows_backward")}


def _record_kernel_arrays(monkeypatch, seen):
    """Wrap every parallel kernel so that the arrays it receives land in ``seen``."""
    for module, names in KERNELS.items():
        for name in names:
            def wrapped(*args, _kernel=getattr(module, name), _name=name):
                seen.extend((_name, a) for a in args if isinstance(a, np.ndarray))
                return _kernel(*args)
            monkeypatch.setattr(module, name, wrapped)


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(8, 6, 5, 7), (6, 5, 4, 4), (40, 6)], ids=str)
def test_kernels_receive_the_2_byte_views(low, shape, monkeypatch):
    """Every activation-sized array a kernel gets (x, dy, y, dx) is the integer view of a
    2-byte tensor: no float32 copy of x or dy, no float32 output converted afterwards."""
    seen = []
    _record_kernel_arrays(monkeypatch, seen)
    x, g, w, b = _inputs(np.random.default_rng(9), shape, low, True)
    _, mean, rstd = bn_kernel.batch_norm_forward(x, w, b)
    bn_kernel.batch_norm_backward(g, x, mean, rstd, w)
    bn_kernel.batch_norm_apply(x, mean, rstd, w, b)
    bn_kernel.batch_norm_backward(g, x, mean, rstd, w, training=False)
    if len(shape) > 2:
        _, mean, rstd = gn_kernel.group_norm_forward(x, 3 if shape[1] % 3 == 0 else 1, w, b)
        gn_kernel.group_norm_backward(g, x, mean, rstd, w, 3 if shape[1] % 3 == 0 else 1)
    big = [(name, a.dtype) for name, a in seen if a.size == x.size]
    assert len(big) >= 8
    assert all(dt == VIEW[low] for _, dt in big), big


@pytest.mark.skipif(not JIT, reason="kernels run as Python: tracemalloc would trace every scalar they make")
@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_no_float32_activation_is_allocated(low):
    """NumPy's allocations during a forward and a backward: the output (one activation of the
    low dtype) and per-channel vectors, never a float32 activation (twice the bytes)."""
    x, g, w, b = _inputs(np.random.default_rng(10), (16, 8, 16, 32), low, True)
    for fwd, bwd in ((lambda: bn_kernel.batch_norm_forward(x, w, b),
                      lambda s: bn_kernel.batch_norm_backward(g, x, s[1], s[2], w)),
                     (lambda: gn_kernel.group_norm_forward(x, 4, w, b),
                      lambda s: gn_kernel.group_norm_backward(g, x, s[1], s[2], w, 4))):
        bwd(fwd())                          # compiled, warm
        tracemalloc.start()
        try:
            stats = fwd()
            _, forward_peak = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            result = bwd(stats)
            _, backward_peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert stats[0].dtype == LOW[low] and result[0].dtype == LOW[low]
        assert forward_peak < 1.5 * x.nbytes, (forward_peak, x.nbytes)
        assert backward_peak < 2.5 * x.nbytes, (backward_peak, x.nbytes)     # y still alive, and dx


# through the functional API and autograd ----------------------------------------------------------
@pytest.mark.parametrize("low", ["float16", "bfloat16"])
@pytest.mark.parametrize("training", [True, False])
def test_functional_norms_forward_and_backward(low, training):
    rng = np.random.default_rng(11)
    x, g, w, b = _inputs(rng, (4, 6, 5, 7), low, True)
    running_mean = rng.standard_normal(6).astype(np.float32)
    running_var = rng.uniform(0.5, 2, 6).astype(np.float32)

    def run(x, g, w, b, rm, rv):
        out = []
        for fn in (lambda t, wt, bt: F.batch_norm(t, md.tensor(rm), md.tensor(rv), wt, bt, training=training),
                   lambda t, wt, bt: F.group_norm(t, 3, wt, bt),
                   lambda t, wt, bt: F.instance_norm(t, weight=wt, bias=bt)):
            t, wt, bt = (md.tensor(a, requires_grad=True) for a in (x, w, b))
            with md.implementation(norm="numba"):
                y = fn(t, wt, bt)
                y.backward(md.tensor(g))
            out.append((y.detach().numpy(), t.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()))
        return out

    got = run(x, g, w, b, running_mean, running_var)
    exact = run(*(a.astype(np.float64) for a in (x, g, w, b, running_mean, running_var)))
    for name, (y, dx, dw, db), (y64, dx64, dw64, db64) in zip(("batch_norm", "group_norm", "instance_norm"), got,
                                                                exact):
        _assert_within_ulp(y, y64, low, f"{name} y")
        _assert_within_ulp(dx, dx64, low, f"{name} dx")
        assert dw.dtype == np.float32 and db.dtype == np.float32
        np.testing.assert_allclose(dw, dw64, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(db, db64, rtol=1e-5, atol=1e-5)


# the conversions ----------------------------------------------------------------------------------
def _conversion_kernels():
    def widen_all(bits, out):
        for i in range(bits.shape[0]):
            out[i] = _channel_rows.widen(bits[i])

    def narrow_all(v, out):
        for i in range(v.shape[0]):
            out[i] = _channel_rows.narrow(v[i], out)
    return (numba.njit(widen_all), numba.njit(narrow_all)) if JIT else (widen_all, narrow_all)


@pytest.mark.parametrize("low", ["float16", "bfloat16"])
def test_conversions_round_as_numpy(low):
    """widen is exact for every 2-byte pattern; narrow rounds to nearest even as NumPy/ml_dtypes,
    ties (the midpoints between neighbours) included; NaN stays NaN of its sign."""
    widen_all, narrow_all = _conversion_kernels()
    stride = 1 if JIT else 61            # every pattern with the JIT, a sample as Python
    bits = np.arange(0, 65536, stride, dtype=np.uint32).astype(np.uint16).view(VIEW[low])
    exact = bits.view(LOW[low]).astype(np.float32)
    wide = np.empty(bits.shape, np.float32)
    widen_all(bits, wide)
    nan = np.isnan(exact)
    np.testing.assert_array_equal(wide[~nan].view(np.uint32), exact[~nan].view(np.uint32))
    assert np.isnan(wide[nan]).all() and (np.signbit(wide[nan]) == np.signbit(exact[nan])).all()

    finite = np.sort(exact[np.isfinite(exact) & (exact >= 0)])
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)    # exact in float32
    rng = np.random.default_rng(12)
    noise = rng.integers(0, 2 ** 32, 4096 if JIT else 512, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([65504, 65519.99, 65520, 2 ** -25, 1.5 * 2 ** -24, 3e38, 3.4e38, np.inf, np.nan, 0.0, 1e-40],
                       np.float32)
    v = np.concatenate([mids, -mids, noise, special, -special])
    out = np.empty(v.shape, VIEW[low])
    narrow_all(v, out)
    with np.errstate(all="ignore"):
        expected = v.astype(LOW[low]).view(VIEW[low])
    nan = np.isnan(v)
    np.testing.assert_array_equal(out[~nan], expected[~nan])
    back = out[nan].view(LOW[low]).astype(np.float32)
    assert np.isnan(back).all() and (np.signbit(back) == np.signbit(v[nan])).all()
