"""Factorisations and what they solve: torch.linalg's cholesky, lu_factor, lu, lu_solve and
matrix_exp, and torch's cholesky_solve, cholesky_inverse and lu_unpack, with closed-form backward.

The forwards are NumPy's LAPACK (np.linalg.cholesky, np.linalg.solve) and the LU with partial
pivoting of linalg_solve.py. The backwards, for real matrices:

- cholesky (A = L L^T, Murray 2016, arXiv:1602.07527): with Phi(X) the lower triangle of X with its
  diagonal halved, dL/dA = L^-T Phi(L^T G) L^-1, symmetrised (only the symmetric part of dA
  moves L): dL/dA = 1/2 L^-T (P + P^T - diag P) L^-1 with P = tril(L^T G), as PyTorch's.
- cholesky_solve (X = (L L^T)^-1 B): dL/dB = (L L^T)^-1 G and, from d(L L^T) = dL L^T + L dL^T,
  dL/dL = -(C + C^T) L with C = (dL/dB) X^T (for U^T U: -U (C + C^T)).
- lu_factor (A = P L U): from dA = P (dL U + L dU), where L^-1 dL is strictly lower and dU U^-1
  upper, dL/dA = P L^-T [tril(L^T G_L, -1) + triu(G_U U^T)] U^-T for square A; wide and tall A
  (m != n) split U or L into their square and rectangular blocks (``lu_backward_array``).
- lu_solve: the gradient of solve with respect to A = P L U, passed back to the packed LU through
  dA = P (dL U + L dU): dL/dL = tril(P^T G_A U^T, -1), dL/dU = triu(L^T P^T G_A).
- matrix_exp: the Frechet derivative of exp at A applied to G sits in the upper right block of
  exp([[A^T, G], [0, A^T]]) (Mathias 1996), which is dL/dA.
"""
import math
from collections import namedtuple

import numpy as np

from ..autograd.op_function import Function
from ..tensor.tensor import Tensor
from ._broadcast import unbroadcast
from .linalg_solve import (LinAlgError, broadcast_batch, check_cpu, check_float, check_rhs, check_same_dtype,
                           check_square, lu_factor_array, lu_solve_array, mT, permutation_array, permutation_matrix,
                           raise_for_info, tri_solve_array)
from .shape_error import broadcast_shape

linalg_cholesky_ex = namedtuple("linalg_cholesky_ex", ("L", "info"))
linalg_lu_factor = namedtuple("linalg_lu_factor", ("LU", "pivots"))
linalg_lu_factor_ex = namedtuple("linalg_lu_factor_ex", ("LU", "pivots", "info"))
linalg_lu = namedtuple("linalg_lu", ("P", "L", "U"))
lu_unpack_result = namedtuple("lu_unpack", ("P", "L", "U"))


# Cholesky -------------------------------------------------------------------------------------
def _potf2(a):
    """LAPACK's unblocked Cholesky of the lower triangle, column by column, stopping at the first
    pivot that is not positive (info, 1-based; that pivot is left as computed and the columns after
    it hold the input, as potf2 leaves them)."""
    n = a.shape[-1]
    low = np.tril(a).reshape(math.prod(a.shape[:-2]), n, n).copy()
    info = np.zeros(low.shape[0], np.int32)
    active = np.ones(low.shape[0], bool)
    for j in range(n):
        ajj = low[:, j, j] - np.einsum("bk,bk->b", low[:, j, :j], low[:, j, :j])
        bad = active & ~(ajj > 0)
        info[bad], low[bad, j, j] = j + 1, ajj[bad]
        active &= ~bad
        r = np.sqrt(np.where(active, ajj, 1))
        col = (low[:, j + 1:, j] - np.einsum("bik,bk->bi", low[:, j + 1:, :j], low[:, j, :j])) / r[:, None]
        low[active, j, j], low[active, j + 1:, j] = r[active], col[active]
    return low.reshape(a.shape), info.reshape(a.shape[:-2])


def cholesky_ex_array(a, upper):
    """(L, info), L lower with A = L L^T from A's lower triangle, or U = L^T upper with A = U^T U
    from A's upper triangle."""
    src = mT(a) if upper else a     # A's upper triangle is A^T's lower one
    try:
        low, info = np.linalg.cholesky(src), np.zeros(a.shape[:-2], np.int32)
    except np.linalg.LinAlgError:
        low, info = _potf2(src)
    return (mT(low) if upper else low), info


class CholeskyEx(Function):
    """(L, info) with A = L L^T (A = U^T U when ``upper``); the backward is Murray's, as the
    module docstring derives."""

    @staticmethod
    def forward(ctx, a, upper):
        factor, info = cholesky_ex_array(a, upper)
        ctx.upper = upper
        ctx.save_for_backward(factor)
        ctx.mark_non_differentiable(info)
        return factor, info

    @staticmethod
    def backward(ctx, g, ginfo):
        low, = ctx.saved_tensors
        if ctx.upper:
            low, g = mT(low), mT(g)
        phi = np.tril(mT(low) @ g)
        phi = 0.5 * (phi + mT(np.tril(phi, -1)))
        x = tri_solve_array(mT(low), phi, upper=True)                 # L^-T Phi
        return mT(tri_solve_array(mT(low), mT(x), upper=True)), None      # (L^-T Phi) L^-1


def _cholesky_message(i):
    return ("The factorization could not be completed because the input is not positive-definite (the leading "
            f"minor of order {i} is not positive-definite).")


def cholesky_ex(A, *, upper=False, check_errors=False):
    """(L, info) as torch.linalg.cholesky_ex: info (int32, one per matrix) is the order of the
    first leading minor that is not positive-definite (0: the factorisation succeeded)."""
    check_square("linalg.cholesky_ex", A)
    factor, info = CholeskyEx.apply(A, bool(upper))
    if check_errors:
        raise_for_info("linalg.cholesky_ex", info.numpy(force=True), _cholesky_message)
    return linalg_cholesky_ex(factor, info)


def cholesky(A, *, upper=False):
    """The Cholesky factor of a symmetric positive-definite A (*, n, n), as torch.linalg.cholesky:
    lower L with A = L L^T from A's lower triangle, or upper U with A = U^T U from its upper one.
    LinAlgError where A is not positive-definite."""
    check_square("linalg.cholesky", A)
    factor, info = CholeskyEx.apply(A, bool(upper))
    raise_for_info("linalg.cholesky", info.numpy(force=True), _cholesky_message)
    return factor


def cholesky_solve_array(b, factor, upper):
    """(L L^T)^-1 B from L's lower triangle, or (U^T U)^-1 B from U's upper one."""
    low = mT(np.triu(factor)) if upper else np.tril(factor)
    return tri_solve_array(mT(low), tri_solve_array(low, b, upper=False), upper=True)


class CholeskySolve(Function):
    """X = (L L^T)^-1 B (or (U^T U)^-1 B) from the Cholesky factor's triangle; gradients as the
    module docstring derives (PyTorch's: dL/dL is the full matrix, both triangles)."""

    @staticmethod
    def forward(ctx, b, factor, upper):
        x = cholesky_solve_array(b, factor, upper)
        ctx.shapes, ctx.upper = (b.shape, factor.shape), upper
        ctx.save_for_backward(factor, x)
        return x

    @staticmethod
    def backward(ctx, g):
        factor, x = ctx.saved_tensors
        gb = cholesky_solve_array(g, factor, ctx.upper)
        c = gb @ mT(x)
        c = c + mT(c)
        gl = -(factor @ c) if ctx.upper else -(c @ factor)
        return unbroadcast(gb, ctx.shapes[0]), unbroadcast(gl, ctx.shapes[1]), None


def cholesky_solve(B, L, upper=False):
    """X with (L L^T) X = B (U^T U X = B when upper) for a Cholesky factor L (*, n, n) and B
    (*, n, k), batch dims broadcasting, as torch.cholesky_solve."""
    check_cpu("cholesky_solve", B, L)
    if B.ndim < 2:
        raise RuntimeError(f"cholesky_solve: b should have at least 2 dimensions, but has {B.ndim} dimensions instead")
    check_square("cholesky_solve", L)
    check_same_dtype("cholesky_solve", B, L)
    if B.shape[-2] != L.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {L.shape[-1]} by "
                           f"{L.shape[-1]} but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    broadcast_shape("cholesky_solve", B.shape[:-2], L.shape[:-2], "B", "L")
    return CholeskySolve.apply(B, L, bool(upper))


def cholesky_inverse(L, upper=False):
    """(L L^T)^-1 (or (U^T U)^-1) from a Cholesky factor, as torch.cholesky_inverse: cholesky_solve
    with B = I, whose gradient is then -(Y (G + G^T) Y) L with Y the inverse."""
    check_square("cholesky_inverse", L)
    eye = Tensor._wrap(np.eye(L.shape[-1], dtype=L._data.dtype), None, 0)
    return CholeskySolve.apply(eye, L, bool(upper))


# LU ---------------------------------------------------------------------------------------
def unpack_array(lu):
    """(L, U) of a packed (*, m, n) LU: L (*, m, k) unit lower, U (*, k, n) upper, k = min(m, n)."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    return np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=lu.dtype), np.triu(lu[..., :k, :])


def _right_solve_ut(u, y):
    """X with X U^T = Y for upper U (i.e. U X^T = Y^T)."""
    return mT(tri_solve_array(u, mT(y), upper=True))


def lu_backward_array(gl, gu, P, low, up):
    """dL/dA for A = P L U from dL/dL (strictly lower) and dL/dU (upper), as PyTorch's
    linalg_lu_backward. Square: P L^-T [tril(L^T G_L, -1) + triu(G_U U^T)] U^-T. Wide (m < n, U = [U1
    U2]): P L^-T [tril(L^T G_L - G_U U^T, -1) U1^-T + G_U1, G_U2]. Tall (m > n, L = [L1; L2]):
    P [L1^-T triu(G_U U^T - L^T G_L) + G_L1; G_L2] U^-T."""
    m, k = low.shape[-2:]
    n = up.shape[-1]
    if m == n:
        phi = np.tril(mT(low) @ gl, -1) + np.triu(gu @ mT(up))
        ga = tri_solve_array(mT(low), _right_solve_ut(up, phi), upper=True, unit=True)
    elif m < n:
        phi = np.tril(mT(low) @ gl - gu @ mT(up), -1)
        top = _right_solve_ut(up[..., :, :k], phi) + gu[..., :, :k]
        ga = tri_solve_array(mT(low), np.concatenate([top, gu[..., :, k:]], axis=-1), upper=True, unit=True)
    else:
        phi = np.triu(gu @ mT(up) - mT(low) @ gl)
        top = tri_solve_array(mT(low[..., :k, :]), phi, upper=True, unit=True) + gl[..., :k, :]
        ga = _right_solve_ut(up, np.concatenate([top, gl[..., k:, :]], axis=-2))
    return P @ ga


class LUFactorEx(Function):
    """(LU, pivots, info) with P A = L U packed as LAPACK's getrf; the gradient reaches A through
    the strictly lower part (L) and the upper part (U) of LU (``lu_backward_array``)."""

    @staticmethod
    def forward(ctx, a):
        lu, piv, info = lu_factor_array(a)
        ctx.save_for_backward(lu, piv)
        ctx.mark_non_differentiable(piv, info)
        return lu, piv, info

    @staticmethod
    def backward(ctx, g, gpiv, ginfo):
        lu, piv = ctx.saved_tensors
        m, n = lu.shape[-2:]
        k = min(m, n)
        low, up = unpack_array(lu)
        P = permutation_matrix(piv, m, lu.dtype)
        return lu_backward_array(np.tril(g[..., :, :k], -1), np.triu(g[..., :k, :]), P, low, up)


def _check_lu_input(op, A):
    check_cpu(op, A)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} instead")
    check_float(op, A)


def _check_pivot(op, pivot):
    if not pivot:
        raise RuntimeError(f"{op}: LU without pivoting is not implemented on the CPU")


def _lu_message(i):
    return (f"U[{i},{i}] is zero and using it on lu_solve would result in a division by zero. If you still want to "
            "perform the factorization, consider calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor_ex(A, *, pivot=True, check_errors=False):
    """(LU, pivots, info) of A (*, m, n), as torch.linalg.lu_factor_ex: P A = L U with L unit
    lower (below LU's diagonal) and U upper; pivots (int32, 1-based) the rows swapped in turn;
    info the 1-based index of U's first zero diagonal entry (0: none)."""
    _check_lu_input("linalg.lu_factor_ex", A)
    _check_pivot("linalg.lu_factor_ex", pivot)
    lu, piv, info = LUFactorEx.apply(A)
    if check_errors:
        raise_for_info("linalg.lu_factor_ex", info.numpy(force=True), _lu_message)
    return linalg_lu_factor_ex(lu, piv, info)


def lu_factor(A, *, pivot=True):
    """(LU, pivots) as torch.linalg.lu_factor; LinAlgError where U has a zero on its diagonal."""
    _check_lu_input("linalg.lu_factor", A)
    _check_pivot("linalg.lu_factor", pivot)
    lu, piv, info = LUFactorEx.apply(A)
    raise_for_info("linalg.lu_factor", info.numpy(force=True), _lu_message)
    return linalg_lu_factor(lu, piv)


def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    """(P, L, U) from lu_factor's (LU, pivots), as torch.lu_unpack: L = tril(LU, -1) + I (m x k),
    U = triu(LU) (k x n), P the permutation matrix with A = P L U; what is not unpacked is an empty
    tensor. L and U are slices and triangles of LU, so gradients pass through them."""
    check_cpu("lu_unpack", LU_data, LU_pivots)
    m, n = LU_data.shape[-2:]
    k = min(m, n)
    empty = Tensor._wrap(np.zeros(0, LU_data._data.dtype), None, 0)
    P = L = U = empty
    if unpack_data:
        from .rearrange import tril, triu
        eye = Tensor._wrap(np.eye(m, k, dtype=LU_data._data.dtype), None, 0)
        L = tril(LU_data[..., :, :k], -1) + eye
        U = triu(LU_data[..., :k, :])
    if unpack_pivots:
        if LU_pivots.dtype.name != "int32":
            raise RuntimeError(f"lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype. "
                               f"Note: this function is intended to be used with the output produced by "
                               f"torch.linalg.lu_factor; got {LU_pivots.dtype}")
        P = Tensor._wrap(permutation_matrix(LU_pivots._data, m, LU_data._data.dtype), None, 0)
    return lu_unpack_result(P, L, U)


def lu(A, *, pivot=True):
    """(P, L, U) with A = P L U, as torch.linalg.lu: lu_factor_ex unpacked (a singular A is no
    error), gradients through lu_factor's backward."""
    _check_lu_input("linalg.lu", A)
    _check_pivot("linalg.lu", pivot)
    lu_, piv, _ = LUFactorEx.apply(A)
    return linalg_lu(*lu_unpack(lu_, piv))


class LUSolve(Function):
    """X with A X = B, A^T X = B (adjoint), X A = B (left=False) or X A^T = B, for A = P L U given
    as (LU, pivots). dL/dB and dL/dA are solve's (module docstring of linalg_solve.py), and
    dL/dA reaches the packed LU as tril(P^T G_A U^T, -1) + triu(L^T P^T G_A)."""

    @staticmethod
    def forward(ctx, lu, piv, b, left, adjoint):
        x = lu_solve_array(lu, piv, b, adjoint) if left else mT(lu_solve_array(lu, piv, mT(b), not adjoint))
        ctx.flags, ctx.shapes = (left, adjoint), (lu.shape, b.shape)
        ctx.save_for_backward(lu, piv, x)
        return x

    @staticmethod
    def backward(ctx, g, *_):
        lu, piv, x = ctx.saved_tensors
        left, adjoint = ctx.flags
        if left:
            gb = lu_solve_array(lu, piv, g, not adjoint)
            ga = -(x @ mT(gb)) if adjoint else -(gb @ mT(x))
        else:
            gb = mT(lu_solve_array(lu, piv, mT(g), adjoint))
            ga = -(mT(gb) @ x) if adjoint else -(mT(x) @ gb)
        gl = None
        if ctx.needs_input_grad[0]:
            n = lu.shape[-1]
            lu_b, ga = broadcast_batch(lu, ga)
            perm = np.broadcast_to(permutation_array(piv, n), lu_b.shape[:-1])
            pga = np.take_along_axis(ga, perm[..., None], axis=-2)    # P^T G_A
            low, up = unpack_array(lu_b)
            gl = unbroadcast(np.tril(pga @ mT(up), -1) + np.triu(mT(low) @ pga), ctx.shapes[0])
        return gl, None, unbroadcast(gb, ctx.shapes[1]), None, None


def lu_solve(LU, pivots, B, *, left=True, adjoint=False):
    """X with A X = B (adjoint: A^T X = B; left=False: X A = B or X A^T = B) for A given by
    lu_factor's (LU, pivots), as torch.linalg.lu_solve; batch dims broadcast."""
    op = "linalg.lu_solve"
    check_square(op, LU, "LU")
    check_cpu(op, pivots, B)
    if pivots.dtype.name != "int32":
        raise RuntimeError(f"{op}: pivots should be a Tensor of scalar type int32, got {pivots.dtype}")
    if tuple(pivots.shape) != tuple(LU.shape[:-1]):
        raise RuntimeError(f"{op}: Expected LU.shape[:-1] == pivots.shape, got LU of shape {list(LU.shape)} "
                           f"and pivots of shape {list(pivots.shape)}")
    check_same_dtype(op, LU, B)
    check_rhs(op, LU, B, left)
    return LUSolve.apply(LU, pivots, B, bool(left), bool(adjoint))


# matrix exponential -------------------------------------------------------------------------------
# Higham's (2005) degree-13 Pade coefficients and the 1-norm up to which they are accurate in float64
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def expm_array(a):
    """exp(A) by scaling and squaring: A / 2^s with s the least making its 1-norm <= theta_13
    (per matrix), the [13/13] Pade approximant r(A) = (V - U)^-1 (V + U), then s squarings. Computed
    in float64 and returned in A's dtype."""
    out_dtype, a = a.dtype, a.astype(np.float64)
    n = a.shape[-1]
    if a.size == 0:
        return a.astype(out_dtype)
    norm = np.abs(a).sum(axis=-2).max(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.ceil(np.log2(norm / _THETA13))
    s = np.where(np.isfinite(s) & (s > 0), s, 0).astype(np.int64)
    a = a / np.ldexp(1.0, s)[..., None, None]
    b, eye = _PADE13, np.eye(n)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    for i in range(int(s.max(initial=0))):
        r = np.where((s > i)[..., None, None], r @ r, r)
    return r.astype(out_dtype)


class MatrixExp(Function):
    """exp(A) = sum A^k / k!; dL/dA = the upper right block of exp([[A^T, G], [0, A^T]])."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return expm_array(a)

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        n = a.shape[-1]
        at, g = broadcast_batch(mT(a), g)
        block = np.zeros(at.shape[:-2] + (2 * n, 2 * n), np.result_type(at, g))
        block[..., :n, :n] = block[..., n:, n:] = at
        block[..., :n, n:] = g
        return expm_array(block)[..., :n, n:].astype(a.dtype)


def matrix_exp(A):
    """exp(A) of a (*, n, n) tensor, as torch.linalg.matrix_exp."""
    check_square("linalg.matrix_exp", A)
    return MatrixExp.apply(A)


__all__ = ["LinAlgError", "cholesky", "cholesky_ex", "cholesky_solve", "cholesky_inverse", "lu_factor",
           "lu_factor_ex", "lu", "lu_unpack", "lu_solve", "matrix_exp"]
