"""2-D convolution (cross-correlation, as PyTorch) with stride, padding, dilation and groups.

    out[n, o, oh, ow] = b[o] + sum_{c in group(o), i, j} W[o, c, i, j] * x[n, c, oh*s - p + i*d, ow*s - p + j*d]

The op is turned into matrix products by im2col: gather every receptive field into a row,
``cols`` of shape (M, K) with M = N*OH*OW output pixels (the batch folded in) and
K = C/G*kh*kw per group, so that with W_g reshaped to (O/G, K)

    Y_g = cols_g @ W_g^T          (M, O/G), then laid out as NCHW

Backward is the same product differentiated, then im2col's adjoint (col2im, a scatter-add),
with G_g = dL/dY_g of shape (M, O/G) (the output gradient moved to pixel-major order):

    dW_g    = G_g^T @ cols_g      (O/G, K)
    dcols_g = G_g @ W_g           (M, K)
    dx      = col2im(dcols)       every cols entry adds back into the x element it copied
    db      = sum of g over n, oh, ow

The products go to BLAS through ``xp.matmul``; the gather and scatter are Numba kernels
(``minidl.kernels.cpu.im2col``) with the NumPy references below.

On the CPU, convolutions whose tall GEMM would be thin (1x1 kernels, at most UNFOLD_MAX_K values
per receptive field, or at most UNFOLD_MAX_O output channels per group; ``_columns``) use
PyTorch's unfold layout instead (``minidl.ops.fold``: cols_n of shape (C*kh*kw, L), rows (c, i,
j)), one product per image n and group g with W_g (O/G, K) as it is stored:

    Y_ng      = W_g @ cols_ng               (O/G, L): already image n's NCHW rows
    dW_g      = sum_n G_ng @ cols_ng^T      G_ng: dL/dY read in place, no transposing copy
    dcols_ng  = W_g^T @ G_ng                then fold (unfold's adjoint) into dx

(for a 1x1, stride-1, unpadded kernel cols_n is x[n] itself). The per-image products are too
small for BLAS to thread, so this layout takes the block workers from a lower size.

cols is K times bigger than x, so instead of materialising it for the whole batch, the
rows are processed in blocks of whole images (about BLOCK_BYTES of cols, which the L3 cache
holds, in one reused buffer: fresh pages would each cost a page fault): im2col of a block,
its GEMM, next block. Every block is a tall GEMM (thousands of rows).

Backward needs cols again for dW. When the weight needs a gradient and the whole batch's
cols fit in KEEP_COLS_BYTES, forward writes the blocks into one array kept for backward
(ResNet-8 at batch 64: 23 MB over the five convs that take columns, read back at memory speed); otherwise
backward rebuilds each block's cols from x, which keeps a step's memory at the size of the
activations at the cost of a second gather (about 10% of a ResNet-8 step on 2 cores).

Winograd F(4x4, 3x3) (Lavin & Gray, 2016) computes the 3x3, stride-1, ungrouped convolutions of
float32/float64 CPU arrays (``_use_winograd``) with 4x fewer multiplications, and a transform
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
that size). The GPU device keeps im2col + GEMM. The batch is processed in blocks of a few images
(``_winograd_blocks``): the transform of a block, its 36 GEMMs and the inverse transform, so
that V, M, dM and dV stay in cache; only the outputs go to memory.

Small stride-1 convolutions on the CPU (up to 16 input and 16 output channels, 3x3 ones of
16 x 16 left to Winograd: LeNet's layers, a network's first layer) skip both and compute the
sums directly on a zero-padded grid where every tap is a shift (``minidl.ops.conv_direct``).

Threads: with more than one thread, a big CPU convolution splits its batch into one contiguous
share of images per thread (``minidl.runtime.block_workers``), and each thread runs its share's
blocks end to end with the serial kernels and a single-threaded GEMM; backward sums the
shares' dW (dU) and db at the end, in share order, so a given thread count gives the same
result on every call. That replaces a Numba-parallel kernel and a multi-threaded BLAS call
per block, each a hand-over between thread pools, and GEMMs too skinny for BLAS to split
well (measurements: docs/performance.md). Small problems, one image, the NumPy references and
the GPU keep the loop on the calling thread (``_worker_count``).
"""
import numpy as np

from ..autograd.function import Function
from ..backends import namespace_of
from ..kernels.switch import into
from ..tensor.dtype import check_same_dtype
from ..tensor.allocation import check_allocation
from ._broadcast import int_pair
from .conv_direct import direct_backward, direct_forward, use_direct
from .conv_blocks import (im2col_backward_blocks, im2col_forward_blocks, unfold_backward_blocks,
                          unfold_forward_blocks, unfold_is_identity, winograd_backward_blocks, winograd_forward_blocks)
from ._kernel_switch import LAYER
from .fold import UNFOLD, conv_output_size, sliding_views
from .low_precision import float32_compute, keep_low, narrows_saves


def im2col_reference(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups=1, out=None):
    """x (N, C, H, W) -> cols (N, OH, OW, C*kh*kw) with
    cols[n, oh, ow, (g, i, j, cg)] = xpad[n, g*Cg + cg, oh*sh + i*dh, ow*sw + j*dw]
    (written into ``out`` when given)."""
    xp = namespace_of(x)
    N, C = x.shape[:2]
    G = groups
    xpad = xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    cols = xp.empty((N, OH, OW, G, kh, kw, C // G), dtype=x.dtype)
    for i, j, view in sliding_views(xpad, kh, kw, sh, sw, dh, dw, OH, OW):
        cols[:, :, :, :, i, j, :] = view.transpose(0, 2, 3, 1).reshape(N, OH, OW, G, C // G)
    return into(out, cols.reshape(N, OH, OW, C * kh * kw))


def col2im_reference(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, groups=1, out=None):
    """The adjoint of im2col: scatter-add cols (N, OH, OW, C*kh*kw) into dx (N, C, H, W)
    (written into ``out`` when given)."""
    xp = namespace_of(cols)
    OH, OW = cols.shape[1:3]
    G = groups
    cols = cols.reshape(N, OH, OW, G, kh, kw, C // G)
    dxpad = xp.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype=cols.dtype)
    for i, j, view in sliding_views(dxpad, kh, kw, sh, sw, dh, dw, OH, OW):
        view += cols[:, :, :, :, i, j, :].reshape(N, OH, OW, C).transpose(0, 3, 1, 2)
    return into(out, dxpad[:, :, ph: ph + H, pw: pw + W])


# the gather and its adjoint: the reference above, or one kernel launch per block on each device
IM2COL = LAYER.kernels(("im2col", "col2im"), __name__, cpu="minidl.kernels.cpu.im2col",
                       cuda="minidl.kernels.cuda.im2col")


# Winograd F(4x4, 3x3) -----------------------------------------------------------------------
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


def _use_winograd(x, w, stride, dilation, groups):
    return (USE_WINOGRAD and type(x) is np.ndarray and x.dtype in (np.float32, np.float64)
            and tuple(w.shape[2:]) == (3, 3) and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1)
            and groups == 1 and x.shape[1] >= WINOGRAD_MIN_CHANNELS)


def _weight_rows(w, G):
    """W (O, Cg, kh, kw) -> (G, O/G, kh*kw*Cg), axes ordered (i, j, cg) as cols' rows are."""
    O, Cg, kh, kw = w.shape
    return w.reshape(G, O // G, Cg, kh, kw).transpose(0, 1, 3, 4, 2).reshape(G, O // G, kh * kw * Cg)


BLOCK_BYTES = 8 << 20   # target size of one block of cols (fits the L3 cache; few blocks = few thread syncs)
KEEP_COLS_BYTES = 64 << 20   # largest cols (whole batch) kept from forward for backward's dW
KEEP_V_BYTES = 0             # the same for Winograd's V: rebuilt in backward (see the module docstring)


def _blocks(N, row_bytes):
    """[n0, n1) ranges of whole images whose cols take about BLOCK_BYTES."""
    import numba

    import minidl.kernels.cpu  # noqa: F401  (starts Numba's pool the way minidl configures it)
    threads = numba.get_num_threads()
    per = threads * max(1, round(BLOCK_BYTES / (max(row_bytes, 1) * threads)))   # images split evenly over threads
    return [(n0, min(n0 + per, N)) for n0 in range(0, N, per)]


# Block workers ------------------------------------------------------------------------------
BLOCK_WORKERS = True   # big CPU convolutions run their image blocks on minidl.runtime.block_workers
BLOCK_WORKERS_FROM = 1 << 20   # elements (cols, transforms); below, the hand-off costs more than it saves (docs/performance.md)


class _SerialKernels:
    """A CPU kernel module's single-thread entry points (``<name>_serial``) under the names the
    block loops call (looked up at each call, so a test may patch one)."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        return getattr(self._module, name + "_serial")


def _worker_count(N, n_elements, impl, threshold=None):
    """How many threads run a convolution's image blocks, each its own share end to end
    (``minidl.runtime.block_workers``): 1 keeps the loop on the calling thread, where each block
    is a parallel kernel and a multi-threaded GEMM. Only the CPU kernels (not the references,
    not the GPU), two images or more, problems of at least ``threshold`` elements
    (BLOCK_WORKERS_FROM unless given), the kernels' own threshold for going parallel
    (``layer_parallel``), and a BLAS that can be held at one thread meanwhile."""
    if not BLOCK_WORKERS or impl.name != "cpu" or N < 2:
        return 1
    import numba

    from ..kernels.cpu._threads import layer_parallel
    from ..runtime import block_workers
    if (n_elements < (BLOCK_WORKERS_FROM if threshold is None else threshold) or not layer_parallel(n_elements)
            or block_workers.in_worker()
            or not block_workers.available()):
        return 1
    return min(N, numba.get_num_threads())


def _run_shares(work, N, k):
    """work(n0, n1) for k near-equal contiguous shares of the N images, concurrently; the
    results in share order."""
    from ..runtime import block_workers
    return block_workers.run(lambda share: work(*share), block_workers.split(N, k))


def _share_blocks(n0, n1, per):
    """[a, b) ranges of ``per`` images (the last one shorter) covering images n0..n1."""
    return [(a, min(a + per, n1)) for a in range(n0, n1, per)]


# The two column layouts. unfold's, (N, C*kh*kw, L), multiplies each image as W (O, K) @ cols
# (K, L), which lands in NCHW order and reads the output gradient in place: it pays on the CPU
# where the gather is cheap or im2col's tall GEMM is thin: 1x1 kernels (no gather at stride 1,
# a subsample otherwise), receptive fields of at most UNFOLD_MAX_K values (the first layers:
# 1-3 input channels, a short inner dimension) and at most UNFOLD_MAX_O output channels per
# group (few columns). Elsewhere, and on other devices, im2col's pixel rows: one tall GEMM per
# block, faster for long K and many channels (docs/performance.md has the measurements). Its
# per-image products are too small for BLAS to thread, so it takes the block workers from
# UNFOLD_BLOCK_WORKERS_FROM elements of columns.
class _Columns:
    def __init__(self, name, kernels, forward_blocks, backward_blocks, weight_rows, cols_shape, workers_from):
        self.name, self.kernels = name, kernels
        self.forward_blocks, self.backward_blocks = forward_blocks, backward_blocks
        self.weight_rows, self.cols_shape = weight_rows, cols_shape
        self.workers_from = workers_from    # () -> elements of columns from which the block workers run


IM2COL_COLUMNS = _Columns("im2col", IM2COL, im2col_forward_blocks, im2col_backward_blocks, _weight_rows,
                          lambda N, OH, OW, GK: (N, OH, OW, GK), lambda: BLOCK_WORKERS_FROM)
UNFOLD_COLUMNS = _Columns("unfold", UNFOLD, unfold_forward_blocks, unfold_backward_blocks,
                          lambda w, G: w.reshape(G, w.shape[0] // G, -1), lambda N, OH, OW, GK: (N, GK, OH * OW),
                          lambda: UNFOLD_BLOCK_WORKERS_FROM)
USE_UNFOLD = True     # CPU arrays in unfold's layout where it pays (else im2col's everywhere)
UNFOLD_MAX_K = 96     # receptive-field values per group up to which unfold's layout is faster
UNFOLD_MAX_O = 16     # output channels per group up to which unfold's layout is faster
UNFOLD_BLOCK_WORKERS_FROM = 1 << 18


def _columns(x, w, groups):
    O, Cg, kh, kw = w.shape
    if USE_UNFOLD and type(x) is np.ndarray and (kh * kw == 1 or Cg * kh * kw <= UNFOLD_MAX_K
                                                 or O // groups <= UNFOLD_MAX_O):
        return UNFOLD_COLUMNS
    return IM2COL_COLUMNS


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class Conv2d(Function):
    """conv2d by the direct sums where ``use_direct`` says so (``conv_direct.py``), by Winograd
    F(4x4, 3x3) where ``_use_winograd`` does, else by blocked columns (unfold's on the CPU,
    im2col's elsewhere) + GEMM; see the module docstring for the derivations."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups):
        xp = namespace_of(x)
        if not getattr(getattr(x, "flags", None), "c_contiguous", True):
            x = xp.ascontiguousarray(x)           # the kernels read x as one C-ordered block per image
        ctx.winograd = _use_winograd(x, w, stride, dilation, groups)
        ctx.direct = use_direct(x, w, stride, dilation, groups, ctx.winograd)
        if ctx.direct:
            return direct_forward(ctx, x, w, b, padding)
        if ctx.winograd:
            return _winograd_forward(ctx, x, w, b, padding)
        path = ctx.path = _columns(x, w, groups)
        impl = ctx.impl = path.kernels.select(x)
        N, C, H, W = x.shape
        O, Cg, kh, kw = w.shape
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        OH = conv_output_size(H, kh, sh, ph, dh)
        OW = conv_output_size(W, kw, sw, pw, dw)
        G, K, L = groups, Cg * kh * kw, OH * OW
        geom = (kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G)
        wr = path.weight_rows(w, G)                                          # (G, O/G, K)
        out = xp.empty((N, O, OH, OW), dtype=x.dtype)
        keep = None
        if (ctx.needs_input_grad[1] and N * L * G * K * x.itemsize <= KEEP_COLS_BYTES
                and not (path is UNFOLD_COLUMNS and unfold_is_identity(geom))):    # there the columns are x
            keep = xp.empty(path.cols_shape(N, OH, OW, G * K), dtype=x.dtype)
        row_bytes = L * G * K * x.itemsize
        k = _worker_count(N, N * L * G * K, impl, path.workers_from())
        if k == 1:
            path.forward_blocks(impl, x, wr, b, keep, out, geom, _blocks(N, row_bytes))
        else:
            kern, per = _SerialKernels(_cpu_module(path.name)), _images_per_block(BLOCK_BYTES / k, row_bytes)
            _run_shares(lambda n0, n1: path.forward_blocks(kern, x, wr, b, keep, out, geom,
                                                            _share_blocks(n0, n1, per)), N, k)
        ctx.save_for_backward(x, wr)
        ctx.cols = keep
        keep_low(ctx, keep, wr)   # copies of the (rounded) input and weight: exact in the low dtype
        ctx.geom = geom
        ctx.wshape = w.shape
        return out

    @staticmethod
    def backward(ctx, g):
        if ctx.direct:
            return direct_backward(ctx, g) + (None, None, None, None)
        if ctx.winograd:
            return _winograd_backward(ctx, g) + (None, None, None, None)
        x, wr = ctx.saved_tensors
        kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G = geom = ctx.geom
        path = ctx.path
        O, Cg = ctx.wshape[:2]
        nx, nw, nb = ctx.needs_input_grad[:3]
        xp = namespace_of(g)
        g = xp.ascontiguousarray(g)
        N, C, H, W = x.shape
        K, L = Cg * kh * kw, OH * OW
        dx = xp.empty((N, C, H, W), dtype=g.dtype) if nx else None
        kept, ctx.cols = ctx.cols, None
        row_bytes = L * G * K * x.itemsize
        k = _worker_count(N, N * L * G * K, ctx.impl, path.workers_from())
        if k == 1:
            db = g.sum(axis=(0, 2, 3)) if nb else None
            dwr = path.backward_blocks(ctx.impl, x, g, wr, kept, dx, nw, geom, _blocks(N, row_bytes))
        else:
            kern, per = _SerialKernels(_cpu_module(path.name)), _images_per_block(BLOCK_BYTES / k, row_bytes)

            def share(n0, n1):    # a share's dW and db, summed over the shares below
                return (path.backward_blocks(kern, x, g, wr, kept, dx, nw, geom, _share_blocks(n0, n1, per)),
                        g[n0:n1].sum(axis=(0, 2, 3)) if nb else None)
            parts = _run_shares(share, N, k)
            dwr = sum(p[0] for p in parts) if nw else None
            db = sum(p[1] for p in parts) if nb else None
        dw_ = None
        if nw:
            dw_ = (dwr.reshape(ctx.wshape) if path is UNFOLD_COLUMNS else
                   dwr.reshape(G, O // G, kh, kw, Cg).transpose(0, 1, 4, 2, 3).reshape(ctx.wshape))
        return dx, dw_, db, None, None, None, None


def _cpu_module(name):
    import importlib
    return importlib.import_module("minidl.kernels.cpu." + name)


def _images_per_block(block_bytes, per_image_bytes):
    """Whole images whose data take about ``block_bytes`` (at least one)."""
    return max(1, round(block_bytes / max(per_image_bytes, 1)))


# Winograd F(4x4, 3x3) -----------------------------------------------------------------------
def _winograd_blocks(N, per_image_bytes):
    """[n0, n1) ranges of whole images whose transform-domain products (M, dM, dV) take about
    WINOGRAD_BLOCK_BYTES per thread, so that each thread's share stays in its L2 cache between
    the GEMM and the transform."""
    import numba
    threads = numba.get_num_threads()
    per = threads * _images_per_block(WINOGRAD_BLOCK_BYTES, per_image_bytes)
    return [(n0, min(n0 + per, N)) for n0 in range(0, N, per)]


def _winograd_forward(ctx, x, w, b, padding):
    """Conv2d.forward by Winograd F(4x4, 3x3); see the module docstring."""
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
    k = _worker_count(N, WINOGRAD_PLANES * N * TT * max(C, O), impl, WINOGRAD_BLOCK_WORKERS_FROM)
    if k == 1:
        winograd_forward_blocks(impl, x, Ut, b, V, out, geom, _winograd_blocks(N, per_image))
    else:
        kern, per = _SerialKernels(_cpu_module("winograd")), _images_per_block(WINOGRAD_BLOCK_BYTES, per_image)
        _run_shares(lambda n0, n1: winograd_forward_blocks(kern, x, Ut, b, V, out, geom,
                                                            _share_blocks(n0, n1, per)), N, k)
    ctx.save_for_backward(x, w, V)   # w, not U: an input costs nothing to keep, U is 4x its size
    ctx.geom = geom
    return out


def _winograd_backward(ctx, g):
    """The adjoint of each step of _winograd_forward, in reverse: (dx, dW, db)."""
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
    k = _worker_count(N, WINOGRAD_PLANES * N * TT * max(C, O), ctx.impl, WINOGRAD_BLOCK_WORKERS_FROM)
    if k == 1:
        dU = winograd_backward_blocks(ctx.impl, x, g, U, V, dx, nw, geom, _winograd_blocks(N, per_image))
        db = g.sum(axis=(0, 2, 3)) if nb else None
    else:
        kern, per = _SerialKernels(_cpu_module("winograd")), _images_per_block(WINOGRAD_BLOCK_BYTES, per_image)

        def share(n0, n1):    # a share's dU and db, summed over the shares below
            return (winograd_backward_blocks(kern, x, g, U, V, dx, nw, geom, _share_blocks(n0, n1, per)),
                    g[n0:n1].sum(axis=(0, 2, 3)) if nb else None)
        parts = _run_shares(share, N, k)
        dU = sum(p[0] for p in parts) if nw else None
        db = sum(p[1] for p in parts) if nb else None
    dw = winograd_filter_adjoint(dU) if nw else None                          # (O, C, 3, 3)
    return dx, dw, db


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution over (N, C, H, W) (or unbatched (C, H, W)) input, as ``torch.nn.functional.conv2d``.

    ``padding`` may be an int, a pair, "valid" (no padding) or "same" (stride 1 only; odd
    total padding puts the extra row/column at the bottom/right, as PyTorch).
    """
    from .shape import squeeze, unsqueeze
    unbatched = input.ndim == 3
    if unbatched:
        input = unsqueeze(input, 0)
    if input.ndim != 4:
        raise ValueError(f"conv2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {list(input.shape)}")
    if weight.ndim != 4:
        raise ValueError(f"conv2d: expected a 4-D weight (out_channels, in_channels/groups, kH, kW), "
                         f"got shape {list(weight.shape)}")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"conv2d: groups must be a positive int, got {groups!r}")
    O, Cg, kh, kw = weight.shape
    if O == 0 or kh == 0 or kw == 0:   # PyTorch's rule (an input of no channel, Cg = 0, is fine: out = bias)
        raise RuntimeError(f"conv2d: expected a weight with at least one output channel and a kernel of positive "
                           f"size, got weight of shape {list(weight.shape)}")
    C = input.shape[1]
    if Cg * groups != C:
        raise ValueError(f"conv2d: input has {C} channels but weight of shape {list(weight.shape)} "
                         f"with groups={groups} "
                         f"expects {Cg * groups}")
    if O % groups:
        raise ValueError(f"conv2d: out_channels {O} is not divisible by groups={groups}")
    if bias is not None and tuple(bias.shape) != (O,):
        raise ValueError(f"conv2d: bias must have shape [{O}], got {list(bias.shape)}")
    check_same_dtype("conv2d", [("input", input), ("weight", weight), ("bias", bias)])
    stride, dilation = int_pair(stride, "stride", "conv2d"), int_pair(dilation, "dilation", "conv2d")
    if min(stride) < 1 or min(dilation) < 1:
        raise ValueError(f"conv2d: stride and dilation must be >= 1, got stride={stride}, dilation={dilation}")
    extra = None
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same":
            if stride != (1, 1):
                raise ValueError("conv2d: padding='same' is not supported for strided convolutions")
            tot = (dilation[0] * (kh - 1), dilation[1] * (kw - 1))
            padding = (tot[0] // 2, tot[1] // 2)
            extra = (tot[0] % 2, tot[1] % 2)
        else:
            raise ValueError(f"conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
    padding = int_pair(padding, "padding", "conv2d")
    if min(padding) < 0:
        raise ValueError(f"conv2d: padding must be >= 0, got {padding}")
    if extra and any(extra):
        input = _pad_bottom_right(input, extra)
    H, W = input.shape[2] + 2 * padding[0], input.shape[3] + 2 * padding[1]
    if H < dilation[0] * (kh - 1) + 1 or W < dilation[1] * (kw - 1) + 1:
        raise ValueError(f"conv2d: kernel size {kh}x{kw} (dilation {dilation}) is larger than the padded input "
                         f"{H}x{W}")
    N = input.shape[0]
    OH = conv_output_size(input.shape[2], kh, stride[0], padding[0], dilation[0])
    OW = conv_output_size(input.shape[3], kw, stride[1], padding[1], dilation[1])
    # what padding and stride make im2col allocate: the padded input, the output, one image's cols
    for shape in ((N, C, H, W), (N, O, OH, OW), (1, OH, OW, C * kh * kw)):
        check_allocation("conv2d", shape, input.dtype)
    out = Conv2d.apply(input, weight, bias, stride, padding, dilation, groups)
    return squeeze(out, 0) if unbatched else out


class _PadBottomRight(Function):
    """out = x with ``extra`` zero rows/columns appended;  dL/dx = g cropped back."""

    @staticmethod
    def forward(ctx, x, extra):
        ctx.hw = x.shape[2:]
        return namespace_of(x).pad(x, ((0, 0), (0, 0), (0, extra[0]), (0, extra[1])))

    @staticmethod
    def backward(ctx, g):
        H, W = ctx.hw
        return g[:, :, :H, :W], None


def _pad_bottom_right(x, extra):
    return _PadBottomRight.apply(x, extra)
