"""Resampling one axis by gathering: the op under padding and interpolation.

Along one axis of x, each output position j reads a few input positions i_k[j] ("taps") and
mixes them with weights w_k[j], plus an optional constant c[j]:

    y[..., j, ...] = sum_k w_k[j] x[..., i_k[j], ...] + c[j]

Padding is one tap (reflect/replicate/circular: weight 1 at the mirrored, clamped or wrapped
position; constant: weight 0 and c = value outside the input), nearest interpolation is one
tap, linear interpolation two (the neighbours, weighted by distance). A separable N-D op is
one of these per axis. The gradient scatters back along the same taps:

    dL/dx[..., i, ...] = sum_k sum_{j : i_k[j] = i} w_k[j] g[..., j, ...]

(a scatter-add, since several j may read the same i); the constant gets no gradient.
"""
from ..autograd.function import Function
from ..backends import namespace_of


class GatherAxis(Function):
    """See the module docstring. ``taps`` is a tuple of (index, weight) arrays of the output
    length (weight None means 1, a bool weight is a mask); ``constant`` is None or a float array."""

    @staticmethod
    def forward(ctx, x, axis, taps, constant):
        xp = namespace_of(x)
        shape = [1] * x.ndim
        shape[axis] = -1
        out_shape = list(x.shape)
        out_shape[axis] = len(taps[0][0]) if taps else len(constant)
        y = xp.zeros(tuple(out_shape), dtype=x.dtype)   # no taps: nothing is read (padding an empty axis)
        for idx, w in taps:
            part = xp.take(x, idx, axis=axis)
            if w is not None and w.dtype == bool:   # a mask: 0 where it reads nothing, even from an inf
                part = xp.where(w.reshape(shape), part, xp.zeros((), dtype=x.dtype))   # (keeps a bool x bool)
            elif w is not None:
                part = part * w.astype(x.dtype).reshape(shape)
            y = y + part
        if constant is not None:
            y = y + constant.astype(x.dtype).reshape(shape)
        ctx.args = (axis, taps, x.shape[axis])
        return y

    @staticmethod
    def backward(ctx, g):
        axis, taps, n_in = ctx.args
        xp = namespace_of(g)
        gm = xp.moveaxis(g, axis, 0)
        dx = xp.zeros((n_in,) + gm.shape[1:], dtype=g.dtype)
        wshape = (-1,) + (1,) * (gm.ndim - 1)
        for idx, w in taps:
            xp.add.at(dx, idx, gm if w is None else gm * w.astype(g.dtype).reshape(wshape))
        return xp.moveaxis(dx, 0, axis), None, None, None
