"""Matrix product with NumPy's (and PyTorch's) matmul semantics."""
from ..autograd.op_function import Function
from ..backends import namespace_of
from ._broadcast import unbroadcast
from ..tensor.dtype import check_same_dtype
from ._higher_order import sum_to
from .low_precision import float32_compute
from .shape_error import ShapeError


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class MatMul(Function):
    """out = a @ b, batched over leading dims that broadcast.

    For matrices, dL/da = g @ b^T and dL/db = a^T @ g, each summed back over batch dims
    that broadcasting created. A 1-D operand is treated as a row (a) or column (b) vector
    and the inserted axis is removed again. Only what a needed gradient reads is saved (b
    for dL/da, a for dL/db), as PyTorch: a constant's partner may be modified in place.
    """
    cuda_low_operands = ("a", "b", "grad_output")   # matmul operands only: low on cuda (low_precision.py)

    @staticmethod
    def forward(ctx, a, b):
        na, nb = ctx.needs_input_grad
        ctx.shapes = a.shape, b.shape
        ctx.save_for_backward(a if nb else None, b if na else None)
        return namespace_of(a).matmul(a, b)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        sa, sb = ctx.shapes
        xp = namespace_of(g)
        if len(sa) == 1 and len(sb) == 1:  # a dot product: g is 0-d
            g = g.reshape(1, 1)
        elif len(sa) == 1:
            g = g[..., None, :]
        elif len(sb) == 1:
            g = g[..., None]
        sa2 = (1,) + sa if len(sa) == 1 else sa     # the shapes as matrices
        sb2 = sb + (1,) if len(sb) == 1 else sb
        na, nb = ctx.needs_input_grad
        ga = gb = None
        if na:
            ga = unbroadcast(xp.matmul(g, xp.swapaxes(b.reshape(sb2), -1, -2)), sa2).reshape(sa)
        if nb:
            gb = unbroadcast(xp.matmul(xp.swapaxes(a.reshape(sa2), -1, -2), g), sb2).reshape(sb)
        return ga, gb

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        a, b = inputs
        sa, sb = ctx.shapes
        if len(sa) == 1 and len(sb) == 1:
            g = g.reshape(1, 1)
        elif len(sa) == 1:
            g = g.unsqueeze(-2)
        elif len(sb) == 1:
            g = g.unsqueeze(-1)
        sa2 = (1,) + sa if len(sa) == 1 else sa
        sb2 = sb + (1,) if len(sb) == 1 else sb
        na, nb = ctx.needs_input_grad
        ga = sum_to(g @ b.reshape(sb2).transpose(-1, -2), sa2).reshape(sa) if na else None
        gb = sum_to(a.reshape(sa2).transpose(-1, -2) @ g, sb2).reshape(sb) if nb else None
        return ga, gb


def matmul(a, b):
    sa, sb = getattr(a, "shape", ()), getattr(b, "shape", ())
    if len(sa) == 0 or len(sb) == 0:
        raise ShapeError(f"matmul: both operands need at least 1 dim, got shapes {list(sa)} and {list(sb)}")
    k_a = sa[-1]
    k_b = sb[0] if len(sb) == 1 else sb[-2]
    if k_a != k_b:
        raise ShapeError(f"matmul: shapes {list(sa)} and {list(sb)} cannot be multiplied ({k_a} != {k_b})")
    da, db = getattr(a, "_data", None), getattr(b, "_data", None)   # Tensors' arrays (a dtype read costs less)
    if da is not None and db is not None and da.dtype is not db.dtype and da.dtype != db.dtype:
        check_same_dtype("matmul", [("input", a), ("other", b)])   # PyTorch promotes neither operand
    try:
        return MatMul.apply(a, b)
    except ValueError:
        raise ShapeError(f"matmul: batch dims of shapes {list(sa)} and {list(sb)} do not broadcast") from None
