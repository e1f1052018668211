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

3x3, stride-1, ungrouped convolutions of float32/float64 CPU arrays from 8 input channels go
through Winograd F(4x4, 3x3) instead (``minidl.ops.conv_winograd``: the derivation, the NumPy
references of its transforms, its block loop), with 4x fewer multiplications.

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
the GPU keep the loop on the calling thread (``conv_blocks.worker_count``).
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..kernels.switch import into
from ..tensor.dtype import check_same_dtype
from ..tensor.allocation import check_allocation
from ._broadcast import int_pair
from .conv_direct import direct_backward, direct_forward, use_direct
from .conv_blocks import (im2col_backward_blocks, im2col_forward_blocks, images_per_block, run_shares,
                          unfold_backward_blocks, unfold_forward_blocks, unfold_is_identity, worker_count)
from .conv_winograd import use_winograd, winograd_backward, winograd_forward
from ._kernel_switch import LAYER
from .fold import UNFOLD, conv_output_size, sliding_views
from .low_precision import float32_compute, keep_low
from .shape_error import ShapeError


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


def _weight_rows(w, G):
    """W (O, Cg, kh, kw) -> (G, O/G, kh*kw*Cg), axes ordered (i, j, cg) as cols' rows are."""
    O, Cg, kh, kw = w.shape
    return w.reshape(G, O // G, Cg, kh, kw).transpose(0, 1, 3, 4, 2).reshape(G, O // G, kh * kw * Cg)


BLOCK_BYTES = 8 << 20   # target size of one block of cols (fits the L3 cache; few blocks = few thread syncs)
KEEP_COLS_BYTES = 64 << 20   # largest cols (whole batch) kept from forward for backward's dW


def _blocks(N, row_bytes):
    """[n0, n1) ranges of whole images whose cols take about BLOCK_BYTES."""
    import numba

    import minidl.kernels.cpu  # noqa: F401  (starts Numba's pool the way minidl configures it)
    threads = numba.get_num_threads()
    per = threads * max(1, round(BLOCK_BYTES / (max(row_bytes, 1) * threads)))   # images split evenly over threads
    return [(n0, min(n0 + per, N)) for n0 in range(0, N, per)]


# Block workers (``conv_blocks.worker_count``): from how many elements of columns they pay.
BLOCK_WORKERS_FROM = 1 << 20   # below, the hand-off costs more than it saves (docs/performance.md)


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
    F(4x4, 3x3) where ``use_winograd`` does, else by blocked columns (unfold's on the CPU,
    im2col's elsewhere) + GEMM; see the module docstring for the derivations."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups):
        xp = namespace_of(x)
        if not getattr(getattr(x, "flags", None), "c_contiguous", True):
            x = xp.ascontiguousarray(x)           # the kernels read x as one C-ordered block per image
        ctx.options = (stride, padding, dilation, groups)     # (read by differentiable_backward)
        ctx.winograd = use_winograd(x, w, stride, dilation, groups)
        ctx.direct = use_direct(x, w, stride, dilation, groups, ctx.winograd)
        if ctx.direct:
            return direct_forward(ctx, x, w, b, padding)
        if ctx.winograd:
            return winograd_forward(ctx, x, w, b, padding)
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
        k = worker_count(N, N * L * G * K, impl, path.workers_from())
        if k == 1:
            path.forward_blocks(impl, x, wr, b, keep, out, geom, _blocks(N, row_bytes))
        else:
            run_shares(path.name, N, k, images_per_block(BLOCK_BYTES / k, row_bytes),
                       lambda kern, n0, n1, blocks: path.forward_blocks(kern, x, wr, b, keep, out, geom, blocks))
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
            return winograd_backward(ctx, g) + (None, None, None, None)
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
        k = worker_count(N, N * L * G * K, ctx.impl, path.workers_from())
        if k == 1:
            db = g.sum(axis=(0, 2, 3)) if nb else None
            dwr = path.backward_blocks(ctx.impl, x, g, wr, kept, dx, nw, geom, _blocks(N, row_bytes))
        else:
            def share(kern, n0, n1, blocks):    # a share's dW and db, summed over the shares below
                return (path.backward_blocks(kern, x, g, wr, kept, dx, nw, geom, blocks),
                        g[n0:n1].sum(axis=(0, 2, 3)) if nb else None)
            parts = run_shares(path.name, N, k, images_per_block(BLOCK_BYTES / k, row_bytes), share)
            dwr = sum(p[0] for p in parts) if nw else None
            db = sum(p[1] for p in parts) if nb else None
        dw_ = None
        if nw:
            dw_ = (dwr.reshape(ctx.wshape) if path is UNFOLD_COLUMNS else
                   dwr.reshape(G, O // G, kh, kw, Cg).transpose(0, 1, 4, 2, 3).reshape(ctx.wshape))
        return dx, dw_, db, None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        # dx: the adjoint of the convolution in x, a transposed convolution of g with the same
        # weight and options, of x's size (rows and columns no window reached get 0);
        # dW: a convolution of x with g (conv_weight_grad); db: g summed over n, oh, ow
        from .conv_transpose import ConvTranspose2d
        x, w = inputs[:2]
        stride, padding, dilation, groups = ctx.options
        nx, nw, nb = ctx.needs_input_grad[:3]
        dx = ConvTranspose2d.apply(g, w, None, stride, padding, dilation, groups, tuple(x.shape[2:])) if nx else None
        dw = conv_weight_grad(Conv2d, x, g, stride, padding, dilation, groups, w.shape[2:]) if nw else None
        return dx, dw, g.sum(dim=(0, 2, 3)) if nb else None, None, None, None, None


def conv_weight_grad(conv, x, g, stride, padding, dilation, groups, kernel):
    """The weight gradient of a convolution (any rank) for Tensors, itself a convolution:

        dW[o, c, k] = sum_{n, q} g[n, o, q] x[n, c, q s - p + k d]          (q the output positions)

    is, with the batch and channel axes of x and of g swapped, the convolution of x^T
    (C/G, G N, ...) with the "weight" g^T (O, N, ...) at stride d, dilation s, padding p and G
    groups; its output (C/G, O, k'...) has k' >= k (the remainder of the forward's floor division
    adds taps past the kernel), so it is cropped to the kernel and transposed to (O, C/G, k...).
    ``conv`` is the Function (Conv2d or Conv3d), so the result can be differentiated again."""
    N, C, O, G = x.shape[0], x.shape[1], g.shape[1], groups
    r = len(kernel)
    rest = tuple(range(3, 3 + r))
    xt = x.reshape((N, G, C // G) + tuple(x.shape[2:])).permute((2, 1, 0) + rest)
    gt = g.reshape((N, G, O // G) + tuple(g.shape[2:])).permute((1, 2, 0) + rest)
    dw = conv.apply(xt.reshape((C // G, G * N) + tuple(x.shape[2:])), gt.reshape((O, N) + tuple(g.shape[2:])),
                    None, tuple(dilation), tuple(padding), tuple(stride), G)
    if tuple(dw.shape[2:]) != tuple(kernel):
        dw = dw[(slice(None), slice(None)) + tuple(slice(0, k) for k in kernel)]
    return dw.transpose(0, 1)


def check_weight_and_groups(op, input_shape, weight_shape, bias, groups):
    """The checks a convolution's operands share in every rank: input (N, C, ...) or unbatched
    (C, ...), weight (O, C / groups, kernel...), bias (O,), groups a positive int dividing O and C."""
    if not isinstance(groups, int) or groups < 1:
        raise ShapeError(f"{op}: groups must be a positive int, got {groups!r}")
    O, Cg, kernel = weight_shape[0], weight_shape[1], weight_shape[2:]
    if O == 0 or 0 in kernel:   # PyTorch's rule (an input of no channel, Cg = 0, is fine: out = bias)
        raise RuntimeError(f"{op}: expected a weight with at least one output channel and a kernel of positive "
                           f"size, got weight of shape {list(weight_shape)}")
    C = input_shape[len(input_shape) - len(weight_shape) + 1]
    if Cg * groups != C:
        raise ShapeError(f"{op}: Given groups={groups}, weight of size {list(weight_shape)}, expected input"
                         f"{list(input_shape)} to have {Cg * groups} channels, but got {C} channels instead")
    if O % groups:
        raise ShapeError(f"{op}: Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                         f"but got weight of size {list(weight_shape)} (out_channels {O} is not divisible by groups)")
    if bias is not None and tuple(bias.shape) != (O,):
        raise ShapeError(f"{op}: bias must have shape [{O}], got {list(bias.shape)}")


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
        raise ShapeError(f"conv2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape {list(input.shape)}")
    if weight.ndim != 4:
        raise ShapeError(f"conv2d: expected a 4-D weight (out_channels, in_channels/groups, kH, kW), "
                         f"got shape {list(weight.shape)}")
    check_weight_and_groups("conv2d", input.shape, weight.shape, bias, groups)
    O, C, kh, kw = weight.shape[0], input.shape[1], weight.shape[2], weight.shape[3]
    check_same_dtype("conv2d", [("input", input), ("weight", weight), ("bias", bias)])
    stride, dilation = int_pair(stride, "stride", "conv2d"), int_pair(dilation, "dilation", "conv2d")
    if min(stride) < 1 or min(dilation) < 1:
        raise ShapeError(f"conv2d: stride and dilation must be >= 1, got stride={stride}, dilation={dilation}")
    extra = None
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0)
        elif padding == "same":
            if stride != (1, 1):
                raise ShapeError("conv2d: padding='same' is not supported for strided convolutions")
            tot = (dilation[0] * (kh - 1), dilation[1] * (kw - 1))
            padding = (tot[0] // 2, tot[1] // 2)
            extra = (tot[0] % 2, tot[1] % 2)
        else:
            raise ShapeError(f"conv2d: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
    padding = int_pair(padding, "padding", "conv2d")
    if min(padding) < 0:
        raise ShapeError(f"conv2d: padding must be >= 0, got {padding}")
    if extra and any(extra):
        input = _pad_bottom_right(input, extra)
    H, W = input.shape[2] + 2 * padding[0], input.shape[3] + 2 * padding[1]
    if H < dilation[0] * (kh - 1) + 1 or W < dilation[1] * (kw - 1) + 1:
        raise ShapeError(f"conv2d: kernel size {kh}x{kw} (dilation {dilation}) is larger than the padded input "
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

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        H, W = ctx.hw
        return g[:, :, :H, :W], None


def _pad_bottom_right(x, extra):
    return _PadBottomRight.apply(x, extra)
