"""Transposed convolution (the adjoint of conv2d with respect to its input; "deconvolution"),
as ``torch.nn.functional.conv_transpose2d``; conv_transpose1d is the same on a height-1 image.

With weight W (C_in, C_out/G, kh, kw), each input pixel x[n, c, h, w] stamps a copy of its
kernel, scaled, into the output at stride s:

    out[n, o, h s - p + i d, w s - p + j d] += x[n, c, h, w] W[c, o, i, j]      (o, c in one group)

In matrix form, per group g: cols_g = x_g^T @ W_g (one row of kh kw C_out/G values per input
pixel), then col2im sums the rows into the output (``minidl.ops.conv``'s scatter-add). The
output size is (H - 1) s - 2 p + d (kh - 1) + output_padding + 1. Backward is the forward of
conv2d: dcols = im2col(g), and

    dx_g = W_g @ dcols_g^T,    dW_g = x_g @ dcols_g,    db = sum of g over n, h, w.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ..tensor.tensor import Tensor
from ._broadcast import int_pair
from .low_precision import float32_compute
from .conv import col2im_reference, im2col_reference


def _weight_rows(w, G):
    """W (C_in, C_out/G, kh, kw) -> (G, C_in/G, kh*kw*C_out/G), columns ordered (i, j, o) as cols."""
    Cin, Cog, kh, kw = w.shape
    return w.reshape(G, Cin // G, Cog, kh, kw).transpose(0, 1, 3, 4, 2).reshape(G, Cin // G, kh * kw * Cog)


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class ConvTranspose2d(Function):
    """See the module docstring."""

    @staticmethod
    def forward(ctx, x, w, b, stride, padding, dilation, groups, out_hw):
        xp = namespace_of(x)
        N, Cin, H, W = x.shape
        G, (kh, kw), Cout = groups, w.shape[2:], w.shape[1] * groups
        xr = x.reshape(N, G, Cin // G, H * W)
        wr = _weight_rows(w, G)
        # cols[n, p, g, k] = sum_c xr[n, g, c, p] wr[g, c, k]: one product per image and group
        cols = xp.matmul(xr.transpose(0, 1, 3, 2), wr).transpose(0, 2, 1, 3).reshape(N, H, W, G * wr.shape[2])
        out = col2im_reference(xp.ascontiguousarray(cols), N, Cout, *out_hw, kh, kw, *stride, *padding, *dilation,
                               groups=G)
        if b is not None:
            out = out + b.reshape(1, -1, 1, 1)
        ctx.save_for_backward(xr, wr)
        ctx.args = (x.shape, w.shape, stride, padding, dilation, G, b is not None)
        return out.astype(x.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        xr, wr = ctx.saved_tensors
        x_shape, w_shape, stride, padding, dilation, G, has_bias = ctx.args
        xp = namespace_of(g)
        N, Cin, H, W = x_shape
        Cin_, Cog, kh, kw = w_shape
        dcols = im2col_reference(xp.ascontiguousarray(g), kh, kw, *stride, *padding, *dilation, H, W, groups=G)
        dcols = dcols.reshape(N, H * W, G, wr.shape[2])
        nx, nw, nb = ctx.needs_input_grad[:3]
        dx = xp.matmul(wr, dcols.transpose(0, 2, 3, 1)).reshape(x_shape) if nx else None    # (N, G, C_in/G, HW)
        dw = None
        if nw:
            P = H * W     # dwr[g, c, k] = sum_{n, p} xr[n, g, c, p] dcols[n, p, g, k]
            dwr = xp.matmul(xr.transpose(1, 2, 0, 3).reshape(G, Cin // G, N * P),
                            dcols.transpose(2, 0, 1, 3).reshape(G, N * P, wr.shape[2]))
            dw = dwr.reshape(G, Cin // G, kh, kw, Cog).transpose(0, 1, 4, 2, 3).reshape(w_shape)
        db = g.sum(axis=(0, 2, 3)) if nb and has_bias else None
        return dx, dw, db, None, None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        # dx: conv2d of g with the same weight and options (the forward is its adjoint), cropped
        # to x where output_padding >= stride adds rows; dW: conv_weight_grad with the roles of
        # input and output gradient swapped, dW[c, o, i, j] = sum x[n, c, h, w] g[n, o, h s - p + i d, ...]
        from .conv import Conv2d, conv_weight_grad
        x, w = inputs[:2]
        x_shape, w_shape, stride, padding, dilation, G, has_bias = ctx.args
        nx, nw, nb = ctx.needs_input_grad[:3]
        dx = dw = None
        if nx:
            dx = Conv2d.apply(g, w, None, stride, padding, dilation, G)
            if tuple(dx.shape[2:]) != tuple(x_shape[2:]):
                dx = dx[:, :, :x_shape[2], :x_shape[3]]
        if nw:
            dw = conv_weight_grad(Conv2d, g, x, stride, padding, dilation, G, w_shape[2:])
        db = g.sum(dim=(0, 2, 3)) if nb and has_bias else None
        return dx, dw, db, None, None, None, None, None


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """As ``torch.nn.functional.conv_transpose2d`` over (N, C_in, H, W) or (C_in, H, W)."""
    if not isinstance(input, Tensor) or input.ndim not in (3, 4):
        raise RuntimeError(f"conv_transpose2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, got "
                           f"{list(getattr(input, 'shape', [])) or type(input).__name__}")
    x = input if input.ndim == 4 else input.unsqueeze(0)
    if weight.ndim != 4:
        raise RuntimeError(f"conv_transpose2d: expected a 4-D weight (in_channels, out_channels/groups, kH, kW), "
                           f"got shape {list(weight.shape)}")
    if not isinstance(groups, int) or groups < 1 or weight.shape[0] % groups:
        raise RuntimeError(f"conv_transpose2d: expected a positive groups dividing the weight's in_channels "
                           f"{weight.shape[0]}, got groups={groups!r}")
    if x.shape[1] != weight.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(weight.shape)}, expected input{list(x.shape)} "
                           f"to have {weight.shape[0]} channels, but got {x.shape[1]} channels instead")
    Cout = weight.shape[1] * groups
    if bias is not None and tuple(bias.shape) != (Cout,):
        raise RuntimeError(f"conv_transpose2d: expected bias of shape [{Cout}], got {list(bias.shape)}")
    check_same_dtype("conv_transpose2d", [("input", x), ("weight", weight), ("bias", bias)])
    s, p = int_pair(stride, "stride", "conv_transpose2d"), int_pair(padding, "padding", "conv_transpose2d")
    op, d = int_pair(output_padding, "output_padding", "conv_transpose2d"), int_pair(dilation, "dilation",
                                                                                       "conv_transpose2d")
    if min(s + d) < 1 or min(p + op) < 0:
        raise RuntimeError(f"conv_transpose2d: expected stride and dilation >= 1, padding and output_padding >= 0, "
                           f"got stride={s}, padding={p}, output_padding={op}, dilation={d}")
    for o, s_, d_ in zip(op, s, d):
        if o >= s_ and o >= d_:
            raise RuntimeError(f"output padding must be smaller than either stride or dilation, but got "
                               f"output_padding={op}, stride={s}, dilation={d}")
    k = weight.shape[2:]
    out_hw = tuple((n - 1) * s_ - 2 * p_ + d_ * (k_ - 1) + o + 1
                   for n, s_, p_, d_, k_, o in zip(x.shape[2:], s, p, d, k, op))
    if min(out_hw) < 1:
        raise RuntimeError(f"conv_transpose2d: given input of spatial size {list(x.shape[2:])} and these options the "
                           f"output would have size {list(out_hw)}; expected a positive size")
    out = ConvTranspose2d.apply(x, weight, bias, s, p, d, groups, out_hw)
    return out if input.ndim == 4 else out.squeeze(0)


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """As ``torch.nn.functional.conv_transpose1d``: conv_transpose2d on a height-1 image."""
    if not isinstance(input, Tensor) or input.ndim not in (2, 3):
        raise RuntimeError(f"conv_transpose1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got "
                           f"{list(getattr(input, 'shape', [])) or type(input).__name__}")
    if weight.ndim != 3:
        raise RuntimeError(f"conv_transpose1d: expected a 3-D weight (in_channels, out_channels/groups, k), "
                           f"got shape {list(weight.shape)}")
    one = lambda v: (1, int(v if np.ndim(v) == 0 else v[0]))   # noqa: E731  (the height axis is trivial)
    zero = lambda v: (0, int(v if np.ndim(v) == 0 else v[0]))  # noqa: E731
    out = conv_transpose2d(input.unsqueeze(-2), weight.unsqueeze(-2), bias, one(stride), zero(padding),
                           zero(output_padding), groups, one(dilation))
    return out.squeeze(-2)
