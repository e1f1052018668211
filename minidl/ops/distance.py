"""Similarity and distance between vectors: cosine_similarity and pairwise_distance, with
PyTorch's semantics."""
import numpy as np

from ..autograd.function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ..tensor.tensor import Tensor
from ._broadcast import unbroadcast


def check_dim(dim, ndim):
    """``dim`` as a non-negative axis of an ndim-D tensor, or PyTorch's IndexError."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")
    return dim % n


class CosineSimilarity(Function):
    """Along dim, with |a| the 2-norm and n_a = max(|a|, eps) (likewise for b):

        s = sum(a * b) / (n_a n_b)
        ds/da = b / (n_a n_b) - s a / (n_a |a|),   ds/db = a / (n_a n_b) - s b / (n_b |b|)

    The second term uses d|a|/da = a / |a| (0 at a = 0) even where eps is the larger: PyTorch
    clamps the norm outside the graph, and this is the gradient it computes."""

    @staticmethod
    def forward(ctx, a, b, dim, eps):
        xp = namespace_of(a)
        A, B = xp.broadcast_arrays(a, b)
        na = xp.sqrt((A * A).sum(axis=dim, keepdims=True))
        nb = xp.sqrt((B * B).sum(axis=dim, keepdims=True))
        ca, cb = xp.maximum(na, eps), xp.maximum(nb, eps)
        s = ((A / ca) * (B / cb)).sum(axis=dim, keepdims=True)
        ctx.save_for_backward(A, B, na, nb, ca, cb, s)
        ctx.args = (dim, np.shape(a), np.shape(b))
        return xp.squeeze(s, axis=dim).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        A, B, na, nb, ca, cb, s = ctx.saved_tensors
        dim, a_shape, b_shape = ctx.args
        xp = namespace_of(A)
        g = xp.expand_dims(g, dim)
        da = db = None
        with np.errstate(divide="ignore", invalid="ignore"):
            if ctx.needs_input_grad[0]:
                unit_a = xp.where(na > 0, A / xp.where(na > 0, na, 1), 0)
                da = unbroadcast((g * (B / (ca * cb) - s * unit_a / ca)).astype(A.dtype, copy=False), a_shape)
            if ctx.needs_input_grad[1]:
                unit_b = xp.where(nb > 0, B / xp.where(nb > 0, nb, 1), 0)
                db = unbroadcast((g * (A / (ca * cb) - s * unit_b / cb)).astype(A.dtype, copy=False), b_shape)
        return da, db, None, None


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """As ``torch.nn.functional.cosine_similarity``: x1 . x2 / (max(|x1|, eps) max(|x2|, eps))
    along ``dim`` of the broadcast of x1 and x2."""
    _floating_operands("cosine_similarity", [("x1", x1), ("x2", x2)])
    try:
        shape = np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError:
        raise RuntimeError(f"cosine_similarity: x1 of shape {list(x1.shape)} and x2 of shape {list(x2.shape)} "
                           f"do not broadcast") from None
    if len(shape) == 0:
        raise RuntimeError("cosine_similarity: expected inputs with at least one dim, got two 0-d tensors")
    return CosineSimilarity.apply(x1, x2, check_dim(dim, len(shape)), float(eps))


def _floating_operands(op, names_and_tensors):
    """Each operand a floating Tensor, all of one dtype, or a clear error naming the operand."""
    for name, t in names_and_tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected {name} to be a Tensor, got {type(t).__name__}")
        if t.dtype.kind != "f":
            raise RuntimeError(f"{op}: expected a floating point {name}, got dtype {t.dtype}")
    check_same_dtype(op, list(names_and_tensors))


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """As ``torch.nn.functional.pairwise_distance``: ||x1 - x2 + eps||_p over the last dim of
    the broadcast of x1 and x2 (eps keeps the norm's gradient finite where x1 = x2). It is that
    composition of recorded ops (sub, add, ``md.norm``), so its gradient is theirs: the p-norm's
    stated in ops/reduction.py (VectorNorm), inf / 0 / negative p as ``md.norm`` does them."""
    _floating_operands("pairwise_distance", [("x1", x1), ("x2", x2)])
    try:
        np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError:
        raise RuntimeError(f"pairwise_distance: x1 of shape {list(x1.shape)} and x2 of shape "
                           f"{list(x2.shape)} do not broadcast") from None
    from .._namespace import norm
    return norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)
