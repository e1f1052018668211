"""A Linear layer followed by GELU, with the bias add and the activation as the GEMM's epilogue:
a = gelu(x W^T + b), for a Transformer MLP's first layer.

With X the (M, in) rows of x and U = X W^T the GEMM's result (M, out):

    forward:   a = gelu(U + b)                              one pass over U after the GEMM
    backward:  dU = da * gelu'(U + b)                       one pass over U and da ...
               db = sum_rows dU                             ... summed in the same pass
               dX = dU W,   dW = dU^T X                     the two GEMMs, as nn.Linear's

gelu' as in ops/activation.py: exact, Phi(v) + v phi(v); tanh, with s = (1 + tanh u) / 2 and
u = sqrt(2/pi) (v + 0.044715 v^3), s + 2 v s (1 - s) sqrt(2/pi) (1 + 3 * 0.044715 v^2).

Unfused, the GEMM's output is read and written once more to add the bias, GELU reads it again
and writes its output, its backward reads da and its input and writes dU, and the bias gradient
reads dU again: six passes over an (M, out) array against three here. U is saved without the
bias (b is added again where it is read), so the forward writes nothing but a.

Saved: U (the unfused pair saved GELU's input, the same size; rounded to the low dtype in a
float16/bfloat16 call, as the unfused Linear's output is), X if W needs a gradient and W if
x does, as nn.Linear's op.
"""
import math

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ._kernel_switch import LAYER
from .linear import check_linear_arguments
from .linear import linear_backward_reference
from .low_precision import float32_compute, keep_low
from .activation import gelu_backward_reference, gelu_reference, gelu_tanh_backward_reference, gelu_tanh_reference


def _rows(a):
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def bias_gelu_forward_reference(u, b, approximate):
    """gelu(u + b) for the GEMM result u (M, out) and the bias b (out,) or None."""
    v = u if b is None else u + b
    return gelu_tanh_reference(v) if approximate == "tanh" else gelu_reference(v)


def bias_gelu_backward_reference(u, b, g, approximate, need_db=True):
    """(dU, db): dU = g * gelu'(u + b) and db = sum_rows dU (float64; None if not needed)."""
    v = u if b is None else u + b
    du = gelu_tanh_backward_reference(v, g) if approximate == "tanh" else gelu_backward_reference(v, g)
    return du, (du.astype(np.float64).sum(axis=0) if need_db else None)


def linear_gelu_forward_reference(x, w, b, approximate):
    """(a, U): U = x W^T for the rows x (M, in) and a = gelu(U + b)."""
    u = namespace_of(x).matmul(x, w.T)
    return bias_gelu_forward_reference(u, b, approximate), u


def linear_gelu_backward_reference(g, u, b, x, w, approximate, need_db):
    """(dX, dW, db): dU = g * gelu'(U + b), then nn.Linear's GEMMs dX = dU W (if W is given) and
    dW = dU^T X (if X is given); db = sum_rows dU in float64 if need_db (else None each)."""
    du, db = bias_gelu_backward_reference(u, b, g, approximate, need_db)
    dx, dw, _ = linear_backward_reference(du, x, w, False)
    return dx, dw, db


# the GEMMs with the bias and GELU as their epilogue on the CPU: kernels/cpu/linear.py
LINEAR_GELU = LAYER.kernels(("linear_gelu_forward", "linear_gelu_backward"), __name__,
                            cpu="minidl.kernels.cpu.linear")


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class LinearGelu(Function):
    @staticmethod
    def forward(ctx, x, w, b, approximate):
        ctx.impl = LINEAR_GELU.select(x)
        a, u = ctx.impl.linear_gelu_forward(_rows(x), w, b, approximate)
        nx, nw, _ = ctx.needs_input_grad[:3]
        ctx.x_shape, ctx.approximate = x.shape, approximate
        ctx.save_for_backward(x if nw else None, w if nx else None, u, b)
        keep_low(ctx, u)   # GELU's input, which the unfused Linear returns rounded: kept low as a GPU keeps it
        return a if x.ndim == 2 else a.reshape(x.shape[:-1] + (w.shape[0],))

    @staticmethod
    def backward(ctx, g):
        x, w, u, b = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad[:3]
        dx, dw, db = ctx.impl.linear_gelu_backward(_rows(g), u, b, _rows(x) if nw else None, w if nx else None,
                                                   ctx.approximate, nb)
        return (dx.reshape(ctx.x_shape) if nx else None), dw, (db.astype(b.dtype) if nb else None), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        """backward on Tensors: v = x W^T + b recomputed, dU = GELU's differentiable backward at v."""
        from ._higher_order import rows
        from .activation import Gelu, GeluTanh
        x, w, b = inputs[:3]
        nx, nw, nb = ctx.needs_input_grad[:3]
        x2 = rows(x) if x.ndim != 2 else x
        v = x2 @ w.transpose(0, 1)
        if b is not None:
            v = v + b
        gelu = GeluTanh if ctx.approximate == "tanh" else Gelu
        du = gelu.differentiable_backward(ctx, (v,), rows(g) if g.ndim != 2 else g)
        dx = (du @ w).reshape(ctx.x_shape) if nx else None
        dw = du.transpose(0, 1) @ x2 if nw else None
        return dx, dw, (du.sum(0) if nb else None), None


def linear_gelu(input, weight, bias=None, approximate="none"):
    """``F.gelu(F.linear(input, weight, bias), approximate)`` as one op (see the module docstring)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"linear_gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    check_linear_arguments(input, weight, bias)
    return LinearGelu.apply(input, weight, bias, approximate)
