"""conv2d's image blocks on the block workers (minidl.runtime.block_workers), and Winograd's shares
as one parallel region of Numba's pool (minidl.kernels.cpu.winograd_shares): the same output and
gradients as the loop on the calling thread, for Winograd convolutions and both column layouts
(im2col's and unfold's), over block counts, odd batches, more shares than workers, every
combination of needed gradients, and groups/stride/dilation; the region taken where it can be;
an exception in a worker reaches the caller; two user threads convolving at once; BLAS held at
one thread only while the shares run."""
import threading

import numba
import numpy as np
import pytest

import minidl as md
import minidl.nn.functional as F
from minidl.kernels.cpu import _threads
from minidl.kernels.cpu import im2col as k_im2col
from minidl.kernels.cpu import unfold as k_unfold
from minidl.kernels.cpu import winograd as k_wino
from minidl.kernels.cpu import winograd_shares
from minidl.ops import conv as conv_ops
from minidl.ops import conv_blocks
from minidl.ops import conv_winograd as wino_ops
from minidl.ops import conv_direct as conv_direct_ops
from minidl.runtime import blas_threads, block_workers, layer_threads


@pytest.fixture(autouse=True)
def _no_direct_sums(monkeypatch):
    """These tests are about the Winograd and column paths: at their channel counts conv2d would
    otherwise take the direct sums (minidl.ops.conv_direct, tested in test_conv_direct.py)."""
    monkeypatch.setattr(conv_direct_ops, "USE_DIRECT", False)


pytestmark = pytest.mark.skipif(not block_workers.available(), reason="needs an OpenBLAS whose thread count can be set")


@pytest.fixture
def workers(monkeypatch):
    """Let every convolution here take the block workers (small problems included), with two
    threads; returns the names of the threads that ran a share of images (or a serial kernel).
    Winograd's shares too, which otherwise run as one parallel region where NumPy's BLAS can be
    called from Numba (test_winograd_shares.py)."""
    monkeypatch.setattr(wino_ops, "ONE_REGION", False)
    monkeypatch.setattr(_threads, "SERIAL_BELOW", 1)
    monkeypatch.setattr(conv_ops, "BLOCK_WORKERS_FROM", 1)
    monkeypatch.setattr(conv_ops, "UNFOLD_BLOCK_WORKERS_FROM", 1)
    monkeypatch.setattr(wino_ops, "WINOGRAD_BLOCK_WORKERS_FROM", 1)
    monkeypatch.setattr(layer_threads, "PARALLEL", True)
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    seen = set()
    for module, name in [(k_wino, "winograd_input_serial"), (k_wino, "winograd_output_adjoint_serial"),
                         (k_im2col, "im2col_serial"), (k_im2col, "col2im_serial"),
                         (k_unfold, "unfold_serial"), (k_unfold, "fold_serial"), (conv_blocks, "share_blocks")]:
        fn = getattr(module, name)

        def spy(*args, _fn=fn, **kw):
            seen.add(threading.current_thread().name)
            return _fn(*args, **kw)
        monkeypatch.setattr(module, name, spy)
    return seen


@pytest.fixture
def region(monkeypatch, workers):
    """As ``workers``, with Winograd's shares in one region; returns the calls of the region's
    entry points, by name."""
    if not winograd_shares.AVAILABLE:
        pytest.skip("needs NumPy's OpenBLAS with a 64-bit CBLAS GEMM")
    monkeypatch.setattr(wino_ops, "ONE_REGION", True)
    calls = []
    for name in ("winograd_forward_shares", "winograd_backward_shares"):
        fn = getattr(winograd_shares, name)

        def spy(*args, _fn=fn, _name=name, **kw):
            calls.append(_name)
            return _fn(*args, **kw)
        monkeypatch.setattr(winograd_shares, name, spy)
    return calls


def _conv(x, w, b, g, needs=(True, True, True), **kw):
    """(y, dx, dw, db) of conv2d, with cotangent g."""
    tx, tw, tb = (md.tensor(a, requires_grad=n) for a, n in zip((x, w, b), needs))
    y = F.conv2d(tx, tw, tb, **kw)
    y.backward(md.tensor(g))
    return [y.detach().numpy()] + [t.grad.numpy() if t.grad is not None else None for t in (tx, tw, tb)]


def _pooled_and_serial(monkeypatch, x, w, b, needs=(True, True, True), **kw):
    rng = np.random.default_rng(7)
    g = None

    def run(pooled):
        nonlocal g
        monkeypatch.setattr(conv_blocks, "BLOCK_WORKERS", pooled)
        if g is None:
            y = F.conv2d(md.tensor(x), md.tensor(w), md.tensor(b), **kw).numpy()
            g = rng.standard_normal(y.shape).astype(x.dtype)
        return _conv(x, w, b, g, needs, **kw)
    return run(True), run(False)


def _assert_same(a, b, dtype):
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-5)
    for p, s in zip(a, b):
        assert (p is None) == (s is None)
        if p is not None:
            scale = max(1.0, float(np.abs(s).max()))
            np.testing.assert_allclose(p / scale, s / scale, **tol)


WINOGRAD_CASES = [  # (N, C, H, W), O, padding
    ((2, 8, 8, 8), 16, 1), ((3, 8, 7, 6), 5, 1), ((5, 12, 6, 9), 8, 0), ((7, 8, 5, 5), 3, (1, 0))]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("block_bytes", [1, 1 << 20])
@pytest.mark.parametrize("xs,O,padding", WINOGRAD_CASES)
def test_winograd_blocks_on_workers_equal_the_serial_loop(monkeypatch, workers, xs, O, padding, block_bytes, dtype):
    """One image per block or the whole share in one; V kept for dW or rebuilt."""
    monkeypatch.setattr(wino_ops, "WINOGRAD_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((O, xs[1], 3, 3)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    for keep in (64 << 20, 0):
        monkeypatch.setattr(wino_ops, "KEEP_V_BYTES", keep)
        workers.clear()
        pooled, serial = _pooled_and_serial(monkeypatch, x, w, b, padding=padding)
        assert len(workers) == 2                  # the calling thread and a worker each ran a share
        _assert_same(pooled, serial, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("block_bytes", [1, 1 << 20])
@pytest.mark.parametrize("xs,O,padding", WINOGRAD_CASES)
def test_winograd_shares_in_one_region_equal_the_serial_loop(monkeypatch, region, xs, O, padding, block_bytes,
                                                            dtype):
    monkeypatch.setattr(wino_ops, "WINOGRAD_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal((O, xs[1], 3, 3)).astype(dtype)
    b = rng.standard_normal(O).astype(dtype)
    pooled, serial = _pooled_and_serial(monkeypatch, x, w, b, padding=padding)
    assert {"winograd_forward_shares", "winograd_backward_shares"} <= set(region)
    _assert_same(pooled, serial, dtype)


@pytest.mark.parametrize("needs", [(True, False, False), (False, True, True), (False, True, False),
                                   (True, True, False)])
def test_winograd_region_for_every_combination_of_needed_gradients(monkeypatch, region, needs):
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((5, 8, 6, 7)), rng.standard_normal((6, 8, 3, 3)), rng.standard_normal(6)
    pooled, serial = _pooled_and_serial(monkeypatch, x, w, b, needs, padding=1)
    assert "winograd_backward_shares" in region
    _assert_same(pooled, serial, np.float64)


def test_block_workers_run_winograd_where_v_is_kept_or_the_region_is_off(monkeypatch, region):
    rng = np.random.default_rng(2)
    x = md.tensor(rng.standard_normal((4, 8, 6, 6)), requires_grad=True)
    w = md.tensor(rng.standard_normal((8, 8, 3, 3)), requires_grad=True)     # V is kept only for dW
    monkeypatch.setattr(wino_ops, "KEEP_V_BYTES", 1 << 30)
    F.conv2d(x, w, padding=1).sum().backward()
    monkeypatch.setattr(wino_ops, "KEEP_V_BYTES", 0)
    monkeypatch.setattr(wino_ops, "ONE_REGION", False)
    F.conv2d(x, w, padding=1).sum().backward()
    assert region == []
    monkeypatch.setattr(wino_ops, "ONE_REGION", True)
    F.conv2d(x, w, padding=1).sum().backward()
    assert region == ["winograd_forward_shares", "winograd_backward_shares"]


COLUMN_CASES = [  # (N, C, H, W), weight shape, conv2d keywords
    ((3, 3, 9, 9), (6, 3, 3, 3), dict(padding=1)),                        # few channels: im2col, not Winograd
    ((4, 8, 9, 8), (16, 8, 3, 3), dict(stride=2, padding=1)),
    ((5, 8, 7, 7), (6, 4, 3, 3), dict(padding=1, groups=2)),
    ((3, 6, 8, 8), (4, 6, 1, 1), dict()),
    ((2, 4, 11, 10), (5, 4, 5, 5), dict(padding=2, dilation=(1, 2))),
]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("block_bytes", [1, 8 << 20])
@pytest.mark.parametrize("xs,ws,kw", COLUMN_CASES)
@pytest.mark.parametrize("columns", ["im2col", "unfold"])
def test_column_blocks_on_workers_equal_the_serial_loop(monkeypatch, workers, xs, ws, kw, block_bytes, dtype, columns):
    monkeypatch.setattr(conv_ops, "BLOCK_BYTES", block_bytes)
    monkeypatch.setattr(conv_ops, "UNFOLD_MAX_K", 1 << 30 if columns == "unfold" else 0)
    monkeypatch.setattr(conv_ops, "USE_UNFOLD", columns == "unfold")
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    for keep in (64 << 20, 0):
        monkeypatch.setattr(conv_ops, "KEEP_COLS_BYTES", keep)
        workers.clear()
        pooled, serial = _pooled_and_serial(monkeypatch, x, w, b, **kw)
        assert len(workers) == 2
        _assert_same(pooled, serial, dtype)


@pytest.mark.parametrize("needs", [(True, False, False), (False, True, False), (False, False, True)])
@pytest.mark.parametrize("ws", [(8, 8, 3, 3), (8, 8, 1, 1)])
def test_workers_with_some_gradients(monkeypatch, workers, needs, ws):
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal((3, 8, 6, 6)), rng.standard_normal(ws), rng.standard_normal(8)
    pooled, serial = _pooled_and_serial(monkeypatch, x, w, b, needs, padding=1)
    _assert_same(pooled, serial, np.float64)


@pytest.mark.parametrize("ws", [(8, 8, 3, 3), (8, 8, 1, 1)])
def test_more_shares_than_workers(monkeypatch, workers, ws):
    """Four threads asked for, three images: three shares queue for the pool's workers (however
    many it has), and single images stay on the calling thread."""
    monkeypatch.setattr(numba, "get_num_threads", lambda: 4)
    rng = np.random.default_rng(3)
    for N in (3, 1):
        x, w, b = rng.standard_normal((N, 8, 6, 6)), rng.standard_normal(ws), rng.standard_normal(8)
        workers.clear()
        pooled, serial = _pooled_and_serial(monkeypatch, x, w, b, padding=1)
        assert (len(workers) >= 2) == (N > 1)
        _assert_same(pooled, serial, np.float64)


def test_split_covers_every_item_once():
    for n in (1, 2, 3, 7, 64):
        for parts in (1, 2, 3, 5, 80):
            shares = block_workers.split(n, parts)
            assert len(shares) == min(n, parts) and all(b > a for a, b in shares)
            assert [i for a, b in shares for i in range(a, b)] == list(range(n))


@pytest.mark.parametrize("kernel", ["winograd_input_serial", "winograd_input_adjoint_serial"])
def test_a_worker_exception_reaches_the_caller(monkeypatch, workers, kernel):
    module_fn = getattr(k_wino, kernel)

    def failing(*args, **kw):
        if threading.current_thread().name.startswith("minidl-block"):
            raise FloatingPointError("worker failed")
        return module_fn(*args, **kw)
    monkeypatch.setattr(k_wino, kernel, failing)
    rng = np.random.default_rng(4)
    x = md.tensor(rng.standard_normal((4, 8, 6, 6)), requires_grad=True)
    w = md.tensor(rng.standard_normal((8, 8, 3, 3)), requires_grad=True)
    before = [get() for _, get in blas_threads._count_functions()]
    with pytest.raises(FloatingPointError, match="worker failed"):
        y = F.conv2d(x, w, padding=1)
        y.sum().backward()
    assert blas_threads._holders == 0
    assert [get() for _, get in blas_threads._count_functions()] == before   # BLAS's thread count is back
    monkeypatch.setattr(k_wino, kernel, module_fn)
    assert F.conv2d(x, w, padding=1).shape == (4, 8, 6, 6)                     # the pool still works


@pytest.mark.parametrize("one_region", [False, True])
def test_blas_is_single_threaded_only_while_the_workers_run(monkeypatch, workers, one_region):
    """OpenBLAS at one thread while the shares run, and back afterwards; a region whose GEMM calls
    reach MKL (its sequential layer) leaves OpenBLAS's count alone."""
    from minidl.kernels.cpu import _cblas
    counts = []
    module, name = (winograd_shares, "_forward_shares") if one_region else (k_wino, "winograd_output_serial")
    if one_region and not winograd_shares.AVAILABLE:
        pytest.skip("needs NumPy's OpenBLAS with a 64-bit CBLAS GEMM")
    monkeypatch.setattr(wino_ops, "ONE_REGION", one_region)
    fn = getattr(module, name)

    def spy(*args, **kw):
        counts.append([get() for _, get in blas_threads._count_functions()])
        return fn(*args, **kw)
    monkeypatch.setattr(module, name, spy)
    before = [get() for _, get in blas_threads._count_functions()]
    rng = np.random.default_rng(5)
    F.conv2d(md.tensor(rng.standard_normal((4, 8, 6, 6))), md.tensor(rng.standard_normal((8, 8, 3, 3))), padding=1)
    during = before if one_region and _cblas.PROVIDER == "mkl" else [1] * len(before)
    assert counts and all(c == during for c in counts)
    assert [get() for _, get in blas_threads._count_functions()] == before


@pytest.mark.parametrize("one_region", [False, True])
def test_two_user_threads_convolve_at_once(monkeypatch, workers, one_region):
    """Each thread's results equal the serial loop's, call after call."""
    if one_region and not winograd_shares.AVAILABLE:
        pytest.skip("needs NumPy's OpenBLAS with a 64-bit CBLAS GEMM")
    monkeypatch.setattr(wino_ops, "ONE_REGION", one_region)
    rng = np.random.default_rng(6)
    cases = []
    for ws, kw in [((16, 8, 3, 3), dict(padding=1)), ((8, 8, 3, 3), dict(stride=2, padding=1))]:
        x, w, b = rng.standard_normal((5, 8, 8, 8)), rng.standard_normal(ws), rng.standard_normal(ws[0])
        g = rng.standard_normal(F.conv2d(md.tensor(x), md.tensor(w), **kw).shape)
        monkeypatch.setattr(conv_blocks, "BLOCK_WORKERS", False)
        cases.append((x, w, b, g, kw, _conv(x, w, b, g, **kw)))
    monkeypatch.setattr(conv_blocks, "BLOCK_WORKERS", True)
    errors = []

    def user(case):
        x, w, b, g, kw, expected = case
        try:
            for _ in range(10):
                _assert_same(_conv(x, w, b, g, **kw), expected, np.float64)
        except BaseException as e:   # reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=user, args=(c,)) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert blas_threads._holders == 0


def test_no_workers_for_one_thread_or_small_problems(monkeypatch):
    impl = wino_ops.WINOGRAD.select(np.zeros(1, np.float32))
    monkeypatch.setattr(layer_threads, "PARALLEL", True)
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    big = max(_threads.SERIAL_BELOW, conv_ops.BLOCK_WORKERS_FROM)
    assert conv_blocks.worker_count(8, big, impl, conv_ops.BLOCK_WORKERS_FROM) == 2
    assert conv_blocks.worker_count(8, big - 1, impl, conv_ops.BLOCK_WORKERS_FROM) == 1
    assert conv_blocks.worker_count(1, 1 << 30, impl, conv_ops.BLOCK_WORKERS_FROM) == 1
    with md.implementation(layer="reference"):
        assert conv_blocks.worker_count(8, 1 << 30, wino_ops.WINOGRAD.select(np.zeros(1, np.float32)), 1) == 1
    monkeypatch.setattr(numba, "get_num_threads", lambda: 1)
    assert conv_blocks.worker_count(8, 1 << 30, impl, 1) == 1
