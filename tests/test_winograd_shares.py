"""The kernels of Winograd's shares in one parallel region (minidl.kernels.cpu.winograd_shares) and
the GEMM they call from Numba through NumPy's BLAS (minidl.kernels.cpu._cblas):

- the GEMM binding equals NumPy's product for every transpose and both dtypes, compiled and as
  Python;
- the entry points refuse shapes their kernels cannot index;
- the region runs as plain Python under NUMBA_DISABLE_JIT=1, with the same numbers.

conv2d through the region against the loop on the calling thread: test_conv_threads.py."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from numba import njit

from minidl.kernels.cpu import _cblas
from minidl.kernels.cpu import winograd_shares as shares

pytestmark = pytest.mark.skipif(not shares.AVAILABLE, reason="needs NumPy's OpenBLAS with a 64-bit CBLAS GEMM")


@njit
def _gemm_compiled(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc):
    _cblas.gemm(ta, tb, M, N, K, alpha, a, lda, b, ldb, beta, c, ldc)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gemm_equals_numpy_for_every_transpose(dtype, compiled):
    rng = np.random.default_rng(0)
    call = _gemm_compiled if compiled else _cblas.gemm
    M, N, K = 5, 4, 3
    for ta in (_cblas.NO_TRANS, _cblas.TRANS):
        for tb in (_cblas.NO_TRANS, _cblas.TRANS):
            # operands stored as op() needs them, inside wider rows (lda, ldb, ldc beyond the minimum)
            a = rng.standard_normal((M, K + 2) if ta == _cblas.NO_TRANS else (K, M + 2)).astype(dtype)
            b = rng.standard_normal((K, N + 1) if tb == _cblas.NO_TRANS else (N, K + 1)).astype(dtype)
            c = rng.standard_normal((M, N + 3)).astype(dtype)
            opa = a[:, :K] if ta == _cblas.NO_TRANS else a[:, :M].T
            opb = b[:, :N] if tb == _cblas.NO_TRANS else b[:, :K].T
            expected = 0.5 * c[:, :N] + 2.0 * (opa @ opb)
            untouched = c[:, N:].copy()
            call(ta, tb, M, N, K, 2.0, a, a.shape[1], b, b.shape[1], 0.5, c, c.shape[1])
            np.testing.assert_allclose(c[:, :N], expected, rtol=1e-5 if dtype == np.float32 else 1e-12)
            assert np.array_equal(c[:, N:], untouched)


def test_entry_points_refuse_shapes_the_kernels_cannot_index():
    x = np.zeros((2, 8, 8, 8), np.float32)
    U = np.zeros((36, 4, 8), np.float32)
    out = np.zeros((2, 4, 8, 8), np.float32)
    g = np.zeros((2, 4, 8, 8), np.float32)
    ok = dict(k=2, per=1, ph=1, pw=1, TH=2, TW=2)
    shares.winograd_forward_shares(x, U, None, out, **ok)
    bad_forward = [
        (x[:, :, :, ::2], U, None, out, ok),                   # x not contiguous
        (x, np.zeros((36, 4, 6), np.float32), None, out, ok),  # U for other input channels
        (x, U.astype(np.float64), None, out, ok),              # dtypes differ
        (x, U, None, np.zeros((2, 4, 9, 8), np.float32), ok),  # more output rows than the tiles hold
        (x, U, None, np.zeros((2, 5, 8, 8), np.float32), ok),  # output channels not U's
        (x, U, np.zeros(3, np.float32), out, ok),              # bias of the wrong length
        (x, U, None, out, dict(ok, per=0)),                    # no image per block
        (x, U, None, out, dict(ok, TH=1)),                     # input taller than the tiles read
    ]
    for xx, UU, bb, oo, kw in bad_forward:
        with pytest.raises(ValueError, match="winograd"):
            shares.winograd_forward_shares(xx, UU, bb, oo, **kw)
    shares.winograd_backward_shares(x, g, U, np.zeros_like(x), True, **ok)
    for gg, dx in [(np.zeros((2, 5, 8, 8), np.float32), None), (g[:, :, ::2], None),
                   (g, np.zeros((2, 8, 8, 7), np.float32)), (g, np.zeros((2, 8, 8, 8), np.float64))]:
        with pytest.raises(ValueError, match="winograd"):
            shares.winograd_backward_shares(x, gg, U, dx, True, **ok)


def test_the_region_runs_as_python_without_the_jit():
    """NUMBA_DISABLE_JIT=1: the same kernels and GEMM binding as Python, same numbers."""
    script = textwrap.dedent("""
        import numpy as np
        from minidl.ops import conv_winograd as W
        from minidl.ops.conv_blocks import winograd_backward_blocks, winograd_forward_blocks
        from minidl.kernels.cpu import winograd as K, winograd_shares as S
        rng = np.random.default_rng(0)
        x = rng.standard_normal((3, 8, 5, 6)); w = rng.standard_normal((4, 8, 3, 3)); b = rng.standard_normal(4)
        U = np.ascontiguousarray(W.winograd_filter(w))
        geom = (1, 1, 5, 6, 2, 2)
        ref = np.empty((3, 4, 5, 6)); winograd_forward_blocks(K, x, U.transpose(0, 2, 1), b, None, ref, geom, [(0, 3)])
        out = S.winograd_forward_shares(x, U, b, np.empty_like(ref), 2, 1, 1, 1, 2, 2)
        g = rng.standard_normal(ref.shape)
        dxr = np.empty_like(x); dUr = winograd_backward_blocks(K, x, g, U, None, dxr, True, geom, [(0, 3)])
        dx = np.empty_like(x); dU = S.winograd_backward_shares(x, g, U, dx, True, 2, 1, 1, 1, 2, 2)
        print(max(float(np.abs(a - r).max()) for a, r in ((out, ref), (dx, dxr), (dU, dUr))))
    """)
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert float(run.stdout.strip().splitlines()[-1]) < 1e-12
