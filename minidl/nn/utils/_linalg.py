"""The matrix functions the orthogonal parametrization needs (``parametrizations.orthogonal``):
PyTorch's ``torch.matrix_exp``, ``torch.linalg.solve`` and ``torch.linalg.householder_product``,
differentiable, over a batch of matrices (..., n, n) / (..., n, k).

``matrix_exp`` and ``solve`` are Functions with hand-written backwards (NumPy references below);
``householder_product`` is a composition of matmuls, so its gradient is theirs. They take CPU
tensors (the orthogonal parametrization computes on the host for a weight on another device).
"""
import math

import numpy as np

from ...autograd.function import Function
from ...ops._broadcast import unbroadcast

__all__ = ["matrix_exp", "solve", "householder_product"]

# Higham (2005), "The scaling and squaring method for the matrix exponential revisited": the
# [13/13] Pade approximant's coefficients, and the largest ||A||_1 for which it is accurate to
# double precision without scaling.
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _expm_one(a):
    """exp(a) of one square float64 matrix: scale a by 2^-s until ||a||_1 <= theta_13, take the
    [13/13] Pade approximant r(a) = (V - U)^-1 (V + U) (U the odd part, V the even part), then
    square s times (exp(a) = exp(a / 2^s)^(2^s))."""
    n = a.shape[-1]
    norm = np.abs(a).sum(axis=0).max() if n else 0.0
    if not np.isfinite(norm):
        return np.full_like(a, np.nan)
    s = max(0, math.ceil(math.log2(norm / _THETA13))) if norm > _THETA13 else 0
    a = a / 2.0 ** s
    b = _PADE13
    eye = np.eye(n)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


def _expm(a):
    """exp of each matrix of a batch (..., n, n), in float64 (each matrix with its own scaling)."""
    flat = a.reshape((-1,) + a.shape[-2:]).astype(np.float64)
    out = np.stack([_expm_one(m) for m in flat]) if flat.shape[0] else flat.copy()
    return out.reshape(a.shape)


class MatrixExp(Function):
    """Q = exp(A) = sum_k A^k / k!, for each matrix of a batch.

    Backward: dQ = sum_k 1/k! sum_{j<k} A^j dA A^(k-1-j), so for dL/dQ = G

        <G, dQ> = tr(G^T dQ) = tr( (sum_k 1/k! sum_j A^(k-1-j) G^T A^j) dA )
        dL/dA   = sum_k 1/k! sum_j (A^T)^j G (A^T)^(k-1-j) = L(A^T, G),

    the Frechet derivative of exp at A^T in the direction G, which is the upper-right block of
    exp([[A^T, G], [0, A^T]]) (the powers of that block-triangular matrix have exactly those
    sums in their corner). Both exponentials are taken in float64 and rounded to A's dtype.
    """

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return _expm(a).astype(a.dtype, copy=False)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        n = a.shape[-1]
        at = np.swapaxes(a, -1, -2).astype(np.float64)
        block = np.zeros(a.shape[:-2] + (2 * n, 2 * n))
        block[..., :n, :n] = at
        block[..., n:, n:] = at
        block[..., :n, n:] = g
        return _expm(block)[..., :n, n:].astype(a.dtype, copy=False)


class Solve(Function):
    """X = A^-1 B for each (A, B) of a batch (batch dims broadcast), as torch.linalg.solve
    with B a matrix (..., n, m).

    Backward: from A X = B, dA X + A dX = dB, so dX = A^-1 (dB - dA X) and for dL/dX = G

        <G, dX> = tr(G^T A^-1 dB) - tr(G^T A^-1 dA X)
        dL/dB   = A^-T G
        dL/dA   = -(A^-T G) X^T = -dL/dB X^T,

    each summed back over the batch dims that broadcasting added.
    """

    @staticmethod
    def forward(ctx, a, b):
        try:
            x = np.linalg.solve(a, b)
        except np.linalg.LinAlgError:
            raise RuntimeError("linalg.solve: The solver failed because the input matrix is singular.") from None
        ctx.save_for_backward(a, x)
        ctx.shapes = a.shape, b.shape
        return x.astype(np.result_type(a, b), copy=False)

    @staticmethod
    def backward(ctx, g):
        a, x = ctx.saved_tensors
        sa, sb = ctx.shapes
        gb = np.linalg.solve(np.swapaxes(a, -1, -2), g)
        ga = -(gb @ np.swapaxes(x, -1, -2)) if ctx.needs_input_grad[0] else None
        return (None if ga is None else unbroadcast(ga, sa).astype(a.dtype, copy=False),
                unbroadcast(gb, sb).astype(g.dtype, copy=False) if ctx.needs_input_grad[1] else None)


def _check_square(a, op):
    if a.device.type != "cpu":
        raise RuntimeError(f"{op}: expected a tensor on the CPU, got one on {a.device}")
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are "
                           f"{a.shape[-2] if a.ndim >= 2 else a.ndim} by {a.shape[-1] if a.ndim else 0} matrices")


def matrix_exp(a):
    """exp(A) of each square matrix of ``a`` (..., n, n), as torch.matrix_exp."""
    _check_square(a, "linalg.matrix_exp")
    return MatrixExp.apply(a)


def solve(a, b):
    """A^-1 B for square ``a`` (..., n, n) and ``b`` (..., n, m), as torch.linalg.solve for a
    matrix B (RuntimeError for a singular A)."""
    _check_square(a, "linalg.solve")
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({a.shape[-2]}x{a.shape[-1]} and {'x'.join(map(str, b.shape[-2:]))})")
    return Solve.apply(a, b)


def householder_product(a, tau):
    """The first k columns of H_1 H_2 ... H_k, H_i = I - tau_i v_i v_i^T, where v_i is column
    i of ``a`` (..., n, k) below the diagonal with a 1 on it and zeros above (the layout LAPACK's
    geqrf leaves), as torch.linalg.householder_product. Computed as E_k = I[:, :k] reflected by
    H_k, then H_(k-1), ... down to H_1 (Q = Q - tau_i v_i (v_i^T Q)); differentiable in ``a``
    and ``tau`` through those matmuls."""
    from ... import eye
    n, k = a.shape[-2], a.shape[-1]
    if n < k:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-2] must be greater than or equal to "
                           "input.shape[-1]")
    if tau.shape[-1] > k:
        raise RuntimeError("torch.linalg.householder_product: input.shape[-1] must be greater than or equal to "
                           "tau.shape[-1]")
    unit = eye(n, k, dtype=a.dtype, device=a.device)
    v = a.tril(-1) + unit        # the reflectors' vectors as columns
    q = unit
    for i in reversed(range(tau.shape[-1])):
        vi = v[..., :, i:i + 1]
        q = q - tau[..., i:i + 1].unsqueeze(-1) * (vi @ (vi.mT @ q))
    return q
