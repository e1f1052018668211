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

cols is K times bigger than x, so instead of materialising it for the whole batch, the
rows are processed in blocks of whole images (about BLOCK_BYTES of cols, which the L3 cache
holds, in one reused buffer: fresh pages would each cost a page fault): im2col of a block,
its GEMM, next block. Every block is a tall GEMM (thousands of rows).

Backward needs cols again for dW. When the weight needs a gradient and the whole batch's
cols fit in KEEP_COLS_BYTES, forward writes the blocks into one array kept for backward
(ResNet-8 at batch 64: 126 MB over its nine convs, read back at memory speed); otherwise
backward rebuilds each block's cols from x, which keeps a step's memory at the size of the
activations at the cost of a second gather (about 10% of a ResNet-8 step on 2 cores).
"""
import math
import threading

from ..autograd.function import Function
from ..backends import namespace_of
from ..kernels.switch import into
from ..tensor.dtype import check_same_dtype
from ..tensor.allocation import check_allocation
from ._broadcast import int_pair
from ._kernel_switch import LAYER


def conv_output_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def _views(xpad, kh, kw, sh, sw, dh, dw, OH, OW):
    """(i, j, xpad[:, :, i*dh + sh*oh, j*dw + sw*ow]) for every kernel offset."""
    for i in range(kh):
        for j in range(kw):
            yield i, j, xpad[:, :, i * dh: i * dh + sh * (OH - 1) + 1: sh, j * dw: j * dw + sw * (OW - 1) + 1: sw]


def im2col_reference(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, groups=1, out=None):
    """x (N, C, H, W) -> cols (N, OH, OW, C*kh*kw) with
    cols[n, oh, ow, (g, i, j, cg)] = xpad[n, g*Cg + cg, oh*sh + i*dh, ow*sw + j*dw]
    (written into ``out`` when given)."""
    xp = namespace_of(x)
    N, C = x.shape[:2]
    G = groups
    xpad = xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    cols = xp.empty((N, OH, OW, G, kh, kw, C // G), dtype=x.dtype)
    for i, j, view in _views(xpad, kh, kw, sh, sw, dh, dw, OH, OW):
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
    for i, j, view in _views(dxpad, kh, kw, sh, sw, dh, dw, OH, OW):
        view += cols[:, :, :, :, i, j, :].reshape(N, OH, OW, C).transpose(0, 3, 1, 2)
    return into(out, dxpad[:, :, ph: ph + H, pw: pw + W])


# the gather and its adjoint: the reference above, or one kernel launch per block on each device
IM2COL = LAYER.kernels(("im2col", "col2im"), __name__, cpu="minidl.kernels.cpu.im2col",
                       cuda="minidl.kernels.cuda.im2col")


def _weight_rows(w, G):
    """W (O, Cg, kh, kw) -> (G, O/G, kh*kw*Cg), axes ordered (i, j, cg) as cols' rows are."""
    O, Cg, kh, kw = w.shape
    return w.reshape(G, O // G, Cg, kh, kw).transpose(0, 1, 3, 4, 2).reshape(G, O // G, kh * kw * Cg)


_scratch = threading.local()   # per thread, so concurrent convs never share a buffer
BLOCK_BYTES = 8 << 20   # target size of one block of cols (fits the L3 cache; few blocks = few thread syncs)
KEEP_COLS_BYTES = 64 << 20   # largest cols (whole batch) kept from forward for backward's dW


def _scratch_buffer(name, shape, dtype, xp):
    """A reusable array for a temporary that dies within one call (a block of cols or
    dcols): fresh pages cost a page fault each, and reused ones are already in cache."""
    import numpy as np
    if xp is not np:
        return xp.empty(shape, dtype=dtype)
    n = math.prod(shape)
    key = (name, np.dtype(dtype))
    buffers = _scratch.__dict__
    buf = buffers.get(key)
    if buf is None or buf.size < n:
        buf = buffers[key] = np.empty(n, dtype=dtype)
    return buf[:n].reshape(shape)


def _blocks(N, row_bytes):
    """[n0, n1) ranges of whole images whose cols take about BLOCK_BYTES."""
    import numba

    import minidl.kernels.cpu  # noqa: F401  (starts Numba's pool the way minidl configures it)
    threads = numba.get_num_threads()
    per = threads * max(1, round(BLOCK_BYTES / (max(row_bytes, 1) * threads)))   # images split evenly over threads
    return [(n0, min(n0 + per, N)) for n0 in range(0, N, per)]


class Conv2d(Function):
    """conv2d via blocked im2col + GEMM; see the module docstring for the derivation."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups):
        xp = namespace_of(x)
        impl = ctx.impl = IM2COL.select(x)
        if not getattr(getattr(x, "flags", None), "c_contiguous", True):
            x = xp.ascontiguousarray(x)           # the kernels read x as one C-ordered block per image
        N, C, H, W = x.shape
        O, Cg, kh, kw = w.shape
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        OH = conv_output_size(H, kh, sh, ph, dh)
        OW = conv_output_size(W, kw, sw, pw, dw)
        G, K, L = groups, Cg * kh * kw, OH * OW
        geom = (kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G)
        wr = _weight_rows(w, G)                                            # (G, O/G, K)
        wt = wr[0].T if G == 1 else wr.transpose(0, 2, 1)
        out = xp.empty((N, O, OH, OW), dtype=x.dtype)
        keep = None
        if ctx.needs_input_grad[1] and N * L * G * K * x.itemsize <= KEEP_COLS_BYTES:
            keep = xp.empty((N, OH, OW, G * K), dtype=x.dtype)
        for n0, n1 in _blocks(N, L * G * K * x.itemsize):
            m = (n1 - n0) * L
            dst = keep[n0:n1] if keep is not None else _scratch_buffer("cols", (n1 - n0, OH, OW, G * K), x.dtype, xp)
            cols = impl.im2col(x[n0:n1], *geom, out=dst)
            if G == 1:
                y = xp.matmul(cols.reshape(m, K), wt).reshape(n1 - n0, L, O).transpose(0, 2, 1)
            else:
                y = xp.matmul(cols.reshape(m, G, K).transpose(1, 0, 2), wt)        # (G, m, O/G)
                y = y.reshape(G, n1 - n0, L, O // G).transpose(1, 0, 3, 2)
            y = y.reshape(n1 - n0, O, OH, OW)
            if b is not None:                                               # the NCHW copy, fused with the bias
                xp.add(y, b.reshape(1, O, 1, 1), out=out[n0:n1])
            else:
                out[n0:n1] = y
        ctx.save_for_backward(x, wr)
        ctx.cols = keep
        ctx.geom = geom
        ctx.wshape = w.shape
        return out

    @staticmethod
    def backward(ctx, g):
        x, wr = ctx.saved_tensors
        kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, G = geom = ctx.geom
        O, Cg = ctx.wshape[:2]
        nx, nw, nb = ctx.needs_input_grad[:3]
        xp = namespace_of(g)
        N, C, H, W = x.shape
        Og, K, L = O // G, Cg * kh * kw, OH * OW
        db = g.sum(axis=(0, 2, 3)) if nb else None
        dwr = xp.zeros((G, Og, K), dtype=g.dtype) if nw else None
        dx = xp.empty((N, C, H, W), dtype=g.dtype) if nx else None
        # dL/dY in pixel-major order, (G, M, O/G): one transposing copy, then two GEMMs per block
        gy = xp.ascontiguousarray(g.reshape(N, G, Og, L).transpose(1, 0, 3, 2)).reshape(G, N * L, Og)
        for n0, n1 in _blocks(N, L * G * K * x.itemsize):
            nb_, m0, m1 = n1 - n0, n0 * L, n1 * L
            gyb = gy[:, m0:m1]                                              # (G, m, O/G)
            if nw:
                if ctx.cols is not None:
                    cols = ctx.cols[n0:n1]
                else:
                    cols = ctx.impl.im2col(x[n0:n1], *geom,
                                           out=_scratch_buffer("cols", (nb_, OH, OW, G * K), x.dtype, xp))
                dwr += xp.matmul(gyb.transpose(0, 2, 1), cols.reshape(m1 - m0, G, K).transpose(1, 0, 2))
            if nx:
                buf = _scratch_buffer("dcols", (m1 - m0, G, K), g.dtype, xp)
                xp.matmul(gyb, wr, out=buf.transpose(1, 0, 2))               # (G, m, K) into (m, G, K)
                ctx.impl.col2im(buf.reshape(nb_, OH, OW, G * K), nb_, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, G,
                                out=dx[n0:n1])
        ctx.cols = None
        dw_ = None
        if nw:
            dw_ = dwr.reshape(G, Og, kh, kw, Cg).transpose(0, 1, 4, 2, 3).reshape(ctx.wshape)
        return dx, dw_, db, None, None, None, None


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
