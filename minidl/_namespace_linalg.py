"""PyTorch's top-level linear-algebra functions (and their Tensor methods): det, logdet, slogdet,
inverse, matrix_power, matrix_exp, the Cholesky family (cholesky, cholesky_solve,
cholesky_inverse), the older LU interface (lu, lu_solve, lu_unpack), triangular_solve,
chain_matmul and vander. Installed by _namespace.py's tables like the rest.

Most are torch.linalg's functions under their older names and argument orders
(``torch.lu_solve(b, LU, pivots)`` is ``linalg.lu_solve(LU, pivots, b)``); the Functions and
their gradients are in ops/linalg_solve.py and ops/linalg_factor.py.
"""
import math
from collections import namedtuple

from . import linalg as _linalg
from .ops.linalg_factor import cholesky_inverse, cholesky_solve, lu_unpack

slogdet_result = namedtuple("slogdet", ("sign", "logabsdet"))
triangular_solve_result = namedtuple("triangular_solve", ("solution", "cloned_coefficient"))
lu_with_info_result = namedtuple("_lu_with_info", ("LU", "pivots", "info"))


def det(input):
    return _linalg.det(input)


def slogdet(input):
    """(sign, logabsdet) of det(input), as torch.slogdet."""
    return slogdet_result(*_linalg.slogdet(input))


def logdet(input):
    """log(det(input)), as torch.logdet: NaN where the determinant is negative, -inf where it is 0;
    the log|det| of slogdet elsewhere (its gradient input^-T)."""
    from .ops import where
    sign, logabsdet = _linalg.slogdet(input)
    return where(sign < 0, math.nan, logabsdet)


def inverse(input):
    """input^-1, as torch.inverse (torch.linalg.inv)."""
    return _linalg.inv(input)


def cholesky(input, upper=False):
    """The Cholesky factor, as the older torch.cholesky (torch.linalg.cholesky(input, upper=upper))."""
    return _linalg.cholesky(input, upper=upper)


def lu(A, pivot=True, get_infos=False):
    """(LU, pivots), or (LU, pivots, infos) with get_infos, as torch.lu: torch.linalg.lu_factor_ex,
    which without get_infos raises for a matrix with a zero pivot."""
    LU, pivots, info = _linalg.lu_factor_ex(A, pivot=pivot, check_errors=not get_infos)
    return lu_with_info_result(LU, pivots, info) if get_infos else (LU, pivots)


def lu_solve(b, LU_data, LU_pivots):
    """X with A X = b for A's (LU, pivots), as torch.lu_solve (torch.linalg.lu_solve(LU, pivots, b))."""
    return _linalg.lu_solve(LU_data, LU_pivots, b)


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """(X, A's copy) with op(A) X = b, op(A) = A^T when transpose, for triangular A, as
    torch.triangular_solve; in float32 under autocast on the CPU, PyTorch's rule."""
    from .amp.policy import run_composite

    def solve(b, A):
        At = A.transpose(-2, -1) if transpose else A
        X = _linalg.solve_triangular(At, b, upper=upper != bool(transpose), unitriangular=unitriangular)
        return triangular_solve_result(X, A.clone())
    return run_composite("triangular_solve", solve, b, A)


def chain_matmul(*matrices):
    """The product of 2-D matrices in the cheapest order, as torch.chain_matmul (linalg.multi_dot)."""
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    if len(matrices) == 1:
        if matrices[0].ndim != 2:
            raise RuntimeError(f"chain_matmul(): Tensor dimension is {matrices[0].ndim}, expected 2 instead.")
        return matrices[0].clone()
    return _linalg.multi_dot(matrices)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-D x, as torch.vander: columns x^(N-1), ..., x, 1 (x^0 first when
    increasing); N defaults to len(x)."""
    import minidl
    if x.ndim != 1:
        raise RuntimeError(f"vander: x must be a one-dimensional tensor, got {x.ndim}-D")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError(f"vander: N must be non-negative, got {n}")
    dtype = x.dtype if x.dtype.is_floating_point else minidl.int64
    if n <= 1:
        out = minidl.ones((x.shape[0], n), dtype=dtype, device=x.device)
    else:
        out = _linalg.vander(x.to(dtype), N=n)
    return out if increasing else out.flip(-1)


BOTH = {
    "det": det, "logdet": logdet, "slogdet": slogdet, "inverse": inverse, "matrix_power": _linalg.matrix_power,
    "matrix_exp": _linalg.matrix_exp, "cholesky": cholesky, "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse, "lu": lu, "lu_solve": lu_solve, "triangular_solve": triangular_solve,
}

# module level only: torch has no Tensor method of these names
MODULE_ONLY = {"lu_unpack": lu_unpack, "chain_matmul": chain_matmul, "vander": vander}

# Tensor methods only
METHODS_ONLY = {}
