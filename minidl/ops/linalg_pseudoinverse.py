"""What torch.linalg builds on the singular values: pinv, lstsq, matrix_rank and cond.

pinv and lstsq are Functions whose backward is PyTorch's: the derivative of the pseudo-inverse
(for lstsq's solution pinv(A) B; its residuals by the envelope theorem). cond composes
differentiable ops as PyTorch does (svdvals; inv_ex and matrix_norm), and matrix_rank counts
singular values (no gradient).

Tolerances follow PyTorch: a singular value s counts when s > max(atol, rtol * s_max), with
atol = 0 and rtol = eps(dtype) * max(m, n) when neither is given (rtol = 0 when only a positive
atol is), both taken in float64 and broadcast over the batch.
"""
import math
import numbers
from collections import namedtuple

import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ._broadcast import unbroadcast
from .linalg_decompositions import _T, check_cpu, check_input, svdvals, type_name
from .linalg_solve import autocast_casts

linalg_lstsq = namedtuple("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))

_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _md():
    import minidl
    return minidl


def _wrap(array):
    return _op_function.Tensor._wrap(np.asarray(array), None, 0)


def _as_float64(tol):
    if isinstance(tol, _op_function.Tensor):
        return tol.numpy(force=True).astype(np.float64)
    return np.float64(tol)


def tolerances(A, atol, rtol):
    """(atol, rtol) as float64 arrays, PyTorch's defaults filled in."""
    if atol is not None and rtol is not None:
        return _as_float64(atol), _as_float64(rtol)
    default_rtol = np.finfo(A.dtype.name).eps * max(A.shape[-1], A.shape[-2])
    if rtol is not None:
        return np.float64(0.0), _as_float64(rtol)
    if atol is None:
        return np.float64(0.0), np.float64(default_rtol)
    atol = _as_float64(atol)
    return atol, np.where(atol > 0, 0.0, default_rtol)


def _cutoff(S_max, atol, rtol):
    """max(atol, rtol * s_max) with a trailing axis to compare with the singular values."""
    return np.maximum(np.asarray(atol)[..., None], np.asarray(rtol)[..., None] * S_max)


# pinv -------------------------------------------------------------------------------------------
class Pinv(Function):
    """P = A^+, the Moore-Penrose pseudo-inverse: V diag(1/s) U^T over the singular values s
    above the cutoff (0 for the others); for a symmetric A (hermitian=True) V diag(1/lambda) V^T
    from its eigendecomposition, over |lambda| above the cutoff. Backward: pinv_backward
    (PyTorch's), the derivative of the pseudo-inverse of a matrix of constant rank, which needs
    neither distinct singular values nor the singular vectors."""

    @staticmethod
    def forward(ctx, A, atol, rtol, hermitian):
        if hermitian:
            L, V = np.linalg.eigh(A)
            absL = np.abs(L)
            keep = absL > _cutoff(absL.max(axis=-1, keepdims=True), atol, rtol)
            P = (V * _inverse_where(L, keep)[..., None, :]) @ _T(V)
        else:
            U, S, Vh = np.linalg.svd(A, full_matrices=False)
            keep = S > _cutoff(S[..., :1], atol, rtol)
            P = (_T(Vh) * _inverse_where(S, keep)[..., None, :]) @ _T(U)
        ctx.save_for_backward(A, P)
        return P

    @staticmethod
    def backward(ctx, g):
        A, P = ctx.saved_tensors
        return pinv_backward(g, P, A), None, None, None


def _inverse_where(S, keep):
    """1/S where ``keep``, 0 elsewhere."""
    keep = np.broadcast_to(keep, S.shape)
    return np.divide(1, S, out=np.zeros_like(S), where=keep)


def pinv(A, rcond=None, hermitian=False, *, atol=None, rtol=None):
    """torch.linalg.pinv: the Moore-Penrose pseudo-inverse of A over its singular values above
    max(atol, rtol * s_max); with hermitian=True, of the symmetric A from eigh (reading its
    lower triangle). ``rcond`` is PyTorch's older name of rtol."""
    _check_pinv_input("linalg.pinv", A)
    if rcond is not None:
        if rtol is not None:
            raise TypeError("linalg.pinv(): rcond and rtol are the same argument; give one of them")
        atol, rtol = (0.0 if atol is None else atol), rcond
    atol, rtol = tolerances(A, atol, rtol)
    if hermitian:
        check_input("linalg.eigh", A, "linalg_eigh_cpu", square=True)
    if A.numel() == 0:
        return _md().zeros(*A.shape[:-2], A.shape[-1], A.shape[-2], dtype=A.dtype)
    from ..amp.policy import lowers
    if lowers("cpu"):
        return _pinv_composed(A, atol, rtol, hermitian)
    return Pinv.apply(A, atol, rtol, bool(hermitian))


def _pinv_composed(A, atol, rtol, hermitian):
    """pinv as PyTorch composes it, which is what autocast sees: the decomposition (svd, or eigh
    with hermitian=True: float32 by their rule), 1/s over the values kept, then V diag(1/s) U^T as
    a matmul, which autocast lowers, so the result has the low dtype. Differentiable through the
    ops it is made of."""
    md = _md()
    if hermitian:
        S, U = md.linalg.eigh(A)
        V, magnitude = U, S.abs()
        s_max = magnitude.numpy(force=True).max(axis=-1, keepdims=True)
    else:
        U, S, Vh = md.linalg.svd(A, full_matrices=False)
        V, magnitude = Vh.mT, S
        s_max = S.numpy(force=True)[..., :1]
    keep = _wrap(magnitude.numpy(force=True) > _cutoff(s_max, atol, rtol))
    inverse = md.where(keep, S.reciprocal(), md.zeros((), dtype=S.dtype)).to(A.dtype)
    return md.matmul(V * inverse.unsqueeze(-2), U.mT)


def _check_pinv_input(op, A):
    Tensor = _op_function.Tensor
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}(): argument 'A' must be Tensor, not {type(A).__name__}")
    check_cpu(op, A)
    if A.ndim < 2 or A.dtype.name not in ("float32", "float64"):
        raise RuntimeError(f"{op}({type_name(A.dtype)}{{{list(A.shape)}}}): expected a tensor with 2 or more "
                           "dimensions of float, double, cfloat or cdouble types")


def pinv_backward(G, P, A):
    """dL/dA for P = pinv(A) from G = dL/dP, A of constant rank (Golub and Pereyra):

        dP = -P dA P + P P^T dA^T (I - A P) + (I - P A) dA^T P^T P
        gA = -P^T G P^T + (I - A P) G^T P P^T + P^T P G^T (I - P A)

    (the last two terms vanish where A is invertible, leaving the inverse's -P^T G P^T)."""
    Gt, Pt = _T(G), _T(P)
    AP, PA = A @ P, P @ A
    return -Pt @ G @ Pt + (Gt - AP @ Gt) @ (P @ Pt) + (Pt @ P) @ (Gt - Gt @ PA)


def _pinv_array(A, cutoff_rtol=None):
    """pinv of an array with PyTorch's default tolerance (or rtol ``cutoff_rtol``), and the
    singular values and rank it saw."""
    m, n = A.shape[-2], A.shape[-1]
    U, S, Vh = np.linalg.svd(A, full_matrices=False)
    rtol = np.finfo(A.dtype).eps * max(m, n) if cutoff_rtol is None else cutoff_rtol
    keep = S > rtol * S[..., :1] if S.shape[-1] else np.zeros(S.shape, bool)
    Sinv = np.divide(1, S, out=np.zeros_like(S), where=keep)
    return (_T(Vh) * Sinv[..., None, :]) @ _T(U), S, keep.sum(axis=-1)


# lstsq ------------------------------------------------------------------------------------------
class Lstsq(Function):
    """X minimizing ||A X - B||_F (the minimum-norm one where A lacks full rank), batched, with
    PyTorch's CPU drivers: "gels" (QR, A assumed of full rank), "gelsy", "gelsd", "gelss"
    (rank-revealing; here all three from the SVD, X = V diag(1/s) U^T B over s > rcond * s_max).

    Outputs: solution; residuals ||A X - B||^2 per column of B, for m > n, driver other than
    gelsy, and (for gelsd/gelss) every A of rank n, else empty; rank (int64, gelsy/gelsd/gelss,
    else empty); singular values (gelsd/gelss, else empty). rank and singular values are not
    differentiable.

    Backward (PyTorch's linalg_lstsq_backward): X = pinv(A) B, so gB = pinv(A)^T gX and gA is
    the derivative of the pseudo-inverse (pinv_backward) applied to gX B^T. The residuals
    r = ||A X - B||^2 at the minimizing X have, by the envelope theorem (dr/dX = 0 there),
    dr/dA = 2 (A X - B) X^T and dr/dB = -2 (A X - B), per column.
    """

    @staticmethod
    def forward(ctx, A, B, rcond, driver):
        m, n = A.shape[-2], A.shape[-1]
        batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        Ab = np.broadcast_to(A, batch + A.shape[-2:])
        rank, S = np.zeros((0,), dtype=np.int64), np.zeros((0,), dtype=A.dtype)   # gels computes neither
        if driver != "gels":
            P, S_all, rank = _pinv_array(A, rcond)
            rank = rank.astype(np.int64)
            if driver != "gelsy":
                S = S_all
        if m == 0:
            X = np.zeros(batch + (n, B.shape[-1]), dtype=A.dtype)
        elif driver == "gels":
            X = _gels(Ab, np.broadcast_to(B, batch + B.shape[-2:]))
        else:
            X = P @ B
        residuals = np.zeros((0,), dtype=A.dtype)
        ctx.residual = None
        if m > n and driver != "gelsy" and (driver == "gels" or bool(np.all(rank == n))):
            ctx.residual = Ab @ X - B
            residuals = (ctx.residual ** 2).sum(axis=-2)
        ctx.shapes = A.shape, B.shape
        ctx.save_for_backward(A, B, X)
        ctx.mark_non_differentiable(rank, S)
        return X, residuals, rank, S

    @staticmethod
    def backward(ctx, gX, gres, grank, gS):
        A, B, X = ctx.saved_tensors
        na, nb = ctx.needs_input_grad[:2]
        P = _pinv_array(A)[0]
        gA = pinv_backward(gX @ _T(B), P, A) if na else None
        gB = _T(P) @ gX if nb else None
        if ctx.residual is not None:
            W = 2 * ctx.residual * gres[..., None, :]
            gA = None if not na else gA + W @ _T(X)
            gB = None if not nb else gB - W
        return (None if gA is None else unbroadcast(gA, ctx.shapes[0]),
                None if gB is None else unbroadcast(gB, ctx.shapes[1]), None, None)


def _gels(A, B):
    """LAPACK gels: least squares by QR (m >= n) or the minimum-norm solution by the QR of A^T
    (m < n), A assumed of full rank; an exactly singular triangular factor is an error."""
    m, n = A.shape[-2], A.shape[-1]
    try:
        if m >= n:
            Q, R = np.linalg.qr(A)
            return np.linalg.solve(R, _T(Q) @ B) if n else np.zeros(A.shape[:-2] + (0, B.shape[-1]), A.dtype)
        Q, R = np.linalg.qr(_T(A))
        return Q @ np.linalg.solve(_T(R), B)
    except np.linalg.LinAlgError:
        raise RuntimeError("torch.linalg.lstsq: The least squares solution could not be computed because the input "
                           "matrix does not have full rank") from None


def _autocast_lstsq(A, B):
    """(A, B) as autocast hands them to lstsq: float16, bfloat16 and float32 operands cast to float32
    when its float32 rule for lstsq holds on their device (PyTorch casts before its dtype checks and
    before the default rcond, which is then float32's), else as they came."""
    if not autocast_casts("torch.linalg.lstsq", A):
        return A, B
    low = ("float16", "bfloat16", "float32")
    return tuple(t.to(_md().float32) if t.dtype.name in low else t for t in (A, B))


def lstsq(A, B, rcond=None, *, driver=None):
    """torch.linalg.lstsq: the named tuple (solution, residuals, rank, singular_values) of the
    least-squares problems min ||A X - B||, batched (batch dims broadcast); B of one dim fewer
    than A, with B.shape == A.shape[:-1] (or 1-D), is a batch of vectors. ``driver`` defaults
    to "gelsy", as PyTorch's on the CPU; ``rcond`` (default eps * max(m, n)) sets the rank."""
    Tensor = _op_function.Tensor
    check_cpu("linalg.lstsq", A, B)
    if not isinstance(A, Tensor) or not isinstance(B, Tensor):
        raise TypeError("linalg.lstsq(): arguments 'A' and 'B' must be Tensors, got "
                        f"{type(A).__name__} and {type(B).__name__}")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if B.ndim < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    A, B = _autocast_lstsq(A, B)
    if A.dtype != B.dtype:
        raise RuntimeError("torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {type_name(A.dtype)} and other's dtype {type_name(B.dtype)}")
    if A.dtype.name not in ("float32", "float64"):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if not 0 <= A.ndim - B.ndim <= 1:
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
    if A.ndim - B.ndim == 1 and not vector:
        raise RuntimeError(f"torch.linalg.lstsq: other of shape {list(B.shape)} is neither a batch of matrices nor "
                           f"a batch of vectors of shape input.shape[:-1] = {list(A.shape[:-1])}")
    B2 = B.unsqueeze(-1) if vector else B
    if A.shape[-2] != B2.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    driver = "gelsy" if driver is None else driver
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    eps = float(np.finfo(A.dtype.name).eps)
    rcond = eps * max(A.shape[-2], A.shape[-1]) if rcond is None else float(rcond)
    X, residuals, rank, S = Lstsq.apply(A, B2, eps if rcond < 0 else rcond, driver)
    return linalg_lstsq(X.squeeze(-1) if vector else X, residuals, rank, S)


# matrix_rank, cond ------------------------------------------------------------------------------
def matrix_rank(A, tol=None, hermitian=False, *, atol=None, rtol=None):
    """torch.linalg.matrix_rank: the number of singular values (|eigenvalues| with
    hermitian=True) above max(atol, rtol * s_max), as int64; ``tol`` is PyTorch's older
    spelling of atol (with rtol = 0). In float32 under autocast on the CPU, PyTorch's rule."""
    from ..amp.policy import run_composite
    return run_composite("linalg.matrix_rank", lambda a: _matrix_rank(a, tol, hermitian, atol, rtol), A)


def _matrix_rank(A, tol, hermitian, atol, rtol):
    check_cpu("linalg.matrix_rank", A)
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    if A.dtype.name not in ("float32", "float64"):
        raise RuntimeError("This function doesn't handle types other than float and double")
    if tol is not None:
        if atol is not None or rtol is not None:
            raise TypeError("linalg.matrix_rank(): tol is the older spelling of atol; give tol or atol/rtol")
        atol, rtol = tol, 0.0
    atol, rtol = tolerances(A, atol, rtol)
    a = A.numpy(force=True)
    if A.numel() == 0:
        return _wrap(np.zeros(A.shape[:-2], dtype=np.int64))
    if hermitian:
        check_input("linalg.eigh", A, "linalg_eigh_cpu", square=True)
        S = np.abs(np.linalg.eigvalsh(a))
        S_max = S.max(axis=-1, keepdims=True)
    else:
        S = np.linalg.svd(a, compute_uv=False)
        S_max = S[..., :1]
    return _wrap((S > _cutoff(S_max, atol, rtol)).sum(axis=-1).astype(np.int64))


_COND_ORDS = (2, -2, 1, -1, math.inf, -math.inf)


def cond(A, p=None):
    """torch.linalg.cond: the condition number of A in the norm ``p``: s_max / s_min for
    None and 2 (s_min / s_max for -2; A may be rectangular), sum(s) * sum(1/s) for "nuc", and
    ||A|| ||A^-1|| (inf where A is singular) for "fro", 1, -1, inf, -inf. An empty matrix has
    condition number 0. Differentiable through svdvals, linalg.inv_ex and matrix_norm."""
    md = _md()
    valid = p is None or p in ("fro", "nuc") or (isinstance(p, numbers.Real) and not isinstance(p, bool)
                                                  and p in _COND_ORDS)
    if not valid:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    check_cpu("linalg.cond", A)
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if p is None or (not isinstance(p, str) and abs(p) == 2):
        check_input("linalg.svd", A, "linalg_svd_cpu")
        if A.numel() == 0:
            return md.zeros(*A.shape[:-2], dtype=A.dtype)
        s = svdvals(A)
        s_max, s_min = s[..., 0], s[..., -1]
        with np.errstate(divide="ignore", invalid="ignore"):   # a singular A: inf, or NaN for A = 0, silently
            return s_min / s_max if p == -2 else s_max / s_min
    name = p if isinstance(p, str) else "inf" if p == math.inf else "-inf" if p == -math.inf else str(int(p))
    check_input(f"linalg.cond(ord={name})", A, "linalg_inv_cpu", square=True)
    if A.numel() == 0:
        return md.zeros(*A.shape[:-2], dtype=A.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        if p == "nuc":
            s = svdvals(A)
            return s.sum(-1) * (1.0 / s).sum(-1)
        inverse, info = md.linalg.inv_ex(A)            # a singular matrix's inverse: all inf, as PyTorch's
        inverse = md.where(info[..., None, None] > 0, md.full((), math.inf, dtype=A.dtype), inverse)
        norms = md.linalg.matrix_norm(A, p) * md.linalg.matrix_norm(inverse, p)
    return md.nan_to_num(norms, nan=math.inf, posinf=math.inf, neginf=-math.inf)   # 0 * inf
