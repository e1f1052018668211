"""unfold / fold for conv2d and ``F.unfold`` / ``F.fold``: the gather of every receptive field
into PyTorch's column layout, and its adjoint, the scatter-add back into the image.

Layout (``torch.nn.functional.unfold``'s), with xpad the zero-padded input::

    cols[n, (c, i, j), oh*OW + ow] = xpad[n, c, oh*sh + i*dh, ow*sw + j*dw]

so ``cols`` is (N, C*kh*kw, OH*OW): one row per (channel, kernel offset), one column per output
pixel, and ``W.reshape(O, -1) @ cols[n]`` is image n's convolution, already in NCHW order (the
math and the NumPy references are in ``minidl.ops.fold``).

Why it is fast: a row is the padded channel plane read at one kernel offset, so for stride 1
each of its OH runs of OW values is a contiguous copy of a plane row, which LLVM vectorises.
Each (image, channel) plane is first copied into a zero-bordered buffer (``plane``; the
border is written once per call and never touched again), so the copies need no bounds tests.
fold is the transpose of that map: each row is added back into the padded plane at its
offset, and the plane's interior is copied out. Offsets are unsigned (``U``): a signed index
makes Numba handle negative wraparound, which turns every load into a gather.

Work is split by image, so no two pieces write the same element and the scatter needs no
atomics. Big problems run chunks of images on Numba's pool where the process allows the layer
kernels to (``minidl.runtime.layer_threads``), small ones on the calling thread: unfold and
fold are each one source compiled twice (``_threads.serial_and_parallel``), the weight
gradient a parallel loop over its serial core. The ``*_serial`` entry points run the serial
kernels on the calling thread, which they leave to other Python threads meanwhile (``nogil``):
conv2d's block workers call them, one image block each.

``unfold_weight_grad`` is conv2d's weight gradient in this layout, dW_g += sum_n G_n,g cols_n,g^T:
for each (output channel o, column row k) the dot product over the L output pixels of g's row o
and cols' row k. BLAS computes it as a short, wide product (O/G rows, K columns, depth L), for
which OpenBLAS's packing costs more than the arithmetic when O/G and K are small (LeNet's first
layer: 6 x 25, depth 784; the rates are in docs/performance.md). The kernel instead holds a 2 x 4 block of
output entries in registers, so each pass over L reads 6 rows to do 8 dot products: 8
independent accumulator chains (each a SIMD vector under "reassoc") hide the multiply-add
latency, and the two g rows and four cols rows stay in L1. Blocks past the last row or channel
repeat it (clamped indices) and store nothing, so every shape takes the same loop. It has no
CUDA counterpart because conv2d takes unfold's layout on the CPU only: on a GPU the weight
gradient stays im2col's one product per block of images, G^T (O/G, pixels) @ cols (pixels, K),
on the device's matmul kernel. (For a small O/G x K that product is a long reduction into few
output tiles; a split-reduction kernel for it would be the GPU's analogue, to be measured on
hardware first.)
"""
import numpy as np
from numba import njit, prange

from ...ops.fold import conv_output_size
from ._numerics import REASSOC_CONTRACT
from ._threads import chunk_bounds, layer_parallel, plane_chunks, serial_and_parallel

U = np.uintp


def _unfold_images(x, cols, n0, n1, n_chunks, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW):
    """Images n0..n1 of x into cols, in n_chunks chunks of images (see serial_and_parallel)."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    Wp = W + 2 * pw
    L, KK = OH * OW, kh * kw
    xf, cf = x.reshape(-1), cols.reshape(-1)
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(n1 - n0, n_chunks, chunk)
        plane = np.zeros((H + 2 * ph) * Wp, dtype=x.dtype)
        for n in range(n0 + lo, n0 + hi):
            for c in range(C):
                src = U((n * C + c) * H * W)
                for h in range(H):
                    d0, s0 = U((h + ph) * Wp + pw), src + U(h * W)
                    for w in range(W):
                        plane[d0 + U(w)] = xf[s0 + U(w)]
                for i in range(kh):
                    for j in range(kw):
                        row = U(((n * C + c) * KK + i * kw + j) * L)
                        for oh in range(OH):
                            s, d = U((oh * sh + i * dh) * Wp + j * dw), row + U(oh * OW)
                            if sw == 1:
                                for ow in range(OW):
                                    cf[d + U(ow)] = plane[s + U(ow)]
                            else:
                                for ow in range(OW):
                                    cf[d + U(ow)] = plane[s + U(ow * sw)]


def _fold_images(cols, dx, n0, n1, n_chunks, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW):
    """cols of images n0..n1 added back into dx, in n_chunks chunks of images."""
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    Wp = W + 2 * pw
    L, KK = OH * OW, kh * kw
    df, cf = dx.reshape(-1), cols.reshape(-1)
    for chunk in prange(n_chunks):
        lo, hi = chunk_bounds(n1 - n0, n_chunks, chunk)
        plane = np.empty((H + 2 * ph) * Wp, dtype=dx.dtype)
        for n in range(n0 + lo, n0 + hi):
            for c in range(C):
                plane[:] = 0
                for i in range(kh):
                    for j in range(kw):
                        row = U(((n * C + c) * KK + i * kw + j) * L)
                        for oh in range(OH):
                            s, d = U((oh * sh + i * dh) * Wp + j * dw), row + U(oh * OW)
                            if sw == 1:
                                for ow in range(OW):
                                    plane[s + U(ow)] += cf[d + U(ow)]
                            else:
                                for ow in range(OW):
                                    plane[s + U(ow * sw)] += cf[d + U(ow)]
                dst = U((n * C + c) * H * W)
                for h in range(H):
                    s0, d0 = U((h + ph) * Wp + pw), dst + U(h * W)
                    for w in range(W):
                        df[d0 + U(w)] = plane[s0 + U(w)]


_unfold_images, _unfold_parallel = serial_and_parallel(error_model="numpy", cache=True)(_unfold_images)
_fold_images, _fold_parallel = serial_and_parallel(error_model="numpy", cache=True)(_fold_images)


@njit(inline="always")
def _add_entries(row, k0, K, s0, s1, s2, s3):
    """row[k0 + i] += s_i for the i with k0 + i < K."""
    row[k0] += s0
    if k0 + 1 < K:
        row[k0 + 1] += s1
    if k0 + 2 < K:
        row[k0 + 2] += s2
    if k0 + 3 < K:
        row[k0 + 3] += s3


@njit(error_model="numpy", cache=True, nogil=True, fastmath=REASSOC_CONTRACT)
def _weight_grad_images(g, cols, dw, n0, n1):
    G, Og, L = g.shape[1], g.shape[2], g.shape[3]
    K = cols.shape[2]
    zero = dw.dtype.type(0.0)
    for n in range(n0, n1):
        for gr in range(G):
            gn, cn, dn = g[n, gr], cols[n, gr], dw[gr]
            for k0 in range(0, K, 4):
                k1, k2, k3 = min(k0 + 1, K - 1), min(k0 + 2, K - 1), min(k0 + 3, K - 1)
                c0, c1, c2, c3 = cn[k0], cn[k1], cn[k2], cn[k3]
                for o0 in range(0, Og, 2):
                    o1 = min(o0 + 1, Og - 1)
                    a, b = gn[o0], gn[o1]
                    a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = zero
                    for l in range(L):
                        al, bl = a[l], b[l]
                        x0, x1, x2, x3 = c0[l], c1[l], c2[l], c3[l]
                        a0 += al * x0
                        a1 += al * x1
                        a2 += al * x2
                        a3 += al * x3
                        b0 += bl * x0
                        b1 += bl * x1
                        b2 += bl * x2
                        b3 += bl * x3
                    _add_entries(dn[o0], k0, K, a0, a1, a2, a3)   # only the entries that exist: a
                    if o0 + 1 < Og:                                # clamped row or channel repeats one
                        _add_entries(dn[o1], k0, K, b0, b1, b2, b3)


@njit(error_model="numpy", cache=True, parallel=True)
def _weight_grad_parallel(g, cols, parts):
    N, n_chunks = g.shape[0], parts.shape[0]
    for t in prange(n_chunks):
        _weight_grad_images(g, cols, parts[t], t * N // n_chunks, (t + 1) * N // n_chunks)


def _weight_grad(g, cols, dw, serial):
    if (g.ndim, cols.ndim, dw.ndim) != (4, 4, 3):
        raise ValueError(f"unfold_weight_grad: expected 4-D g and cols and a 3-D dw, got shapes {g.shape}, "
                         f"{cols.shape} and {dw.shape}")
    N, G, Og, L = g.shape
    K = cols.shape[2]
    if cols.shape != (N, G, K, L) or dw.shape != (G, Og, K):
        raise ValueError(f"unfold_weight_grad: expected g (N, G, O/G, L), cols (N, G, K, L) and dw (G, O/G, K) "
                         f"with matching sizes, got {g.shape}, {cols.shape} and {dw.shape}")
    if not (g.dtype == cols.dtype == dw.dtype and g.dtype in (np.float32, np.float64)):
        raise ValueError(f"unfold_weight_grad: expected float32 or float64 arrays of one dtype, got "
                         f"{g.dtype}, {cols.dtype} and {dw.dtype}")
    if not (g.flags.c_contiguous and cols.flags.c_contiguous and dw.flags.c_contiguous):
        raise ValueError("unfold_weight_grad: expected C-contiguous arrays")
    if min(N, G, Og, K, L) == 0:
        return dw                 # no image, channel or pixel: nothing to add
    if serial or N == 1 or not layer_parallel(g.size + cols.size):
        _weight_grad_images(g, cols, dw, 0, N)
    else:
        parts = np.zeros((plane_chunks(N),) + dw.shape, dtype=dw.dtype)
        _weight_grad_parallel(g, cols, parts)
        dw += parts.sum(axis=0)
    return dw


def unfold_weight_grad(g, cols, dw):
    """dw (G, O/G, K) += sum_n g[n, gr] (O/G, L) @ cols[n, gr]^T (L, K) for every group gr
    (g (N, G, O/G, L) and cols (N, G, K, L), C-contiguous, float32 or float64); returns dw."""
    return _weight_grad(g, cols, dw, serial=False)


def unfold_weight_grad_serial(g, cols, dw):
    """unfold_weight_grad on the calling thread only, with the GIL released."""
    return _weight_grad(g, cols, dw, serial=True)


def _checked(x, cols, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, what):
    """The kernels index flat arrays with no bounds checks: refuse any geometry, shape or layout
    whose reads or writes would leave the arrays."""
    if min(kh, kw, sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"{what}: expected kernel size, stride and dilation >= 1 and padding >= 0, got "
                         f"kernel ({kh}, {kw}), stride ({sh}, {sw}), padding ({ph}, {pw}), dilation ({dh}, {dw})")
    N, C, H, W = x.shape
    if (OH, OW) != (conv_output_size(H, kh, sh, ph, dh), conv_output_size(W, kw, sw, pw, dw)):
        raise ValueError(f"{what}: output size ({OH}, {OW}) does not match input ({H}, {W}) with kernel ({kh}, {kw}), "
                         f"stride ({sh}, {sw}), padding ({ph}, {pw}), dilation ({dh}, {dw})")
    if cols.shape != (N, C * kh * kw, OH * OW):
        raise ValueError(f"{what}: expected columns of shape {(N, C * kh * kw, OH * OW)}, got {cols.shape}")
    if cols.dtype != x.dtype:
        raise ValueError(f"{what}: expected columns of dtype {x.dtype}, got {cols.dtype}")
    if not (x.flags.c_contiguous and cols.flags.c_contiguous):
        raise ValueError(f"{what}: expected C-contiguous arrays")


def _run(kernel, parallel_kernel, a, b, n_images, geom, serial):
    if a.size == 0 or b.size == 0 or min(geom[-2:]) < 1:
        return False
    if serial or n_images == 1 or not layer_parallel(max(a.size, b.size)):
        kernel(a, b, 0, n_images, 1, *geom)
    else:
        parallel_kernel(a, b, 0, n_images, plane_chunks(n_images), *geom)
    return True


def _unfold(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, out, serial):
    N, C = x.shape[:2]
    cols = np.empty((N, C * kh * kw, OH * OW), dtype=x.dtype) if out is None else out
    _checked(x, cols, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, "unfold")
    if not _run(_unfold_images, _unfold_parallel, x, cols, N, (kh, kw, sh, sw, ph, pw, dh, dw, OH, OW), serial):
        cols[...] = 0          # no image, no channel or no pixel: only padding (or nothing) to copy
    return cols


def _fold(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, out, serial):
    dx = np.empty((N, C, H, W), dtype=cols.dtype) if out is None else out
    if dx.shape != (N, C, H, W):
        raise ValueError(f"fold: expected an output of shape {(N, C, H, W)}, got {dx.shape}")
    OH, OW = conv_output_size(H, kh, sh, ph, dh), conv_output_size(W, kw, sw, pw, dw)
    _checked(dx, cols, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, "fold")
    if not _run(_fold_images, _fold_parallel, cols, dx, N, (kh, kw, sh, sw, ph, pw, dh, dw, OH, OW), serial):
        dx[...] = 0            # nothing to scatter (or nowhere to)
    return dx


def unfold(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, out=None):
    """x (N, C, H, W), C-contiguous -> cols (N, C*kh*kw, OH*OW) (written into ``out`` if given)."""
    return _unfold(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, out, serial=False)


def fold(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, out=None):
    """cols (N, C*kh*kw, OH*OW), C-contiguous -> dx (N, C, H, W), summing overlapping contributions
    (written into ``out``, C-contiguous, if given)."""
    return _fold(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, out, serial=False)


def unfold_serial(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, out=None):
    """unfold on the calling thread only, with the GIL released."""
    return _unfold(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, out, serial=True)


def fold_serial(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, out=None):
    """fold on the calling thread only, with the GIL released."""
    return _fold(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, out, serial=True)
