"""Overwriting a tensor's values: what fill_, zero_, copy_ and the random in-place
initialisers compute, as a differentiable op, so that an in-place write on a tensor in the
graph is recorded like any other op.

    out = broadcast(values) (cast to x's dtype)
    dL/dx = 0                                   (the old values are gone)
    dL/dvalues = g summed over the broadcast axes (when values is a tensor)
"""
from ..autograd.op_function import Function
from ..backends import namespace_of
from ._broadcast import shape_of, unbroadcast


class Overwrite(Function):
    """out = values broadcast to x's shape;  dL/dx = 0,  dL/dvalues = unbroadcast(g)."""

    @staticmethod
    def forward(ctx, x, values):
        xp = namespace_of(x)
        ctx.shape, ctx.values_shape = x.shape, shape_of(values)
        out = xp.empty(x.shape, dtype=x.dtype)
        out[...] = values
        return out

    @staticmethod
    def backward(ctx, g):
        nx, nv = ctx.needs_input_grad
        gx = namespace_of(g).zeros(ctx.shape, dtype=g.dtype) if nx else None
        gv = unbroadcast(g, ctx.values_shape) if nv else None
        return gx, gv


def overwrite(x, values):
    return Overwrite.apply(x, values)
