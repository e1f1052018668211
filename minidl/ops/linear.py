"""The affine map of nn.Linear, fused into one op: y = x W^T + b.

x is (..., in), W is (out, in), b is (out,). Flattening the leading dims of x into M rows
(X: (M, in), G = dL/dy: (M, out)):

    dL/dX = G W           (M, in)
    dL/dW = G^T X         (out, in)    one GEMM over every row of the batch
    dL/db = sum_rows G    (out,)

The two functions below the helpers are the reference (NumPy's matmul, the bias as one more
pass). On the CPU, ``minidl.kernels.cpu.linear`` runs each GEMM in shares on Numba's threads
with the bias added to a share's rows right after its product, and ``kernels.cpu.bias`` splits
the bias passes over every thread where it cannot.

Only what a needed gradient reads is saved: W for dL/dX, X for dL/dW (as PyTorch), so the
input of a frozen layer, or the weight of a layer whose input needs no gradient, may be
modified in place after the forward.
"""
import math

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ._higher_order import rows
from ._kernel_switch import LAYER
from .low_precision import float32_compute
from .shape_error import ShapeError


def _rows(a):
    """(..., n) -> (M, n), M the product of the leading dims (spelled out: a -1 is ambiguous
    when the array is empty)."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def bias_add_reference(y, b):
    """y += b for the GEMM result y (M, out) and the bias b (out,), in place; returns y."""
    y += b
    return y


def bias_grad_reference(g):
    """dL/db = sum_rows g for the output gradient g (M, out)."""
    return g.sum(axis=0)


def linear_forward_reference(x, w, b):
    """Y = x w^T (+ b) for the rows x (M, in), w (out, in) and b (out,) or None."""
    y = namespace_of(x).matmul(x, w.T)
    return y if b is None else bias_add_reference(y, b)


def linear_backward_reference(g, x, w, need_db):
    """(dX, dW, db) for the output gradient g (M, out): dX = g w if w is given, dW = g^T x if x
    is given, db = sum_rows g if need_db (else None each)."""
    xp = namespace_of(g)
    return (None if w is None else xp.matmul(g, w), None if x is None else xp.matmul(g.T, x),
            bias_grad_reference(g) if need_db else None)


LINEAR = LAYER.kernels(("linear_forward", "linear_backward"), __name__, cpu="minidl.kernels.cpu.linear")


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class Linear(Function):
    cuda_low_operands = ("x", "w", "grad_output")   # matmul operands (g also summed): low on cuda (low_precision.py)

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.impl = LINEAR.select(x)
        # one (M, in) @ (in, out) GEMM for all leading dims, not one per batch entry
        y = ctx.impl.linear_forward(_rows(x), w, b)
        nx, nw, _ = ctx.needs_input_grad
        ctx.x_shape = x.shape
        ctx.save_for_backward(x if nw else None, w if nx else None)
        return y if x.ndim == 2 else y.reshape(x.shape[:-1] + (w.shape[0],))

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        nx, nw, nb = ctx.needs_input_grad
        dx, dw, db = ctx.impl.linear_backward(_rows(g), _rows(x) if nw else None, w if nx else None, nb)
        return (dx.reshape(ctx.x_shape) if nx else None), dw, db

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x, w, _ = inputs
        nx, nw, nb = ctx.needs_input_grad
        g2 = rows(g)
        dx = (g2 @ w).reshape(ctx.x_shape) if nx else None
        dw = g2.transpose(0, 1) @ rows(x) if nw else None
        db = g2.sum(0) if nb else None
        return dx, dw, db


def linear(input, weight, bias=None):
    """As ``torch.nn.functional.linear``: input (..., in_features) @ weight^T (+ bias)."""
    check_linear_arguments(input, weight, bias)
    return Linear.apply(input, weight, bias)


def check_linear_arguments(input, weight, bias):
    """Linear's shape and dtype rules, with errors that name what was expected and what came."""
    if weight.ndim != 2:
        raise ValueError(f"linear: weight must be 2-D (out_features, in_features), got shape {list(weight.shape)}")
    if input.ndim < 1 or input.shape[-1] != weight.shape[1]:
        raise ShapeError(f"linear: input of shape {list(input.shape)} does not match weight of shape "
                         f"{list(weight.shape)} (expected last dim {weight.shape[1]})")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ShapeError(f"linear: bias must have shape [{weight.shape[0]}], got {list(bias.shape)}")
    check_same_dtype("linear", [("input", input), ("weight", weight), ("bias", bias)])
