"""A Transformer's MLP as one op: y = gelu(x W1^T + b1) W2^T + b2, the GELU exact or tanh.

With X the (M, in) rows of x, U = X W1^T (M, hidden), a = gelu(U + b1) and G = dL/dy (M, out):

    forward:   a, U = Linear + GELU of X                  ops/linear_gelu.py (bias and GELU after the GEMM)
               y = a W2^T + b2                            ops/linear.py
    backward:  dW2 = G^T a,   db2 = sum_rows G            fc2's weight and bias, as nn.Linear's
               dU = (G W2) * gelu'(U + b1)                ... a block of rows at a time
               db1 = sum_rows dU
               dX = dU W1,    dW1 = dU^T X                fc1's, as nn.Linear's

Why one op: G W2 is the backward's largest array, (M, hidden), four times the width of the
layer's input and output. As two ops, fc2's backward writes it out whole and GELU's backward reads
it back from memory; here each block of its rows lands in a per-thread scratch and goes through
GELU's backward from there, in cache, into dU (kernels/cpu/linear.py; the measurements:
docs/performance.md, "The MLP as one op"). The values are the two ops' to rounding: the same
products, the same GELU arithmetic.

There is no cuda kernel: on a GPU the reference runs, its products the device's GEMMs over every
row at once and GELU's backward its elementwise kernels, with no cache to keep a block in.

Saved: X if W1 needs a gradient, W1 if x does, U and b1 and W2 if anything below fc2 does, a if
W2 does, as the two ops would. The zoo's MLP runs it for float32 and float64 outside autocast
(zoo/transformer.py); elsewhere it keeps the two ops, whose low-precision roundings autocast's
policy defines.
"""
import math

from ..autograd.op_function import Function
from ..tensor.dtype import check_same_dtype
from ._kernel_switch import LAYER
from .linear import check_linear_arguments, linear_backward_reference
from .linear import linear_forward_reference  # noqa: F401  (MLP's reference, found by name)
from .linear_gelu import bias_gelu_backward_reference
from .linear_gelu import linear_gelu_forward_reference  # noqa: F401  (likewise)
from .low_precision import float32_compute, keep_low
from .shape_error import ShapeError


def _rows(a):
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def gelu_linear_backward_reference(g, a, w, u, b, approximate, need_dw, need_db, need_dub):
    """(dU, dW, db, dub) of y = a w^T + (bias) with a = gelu(U + b): fc2's backward, dW = g^T a
    and db = sum_rows g where needed, then GELU's, dU = (g w) * gelu'(U + b) and dub = sum_rows dU
    (float64) where needed (None for each gradient not needed)."""
    dh, dw, db = linear_backward_reference(g, a if need_dw else None, w, need_db)
    du, dub = bias_gelu_backward_reference(u, b, dh, approximate, need_dub)
    return du, dw, db, dub


# the GEMMs with their epilogues on the CPU: kernels/cpu/linear.py
MLP = LAYER.kernels(("linear_gelu_forward", "linear_forward", "gelu_linear_backward", "linear_backward"), __name__,
                    cpu="minidl.kernels.cpu.linear")


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class LinearGeluLinear(Function):
    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, approximate):
        ctx.impl = MLP.select(x)
        x2 = _rows(x)
        a, u = ctx.impl.linear_gelu_forward(x2, w1, b1, approximate)
        y = ctx.impl.linear_forward(a, w2, b2)
        nx, nw1, nb1, nw2 = ctx.needs_input_grad[:4]
        below = nx or nw1 or nb1                 # does backward need dU?
        ctx.x_shape, ctx.approximate, ctx.below = x.shape, approximate, below
        ctx.save_for_backward(x if nw1 else None, w1 if nx else None, u if below else None, b1 if below else None,
                              a if nw2 else None, w2 if below else None)
        keep_low(ctx, u, a)   # the unfused ops' saved arrays, which they keep in the low dtype
        return y if x.ndim == 2 else y.reshape(x.shape[:-1] + (w2.shape[0],))

    @staticmethod
    def backward(ctx, g):
        x, w1, u, b1, a, w2 = ctx.saved_tensors
        nx, nw1, nb1, nw2, nb2 = ctx.needs_input_grad[:5]
        g2 = _rows(g)
        if not ctx.below:                        # only fc2's own gradients
            _, dw2, db2 = ctx.impl.linear_backward(g2, a if nw2 else None, None, nb2)
            return None, None, None, dw2, db2, None
        du, dw2, db2, db1 = ctx.impl.gelu_linear_backward(g2, a, w2, u, b1, ctx.approximate, nw2, nb2, nb1)
        dx, dw1, _ = ctx.impl.linear_backward(du, _rows(x) if nw1 else None, w1 if nx else None, False)
        return ((dx.reshape(ctx.x_shape) if nx else None), dw1, (db1.astype(b1.dtype) if nb1 else None), dw2,
                db2, None)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        """backward on Tensors: U + b1 recomputed, a = GELU of it as an op, dU by GELU's
        differentiable backward."""
        from ._higher_order import rows
        from .activation import Gelu, GeluTanh
        from ..nn.functional import gelu as gelu_op
        x, w1, b1, w2 = inputs[:4]
        nx, nw1, nb1, nw2, nb2 = ctx.needs_input_grad[:5]
        x2 = rows(x) if x.ndim != 2 else x
        g2 = rows(g) if g.ndim != 2 else g
        v = x2 @ w1.transpose(0, 1)
        if b1 is not None:
            v = v + b1
        dw2 = g2.transpose(0, 1) @ gelu_op(v, approximate=ctx.approximate) if nw2 else None
        db2 = g2.sum(0) if nb2 else None
        if not (nx or nw1 or nb1):
            return None, None, None, dw2, db2, None
        gelu = GeluTanh if ctx.approximate == "tanh" else Gelu
        du = gelu.differentiable_backward(ctx, (v,), g2 @ w2)
        dx = (du @ w1).reshape(ctx.x_shape) if nx else None
        dw1 = du.transpose(0, 1) @ x2 if nw1 else None
        return dx, dw1, (du.sum(0) if nb1 else None), dw2, db2, None


def linear_gelu_linear(input, weight1, bias1, weight2, bias2=None, approximate="none"):
    """``F.linear(F.gelu(F.linear(input, weight1, bias1), approximate), weight2, bias2)`` as one
    op (see the module docstring)."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"linear_gelu_linear: approximate must be 'none' or 'tanh', got {approximate!r}")
    check_linear_arguments(input, weight1, bias1)
    if weight2.ndim != 2 or weight2.shape[1] != weight1.shape[0]:
        raise ShapeError(f"linear_gelu_linear: the second weight must have shape [out_features, {weight1.shape[0]}] "
                         f"to take the first layer's {weight1.shape[0]} features, got {list(weight2.shape)}")
    if bias2 is not None and tuple(bias2.shape) != (weight2.shape[0],):
        raise ShapeError(f"linear_gelu_linear: the second bias must have shape [{weight2.shape[0]}], got "
                         f"{list(bias2.shape)}")
    check_same_dtype("linear", [("input", input), ("weight", weight2), ("bias", bias2)])
    return LinearGeluLinear.apply(input, weight1, bias1, weight2, bias2, approximate)
