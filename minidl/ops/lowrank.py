"""Randomized low-rank SVD and PCA, as torch.svd_lowrank and torch.pca_lowrank (Halko,
Martinsson and Tropp, "Finding structure with randomness", 2009, algorithms 4.4 and 5.1).

A (m, n) has an approximate orthonormal basis Q (m, q) of its range: Q spans A R for a random
Gaussian R (n, q), sharpened by ``niter`` power iterations (alternately re-orthonormalised
bases of A^T Q and A Q, which weight the leading singular directions by sigma^(2 niter + 1)).
Then A ~ Q Q^T A = Q B with B = Q^T A (q, n) small, and B's SVD U_B S V^T gives A ~ (Q U_B) S V^T.
It is exact when A has rank <= q (up to rounding), and for a matrix whose singular values fall
off fast it finds the leading ones at the cost of a few products with A.

Everything composes minidl's differentiable ops (matmul, linalg.qr, linalg.svd), so gradients
flow through the computation as PyTorch's do. The draw uses the global generator (md.randn),
so md.manual_seed makes it repeatable.
"""
from ..tensor.tensor import Tensor


def _md():
    import minidl
    return minidl


def _floating(A):
    return A if A.dtype.is_floating_point else A.to(_md().get_default_dtype())


def get_approximate_basis(A, q, niter=2, M=None):
    """An orthonormal Q (..., m, q) whose span approximates the range of A - M (M: None or A's
    shape); see the module docstring."""
    md = _md()
    niter = 2 if niter is None else niter
    R = md.randn(A.shape[-1], q, dtype=A.dtype, device=A.device)

    def times(X):    # (A - M) X, without forming A - M
        return A.matmul(X) if M is None else A.matmul(X) - M.matmul(X)

    def times_t(X):  # (A - M)^T X
        return A.mT.matmul(X) if M is None else A.mT.matmul(X) - M.mT.matmul(X)

    Q = md.linalg.qr(times(R)).Q
    for _ in range(niter):
        Q = md.linalg.qr(times_t(Q)).Q
        Q = md.linalg.qr(times(Q)).Q
    return Q


def _svd_lowrank(A, q, niter, M):
    m, n = A.shape[-2:]
    if M is not None:
        M = M.broadcast_to(A.shape)
    if m < n:   # work with the taller of A and A^T: Q has q columns of the long side
        A = A.mT
        M = None if M is None else M.mT
    Q = get_approximate_basis(A, q, niter, M)
    B = Q.mT.matmul(A)
    if M is not None:
        B = B - Q.mT.matmul(M)
    U, S, Vh = _md().linalg.svd(B, full_matrices=False)
    U, V = Q.matmul(U), Vh.mT
    return (V, S, U) if m < n else (U, S, V)


def svd_lowrank(A, q=6, niter=2, M=None):
    """(U (..., m, q), S (..., q), V (..., n, q)) with A - M ~ U diag(S) V^T, the rank-q
    randomized SVD of A (M: None, or a matrix broadcast to A's shape that is subtracted)."""
    if not isinstance(A, Tensor):
        raise TypeError(f"svd_lowrank(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"svd_lowrank: expected a matrix or a batch of matrices, got a {A.ndim}-D tensor")
    return _svd_lowrank(_floating(A), 6 if q is None else q, niter, M)


def pca_lowrank(A, q=None, center=True, niter=2):
    """(U, S, V) of the randomized SVD of A centred on its column means (``center``): the
    principal directions are V's columns, the components' variances S**2 / (m - 1); ``q`` (at
    most min(m, n); 6 or less by default) is how many are kept."""
    if not isinstance(A, Tensor):
        raise TypeError(f"pca_lowrank(): argument 'A' must be Tensor, not {type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"pca_lowrank: expected a matrix or a batch of matrices, got a {A.ndim}-D tensor")
    m, n = A.shape[-2:]
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    A = _floating(A)
    if not center:
        return _svd_lowrank(A, q, niter, None)
    return _svd_lowrank(A - A.mean(dim=-2, keepdim=True), q, niter, None)
