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
atomics. Big problems run chunks of images in parallel (prange) where the process allows the
layer kernels to (``minidl.runtime.layer_threads``), small ones the serial core; the
``*_serial`` entry points run the serial core on the calling thread, which they leave to other
Python threads meanwhile (``nogil``): conv2d's block workers call them, one image block each.
"""
import numpy as np
from numba import njit, prange

from ...ops.fold import conv_output_size
from ._threads import layer_parallel, plane_chunks

U = np.uintp


@njit(error_model="numpy", cache=True, nogil=True)
def _unfold_images(x, cols, n0, n1, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW):
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    Wp = W + 2 * pw
    L, KK = OH * OW, kh * kw
    plane = np.zeros((H + 2 * ph) * Wp, dtype=x.dtype)
    xf, cf = x.reshape(-1), cols.reshape(-1)
    for n in range(n0, n1):
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


@njit(error_model="numpy", cache=True, nogil=True)
def _fold_images(cols, dx, n0, n1, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW):
    C, H, W = dx.shape[1], dx.shape[2], dx.shape[3]
    Wp = W + 2 * pw
    L, KK = OH * OW, kh * kw
    plane = np.empty((H + 2 * ph) * Wp, dtype=dx.dtype)
    df, cf = dx.reshape(-1), cols.reshape(-1)
    for n in range(n0, n1):
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


@njit(error_model="numpy", cache=True, parallel=True)
def _unfold_parallel(x, cols, n_chunks, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW):
    N = x.shape[0]
    for t in prange(n_chunks):
        _unfold_images(x, cols, t * N // n_chunks, (t + 1) * N // n_chunks, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)


@njit(error_model="numpy", cache=True, parallel=True)
def _fold_parallel(cols, dx, n_chunks, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW):
    N = dx.shape[0]
    for t in prange(n_chunks):
        _fold_images(cols, dx, t * N // n_chunks, (t + 1) * N // n_chunks, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)


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
        kernel(a, b, 0, n_images, *geom)
    else:
        parallel_kernel(a, b, plane_chunks(n_images), *geom)
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
