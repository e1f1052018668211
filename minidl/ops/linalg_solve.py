"""Square linear systems and determinants: torch.linalg's det, slogdet, inv, solve and
solve_triangular (with the ``*_ex`` forms that report singular matrices instead of raising).

The forwards are NumPy's np.linalg (LAPACK's LU: getrf/gesv). NumPy has no LU factorisation of
its own and no triangular solver, so both are here as array functions that the LU family
(linalg_factor.py) shares: ``lu_factor_array`` is the right-looking LU with partial pivoting that
LAPACK's getf2 is (same pivot choice, LAPACK's 1-based ``pivots`` and ``info``, the index of the
first exactly-zero pivot), and it also names that pivot in PyTorch's error message when np.linalg
reports only "Singular matrix". Everything runs over any leading batch dims.

Each backward is the closed form from differentiating the defining equation:

- det: Jacobi's formula d det(A) = det(A) tr(A^-1 dA), so dL/dA = g det(A) A^-T, which is g times
  the cofactor matrix; that matrix also exists where A is singular, and ``cofactor`` computes it
  from the SVD so that it stays accurate there.
- slogdet: d log|det A| = tr(A^-1 dA), so dL/dA = g A^-T; the sign is piecewise constant.
- inv: Y = A^-1, dY = -Y dA Y, so dL/dA = -Y^T G Y^T.
- solve (AX = B): dX = A^-1 (dB - dA X), so dL/dB = A^-T G and dL/dA = -(dL/dB) X^T. For XA = B
  (left=False): dL/dB = G A^-T and dL/dA = -X^T (dL/dB).
- solve_triangular: the same as solve, with dL/dA kept on the triangle that A's solve reads
  (without the diagonal for a unit triangle, whose diagonal is never read).
"""
import math
from collections import namedtuple

import numpy as np

from ..autograd import autocast_state
from ..autograd.op_function import Function
from ..tensor.dtype import LEGACY_TYPE_NAMES
from ._broadcast import unbroadcast
from .shape_error import broadcast_shape


class LinAlgError(RuntimeError):
    """A matrix the operation cannot handle: singular where an inverse is needed, not positive-
    definite for a Cholesky factorisation. A RuntimeError, as torch.linalg.LinAlgError is."""


linalg_slogdet = namedtuple("linalg_slogdet", ("sign", "logabsdet"))
linalg_inv_ex = namedtuple("linalg_inv_ex", ("inverse", "info"))
linalg_solve_ex = namedtuple("linalg_solve_ex", ("result", "info"))


def mT(a):
    return np.swapaxes(a, -1, -2)


# checks shared by the linalg functions -------------------------------------------------------
def type_name(dtype):
    """PyTorch's name of a dtype in messages ("Double" for float64)."""
    return LEGACY_TYPE_NAMES.get(dtype.name, dtype.name)


def check_cpu(op, *tensors):
    """The factorisations run on NumPy's LAPACK: a tensor on another device is a clear error."""
    for t in tensors:
        if type(t._data) is not np.ndarray:
            raise NotImplementedError(f"{op} is not implemented for device '{t.device}': it computes with NumPy's "
                                      "LAPACK (np.linalg) on the host; move the tensors to the CPU with .cpu()")


def autocast_casts(op, t):
    """True when autocast will cast ``t`` for ``op`` before the op runs (the op's float32 rule in
    minidl/amp/policy.py on t's device): a float16 or bfloat16 input then reaches LAPACK as float32,
    so the dtype checks, which run first, let it pass, as PyTorch's autocast casts before its checks."""
    return autocast_state.state.on and autocast_state.casts(op, "cpu" if type(t._data) is np.ndarray else "cuda")


def check_float(op, t):
    """float32 or float64, as PyTorch's CPU linalg (no integer, half or bfloat16 kernels); a
    float16 or bfloat16 input that autocast casts to float32 for ``op`` passes."""
    if t.dtype.name in ("float16", "bfloat16") and not autocast_casts(op, t):
        raise RuntimeError(f"{op}: Low precision dtypes not supported. Got {type_name(t.dtype)}")
    if t.dtype.kind not in "fc":
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {type_name(t.dtype)}")


def check_square(op, A, name="A"):
    """``A`` a CPU float tensor of shape (*, n, n)."""
    check_cpu(op, A)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    check_float(op, A)


def check_same_dtype(op, A, B):
    if A.dtype != B.dtype and not autocast_casts(op, A):   # (autocast brings both to float32)
        raise RuntimeError(f"{op}: Expected A and B to have the same dtype, but found A of type "
                           f"{type_name(A.dtype)} and B of type {type_name(B.dtype)} instead")


def check_rhs(op, A, B, left):
    """B of shape (*, n, k) (left: AX = B) or (*, k, n) (XA = B) with batch dims that broadcast
    with A's."""
    if B.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor B must have at least 2 dimensions.")
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"{op}: Incompatible shapes of A and B for the equation {eq} ({n}x{n} and "
                           f"{B.shape[-2]}x{B.shape[-1]})")
    broadcast_shape(op, A.shape[:-2], B.shape[:-2], "A", "B")


def raise_for_info(op, info, message):
    """Raise LinAlgError for the first batch element whose ``info`` is non-zero; ``message(i)``
    says what info i means. A batched input names the element, as PyTorch does."""
    info = np.asarray(info)
    bad = np.flatnonzero(info.reshape(-1))
    if bad.size:
        where = f"(Batch element {bad[0]}): " if info.ndim else ""
        raise LinAlgError(f"{op}: {where}{message(int(info.reshape(-1)[bad[0]]))}")


# array functions: LU with partial pivoting, permutations, triangular solves ------------------------
def lu_factor_array(a):
    """(LU, pivots, info) of a (*, m, n) array, as LAPACK's getrf: P A = L U with L unit lower
    (stored below the diagonal), U upper, pivots[i] the 1-based row swapped with row i at step i,
    info the 1-based index of the first zero pivot (0: none). Column j's pivot is the largest
    |entry| on or below the diagonal; a zero column is left as it is and the elimination goes on."""
    *batch, m, n = a.shape
    k = min(m, n)
    lu = np.array(a, copy=True).reshape(math.prod(batch), m, n)
    piv = np.empty((lu.shape[0], k), np.int32)
    info = np.zeros(lu.shape[0], np.int32)
    rows = np.arange(lu.shape[0])
    for j in range(k):
        p = j + np.argmax(np.abs(lu[:, j:, j]), axis=1)
        piv[:, j] = p + 1
        row = lu[rows, j].copy()
        lu[rows, j] = lu[rows, p]
        lu[rows, p] = row
        d = lu[:, j, j]
        zero = d == 0
        info[(info == 0) & zero] = j + 1
        lu[:, j + 1:, j] /= np.where(zero, 1, d)[:, None]
        lu[:, j + 1:, j + 1:] -= lu[:, j + 1:, j, None] * lu[:, j, None, j + 1:]
    return lu.reshape(a.shape), piv.reshape(*batch, k), info.reshape(batch)


def permutation_array(piv, m):
    """perm with (P^T A)[i] = A[perm[i]]: the row swaps ``piv`` (1-based, LAPACK's) applied in turn
    to 0..m-1."""
    count = math.prod(piv.shape[:-1])
    perm = np.broadcast_to(np.arange(m), piv.shape[:-1] + (m,)).reshape(count, m).copy()
    p = piv.reshape(count, piv.shape[-1]).astype(np.intp) - 1
    rows = np.arange(perm.shape[0])
    for i in range(p.shape[1]):
        j = p[:, i]
        keep = perm[:, i].copy()
        perm[:, i] = perm[rows, j]
        perm[rows, j] = keep
    return perm.reshape(piv.shape[:-1] + (m,))


def permutation_matrix(piv, m, dtype):
    """P (*, m, m) with A = P L U: P[perm[i], i] = 1."""
    perm = permutation_array(piv, m)
    P = np.zeros(perm.shape + (m,), dtype)
    np.put_along_axis(P, perm[..., None], 1, axis=-1)   # P^T[i, perm[i]] = 1
    return mT(P)


def broadcast_batch(a, b):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])


def tri_solve_array(t, b, upper, unit=False):
    """X with T X = B for the upper or lower triangle of T (its diagonal taken as ones when
    ``unit``). A zero on the diagonal gives the infinities and NaNs of substitution, as LAPACK's
    trsm does, rather than an error."""
    tri = np.triu(t) if upper else np.tril(t)
    if unit:
        idx = np.arange(t.shape[-1])
        tri[..., idx, idx] = 1
    tri, b = broadcast_batch(tri, b)
    try:
        return np.linalg.solve(tri, b)
    except np.linalg.LinAlgError:
        return _substitute(tri, b, upper)


def _substitute(tri, b, upper):
    n = tri.shape[-1]
    x = np.zeros(np.broadcast_shapes(tri.shape[:-2], b.shape[:-2]) + b.shape[-2:], np.result_type(tri, b))
    with np.errstate(all="ignore"):
        for i in (range(n - 1, -1, -1) if upper else range(n)):
            done = slice(i + 1, n) if upper else slice(0, i)
            s = b[..., i, :] - np.einsum("...j,...jk->...k", tri[..., i, done], x[..., done, :])
            x[..., i, :] = s / tri[..., i, i, None]
    return x


def lu_solve_array(lu, piv, b, adjoint=False):
    """X with A X = B (A^T X = B when ``adjoint``) for A = P L U given as LAPACK's (LU, pivots)."""
    n = lu.shape[-1]
    lu, b = broadcast_batch(lu, b)
    perm = np.broadcast_to(permutation_array(piv, n), lu.shape[:-1])
    if not adjoint:   # L U X = P^T B
        y = tri_solve_array(lu, np.take_along_axis(b, perm[..., None], axis=-2), upper=False, unit=True)
        return tri_solve_array(lu, y, upper=True)
    # U^T L^T (P^T X) = B
    w = tri_solve_array(mT(lu), b, upper=False)
    w = tri_solve_array(mT(lu), w, upper=True, unit=True)
    return np.take_along_axis(w, np.argsort(perm, axis=-1)[..., None], axis=-2)


def solve_ex_array(a, b):
    """(X, info) with A X = B: LAPACK's gesv where every matrix is invertible; for the batch
    elements with an exactly-zero pivot, substitution through the singular U (inf/NaN) and
    info > 0, as torch.linalg.solve_ex."""
    a, b = broadcast_batch(a, b)
    try:
        return np.linalg.solve(a, b), np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        pass
    lu, piv, info = lu_factor_array(a)
    x = lu_solve_array(lu, piv, b)
    ok = info == 0
    if ok.any():
        x[ok] = np.linalg.solve(a[ok], b[ok])
    return x, info


def inv_ex_array(a):
    """(A^-1, info), as solve_ex_array with B = I."""
    try:
        return np.linalg.inv(a), np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        return solve_ex_array(a, np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape))


def cofactor(a):
    """The cofactor matrix adj(A)^T, the gradient of det(A), from the SVD A = U S V^T:
    adj(A) = adj(V^T) adj(S) adj(U) = det(U) det(V) V diag(prod_{j != i} s_j) U^T, so
    adj(A)^T = det(U) det(V) U diag(prod_{j != i} s_j) V^T. It equals det(A) A^-T where A is
    invertible and stays exact where A is singular or nearly so (zero unless rank(A) >= n - 1),
    where det(A) A^-T is 0 * inf or a product of a tiny and a huge inaccurate number."""
    if a.size == 0:
        return np.zeros_like(a)
    u, s, vt = np.linalg.svd(a)
    ones = np.ones_like(s[..., :1])
    before = np.cumprod(np.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)            # prod_{j < i} s_j
    after = np.cumprod(np.concatenate([ones, s[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]  # prod_{j > i} s_j
    scale = np.linalg.det(u) * np.linalg.det(vt)
    return (scale[..., None, None] * ((u * (before * after)[..., None, :]) @ vt)).astype(a.dtype)


# Functions ----------------------------------------------------------------------------------
class Det(Function):
    """det(A) over the last two dims; dL/dA = g * adj(A)^T (= g det(A) A^-T where A is invertible)."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.asarray(np.linalg.det(a), a.dtype)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return np.asarray(g)[..., None, None] * cofactor(a)


class SlogDet(Function):
    """(sign(det A), log|det A|); dL/dA = g A^-T for the log, and the sign has no gradient
    (infinite entries where A is singular, as PyTorch)."""

    @staticmethod
    def forward(ctx, a):
        sign, logabs = np.linalg.slogdet(a)
        sign, logabs = np.asarray(sign, a.dtype), np.asarray(logabs, a.dtype)
        ctx.save_for_backward(a)
        ctx.mark_non_differentiable(sign)
        return sign, logabs

    @staticmethod
    def backward(ctx, gsign, glog):
        a, = ctx.saved_tensors
        with np.errstate(all="ignore"):
            return np.asarray(glog)[..., None, None] * mT(inv_ex_array(a)[0])


class InvEx(Function):
    """(A^-1, info); dL/dA = -Y^T G Y^T with Y = A^-1 (from dY = -Y dA Y)."""

    @staticmethod
    def forward(ctx, a):
        with np.errstate(all="ignore"):
            y, info = inv_ex_array(a)
        ctx.save_for_backward(y)
        ctx.mark_non_differentiable(info)
        return y, info

    @staticmethod
    def backward(ctx, g, ginfo):
        y, = ctx.saved_tensors
        yt = mT(y)
        return -(yt @ g @ yt)


class SolveEx(Function):
    """(X, info) with AX = B (left) or XA = B; B a batch of vectors when ``vector``.
    Left: dL/dB = A^-T G, dL/dA = -(dL/dB) X^T. Right: dL/dB = G A^-T, dL/dA = -X^T (dL/dB).
    Both summed back over the batch dims that broadcasting added."""

    @staticmethod
    def forward(ctx, a, b, left, vector):
        ctx.shapes, ctx.left, ctx.vector = (a.shape, b.shape), left, vector
        bm = b[..., None] if vector else b
        with np.errstate(all="ignore"):
            if left:
                x, info = solve_ex_array(a, bm)
            else:
                x, info = solve_ex_array(mT(a), mT(bm))
                x = mT(x)
        ctx.save_for_backward(a, x)
        ctx.mark_non_differentiable(info)
        return (x[..., 0] if vector else x), info

    @staticmethod
    def backward(ctx, g, ginfo):
        a, x = ctx.saved_tensors
        sa, sb = ctx.shapes
        g = g[..., None] if ctx.vector else g
        with np.errstate(all="ignore"):
            if ctx.left:
                gb = solve_ex_array(mT(a), g)[0]
                ga = -(gb @ mT(x))
            else:
                gb = mT(solve_ex_array(a, mT(g))[0])
                ga = -(mT(x) @ gb)
        gb = gb[..., 0] if ctx.vector else gb
        return unbroadcast(ga, sa), unbroadcast(gb, sb), None, None


class SolveTriangular(Function):
    """X with AX = B (left) or XA = B for the upper or lower triangle of A (unit diagonal when
    ``unit``). Gradients as SolveEx's, with dL/dA kept on the triangle read: triu/tril, and
    without the diagonal for a unit triangle."""

    @staticmethod
    def forward(ctx, a, b, upper, left, unit):
        ctx.shapes, ctx.flags = (a.shape, b.shape), (upper, left, unit)
        x = tri_solve_array(a, b, upper, unit) if left else mT(tri_solve_array(mT(a), mT(b), not upper, unit))
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        upper, left, unit = ctx.flags
        if left:    # A^T gB = G
            gb = tri_solve_array(mT(a), g, not upper, unit)
            ga = -(gb @ mT(x))
        else:       # gB A^T = G, i.e. A gB^T = G^T
            gb = mT(tri_solve_array(a, mT(g), upper, unit))
            ga = -(mT(x) @ gb)
        ga = np.triu(ga, int(unit)) if upper else np.tril(ga, -int(unit))
        return unbroadcast(ga, ctx.shapes[0]), unbroadcast(gb, ctx.shapes[1]), None, None, None


# the torch.linalg functions -------------------------------------------------------------------
def det(A):
    """det(A) of a (*, n, n) tensor, as torch.linalg.det (1 for 0 x 0 matrices)."""
    check_square("linalg.det", A)
    return Det.apply(A)


def slogdet(A):
    """(sign, logabsdet) with det(A) = sign * exp(logabsdet), as torch.linalg.slogdet; a singular
    A gives (0, -inf)."""
    check_square("linalg.slogdet", A)
    return linalg_slogdet(*SlogDet.apply(A))


def _inv_message(i):
    return (f"The diagonal element {i} is zero, the inversion could not be completed because the input matrix is "
            "singular.")


def inv_ex(A, *, check_errors=False):
    """(inverse, info) as torch.linalg.inv_ex: info (int32, one per matrix) is the 1-based index
    of the zero pivot of a singular matrix (0: invertible), whose inverse then holds inf/NaN."""
    check_square("linalg.inv_ex", A)
    y, info = InvEx.apply(A)
    if check_errors:
        raise_for_info("linalg.inv_ex", info.numpy(force=True), _inv_message)
    return linalg_inv_ex(y, info)


def inv(A):
    """A^-1 of a (*, n, n) tensor, as torch.linalg.inv; LinAlgError for a singular matrix."""
    check_square("linalg.inv", A)
    y, info = InvEx.apply(A)
    raise_for_info("linalg.inv", info.numpy(force=True), _inv_message)
    return y


def _solve(op, A, B, left):
    check_square(op, A)
    check_cpu(op, B)
    check_same_dtype(op, A, B)
    # B is a batch of vectors when it is 1-D or has exactly A's shape without the last dim
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    check_rhs(op, A, B.unsqueeze(-1) if vector else B, left)
    return SolveEx.apply(A, B, left, vector)


def solve_ex(A, B, *, left=True, check_errors=False):
    """(result, info) as torch.linalg.solve_ex: info > 0 marks a singular A (its result inf/NaN)."""
    x, info = _solve("linalg.solve_ex", A, B, left)
    if check_errors:
        raise_for_info("linalg.solve_ex", info.numpy(force=True),
                       lambda i: "The solver failed because the input matrix is singular.")
    return linalg_solve_ex(x, info)


def solve(A, B, *, left=True):
    """X with AX = B (XA = B when left=False), as torch.linalg.solve. A (*, n, n); B (*, n, k), or
    a batch of vectors (*, n) (1-D, or A's shape without its last dim); batch dims broadcast.
    LinAlgError for a singular A."""
    x, info = _solve("linalg.solve", A, B, left)
    raise_for_info("linalg.solve", info.numpy(force=True),
                   lambda i: "The solver failed because the input matrix is singular.")
    return x


def solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """X with AX = B (XA = B when left=False) for triangular A, as torch.linalg.solve_triangular:
    only A's upper (or lower) triangle is read, its diagonal taken as ones when unitriangular.
    A zero on the diagonal gives inf/NaN, not an error."""
    op = "linalg.solve_triangular"
    check_square(op, A)
    check_cpu(op, B)
    check_same_dtype(op, A, B)
    check_rhs(op, A, B, left)
    return SolveTriangular.apply(A, B, bool(upper), bool(left), bool(unitriangular))
