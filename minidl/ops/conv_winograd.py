"""conv2d by Winograd F(4x4, 3x3): the derivation, the NumPy references of the tile transforms,
and the op's forward and backward over blocks of images (``minidl.ops.conv.Conv2d`` calls them
where ``use_winograd`` says so).

Winograd F(4x4, 3x3) (Lavin & Gray, 2016) computes the 3x3, stride-1, ungrouped convolutions of
float32/float64 CPU arrays (``use_winograd``) with 4x fewer multiplications, and a transform
domain 2.25x the size of the output instead of im2col's 9x the input. In one dimension, F(4, 3)
takes an input tile d = (d0, ..., d5) and the filter g = (g0, g1, g2) to the four outputs of the
correlation, y_i = g0 d_i + g1 d_(i+1) + g2 d_(i+2), as

    y = A^T [(G g) * (B^T d)]       (* elementwise: six multiplications instead of twelve)
    B^T = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
           [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]
    G   = [[1/4, 0, 0], [-1/6, -1/6, -1/6], [-1/6, 1/6, -1/6],
           [1/24, 1/12, 1/6], [1/24, -1/12, 1/6], [0, 0, 1]]
    A^T = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]

It is polynomial multiplication evaluated at the points 0, 1, -1, 2, -2 and infinity: the
rows of B^T and G evaluate d and g there, the products are the values of their product, and
A^T interpolates the four wanted coefficients back (for instance y0 = m0 + m1 + m2 + m3 + m4
with m = (G g) * (B^T d) expands to g0 d0 + g1 d1 + g2 d2). Nesting it over rows and columns
gives the 2-D tile: output tile (th, tw), rows 4*th .. 4*th + 3, reads the 6x6 input tile d at
rows 4*th - ph .. 4*th - ph + 5 (zero outside the image; tiles overlap by two rows and
columns), and, summed over channels c,

    V[xi, t, c] = (B^T d_tc B)[xi]        U[xi, o, c] = (G w_oc G^T)[xi]       (xi: 36 positions)
    M[xi] = V[xi] @ U[xi]^T               (36 GEMMs, (T, C) @ (C, O); T = N*TH*TW tiles)
    y_to = A^T M_to A                     (4x4, cropped at the output's bottom and right edge)

Every step is linear, so backward is each step's adjoint, in reverse (no flipped-filter
convolution needed), with g_to the 4x4 tile of dL/dy:

    dM_to = A g_to A^T
    dU[xi] = dM[xi]^T @ V[xi]     ->  dW_oc = G^T dU_oc G
    dV[xi] = dM[xi] @ U[xi]       ->  dx = sum over tiles of B dV_tc B^T, added where d_tc was read

The gradients are those of the Winograd forward, so exact up to rounding like im2col's. The
tile was chosen by float32 error and speed (docs/performance.md): the transforms' entries up to
8 and 1/24 round more than F(2x2, 3x3)'s additions and halves, so against direct summation in
float64 the error is 4-7e-6 of the output's largest value, 7-13 times im2col's and 15-18 times
F(2x2, 3x3)'s (some 50 float32 ulps, far below a stochastic gradient's noise), while its layers
run 19-23% faster than F(2x2, 3x3)'s (36 instead of 64 transform values and products per 16
outputs). The tile transforms are the NumPy references below and Numba kernels in
``minidl.kernels.cpu.winograd``; backward rebuilds V from x for dW, block by block in a
cache-resident buffer (V is 2.25x the size of x: writing it out in forward and reading it back
cost more than the second transform, docs/performance.md; KEEP_V_BYTES above 0 keeps V up to
that size). The GPU device keeps im2col + GEMM: the blocking below is written for a CPU's
caches, and on a GPU, whose GEMMs run near its peak at these sizes, cutting the multiply-adds to a
quarter is expected to save less than the extra passes over a transform domain 2.25x the input's
size cost (an expectation: no port has been measured). The batch is processed in blocks of a few
images (``winograd_blocks``): the transform of a block, its 36 GEMMs and the inverse transform, so
that V, M, dM and dV stay in cache; only the outputs go to memory.

Threads: from WINOGRAD_BLOCK_WORKERS_FROM transform-domain elements the batch splits into one
share of images per thread, each run end to end with the serial kernels and single-threaded
BLAS. Where NumPy's OpenBLAS can be called from Numba (``ONE_REGION``), the shares run as one
parallel region of Numba's pool (``minidl.kernels.cpu.winograd_shares``). Elsewhere, and where V
is kept, they run on the block workers as the column paths do (``minidl.ops.conv``'s
docstring). Python threads hand the GIL over at every kernel and GEMM, which costs most on a
virtual machine (docs/performance.md, "One region for the shares").
"""
import numpy as np

from ..backends import namespace_of
from ..kernels.switch import into
from ._kernel_switch import LAYER
from .conv_blocks import (images_per_block, run_shares, winograd_backward_blocks, winograd_forward_blocks,
                          worker_count)
from .low_precision import narrows_saves

# The transforms ---------------------------------------------------------------------------------
WINOGRAD_BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                        [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], dtype=np.float64)
WINOGRAD_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
                       [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], dtype=np.float64)
WINOGRAD_AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
                       dtype=np.float64)
WINOGRAD_GG = np.kron(WINOGRAD_G, WINOGRAD_G)   # (36, 9): GG[(a, b), (i, j)] = G[a, i] G[b, j]
WINOGRAD_TILE = WINOGRAD_AT.shape[0]           # output rows and columns per tile: 4
WINOGRAD_PLANES = WINOGRAD_BT.shape[0] ** 2     # transform-domain positions xi, the 6 x 6 input tile: 36


def winograd_tiles(OH, OW):
    """(TH, TW): the 4x4 output tiles that cover an OH x OW output."""
    return -(-OH // WINOGRAD_TILE), -(-OW // WINOGRAD_TILE)


def _padded(x, ph, pw, TH, TW):
    """x zero-padded to the (4*TH + 2, 4*TW + 2) rows and columns the tiles read."""
    xp = namespace_of(x)
    N, C, H, W = x.shape
    xpad = xp.zeros((N, C, 4 * TH + 2, 4 * TW + 2), dtype=x.dtype)
    xpad[:, :, ph:ph + H, pw:pw + W] = x
    return xpad


def winograd_input_reference(x, ph, pw, TH, TW, out=None):
    """x (N, C, H, W) -> V (36, N*TH*TW, C): V[(a, b), (n, th, tw), c] = (B^T d B)[a, b] with
    d[i, j] = xpad[n, c, 4*th + i, 4*tw + j]."""
    xp = namespace_of(x)
    N, C = x.shape[:2]
    xpad = _padded(x, ph, pw, TH, TW)
    d = xp.stack([xp.stack([xpad[:, :, i:i + 4 * TH - 3:4, j:j + 4 * TW - 3:4] for j in range(6)])
                  for i in range(6)])                                       # (6, 6, N, C, TH, TW)
    bt = xp.asarray(WINOGRAD_BT.astype(x.dtype))
    v = xp.einsum("ai,bj,ijnchw->abnhwc", bt, bt, d)
    return into(out, v.reshape(WINOGRAD_PLANES, N * TH * TW, C))


def winograd_input_adjoint_reference(dV, N, C, H, W, ph, pw, TH, TW, out=None):
    """The adjoint of winograd_input: dd = B dV B^T per tile, added back where the tile was read."""
    xp = namespace_of(dV)
    bt = xp.asarray(WINOGRAD_BT.astype(dV.dtype))
    dd = xp.einsum("ai,bj,abnhwc->ijnchw", bt, bt, dV.reshape(6, 6, N, TH, TW, C))
    dxpad = xp.zeros((N, C, 4 * TH + 2, 4 * TW + 2), dtype=dV.dtype)
    for i in range(6):
        for j in range(6):
            dxpad[:, :, i:i + 4 * TH - 3:4, j:j + 4 * TW - 3:4] += dd[i, j]
    return into(out, xp.ascontiguousarray(dxpad[:, :, ph:ph + H, pw:pw + W]))


def winograd_output_reference(M, N, O, OH, OW, TH, TW, out=None):
    """M (36, N*TH*TW, O) -> y (N, O, OH, OW): each 4x4 output tile is A^T M_to A."""
    xp = namespace_of(M)
    at = xp.asarray(WINOGRAD_AT.astype(M.dtype))
    y4 = xp.einsum("ai,bj,ijnhwo->abnohw", at, at, M.reshape(6, 6, N, TH, TW, O))   # (4, 4, N, O, TH, TW)
    y = xp.empty((N, O, 4 * TH, 4 * TW), dtype=M.dtype)
    for a in range(4):
        for b in range(4):
            y[:, :, a::4, b::4] = y4[a, b]
    return into(out, xp.ascontiguousarray(y[:, :, :OH, :OW]))


def winograd_output_adjoint_reference(g, TH, TW, out=None):
    """The adjoint of winograd_output: dM_to = A g_to A^T (g zero past OH, OW)."""
    xp = namespace_of(g)
    N, O, OH, OW = g.shape
    gpad = xp.zeros((N, O, 4 * TH, 4 * TW), dtype=g.dtype)
    gpad[:, :, :OH, :OW] = g
    gt = xp.stack([xp.stack([gpad[:, :, a::4, b::4] for b in range(4)]) for a in range(4)])  # (4, 4, N, O, TH, TW)
    at = xp.asarray(WINOGRAD_AT.astype(g.dtype))
    dm = xp.einsum("ai,bj,abnohw->ijnhwo", at, at, gt)
    return into(out, dm.reshape(WINOGRAD_PLANES, N * TH * TW, O))


def winograd_filter(w):
    """W (O, C, 3, 3) -> U (36, O, C): U[(a, b), o, c] = (G W_oc G^T)[a, b], as one product of
    WINOGRAD_GG = G kron G with every filter's nine taps as a column (an einsum over the two
    G's runs NumPy's unoptimised loop: 3 ms of a ResNet-8 step, docs/performance.md)."""
    xp = namespace_of(w)
    O, C = w.shape[:2]
    gg = xp.asarray(WINOGRAD_GG.astype(w.dtype))
    return xp.ascontiguousarray((gg @ w.reshape(O * C, 9).T).reshape(WINOGRAD_PLANES, O, C))


def winograd_filter_adjoint(dU):
    """The adjoint of winograd_filter: dU (36, O, C) -> dW (O, C, 3, 3) = G^T dU_oc G."""
    xp = namespace_of(dU)
    O, C = dU.shape[1:]
    gg = xp.asarray(WINOGRAD_GG.astype(dU.dtype))
    return (dU.reshape(WINOGRAD_PLANES, O * C).T @ gg).reshape(O, C, 3, 3)


WINOGRAD = LAYER.kernels(("winograd_input", "winograd_input_adjoint", "winograd_output", "winograd_output_adjoint"),
                         __name__, cpu="minidl.kernels.cpu.winograd")
USE_WINOGRAD = True   # 3x3 stride-1 convolutions of CPU float32/float64 arrays by Winograd F(4x4, 3x3)
# Below this many input channels im2col + GEMM is faster (the 3-channel first layer of a CIFAR
# ResNet: the transforms cost more than the small GEMM they save; docs/performance.md).
WINOGRAD_MIN_CHANNELS = 8
WINOGRAD_BLOCK_BYTES = 1 << 20   # per thread: images per block whose M (or dM, dV) take about this much
WINOGRAD_BLOCK_WORKERS_FROM = 1 << 19   # transform-domain elements from which the block workers pay (performance.md)
KEEP_V_BYTES = 0   # largest V (whole batch) kept from forward for dW: none, rebuilt (the docstring says why)
# The shares as one parallel region of Numba's pool, the GEMMs called from the kernels
# (kernels/cpu/winograd_shares.py), where NumPy's OpenBLAS allows it; else on the block workers
ONE_REGION = True


def _one_region(V):
    """The kernels that run every share in one parallel region, or None (the block workers)."""
    if not ONE_REGION or V is not None:
        return None
    from ..kernels.cpu import winograd_shares
    return winograd_shares if winograd_shares.AVAILABLE else None


def use_winograd(x, w, stride, dilation, groups):
    """Does conv2d take Winograd F(4x4, 3x3) for these arguments?"""
    return (USE_WINOGRAD and type(x) is np.ndarray and x.dtype in (np.float32, np.float64)
            and tuple(w.shape[2:]) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and x.shape[1] >= WINOGRAD_MIN_CHANNELS)


# The op over blocks of images --------------------------------------------------------------
def winograd_blocks(N, per_image_bytes):
    """[n0, n1) ranges of whole images whose transform-domain products (M, dM, dV) take about
    WINOGRAD_BLOCK_BYTES per thread, so that each thread's share stays in its L2 cache between
    the GEMM and the transform."""
    import numba
    threads = numba.get_num_threads()
    per = threads * images_per_block(WINOGRAD_BLOCK_BYTES, per_image_bytes)
    return [(n0, min(n0 + per, N)) for n0 in range(0, N, per)]


def winograd_forward(ctx, x, w, b, padding):
    """Conv2d.forward by Winograd F(4x4, 3x3); see the docstring above."""
    impl = ctx.impl = WINOGRAD.select(x)
    N, C, H, W = x.shape
    O = w.shape[0]
    ph, pw = padding
    OH, OW = H + 2 * ph - 2, W + 2 * pw - 2
    TH, TW = winograd_tiles(OH, OW)
    TT = TH * TW
    geom = (ph, pw, OH, OW, TH, TW)
    U = winograd_filter(w)                                                    # (36, O, C)
    Ut = U.transpose(0, 2, 1)
    # when V is kept: it sums inputs, so it is not exact in a low dtype, and a float16/bfloat16 call rebuilds it
    keep = (ctx.needs_input_grad[1] and not narrows_saves(ctx)
            and WINOGRAD_PLANES * N * TT * C * x.itemsize <= KEEP_V_BYTES)
    V = np.empty((WINOGRAD_PLANES, N * TT, C), dtype=x.dtype) if keep else None            # kept for dW
    out = np.empty((N, O, OH, OW), dtype=x.dtype)
    per_image = WINOGRAD_PLANES * TT * max(C, O) * x.itemsize
    k = worker_count(N, WINOGRAD_PLANES * N * TT * max(C, O), impl, WINOGRAD_BLOCK_WORKERS_FROM)
    region = _one_region(V) if k > 1 else None
    if k == 1:
        winograd_forward_blocks(impl, x, Ut, b, V, out, geom, winograd_blocks(N, per_image))
    elif region is not None:
        region.winograd_forward_shares(x, U, b, out, k, images_per_block(WINOGRAD_BLOCK_BYTES, per_image), ph, pw,
                                       TH, TW)
    else:
        run_shares("winograd", N, k, images_per_block(WINOGRAD_BLOCK_BYTES, per_image),
                   lambda kern, n0, n1, blocks: winograd_forward_blocks(kern, x, Ut, b, V, out, geom, blocks))
    ctx.save_for_backward(x, w, V)   # w, not U: an input costs nothing to keep, U is 4x its size
    ctx.geom = geom
    return out


def winograd_backward(ctx, g):
    """The adjoint of each step of winograd_forward, in reverse: (dx, dW, db)."""
    x, w, V = ctx.saved_tensors
    U = winograd_filter(w)                                                    # (36, O, C), a small GEMM again
    geom = ctx.geom
    TT = geom[4] * geom[5]
    nx, nw, nb = ctx.needs_input_grad[:3]
    N, C, H, W = x.shape
    O = U.shape[1]
    g = np.ascontiguousarray(g)
    dx = np.empty((N, C, H, W), dtype=g.dtype) if nx else None
    per_image = WINOGRAD_PLANES * TT * max(C, O) * x.itemsize
    k = worker_count(N, WINOGRAD_PLANES * N * TT * max(C, O), ctx.impl, WINOGRAD_BLOCK_WORKERS_FROM)
    region = _one_region(V) if k > 1 else None
    if k == 1 or region is not None:
        if k == 1:
            dU = winograd_backward_blocks(ctx.impl, x, g, U, V, dx, nw, geom, winograd_blocks(N, per_image))
        else:
            dU = region.winograd_backward_shares(x, g, U, dx, nw, k, images_per_block(WINOGRAD_BLOCK_BYTES, per_image),
                                                 *geom[:2], *geom[4:])
        db = g.sum(axis=(0, 2, 3)) if nb else None
    else:
        def share(kern, n0, n1, blocks):    # a share's dU and db, summed over the shares below
            return (winograd_backward_blocks(kern, x, g, U, V, dx, nw, geom, blocks),
                    g[n0:n1].sum(axis=(0, 2, 3)) if nb else None)
        parts = run_shares("winograd", N, k, images_per_block(WINOGRAD_BLOCK_BYTES, per_image), share)
        dU = sum(p[0] for p in parts) if nw else None
        db = sum(p[1] for p in parts) if nb else None
    dw = winograd_filter_adjoint(dU) if nw else None                          # (O, C, 3, 3)
    return dx, dw, db
