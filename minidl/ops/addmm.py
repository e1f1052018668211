"""addmm, baddbmm, addbmm: a matrix product added to a tensor, in one op, as PyTorch's.

    addmm:    out = beta * input + alpha * (A @ B)              A (n, m), B (m, p)
    baddbmm:  out = beta * input + alpha * (A_i @ B_i)          A (b, n, m), B (b, m, p), out (b, n, p)
    addbmm:   out = beta * input + alpha * sum_i (A_i @ B_i)    out (n, p)

input broadcasts to the output's shape. With G = dL/dout:

    dL/dinput = beta * G summed over the dims broadcasting added
    dL/dA_i   = alpha * G_i B_i^T       dL/dB_i = alpha * A_i^T G_i
    (addbmm: G_i = G for every i, since every product lands in the same output)

beta = 0 ignores input's values (NaN and inf in it do not propagate), as PyTorch does. They are
ops of their own, not compositions, so that autocast gives them the rule PyTorch gives them
(the low dtype, like matmul; minidl/amp/policy.py).
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ._broadcast import unbroadcast
from .low_precision import float32_compute

_RANKS = {"addmm": (2, 2, ("mat1", "mat2")), "baddbmm": (3, 3, ("batch1", "batch2")),
          "addbmm": (3, 2, ("batch1", "batch2"))}   # op: (rank of A and B, rank of out, their names)


@float32_compute   # float16/bfloat16 inputs: float32 products, one rounding (low_precision.py)
class AddMatMul(Function):
    cuda_low_operands = ("a", "b")   # matmul operands only: low on cuda (low_precision.py); g is scaled: widened

    @staticmethod
    def forward(ctx, input, a, b, beta, alpha, op):
        xp = namespace_of(a)
        prod = xp.matmul(a, b)
        if op == "addbmm":
            prod = prod.sum(axis=0)
        if alpha != 1:
            prod = prod * alpha
        ni, na, nb = ctx.needs_input_grad[:3]
        ctx.meta = (input.shape, beta, alpha, op)
        ctx.save_for_backward(a if nb else None, b if na else None)
        if beta == 0:
            return prod.astype(a.dtype, copy=False)
        return (prod + (input * beta if beta != 1 else input)).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        a, b = ctx.saved_tensors
        shape, beta, alpha, op = ctx.meta
        xp = namespace_of(g)
        ni, na, nb = ctx.needs_input_grad[:3]
        gi = unbroadcast(g * beta, shape) if ni and beta != 0 else (xp.zeros(shape, g.dtype) if ni else None)
        ga = xp.matmul(g, xp.swapaxes(b, -1, -2)) * alpha if na else None
        gb = xp.matmul(xp.swapaxes(a, -1, -2), g) * alpha if nb else None
        return gi, ga, gb, None, None, None


def _add_matmul(op, input, a, b, beta, alpha):
    rank, out_rank, (na, nb) = _RANKS[op]
    for name, t in ((na, a), (nb, b)):
        if t.ndim != rank:
            raise RuntimeError(f"{name} must be a {'matrix' if rank == 2 else '3D tensor'}, got {t.ndim}-D tensor")
    if a.shape[-1] != b.shape[-2] or (rank == 3 and a.shape[0] != b.shape[0]):
        sa, sb = "x".join(map(str, a.shape)), "x".join(map(str, b.shape))
        raise RuntimeError(f"{na} and {nb} shapes cannot be multiplied ({sa} and {sb})")
    out = ((a.shape[0],) if op == "baddbmm" else ()) + (a.shape[-2], b.shape[-1])
    check_same_dtype(op, [("input", input), (na, a), (nb, b)])
    try:
        ok = tuple(np.broadcast_shapes(tuple(input.shape), out)) == out
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"{op}: input of shape {list(input.shape)} does not broadcast to the product's shape "
                           f"{list(out)}")
    return AddMatMul.apply(input, a, b, beta, alpha, op)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """As ``torch.addmm``: beta * input + alpha * (mat1 @ mat2)."""
    return _add_matmul("addmm", input, mat1, mat2, beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """As ``torch.baddbmm``: beta * input + alpha * (batch1 @ batch2), batched over dim 0."""
    return _add_matmul("baddbmm", input, batch1, batch2, beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """As ``torch.addbmm``: beta * input + alpha * (the sum over dim 0 of batch1 @ batch2)."""
    return _add_matmul("addbmm", input, batch1, batch2, beta, alpha)
