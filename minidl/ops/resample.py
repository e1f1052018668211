"""Resampling one axis by gathering: the op under padding and interpolation.

Along one axis of x, each output position j reads a few input positions i_k[j] ("taps") and
mixes them with weights w_k[j], plus an optional constant c[j]:

    y[..., j, ...] = sum_k w_k[j] x[..., i_k[j], ...] + c[j]

Padding is one tap (reflect/replicate/circular: weight 1 at the mirrored, clamped or wrapped
position; constant: weight 0 and c = value outside the input), nearest interpolation is one
tap, linear interpolation two (the neighbours, weighted by distance). A separable N-D op is
one of these per axis. The gradient scatters back along the same taps:

    dL/dx[..., i, ...] = sum_k sum_{j : i_k[j] = i} w_k[j] g[..., j, ...]

(a scatter-add, since several j may read the same i); the constant gets no gradient. A tap
may carry a third array, a mask: where it is False the tap reads (and sends back) nothing, not
0 times the value, so an inf there leaves no NaN (the antialiased filters' unused taps).

The scatter is linear in g, and its adjoint is the gather again (without the constant), so it
is an op of its own, ScatterAxis, whose backward is the gather: a gradient through padding or
interpolation can then be differentiated again (``backward(create_graph=True)``).
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of


def _along(ndim, axis):
    """The shape that lays a per-position array along ``axis`` of an ndim array."""
    shape = [1] * ndim
    shape[axis] = -1
    return tuple(shape)


def gather_axis(x, axis, taps, n_out):
    """sum_k w_k[j] x[..., i_k[j], ...] along ``axis``: the output of length n_out, 0 without taps."""
    xp = namespace_of(x)
    shape = _along(x.ndim, axis)
    out_shape = list(x.shape)
    out_shape[axis] = n_out
    y = xp.zeros(tuple(out_shape), dtype=x.dtype)   # no taps: nothing is read (padding an empty axis)
    for idx, w, *mask in taps:
        part = xp.take(x, idx, axis=axis)
        if mask:   # first, so that a masked-off inf meets no weight
            part = xp.where(xp.asarray(mask[0].reshape(shape)), part, xp.zeros((), dtype=x.dtype))
        if w is not None and w.dtype == bool:   # a mask: 0 where it reads nothing, even from an inf
            part = xp.where(xp.asarray(w.reshape(shape)), part, xp.zeros((), dtype=x.dtype))   # (keeps bool x bool)
        elif w is not None:
            part = part * xp.asarray(w.astype(x.dtype).reshape(shape))
        y = y + part
    return y


def scatter_axis(g, axis, taps, n_in):
    """The adjoint of gather_axis: each w_k[j] g[..., j, ...] added at i_k[j], along an axis of length n_in."""
    xp = namespace_of(g)
    gm = xp.moveaxis(g, axis, 0)
    dx = xp.zeros((n_in,) + gm.shape[1:], dtype=g.dtype)
    wshape = (-1,) + (1,) * (gm.ndim - 1)
    for idx, w, *mask in taps:
        part = xp.where(xp.asarray(mask[0].reshape(wshape)), gm, xp.zeros((), dtype=g.dtype)) if mask else gm
        if w is not None and w.dtype == bool:   # a mask: what it drops adds nothing, even an inf
            part = xp.where(xp.asarray(w.reshape(wshape)), part, xp.zeros((), dtype=g.dtype))
        elif w is not None:
            part = part * xp.asarray(w.astype(g.dtype).reshape(wshape))
        xp.add.at(dx, idx, part)
    return xp.moveaxis(dx, 0, axis)


class GatherAxis(Function):
    """See the module docstring. ``taps`` is a tuple of (index, weight) or (index, weight, mask)
    arrays of the output length (weight None means 1, a bool weight is a mask); ``constant`` is
    None or a float array."""

    @staticmethod
    def forward(ctx, x, axis, taps, constant):
        y = gather_axis(x, axis, taps, len(taps[0][0]) if taps else len(constant))
        if constant is not None:
            y = y + namespace_of(x).asarray(constant.astype(x.dtype).reshape(_along(x.ndim, axis)))
        ctx.args = (axis, taps, x.shape[axis])
        return y

    @staticmethod
    def backward(ctx, g):
        return scatter_axis(g, *ctx.args), None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return ScatterAxis.apply(g, *ctx.args), None, None, None


class ScatterAxis(Function):
    """GatherAxis's backward as an op: dx = the scatter-add of g along the taps (the module
    docstring); linear in g, so dL/dg = the gather of dL/dx along the same taps."""

    @staticmethod
    def forward(ctx, g, axis, taps, n_in):
        ctx.args = (axis, taps, g.shape[axis])
        return scatter_axis(g, axis, taps, n_in)

    @staticmethod
    def backward(ctx, u):
        return gather_axis(u, *ctx.args), None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, u):
        axis, taps, n_out = ctx.args
        # the gather without a constant: GatherAxis with no taps reads its length from a zero constant
        return GatherAxis.apply(u, axis, taps, None if taps else np.zeros(n_out)), None, None, None
