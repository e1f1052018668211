"""conv2d's Winograd block loops as one parallel region: every thread of Numba's pool takes one
share of the images and runs it end to end (the transforms of ``winograd`` and BLAS's GEMMs,
called from the kernel through ``_cblas``).

The loops are those of ``minidl.ops.conv_blocks.winograd_forward_blocks`` and
``winograd_backward_blocks``, the readable versions. The math is in ``minidl.ops.conv_winograd``.
Per block of ``per`` images, with T its tiles:

    forward   V = B^T d B (input transform);  M[xi] = V[xi] U[xi]^T, 36 GEMMs (T, C) x (C, O);
              y = A^T M A (output transform), + bias
    backward  dM = A g A^T;  dU[xi] += dM[xi]^T V[xi] (V rebuilt from x), each share its own dU;
              dV[xi] = dM[xi] U[xi];  dx = B dV B^T

Why one region: run from Python threads, the same loops hand the GIL over at every kernel and
GEMM. On a virtual machine each hand-over that wakes a waiting thread goes through the
hypervisor, which made a share 1.3-1.5x slower beside another than alone (docs/performance.md,
"One region for the shares"). Numba's workers need no GIL.

Each GEMM call must run on its caller's thread: the entry points hold
``_cblas.one_thread_per_call``. Each share allocates its own scratch blocks
(V or dV, M or dM), so shares share nothing but the read-only inputs. Each share writes disjoint
images of y or dx and its own slice of the dU partials. The partials are summed by the caller in
share order, so the result does not depend on which thread ran which share.

Each share's loop is written inside the ``prange`` body, not as a function of its own. A share
function linked into the parallel region made LLVM optimise the transforms once more: a first
ResNet-8 step from an empty cache took 98.7 s that way, 89.0 s this way, and 66.7 s with the
block workers.

The entry points check every shape before a kernel runs: the kernels index without bounds
checks.
"""
import numpy as np
from numba import njit, prange

from . import _cblas
from .winograd import PLANES, _check_image, _check_output, _check_shape, _input_adjoint_images, _input_images
from .winograd import _output_adjoint_images, _output_images

AVAILABLE = _cblas.AVAILABLE
_N, _T = _cblas.NO_TRANS, _cblas.TRANS


@njit(error_model="numpy", cache=True, parallel=True)
def _forward_shares(x, U, b, has_bias, y, k, per, ph, pw, TH, TW):
    N, C, O = x.shape[0], x.shape[1], y.shape[1]
    TT = TH * TW
    for s in prange(k):                # share s: images n0..n1, in blocks of ``per``
        n0, n1 = s * N // k, (s + 1) * N // k
        V = np.empty(PLANES * per * TT * C, dtype=x.dtype)
        M = np.empty(PLANES * per * TT * O, dtype=x.dtype)
        for b0 in range(n0, n1, per):
            b1 = min(b0 + per, n1)
            T = (b1 - b0) * TT
            _input_images(x[b0:b1], V, T * C, 0, b1 - b0, ph, pw, TH, TW)
            for xi in range(PLANES):   # M[xi] (T, O) = V[xi] (T, C) @ U[xi]^T (C, O)
                _cblas.gemm(_N, _T, T, O, C, 1.0, V[xi * T * C:], C, U[xi], C, 0.0, M[xi * T * O:], O)
            _output_images(M, T * O, y[b0:b1], 0, b1 - b0, TH, TW)
            if has_bias:
                for n in range(b0, b1):
                    for o in range(O):
                        y[n, o] += b[o]


@njit(error_model="numpy", cache=True, parallel=True)
def _backward_shares(x, g, U, dx, want_dx, dU_parts, want_dU, k, per, ph, pw, TH, TW):
    N, C, O = x.shape[0], x.shape[1], g.shape[1]
    TT = TH * TW
    for s in prange(k):                # share s: images n0..n1, in blocks of ``per``; its own dU partial
        n0, n1 = s * N // k, (s + 1) * N // k
        dU = dU_parts[s]
        dM = np.empty(PLANES * per * TT * O, dtype=g.dtype)
        V = np.empty(PLANES * per * TT * C, dtype=g.dtype)     # V for dU, then dV for dx
        for b0 in range(n0, n1, per):
            b1 = min(b0 + per, n1)
            T = (b1 - b0) * TT
            _output_adjoint_images(g[b0:b1], dM, T * O, 0, b1 - b0, TH, TW)
            if want_dU:
                _input_images(x[b0:b1], V, T * C, 0, b1 - b0, ph, pw, TH, TW)
                for xi in range(PLANES):   # dU[xi] (O, C) += dM[xi]^T (O, T) @ V[xi] (T, C)
                    _cblas.gemm(_T, _N, O, C, T, 1.0, dM[xi * T * O:], O, V[xi * T * C:], C, 1.0, dU[xi], C)
            if want_dx:
                for xi in range(PLANES):   # dV[xi] (T, C) = dM[xi] (T, O) @ U[xi] (O, C)
                    _cblas.gemm(_N, _N, T, C, O, 1.0, dM[xi * T * O:], O, U[xi], C, 0.0, V[xi * T * C:], C)
                _input_adjoint_images(V, T * C, dx[b0:b1], 0, b1 - b0, ph, pw, TH, TW)


def _check(x, U, ph, pw, TH, TW, k, per):
    if not (x.ndim == 4 and x.flags.c_contiguous and U.ndim == 3 and U.flags.c_contiguous and U.dtype == x.dtype):
        raise ValueError(f"winograd shares: expected C-contiguous x (N, C, H, W) and U (36, O, C) of one dtype, "
                         f"got {x.shape} {x.dtype} and {U.shape} {U.dtype}")
    _check_image("x", x, ph, pw, TH, TW)
    _check_shape("U", U, (PLANES, U.shape[1], x.shape[1]))
    if k < 1 or per < 1:
        raise ValueError(f"winograd shares: expected at least one share and one image per block, got {k} and {per}")


def winograd_forward_shares(x, U, b, out, k, per, ph, pw, TH, TW):
    """conv2d's Winograd forward into ``out`` (N, O, OH, OW): k shares of the images, blocks of
    ``per`` images, U (36, O, C) the transformed filters, b the bias (O,) or None."""
    _check(x, U, ph, pw, TH, TW, k, per)
    N, O = x.shape[0], U.shape[1]
    if not (out.flags.c_contiguous and out.dtype == x.dtype and out.shape[:2] == (N, O)):
        raise ValueError(f"winograd shares: expected a C-contiguous output ({N}, {O}, OH, OW) of {x.dtype}, "
                         f"got {out.shape} {out.dtype}")
    _check_output("y", out, TH, TW)
    if b is not None:
        _check_shape("b", b, (O,))
    if out.size == 0:
        return out
    bias = np.ascontiguousarray(b, dtype=x.dtype) if b is not None else np.zeros(0, dtype=x.dtype)
    with _cblas.one_thread_per_call():
        _forward_shares(x, U, bias, b is not None, out, min(k, N), per, ph, pw, TH, TW)
    return out


def winograd_backward_shares(x, g, U, dx, want_dU, k, per, ph, pw, TH, TW):
    """conv2d's Winograd backward: dx (N, C, H, W) written when given, and, with ``want_dU``, the
    filters' gradient dU (36, O, C) summed over the shares in order (else None)."""
    _check(x, U, ph, pw, TH, TW, k, per)
    N, C = x.shape[:2]
    O = U.shape[1]
    if not (g.ndim == 4 and g.flags.c_contiguous and g.dtype == x.dtype and g.shape[:2] == (N, O)):
        raise ValueError(f"winograd shares: expected a C-contiguous g ({N}, {O}, OH, OW) of {x.dtype}, "
                         f"got {g.shape} {g.dtype}")
    _check_output("g", g, TH, TW)
    if dx is not None:
        _check_shape("dx", dx, x.shape)
        if not (dx.flags.c_contiguous and dx.dtype == x.dtype):
            raise ValueError(f"winograd shares: expected a C-contiguous dx of {x.dtype}, got {dx.dtype}")
    k = min(k, N) if N else 1
    parts = np.zeros((k, PLANES, O, C) if want_dU else (k, PLANES, 0, 0), dtype=x.dtype)
    if N and (want_dU or dx is not None):
        with _cblas.one_thread_per_call():
            _backward_shares(x, g, U, dx if dx is not None else x[:0], dx is not None, parts, bool(want_dU), k, per,
                             ph, pw, TH, TW)
    if not want_dU:
        return None
    dU = parts[0]
    for s in range(1, k):
        dU = dU + parts[s]
    return dU
