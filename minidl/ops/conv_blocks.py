"""conv2d's block loops: forward and backward over a list of blocks of whole images, for the
im2col + GEMM and the Winograd paths (the math is in ``minidl.ops.conv``'s and
``minidl.ops.conv_winograd``'s docstrings), and who runs them.

Each loop body is the same whichever thread runs it: conv2d either hands every block to one
call on the calling thread, with the kernels that go parallel themselves and multi-threaded
BLAS, or gives each block worker (``minidl.runtime.block_workers``) its own share of images,
with the serial kernels (``kern``: an implementation object with the kernel names conv2d
calls). Temporaries of a block (cols, the transform-domain products) live in per-thread
scratch buffers; the outputs of a block are disjoint slices of the caller's arrays, so
concurrent shares never write the same element, and the weight gradients come back per call,
for the caller to sum.
"""
import math
import threading

import numpy as np

from ..backends import namespace_of

_scratch = threading.local()   # per thread, so concurrent convs (and block workers) never share a buffer


def scratch_buffer(name, shape, dtype, xp):
    """A reusable array for a temporary that dies within one call (a block of cols or
    dcols): fresh pages cost a page fault each, and reused ones are already in cache."""
    if xp is not np:
        return xp.empty(shape, dtype=dtype)
    n = math.prod(shape)
    key = (name, np.dtype(dtype))
    buffers = _scratch.__dict__
    buf = buffers.get(key)
    if buf is None or buf.size < n:
        buf = buffers[key] = np.empty(n, dtype=dtype)
    return buf[:n].reshape(shape)


# Who runs the blocks ------------------------------------------------------------------------
BLOCK_WORKERS = True   # big CPU convolutions run their image blocks on minidl.runtime.block_workers


class _SerialKernels:
    """A CPU kernel module's single-thread entry points (``<name>_serial``) under the names the
    block loops call (looked up at each call, so a test may patch one)."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name + "_serial")


def worker_count(N, n_elements, impl, threshold):
    """How many threads run a convolution's image blocks, each its own share end to end
    (``minidl.runtime.block_workers``): 1 keeps the loop on the calling thread, where each block
    is a parallel kernel and a multi-threaded GEMM. Only the CPU kernels (not the references,
    not the GPU), two images or more, problems of at least ``threshold`` elements (each path's
    own: below it the hand-off costs more than it saves), the kernels' own threshold for going
    parallel (``layer_parallel``), and a BLAS that can be held at one thread meanwhile."""
    if not BLOCK_WORKERS or impl.name != "cpu" or N < 2:
        return 1
    import numba

    from ..kernels.cpu._threads import layer_parallel
    from ..runtime import block_workers
    if (n_elements < threshold or not layer_parallel(n_elements)
            or block_workers.in_worker()
            or not block_workers.available()):
        return 1
    return min(N, numba.get_num_threads())


def run_shares(kernels, N, k, per, work):
    """work(kern, n0, n1, blocks) for k near-equal contiguous shares [n0, n1) of the N images,
    concurrently: the calling thread and k - 1 block workers each run one share end to end, with
    ``kern`` the single-thread entry points of ``minidl.kernels.cpu.<kernels>`` and ``blocks``
    the share in blocks of ``per`` images. The results in share order."""
    import importlib

    from ..runtime import block_workers
    kern = _SerialKernels(importlib.import_module("minidl.kernels.cpu." + kernels))
    return block_workers.run(lambda share: work(kern, *share, share_blocks(*share, per)), block_workers.split(N, k))


def share_blocks(n0, n1, per):
    """[a, b) ranges of ``per`` images (the last one shorter) covering images n0..n1."""
    return [(a, min(a + per, n1)) for a in range(n0, n1, per)]


def images_per_block(block_bytes, per_image_bytes):
    """Whole images whose data take about ``block_bytes`` (at least one)."""
    return max(1, round(block_bytes / max(per_image_bytes, 1)))


def im2col_forward_blocks(kern, x, wr, b, keep, out, geom, blocks):
    """Forward over ``blocks`` of images: im2col of a block (into ``keep`` when cols are kept
    for backward), its GEMM with the weight rows ``wr`` (G, O/G, K), the NCHW copy with the bias."""
    xp = namespace_of(x)
    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G = geom
    wt = wr[0].T if G == 1 else wr.transpose(0, 2, 1)
    O, L = out.shape[1], OH * OW
    K = x.shape[1] // G * kh * kw
    for n0, n1 in blocks:
        m = (n1 - n0) * L
        dst = keep[n0:n1] if keep is not None else scratch_buffer("cols", (n1 - n0, OH, OW, G * K), x.dtype, xp)
        cols = kern.im2col(x[n0:n1], *geom, out=dst)
        if G == 1:
            y = xp.matmul(cols.reshape(m, K), wt).reshape(n1 - n0, L, O).transpose(0, 2, 1)
        else:
            y = xp.matmul(cols.reshape(m, G, K).transpose(1, 0, 2), wt)        # (G, m, O/G)
            y = y.reshape(G, n1 - n0, L, O // G).transpose(1, 0, 3, 2)
        y = y.reshape(n1 - n0, O, OH, OW)
        if b is not None:                                                   # the NCHW copy, fused with the bias
            xp.add(y, b.reshape(1, O, 1, 1), out=out[n0:n1])
        else:
            out[n0:n1] = y


def im2col_backward_blocks(kern, x, g, wr, kept, dx, nw, geom, blocks):
    """Backward over ``blocks`` of images: dL/dY of a block in pixel-major order (one
    transposing copy), its dW GEMM (summed into the returned (G, O/G, K) array when ``nw``),
    its dcols GEMM and col2im into ``dx`` (when given)."""
    xp = namespace_of(g)
    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G = geom
    N, C, H, W = x.shape
    Og, K, L = wr.shape[1], wr.shape[2], OH * OW
    dwr = xp.zeros((G, Og, K), dtype=g.dtype) if nw else None
    for n0, n1 in blocks:
        nb_, m = n1 - n0, (n1 - n0) * L
        gyb = scratch_buffer("gy", (G, nb_, L, Og), g.dtype, xp)
        gyb[...] = g[n0:n1].reshape(nb_, G, Og, L).transpose(1, 0, 3, 2)
        gyb = gyb.reshape(G, m, Og)
        if nw:
            if kept is not None:
                cols = kept[n0:n1]
            else:
                cols = kern.im2col(x[n0:n1], *geom, out=scratch_buffer("cols", (nb_, OH, OW, G * K), x.dtype, xp))
            dwr += xp.matmul(gyb.transpose(0, 2, 1), cols.reshape(m, G, K).transpose(1, 0, 2))
        if dx is not None:
            buf = scratch_buffer("dcols", (m, G, K), g.dtype, xp)
            xp.matmul(gyb, wr, out=buf.transpose(1, 0, 2))                   # (G, m, K) into (m, G, K)
            kern.col2im(buf.reshape(nb_, OH, OW, G * K), nb_, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, G,
                        out=dx[n0:n1])
    return dwr



def winograd_forward_blocks(kern, x, Ut, b, V, out, geom, blocks):
    """Forward over ``blocks`` of images: the input transform of a block (into ``V`` when it is
    kept for dW), its GEMMs (one per transform-domain position), the output transform and the bias."""
    ph, pw, OH, OW, TH, TW = geom
    TT, C, O, P = TH * TW, x.shape[1], out.shape[1], Ut.shape[0]
    for n0, n1 in blocks:
        t0, t1 = n0 * TT, n1 * TT
        Vb = V[:, t0:t1] if V is not None else scratch_buffer("winograd_v", (P, t1 - t0, C), x.dtype, np)
        kern.winograd_input(x[n0:n1], ph, pw, TH, TW, out=Vb)                 # (P, Tb, C)
        M = scratch_buffer("winograd_m", (P, t1 - t0, O), x.dtype, np)
        np.matmul(Vb, Ut, out=M)                                              # P GEMMs (Tb, C) @ (C, O)
        kern.winograd_output(M, n1 - n0, O, OH, OW, TH, TW, out=out[n0:n1])
        if b is not None:
            out[n0:n1] += b.reshape(1, O, 1, 1)


def winograd_backward_blocks(kern, x, g, U, V, dx, nw, geom, blocks):
    """Backward over ``blocks`` of images: dM of a block, its dU GEMMs (summed into the returned
    (P, O, C) array when ``nw``), its dV GEMMs and the input transform's adjoint into ``dx``
    (when given)."""
    ph, pw, OH, OW, TH, TW = geom
    TT = TH * TW
    N, C, H, W = x.shape
    P, O = U.shape[:2]
    dU = np.zeros((P, O, C), dtype=g.dtype) if nw else None
    for n0, n1 in blocks:
        t0, t1 = n0 * TT, n1 * TT
        dM = kern.winograd_output_adjoint(g[n0:n1], TH, TW,
                                          out=scratch_buffer("winograd_m", (P, t1 - t0, O), g.dtype, np))
        if nw:
            Vb = V[:, t0:t1] if V is not None else kern.winograd_input(
                x[n0:n1], ph, pw, TH, TW, out=scratch_buffer("winograd_v", (P, t1 - t0, C), x.dtype, np))
            dU += np.matmul(dM.transpose(0, 2, 1), Vb)                        # (P, O, C)
        if dx is not None:
            dV = scratch_buffer("winograd_dv", (P, t1 - t0, C), g.dtype, np)
            np.matmul(dM, U, out=dV)
            kern.winograd_input_adjoint(dV, n1 - n0, C, H, W, ph, pw, TH, TW, out=dx[n0:n1])
    return dU


def unfold_is_identity(geom):
    """A 1x1, stride-1, unpadded kernel: unfold(x) is x itself, (N, C, H*W)."""
    kh, kw, sh, sw, ph, pw = geom[:6]
    return kh == kw == sh == sw == 1 and ph == pw == 0


def _unfold_block(kern, x, keep, geom, n0, n1):
    """The (n1 - n0, C*kh*kw, L) columns of images n0..n1: a view of x for the identity, else
    unfolded into ``keep`` (kept for backward) or a scratch buffer."""
    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G = geom
    C = x.shape[1]
    if unfold_is_identity(geom):
        return x[n0:n1].reshape(n1 - n0, C, OH * OW)
    dst = keep[n0:n1] if keep is not None else scratch_buffer("unfold_cols", (n1 - n0, C * kh * kw, OH * OW),
                                                              x.dtype, np)
    return kern.unfold(x[n0:n1], kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, out=dst)


def unfold_forward_blocks(kern, x, wr, b, keep, out, geom, blocks):
    """Forward over ``blocks`` of images in unfold's layout: a block's columns (into ``keep``
    when kept for backward), then one GEMM per image and group, W_g (O/G, K) @ cols (K, L),
    written straight into the output's NCHW rows, and the bias."""
    OH, OW, G = geom[8:]
    O, K = out.shape[1], wr.shape[2]
    for n0, n1 in blocks:
        nb = n1 - n0
        cols = _unfold_block(kern, x, keep, geom, n0, n1).reshape(nb, G, K, OH * OW)
        np.matmul(wr, cols, out=out[n0:n1].reshape(nb, G, O // G, OH * OW))
        if b is not None:
            out[n0:n1] += b.reshape(1, O, 1, 1)


# OpenBLAS computes the per-image dW = G (O/G, L) @ cols^T (L, K), a short, wide product when the
# receptive field K is long, much slower than its transpose cols @ G^T; for K below about 8 O/G
# the two run alike (measurements: docs/performance.md, "unfold's dW as its transpose"). Where
# dW_g has at most UNFOLD_DW_KERNEL_MAX entries, both lose to the kernels' register-blocked dot
# products (``unfold_weight_grad``: 1.5-2.7x at LeNet's and ResNet's first layers, same page).
UNFOLD_DW_TRANSPOSED_FROM = 8
UNFOLD_DW_KERNEL_MAX = 1024


def unfold_backward_blocks(kern, x, g, wr, kept, dx, nw, geom, blocks):
    """Backward over ``blocks`` of images in unfold's layout (g is read in place, NCHW): per
    image and group dW_g += G_g (O/G, L) @ cols^T (L, K), by the kernels' ``unfold_weight_grad``
    for a small dW_g, else by BLAS, as its transpose where that is faster
    (UNFOLD_DW_KERNEL_MAX, UNFOLD_DW_TRANSPOSED_FROM; returned summed, (G, O/G, K), when ``nw``),
    dcols = W_g^T @ G_g and fold into ``dx`` (when given)."""
    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G = geom
    N, C, H, W = x.shape
    Og, K, L = wr.shape[1], wr.shape[2], OH * OW
    dwr = np.zeros((G, Og, K), dtype=g.dtype) if nw else None
    wt = wr.transpose(0, 2, 1)                                                 # (G, K, O/G)
    for n0, n1 in blocks:
        nb = n1 - n0
        gb = g[n0:n1].reshape(nb, G, Og, L)
        if nw:
            cols = (kept[n0:n1] if kept is not None else _unfold_block(kern, x, None, geom, n0, n1))
            cols = cols.reshape(nb, G, K, L)
            if Og * K <= UNFOLD_DW_KERNEL_MAX:
                kern.unfold_weight_grad(gb, cols, dwr)
            elif K >= UNFOLD_DW_TRANSPOSED_FROM * Og:   # dW_g^T = cols (K, L) @ G_g^T (L, O/G): BLAS's better shape
                parts = scratch_buffer("unfold_dwt", (nb, G, K, Og), g.dtype, np)
                np.matmul(cols, gb.transpose(0, 1, 3, 2), out=parts)
                dwr += parts.sum(axis=0).transpose(0, 2, 1)
            else:
                parts = scratch_buffer("unfold_dw", (nb, G, Og, K), g.dtype, np)
                np.matmul(gb, cols.transpose(0, 1, 3, 2), out=parts)
                dwr += parts.sum(axis=0)
        if dx is not None:
            if unfold_is_identity(geom):
                np.matmul(wt, gb, out=dx[n0:n1].reshape(nb, G, K, L))
                continue
            dcols = scratch_buffer("unfold_dcols", (nb, G, K, L), g.dtype, np)
            np.matmul(wt, gb, out=dcols)
            kern.fold(dcols.reshape(nb, G * K, L), nb, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, out=dx[n0:n1])
    return dwr
