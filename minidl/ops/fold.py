"""F.unfold (im2col) and F.fold (col2im), as ``torch.nn.functional.unfold`` / ``fold``; their
layout is also the one conv2d multiplies on the CPU (``minidl.ops.conv``).

unfold copies every kh x kw sliding block of a padded (N, C, H, W) input into a column:

    out[n, (c, i, j), l] = xpad[n, c, oh s_h + i d_h, ow s_w + j d_w],   l = oh OW + ow

so a convolution is ``W.view(O, -1) @ unfold(x)``. fold is its adjoint: it sums each
column entry back into the position it was copied from. Hence each is the other's backward:
d unfold(x) / dx applied to g is fold(g), and d fold(c) / dc applied to g is unfold(g).
The NumPy references are below (one strided view of xpad per kernel offset (i, j)); the CPU
runs Numba kernels with the same signature (``minidl.kernels.cpu.unfold``), other devices the
references on their own arrays.
"""
from ..backends import namespace_of
from ..autograd.op_function import Function
from ..kernels.switch import into
from ..tensor.tensor import Tensor
from ._broadcast import int_pair
from ._kernel_switch import LAYER


def conv_output_size(size, k, s, p, d):
    """How many positions a window of k taps, dilation d, slides over at stride s in size + 2p."""
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def sliding_views(xpad, kh, kw, sh, sw, dh, dw, OH, OW):
    """(i, j, xpad[:, :, i*dh + sh*oh, j*dw + sw*ow]) for every kernel offset."""
    for i in range(kh):
        for j in range(kw):
            yield i, j, xpad[:, :, i * dh: i * dh + sh * (OH - 1) + 1: sh, j * dw: j * dw + sw * (OW - 1) + 1: sw]


def unfold_reference(x, kh, kw, sh, sw, ph, pw, dh, dw, OH, OW, out=None):
    """x (N, C, H, W) -> cols (N, C*kh*kw, OH*OW) with
    cols[n, (c, i, j), oh*OW + ow] = xpad[n, c, oh*sh + i*dh, ow*sw + j*dw]
    (written into ``out`` when given)."""
    xp = namespace_of(x)
    N, C = x.shape[:2]
    xpad = xp.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw))) if ph or pw else x
    cols = xp.empty((N, C, kh, kw, OH, OW), dtype=x.dtype)
    for i, j, view in sliding_views(xpad, kh, kw, sh, sw, dh, dw, OH, OW):
        cols[:, :, i, j] = view
    return into(out, cols.reshape(N, C * kh * kw, OH * OW))


def fold_reference(cols, N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, out=None):
    """The adjoint of unfold: scatter-add cols (N, C*kh*kw, OH*OW) into dx (N, C, H, W)
    (written into ``out`` when given)."""
    xp = namespace_of(cols)
    OH, OW = conv_output_size(H, kh, sh, ph, dh), conv_output_size(W, kw, sw, pw, dw)
    cols = cols.reshape(N, C, kh, kw, OH, OW)
    dxpad = xp.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype=cols.dtype)
    for i, j, view in sliding_views(dxpad, kh, kw, sh, sw, dh, dw, OH, OW):
        view += cols[:, :, i, j]
    return into(out, dxpad[:, :, ph: ph + H, pw: pw + W])


def unfold_weight_grad_reference(g, cols, dw):
    """conv2d's weight gradient in unfold's layout, per group gr:
    dw[gr] (O/G, K) += sum_n g[n, gr] (O/G, L) @ cols[n, gr]^T (L, K), i.e.
    dw[gr, o, k] += sum_{n, l} g[n, gr, o, l] cols[n, gr, k, l]; g (N, G, O/G, L) is the output
    gradient's image rows, cols (N, G, K, L) the input's columns. Returns dw."""
    dw += namespace_of(g).matmul(g, cols.transpose(0, 1, 3, 2)).sum(axis=0)
    return dw


# the gather, its adjoint and the weight gradient on columns: the references above, or the
# CPU's Numba kernels
UNFOLD = LAYER.kernels(("unfold", "fold", "unfold_weight_grad"), __name__, cpu="minidl.kernels.cpu.unfold")


def _unfold(x, geom):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (OH, OW) = geom
    xp = namespace_of(x)
    return UNFOLD.select(x).unfold(xp.ascontiguousarray(x), kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)


def _fold(cols, geom, C, H, W):
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (OH, OW) = geom
    xp = namespace_of(cols)
    return UNFOLD.select(cols).fold(xp.ascontiguousarray(cols), cols.shape[0], C, H, W, kh, kw, sh, sw, ph, pw, dh, dw)


class Unfold(Function):
    """out = unfold(x);  dL/dx = fold(g).  See the module docstring."""

    @staticmethod
    def forward(ctx, x, geom):
        ctx.args = (geom, x.shape[1:])
        return _unfold(x, geom)

    @staticmethod
    def backward(ctx, g):
        geom, (C, H, W) = ctx.args
        return _fold(g, geom, C, H, W), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        geom, (C, H, W) = ctx.args
        return Fold.apply(g, geom, C, H, W), None


class Fold(Function):
    """out = fold(cols);  dL/dcols = unfold(g).  See the module docstring."""

    @staticmethod
    def forward(ctx, cols, geom, C, H, W):
        ctx.geom = geom
        return _fold(cols, geom, C, H, W)

    @staticmethod
    def backward(ctx, g):
        return _unfold(g, ctx.geom), None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return Unfold.apply(g, ctx.geom), None, None, None, None


def _geometry(op, size, kernel_size, dilation, padding, stride):
    k, d = int_pair(kernel_size, "kernel_size", op), int_pair(dilation, "dilation", op)
    p, s = int_pair(padding, "padding", op), int_pair(stride, "stride", op)
    if min(k + d + s) < 1 or min(p) < 0:
        raise RuntimeError(f"{op}: expected kernel_size, dilation and stride >= 1 and padding >= 0, got "
                           f"kernel_size={k}, dilation={d}, padding={p}, stride={s}")
    blocks = tuple(conv_output_size(n, k_, s_, p_, d_) for n, k_, s_, p_, d_ in zip(size, k, s, p, d))
    if min(blocks) < 1:
        raise RuntimeError(f"{op}: given input spatial size {tuple(size)}, kernel_size={k}, dilation={d}, "
                           f"padding={p}, stride={s}, the calculated shape of the array of sliding blocks is "
                           f"{blocks}, but its components must be at least one")
    return k, d, p, s, blocks


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C, H, W) (or (C, H, W)) -> (N, C kh kw, L) sliding blocks; see the module docstring."""
    if not isinstance(input, Tensor) or input.ndim not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got "
                           f"{getattr(input, 'ndim', type(input).__name__)}D)")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    geom = _geometry("unfold", x.shape[2:], kernel_size, dilation, padding, stride)
    out = Unfold.apply(x, geom)
    return out if input.ndim == 4 else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C kh kw, L) (or (C kh kw, L)) -> (N, C, H, W), summing overlapping blocks."""
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        raise RuntimeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported (got "
                           f"{getattr(input, 'ndim', type(input).__name__)}D)")
    cols = input if input.ndim == 3 else input.unsqueeze(0)
    H, W = int_pair(output_size, "output_size", "fold")
    k, d, p, s, blocks = _geometry("fold", (H, W), kernel_size, dilation, padding, stride)
    kk = k[0] * k[1]
    if cols.shape[1] % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={cols.shape[1]} and kernel_size={k}")
    if cols.shape[2] != blocks[0] * blocks[1]:
        raise RuntimeError(f"Given output_size={(H, W)}, kernel_size={k}, dilation={d}, padding={p}, stride={s}, "
                           f"expected size of input's dimension 2 to match the calculated number of sliding blocks "
                           f"{blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size(2)={cols.shape[2]}.")
    out = Fold.apply(cols, (k, d, p, s, blocks), cols.shape[1] // kk, H, W)
    return out if input.ndim == 3 else out.squeeze(0)
