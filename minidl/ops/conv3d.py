"""3-D convolution (cross-correlation, as PyTorch) with stride, padding, dilation and groups,
over (N, C, D, H, W) volumes, and its transpose (``conv_transpose3d``).

    out[n, o, od, oh, ow] = b[o] + sum_{c in group(o), a, i, j} W[o, c, a, i, j]
                                   * x[n, c, od*sd - pd + a*dd, oh*sh - ph + i*dh, ow*sw - pw + j*dw]

It is conv2d's im2col + GEMM (``minidl.ops.conv``) with one more axis. vol2col gathers every
receptive field into a row: ``cols`` of shape (M, G*K) with M = N*OD*OH*OW output voxels (the
batch folded in) and K = kd*kh*kw*C/G values per group, ordered (a, i, j, c). With W_g reshaped
to (O/G, K) in the same order, the forward is one GEMM per group:

    Y_g = cols_g @ W_g^T          (M, O/G), then laid out as NCDHW

Backward differentiates that product, then takes vol2col's adjoint (col2vol, a scatter-add);
G_g = dL/dY_g is the output gradient moved to voxel-major order, (M, O/G):

    dW_g    = G_g^T @ cols_g      (O/G, K)     since dY_g[m, o] / dW_g[o, k] = cols_g[m, k]
    dcols_g = G_g @ W_g           (M, K)       since dY_g[m, o] / dcols_g[m, k] = W_g[o, k]
    dx      = col2vol(dcols)      every cols entry adds back into the x element it copied
    db      = sum of g over n, od, oh, ow

cols is K times bigger than x, so forward keeps only x and the weight rows, and backward rebuilds
cols from x when the weight needs a gradient.

conv_transpose3d is the adjoint of conv3d with respect to its input. With W (C_in, C_out/G, kd,
kh, kw) reshaped per group to W_g (C_in/G, K), K = kd*kh*kw*C_out/G ordered (a, i, j, o), and
X_g (M, C_in/G) the input voxels as rows (M = N*D*H*W):

    cols_g = X_g @ W_g            (M, K): each input voxel's kernel, scaled, as a row
    out    = col2vol(cols) + b    the rows summed into the output at stride s

of size (D - 1) s - 2 p + d (k - 1) + output_padding + 1 per axis. Its backward is conv3d's
forward: dcols = vol2col(g), and

    dX_g = dcols_g @ W_g^T,    dW_g = X_g^T @ dcols_g,    db = sum of g over n, d, h, w.

The NumPy references below are the implementation on the CPU (there are no Numba kernels for the
3-D convolutions; the GEMMs go to BLAS through ``xp.matmul``, the gathers are one strided view per
kernel offset). CUDA tensors raise NotImplementedError.
"""
import numbers

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.allocation import check_allocation
from ..tensor.dtype import check_same_dtype
from ..tensor.tensor import Tensor
from ._broadcast import int_tuple
from .conv import check_weight_and_groups
from .fold import conv_output_size
from .low_precision import float32_compute
from .shape_error import ShapeError


def int_triple(v, name, op):
    return int_tuple(v, 3, name, op)


def check_on_cpu(op, *tensors):
    """The 3-D layers are NumPy references only: a tensor on another device is a clear error."""
    for t in tensors:
        if isinstance(t, Tensor) and type(t._data) is not np.ndarray:
            raise NotImplementedError(f"{op} is not implemented for device '{t.device}': the 3-D layers run on CPU "
                                      f"tensors only; move the input and parameters with .cpu() first")


def sliding_volumes(xpad, k, s, d, out):
    """(a, i, j, xpad[:, :, a*dd + sd*od, i*dh + sh*oh, j*dw + sw*ow]) for every kernel offset."""
    (kd, kh, kw), (sd, sh, sw), (dd, dh, dw), (OD, OH, OW) = k, s, d, out
    for a in range(kd):
        for i in range(kh):
            for j in range(kw):
                yield a, i, j, xpad[:, :, a * dd: a * dd + sd * (OD - 1) + 1: sd,
                                    i * dh: i * dh + sh * (OH - 1) + 1: sh,
                                    j * dw: j * dw + sw * (OW - 1) + 1: sw]


def vol2col_reference(x, k, s, p, d, out, groups=1):
    """x (N, C, D, H, W) -> cols (N, OD, OH, OW, C*kd*kh*kw) with
    cols[n, od, oh, ow, (g, a, i, j, cg)] = xpad[n, g*Cg + cg, od*sd + a*dd, oh*sh + i*dh, ow*sw + j*dw]."""
    xp = namespace_of(x)
    N, C = x.shape[:2]
    G, (kd, kh, kw) = groups, k
    xpad = xp.pad(x, ((0, 0), (0, 0)) + tuple((q, q) for q in p)) if any(p) else x
    cols = xp.empty((N,) + tuple(out) + (G, kd, kh, kw, C // G), dtype=x.dtype)
    for a, i, j, view in sliding_volumes(xpad, k, s, d, out):
        cols[..., a, i, j, :] = view.transpose(0, 2, 3, 4, 1).reshape(cols.shape[:5] + (C // G,))
    return cols.reshape((N,) + tuple(out) + (C * kd * kh * kw,))


def col2vol_reference(cols, N, C, size, k, s, p, d, groups=1):
    """The adjoint of vol2col: scatter-add cols (N, OD, OH, OW, C*kd*kh*kw) into dx (N, C, *size)."""
    xp = namespace_of(cols)
    out = cols.shape[1:4]
    G, (kd, kh, kw) = groups, k
    cols = cols.reshape(cols.shape[:4] + (G, kd, kh, kw, C // G))
    dxpad = xp.zeros((N, C) + tuple(n + 2 * q for n, q in zip(size, p)), dtype=cols.dtype)
    for a, i, j, view in sliding_volumes(dxpad, k, s, d, out):
        view += cols[..., a, i, j, :].reshape(cols.shape[:4] + (C,)).transpose(0, 4, 1, 2, 3)
    return dxpad[(slice(None), slice(None)) + tuple(slice(q, q + n) for n, q in zip(size, p))]


def _by_group(rows, G):
    """(M, G*K) rows -> the (G, M, K) stack the per-group GEMMs take (a view where it can be)."""
    return rows.reshape(rows.shape[0], G, rows.shape[1] // G).transpose(1, 0, 2)


def _from_groups(y, shape):
    """(G, M, O/G) per-group products -> (N, O, *spatial) with M = N * prod(spatial)."""
    N, O = shape[:2]
    y = y.transpose(1, 0, 2).reshape((N,) + tuple(shape[2:]) + (O,))
    return y.transpose(0, 4, 1, 2, 3)


def _voxel_rows(t, G):
    """(N, C, D, H, W) -> (G, N*D*H*W, C/G): one row per voxel, per group."""
    N, C, D, H, W = t.shape
    return _by_group(t.transpose(0, 2, 3, 4, 1).reshape(N * D * H * W, C), G)


def _rows(cols):
    """(N, *spatial, G*K) -> (M, G*K), one row per voxel."""
    return cols.reshape(int(np.prod(cols.shape[:-1])), cols.shape[-1])


def _weight_rows(w, G):
    """W (O, Cg, kd, kh, kw) -> (G, O/G, kd*kh*kw*Cg), axes ordered (a, i, j, cg) as cols' rows are.
    The transposed convolution's W (C_in, C_out/G, ...) gives (G, C_in/G, kd*kh*kw*C_out/G) the same way."""
    O, Cg, kd, kh, kw = w.shape
    return w.reshape(G, O // G, Cg, kd, kh, kw).transpose(0, 1, 3, 4, 5, 2).reshape(G, O // G, kd * kh * kw * Cg)


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class Conv3d(Function):
    """vol2col + one GEMM per group; see the module docstring for the backward."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups):
        xp = namespace_of(x)
        N, O, G = x.shape[0], w.shape[0], groups
        out_size = tuple(conv_output_size(n, k, s, p, d)
                         for n, k, s, p, d in zip(x.shape[2:], w.shape[2:], stride, padding, dilation))
        cols = vol2col_reference(x, w.shape[2:], stride, padding, dilation, out_size, G)
        wr = _weight_rows(w, G)                                                 # (G, O/G, K)
        y = xp.matmul(_by_group(_rows(cols), G), wr.transpose(0, 2, 1))     # (G, M, O/G)
        out = _from_groups(y, (N, O) + out_size)
        if b is not None:
            out = out + b.reshape(1, O, 1, 1, 1)
        ctx.save_for_backward(x, wr)
        ctx.geom = (w.shape, stride, padding, dilation, G, out_size)
        return xp.ascontiguousarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        x, wr = ctx.saved_tensors
        wshape, stride, padding, dilation, G, out_size = ctx.geom
        nx, nw, nb = ctx.needs_input_grad[:3]
        O, Cg = wshape[:2]
        gm = _voxel_rows(g, G)                                                  # (G, M, O/G)
        dx = dw = None
        if nx:
            dcols = namespace_of(g).matmul(gm, wr)                              # (G, M, K)
            dcols = dcols.transpose(1, 0, 2).reshape((x.shape[0],) + out_size + (G * wr.shape[2],))
            dx = col2vol_reference(dcols, x.shape[0], x.shape[1], x.shape[2:], wshape[2:], stride, padding,
                                   dilation, G)
        if nw:
            cols = vol2col_reference(x, wshape[2:], stride, padding, dilation, out_size, G)
            dwr = namespace_of(g).matmul(gm.transpose(0, 2, 1), _by_group(_rows(cols), G))
            dw = dwr.reshape((G, O // G) + tuple(wshape[2:]) + (Cg,)).transpose(0, 1, 5, 2, 3, 4).reshape(wshape)
        db = g.sum(axis=(0, 2, 3, 4)) if nb else None
        return dx, dw, db, None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        # as Conv2d's: dx = conv_transpose3d of g, dW = conv3d of x with g (conv.conv_weight_grad)
        from .conv import conv_weight_grad
        x, w = inputs[:2]
        wshape, stride, padding, dilation, G, _ = ctx.geom
        nx, nw, nb = ctx.needs_input_grad[:3]
        dx = ConvTranspose3d.apply(g, w, None, stride, padding, dilation, G, tuple(x.shape[2:])) if nx else None
        dw = conv_weight_grad(Conv3d, x, g, stride, padding, dilation, G, wshape[2:]) if nw else None
        return dx, dw, g.sum(dim=(0, 2, 3, 4)) if nb else None, None, None, None, None


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class ConvTranspose3d(Function):
    """One GEMM per group + col2vol; see the module docstring."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups, out_size):
        xp = namespace_of(x)
        N, G, k = x.shape[0], groups, w.shape[2:]
        Cout = w.shape[1] * G
        xr, wr = _voxel_rows(x, G), _weight_rows(w, G)                          # (G, M, Cin/G), (G, Cin/G, K)
        cols = xp.matmul(xr, wr).transpose(1, 0, 2).reshape(x.shape[:1] + x.shape[2:] + (G * wr.shape[2],))
        out = col2vol_reference(cols, N, Cout, out_size, k, stride, padding, dilation, G)
        if b is not None:
            out = out + b.reshape(1, Cout, 1, 1, 1)
        ctx.save_for_backward(xr, wr)
        ctx.geom = (x.shape, w.shape, stride, padding, dilation, G)
        return xp.ascontiguousarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        xr, wr = ctx.saved_tensors
        xshape, wshape, stride, padding, dilation, G = ctx.geom
        nx, nw, nb = ctx.needs_input_grad[:3]
        xp = namespace_of(g)
        dcols = vol2col_reference(xp.ascontiguousarray(g), wshape[2:], stride, padding, dilation, xshape[2:], G)
        dcols = _by_group(_rows(dcols), G)                # (G, M, K)
        dx = dw = None
        if nx:
            dx = _from_groups(xp.matmul(dcols, wr.transpose(0, 2, 1)), xshape)
        if nw:
            dwr = xp.matmul(xr.transpose(0, 2, 1), dcols)                       # (G, Cin/G, K)
            Cin, Cog = wshape[:2]
            dw = dwr.reshape((G, Cin // G) + tuple(wshape[2:]) + (Cog,)).transpose(0, 1, 5, 2, 3, 4).reshape(wshape)
        db = g.sum(axis=(0, 2, 3, 4)) if nb else None
        return dx, dw, db, None, None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        # as ConvTranspose2d's: dx = conv3d of g cropped to x, dW = conv_weight_grad(g, x)
        from .conv import conv_weight_grad
        xshape, wshape, stride, padding, dilation, G = ctx.geom
        x, w = inputs[:2]
        nx, nw, nb = ctx.needs_input_grad[:3]
        dx = dw = None
        if nx:
            dx = Conv3d.apply(g, w, None, stride, padding, dilation, G)
            if tuple(dx.shape[2:]) != tuple(xshape[2:]):
                dx = dx[(slice(None), slice(None)) + tuple(slice(0, n) for n in xshape[2:])]
        if nw:
            dw = conv_weight_grad(Conv3d, g, x, stride, padding, dilation, G, wshape[2:])
        return dx, dw, g.sum(dim=(0, 2, 3, 4)) if nb else None, None, None, None, None, None


# functional entry points -----------------------------------------------------------------

def _check_input(op, input, weight, weight_layout):
    if not isinstance(input, Tensor) or input.ndim not in (4, 5):
        raise ShapeError(f"Expected 4D (unbatched) or 5D (batched) input to {op}, but got input of size: "
                         f"{list(getattr(input, 'shape', [])) or type(input).__name__}")
    if not isinstance(weight, Tensor) or weight.ndim != 5:
        raise ShapeError(f"{op}: expected a 5-D weight ({weight_layout}, kD, kH, kW), got "
                         f"{list(getattr(weight, 'shape', [])) or type(weight).__name__}")
    return input if input.ndim == 5 else input.unsqueeze(0)


def _check_groups(op, groups, channels, what):
    if not isinstance(groups, numbers.Integral) or isinstance(groups, bool) or groups < 1:
        raise RuntimeError(f"{op}: non-positive groups is not supported, got groups={groups!r}")
    if channels % groups:
        raise RuntimeError(f"{op}: given groups={groups}, expected the weight's {what} ({channels}) to be divisible "
                           f"by groups")


def _same_padding(k, stride, dilation, op):
    """PyTorch's padding='same' (stride 1 only): total d*(k-1) per axis, the odd one at the end."""
    if stride != (1, 1, 1):
        raise RuntimeError(f"{op}: padding='same' is not supported for strided convolutions, got stride={stride}")
    total = tuple(d * (n - 1) for d, n in zip(dilation, k))
    return tuple(t // 2 for t in total), tuple(t % 2 for t in total)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D convolution over (N, C, D, H, W) (or unbatched (C, D, H, W)) input, as
    ``torch.nn.functional.conv3d``; ``padding`` may be an int, a triple, "valid" or "same"."""
    op = "conv3d"
    x = _check_input(op, input, weight, "out_channels, in_channels/groups")
    check_on_cpu(op, x, weight, bias)
    _check_groups(op, groups, weight.shape[0], "out_channels")
    check_weight_and_groups(op, x.shape, weight.shape, bias, groups)
    check_same_dtype(op, [("input", x), ("weight", weight), ("bias", bias)])
    stride, dilation = int_triple(stride, "stride", op), int_triple(dilation, "dilation", op)
    if min(stride) < 1 or min(dilation) < 1:
        raise RuntimeError(f"{op}: non-positive stride or dilation is not supported, got stride={stride}, "
                           f"dilation={dilation}")
    k = tuple(weight.shape[2:])
    if isinstance(padding, str):
        if padding not in ("valid", "same"):
            raise RuntimeError(f"{op}: Invalid padding string: {padding!r} (expected 'valid' or 'same')")
        padding, extra = ((0, 0, 0), (0, 0, 0)) if padding == "valid" else _same_padding(k, stride, dilation, op)
        if any(extra):   # the odd unit of padding goes at the end of the axis, as PyTorch's
            from .pad import pad
            x = pad(x, (0, extra[2], 0, extra[1], 0, extra[0]))
    padding = int_triple(padding, "padding", op)
    if min(padding) < 0:
        raise RuntimeError(f"{op}: negative padding is not supported, got padding={padding}")
    padded = tuple(n + 2 * p for n, p in zip(x.shape[2:], padding))
    if any(n < d * (kk - 1) + 1 for n, d, kk in zip(padded, dilation, k)):
        raise ShapeError(f"{op}: calculated padded input size per channel: {padded}; kernel size {k} (dilation "
                         f"{dilation}) can't be greater than the actual input size")
    out_size = tuple(conv_output_size(n, kk, s, p, d) for n, kk, s, p, d in zip(x.shape[2:], k, stride, padding,
                                                                                   dilation))
    N, C, O = x.shape[0], x.shape[1], weight.shape[0]
    # what vol2col allocates: the padded input, the output, the whole batch's cols
    for shape in ((N, C) + padded, (N, O) + out_size, (N,) + out_size + (C * k[0] * k[1] * k[2],)):
        check_allocation(op, shape, x.dtype)
    out = Conv3d.apply(x, weight, bias, stride, padding, dilation, groups)
    return out if input.ndim == 5 else out.squeeze(0)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """As ``torch.nn.functional.conv_transpose3d`` over (N, C_in, D, H, W) or (C_in, D, H, W)."""
    op = "conv_transpose3d"
    x = _check_input(op, input, weight, "in_channels, out_channels/groups")
    check_on_cpu(op, x, weight, bias)
    _check_groups(op, groups, weight.shape[0], "in_channels")
    if x.shape[1] != weight.shape[0]:
        raise ShapeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input{list(x.shape)} "
                         f"to have {weight.shape[0]} channels, but got {x.shape[1]} channels instead")
    Cout = weight.shape[1] * groups
    if bias is not None and tuple(bias.shape) != (Cout,):
        raise ShapeError(f"{op}: expected bias of shape [{Cout}], got {list(bias.shape)}")
    check_same_dtype(op, [("input", x), ("weight", weight), ("bias", bias)])
    s, p = int_triple(stride, "stride", op), int_triple(padding, "padding", op)
    o, d = int_triple(output_padding, "output_padding", op), int_triple(dilation, "dilation", op)
    if min(s + d) < 1 or min(p + o) < 0:
        raise RuntimeError(f"{op}: expected stride and dilation >= 1, padding and output_padding >= 0, got "
                           f"stride={s}, padding={p}, output_padding={o}, dilation={d}")
    if any(o_ >= s_ and o_ >= d_ for o_, s_, d_ in zip(o, s, d)):
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                           f"output_padding={o}, stride={s}, dilation={d}")
    k = tuple(weight.shape[2:])
    out_size = tuple((n - 1) * s_ - 2 * p_ + d_ * (k_ - 1) + o_ + 1
                     for n, s_, p_, d_, k_, o_ in zip(x.shape[2:], s, p, d, k, o))
    if min(out_size) < 1:
        raise RuntimeError(f"{op}: given input of spatial size {list(x.shape[2:])} and these options the output "
                           f"would have size {list(out_size)}; expected a positive size")
    N = x.shape[0]
    for shape in ((N, Cout) + tuple(n + 2 * q for n, q in zip(out_size, p)), (N,) + tuple(x.shape[2:]) +
                  (Cout * k[0] * k[1] * k[2],)):
        check_allocation(op, shape, x.dtype)
    out = ConvTranspose3d.apply(x, weight, bias, s, p, d, groups, out_size)
    return out if input.ndim == 5 else out.squeeze(0)
