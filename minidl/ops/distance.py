"""Similarity and distance between vectors: cosine_similarity, pairwise_distance and pdist, with
PyTorch's semantics."""
import math

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ..tensor.tensor import Tensor
from ._broadcast import unbroadcast
from ._higher_order import constant, keep_where, sum_to


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

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        dim, a_shape, b_shape = ctx.args
        a, b = inputs[:2]
        shape = np.broadcast_shapes(tuple(a_shape), tuple(b_shape))
        A = a if tuple(a.shape) == shape else a.expand(shape)
        B = b if tuple(b.shape) == shape else b.expand(shape)
        na, nb = (A * A).sum(dim=dim, keepdim=True).sqrt(), (B * B).sum(dim=dim, keepdim=True).sqrt()
        _, _, _, _, ca0, cb0, _ = ctx.saved_tensors   # max(norm, eps): the norm where it is the larger
        xp = namespace_of(ca0)
        ca = keep_where(na._data == ca0, na) + constant(xp.where(na._data == ca0, 0, ca0))
        cb = keep_where(nb._data == cb0, nb) + constant(xp.where(nb._data == cb0, 0, cb0))
        s = ((A / ca) * (B / cb)).sum(dim=dim, keepdim=True)
        g = g.unsqueeze(dim)
        da = db = None
        if ctx.needs_input_grad[0]:
            pa = na._data > 0
            unit_a = keep_where(pa, A / (keep_where(pa, na) + constant((~pa).astype(na._data.dtype))))
            da = sum_to(g * (B / (ca * cb) - s * unit_a / ca), a_shape)
        if ctx.needs_input_grad[1]:
            pb = nb._data > 0
            unit_b = keep_where(pb, B / (keep_where(pb, nb) + constant((~pb).astype(nb._data.dtype))))
            db = sum_to(g * (A / (ca * cb) - s * unit_b / cb), b_shape)
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


class Pdist(Function):
    """For the rows x_i of an (n, m) input and each pair i < j (in row-major order, the upper
    triangle of the distance matrix), with d = x_i - x_j and D = ||d||_p:

        p = 0:   D = #{k: d_k != 0}                    dD/dd = 0
        p = inf: D = max_k |d_k|                       dD/dd_k = sign(d_k) where |d_k| = D (each tie)
        else:    D = (sum_k |d_k|**p) ** (1/p)         dD/dd_k = sign(d_k) |d_k|**(p-1) / D**(p-1)

    and dD/dx_i = dD/dd, dD/dx_j = -dD/dd, summed over the pairs a row is in. As PyTorch, the
    gradient is 0 where D = 0 (and, for p < 1, where d_k = 0, whose |d_k|**(p-1) is infinite)."""

    @staticmethod
    def forward(ctx, x, p):
        xp = namespace_of(x)
        n, m = x.shape
        i, j = np.triu_indices(n, 1)
        d = xp.take(x, i, axis=0) - xp.take(x, j, axis=0)
        if m == 0:
            dist = xp.zeros(len(i), dtype=x.dtype)
        elif p == 0:
            dist = (d != 0).astype(x.dtype).sum(axis=1)
        elif p == 1:
            dist = xp.abs(d).sum(axis=1)
        elif p == 2:
            dist = xp.sqrt((d * d).sum(axis=1))
        elif p == math.inf:
            dist = xp.abs(d).max(axis=1)
        else:
            dist = ((xp.abs(d) ** p).sum(axis=1)) ** (1.0 / p)
        dist = dist.astype(x.dtype, copy=False)
        ctx.save_for_backward(d, dist)
        ctx.p, ctx.n, ctx.pairs = p, n, (i, j)
        return dist

    @staticmethod
    def backward(ctx, g):
        d, dist = ctx.saved_tensors
        p, (i, j) = ctx.p, ctx.pairs
        xp = namespace_of(d)
        D = dist[:, None]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if p == 0 or d.size == 0:
                w = xp.zeros_like(d)
            elif p == 1:
                w = xp.sign(d)
            elif p == 2:
                w = xp.where(D == 0, 0, d / xp.where(D == 0, 1, D))
            elif p == math.inf:
                w = xp.sign(d) * (xp.abs(d) == D)
            else:
                zero = (D == 0) | (d == 0) if p < 1 else (D == 0)
                w = xp.where(zero, 0, xp.sign(d) * (xp.abs(d) / xp.where(D == 0, 1, D)) ** (p - 1))
        gd = (g[:, None] * w).astype(d.dtype, copy=False)
        dx = xp.zeros((ctx.n, d.shape[1]), dtype=d.dtype)
        xp.add.at(dx, i, gd)
        xp.add.at(dx, j, -gd)
        return dx, None


def pdist(input, p=2):
    """As ``torch.nn.functional.pdist``: the p-norm distances between the rows of an (n, m) input,
    the n (n - 1) / 2 entries above the diagonal of the distance matrix, row by row."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pdist: expected input to be a Tensor, got {type(input).__name__}")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if input.dtype.kind != "f":
        raise RuntimeError("pdist only supports floating-point dtypes")
    if not p >= 0:
        raise RuntimeError("pdist only supports non-negative p values")
    return Pdist.apply(input, float(p))


_COMPUTE_MODES = {"use_mm_for_euclid_dist_if_necessary": None, "use_mm_for_euclid_dist": True,
                  "donot_use_mm_for_euclid_dist": False}


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """As ``torch.cdist``: the p-norm distances between the rows of x1 (B..., P, M) and x2
    (B..., R, M), the batch dims broadcast, in float32 under autocast (PyTorch's rule).

    For p = 2 with ``use_mm_for_euclid_dist`` (or ``..._if_necessary`` when P or R exceeds 25,
    PyTorch's threshold) the distances come from one matrix product, as PyTorch's:

        D_ij**2 = |a_i|**2 + |b_j|**2 - 2 a_i . b_j,   D_ij = sqrt(max(D_ij**2, 1e-30))

    which needs P*R memory instead of the P*R*M of the differences (a VQ codebook against every
    pixel of a batch) but loses precision to cancellation where points are far from the origin
    and close to each other; ``donot_use_mm_for_euclid_dist`` takes the differences. Both are
    compositions of recorded ops, so their gradients are those ops' (0 at a zero distance)."""
    if compute_mode not in _COMPUTE_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, t in (("x1", x1), ("x2", x2)):
        if not isinstance(t, Tensor):
            raise TypeError(f"cdist(): argument {name!r} must be Tensor, not {type(t).__name__}")
    for name, t in (("X1", x1), ("X2", x2)):
        if t.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {t.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    for name, t in (("X1", x1), ("X2", x2)):
        if t.dtype.kind != "f":
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {t.dtype}")
    if not p >= 0:
        raise RuntimeError("cdist only supports non-negative p values")
    try:
        np.broadcast_shapes(tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    except ValueError:
        raise RuntimeError(f"cdist: the batch dims of X1 {list(x1.shape[:-2])} and X2 {list(x2.shape[:-2])} "
                           f"do not broadcast") from None
    use_mm = _COMPUTE_MODES[compute_mode]
    if use_mm is None:
        use_mm = x1.shape[-2] > 25 or x2.shape[-2] > 25
    from ..amp.policy import run_composite
    return run_composite("cdist", lambda a, b: _cdist(a, b, float(p), use_mm), x1, x2)


def _cdist(x1, x2, p, use_mm):
    check_same_dtype("cdist", [("x1", x1), ("x2", x2)])
    if p == 2 and use_mm:
        sq = ((x1 * x1).sum(-1, keepdim=True) + (x2 * x2).sum(-1).unsqueeze(-2)
              - 2 * x1.matmul(x2.transpose(-1, -2)))
        return sq.clamp_min(1e-30).sqrt()
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    if p == 2:   # the gradient of a zero distance is 0, as PyTorch's
        from .indexing import where
        sq = (diff * diff).sum(-1)
        safe = where(sq > 0, sq, sq + 1.0)
        return where(sq > 0, safe.sqrt(), sq * 0)
    from .._namespace import norm
    return norm(diff, p, dim=-1)
