"""The matrix decompositions of torch.linalg: qr, eigh/eigvalsh and svd/svdvals, batched over
leading dims, for real floating tensors on the CPU.

The forward is NumPy's LAPACK (np.linalg.qr, eigh, svd), so values are LAPACK's, as PyTorch's
are; each backward is PyTorch's closed form (svd_backward, linalg_eig_backward for a
symmetric matrix, linalg_qr_backward), derived in the Function's docstring. ``A^T`` is the
transpose of the last two dims, ``*`` an elementwise product and ``/`` an elementwise quotient.

Eigenvectors and singular vectors are determined only up to sign (and, where eigenvalues or
singular values repeat, up to a rotation of their subspace). The gradients are those of losses
that do not depend on that choice (a function of the eigenvalues, of V diag(L) V^T, of
U diag(S) V^T, of |U|...); for any other loss no gradient is well defined, as PyTorch's
documentation says. They divide by differences of eigenvalues (squared singular values), so they
are finite only where these are distinct.

linalg.eig and linalg.eigvals return complex tensors in PyTorch, even for a real matrix;
minidl has no complex dtype, so they raise NotImplementedError.
"""
from collections import namedtuple

import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..tensor.dtype import LEGACY_TYPE_NAMES
from .linalg_solve import autocast_casts

return_types = {
    "linalg_qr": namedtuple("linalg_qr", ("Q", "R")),
    "linalg_eigh": namedtuple("linalg_eigh", ("eigenvalues", "eigenvectors")),
    "linalg_svd": namedtuple("linalg_svd", ("U", "S", "Vh")),
}


def _T(x):
    return np.swapaxes(x, -1, -2)


def type_name(dtype):
    """PyTorch's name of a dtype in its messages: "Long" for int64, "Float" for float32."""
    return LEGACY_TYPE_NAMES.get(dtype.name, dtype.name)


def check_input(op, A, kernel, name="A", square=False):
    """The checks every decomposition makes, in PyTorch's words: a Tensor on the CPU (the
    forward is NumPy's LAPACK), at least 2 dims, a float32 or float64 dtype (float16 and
    bfloat16 have no LAPACK routines: NotImplementedError naming ``kernel``, as PyTorch's, unless
    autocast casts them to float32 for ``op``)."""
    Tensor = _op_function.Tensor
    if not isinstance(A, Tensor):
        raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(A).__name__}")
    check_cpu(op, A)
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions.")
    if A.dtype.kind != "f" and A.dtype.name != "bfloat16":
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {type_name(A.dtype)}")
    if A.dtype.name not in ("float32", "float64") and not (A.dtype.name in ("float16", "bfloat16")
                                                          and autocast_casts(op, A)):
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(A.dtype)}'")
    if square and A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")


def check_cpu(op, *tensors):
    for t in tensors:
        if isinstance(t, _op_function.Tensor) and t.device.type != "cpu":
            raise NotImplementedError(f"{op} is not implemented for device '{t.device}': minidl's decompositions "
                                      f"run NumPy's LAPACK on the CPU; move the input with .cpu() first")


def _skew(X):
    return X - _T(X)


# QR -------------------------------------------------------------------------------------------
class QR(Function):
    """A = Q R, Q with orthonormal columns, R upper triangular (np.linalg.qr: LAPACK's geqrf
    and orgqr, PyTorch's too). mode "reduced": Q is m x k and R k x n, k = min(m, n);
    "complete": Q is m x m and R m x n; "r": R alone (Q is an empty tensor).

    Backward, for m >= n (Q m x n, R n x n square and invertible). From dA = dQ R + Q dR,
    Q^T dA R^-1 = Q^T dQ + dR R^-1, where dR R^-1 is upper triangular and, on the span of Q,
    Q^T dQ is skew, so both are fixed by the strictly lower triangle of Q^T dA R^-1 (and dQ has
    the further part (I - Q Q^T) dA R^-1). Collecting <gQ, dQ> + <gR, dR> as <gA, dA> gives

        M  = R gR^T - gQ^T Q
        gA = (gQ + Q copyltu(M)) R^-T,      copyltu(M) = tril(M) + tril(M, -1)^T

    (copyltu mirrors the lower triangle onto the upper one). For m < n, write A = [X | Y] and
    R = [U | V] with X, U square: X = Q U is the square case and Y = Q V, so V = Q^T Y; the
    gradient reaching Q through V is Y gV^T, hence

        gX = square case with gQ + Y gV^T and gU,    gY = Q gV.

    mode "complete" with m > n leaves the last m - n columns of Q undetermined (any orthonormal
    completion will do), and mode "r" drops Q, on which the gradient depends: both backward
    passes raise RuntimeError, as PyTorch's.
    """

    @staticmethod
    def forward(ctx, A, mode):
        ctx.mode = mode
        if mode == "r":
            return np.empty((0,), dtype=A.dtype), np.linalg.qr(A, mode="r")
        Q, R = np.linalg.qr(A, mode=mode)
        ctx.save_for_backward(Q, R)
        return Q, R

    @staticmethod
    def backward(ctx, gQ, gR):
        if ctx.mode == "r":
            raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
                               "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
                               "linalg.qr.")
        Q, R = ctx.saved_tensors
        m, n = Q.shape[-2], R.shape[-1]
        if ctx.mode == "complete" and m > n:
            raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
        if m >= n:
            return _qr_square_backward(gQ, gR, Q, R), None
        U, V = R[..., :m], R[..., m:]
        gU, gV = gR[..., :m], gR[..., m:]
        gX = _qr_square_backward(gQ + Q @ V @ _T(gV), gU, Q, U)   # Y = Q V
        return np.concatenate([gX, Q @ gV], axis=-1), None


def _qr_square_backward(gQ, gR, Q, R):
    """(gQ + Q copyltu(R gR^T - gQ^T Q)) R^-T for a square, invertible R."""
    M = R @ _T(gR) - _T(gQ) @ Q
    M = np.tril(M) + _T(np.tril(M, -1))
    B = gQ + Q @ M
    if B.shape[-1] == 0:
        return B
    return _T(np.linalg.solve(R, _T(B)))   # B R^-T: solve R Z = B^T


def qr(A, mode="reduced"):
    """torch.linalg.qr: the named tuple (Q, R) with A = Q R, for ``mode`` "reduced" (default),
    "complete" or "r" (R only; Q is an empty tensor)."""
    check_input("linalg.qr", A, "geqrf_cpu")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    return return_types["linalg_qr"](*QR.apply(A, mode))


# eigh -----------------------------------------------------------------------------------------
class Eigh(Function):
    """A = V diag(L) V^T for a symmetric A: the eigenvalues L in ascending order and orthonormal
    eigenvectors V (np.linalg.eigh: LAPACK's syevd, reading only the triangle ``UPLO`` names).

    Backward (PyTorch's linalg_eig_backward for a Hermitian matrix). For a symmetric
    perturbation dA, V^T dA V = Omega diag(L) - diag(L) Omega + diag(dL) with Omega = V^T dV
    skew, so dL = diag(V^T dA V) and Omega_ij = (V^T dA V)_ij / E_ij off the diagonal, with
    E_ij = L_j - L_i. Collecting <gL, dL> + <gV, V Omega> as <gA, dA>, and keeping the part of
    V^T gV that Omega can see (its skew part, which makes gA symmetric):

        gA = V (skew(V^T gV) / (2 E) + diag(gL)) V^T          (the diagonal of 1/E taken as 0)

    gA is the symmetric matrix PyTorch returns, not restricted to the triangle that was read.
    """

    @staticmethod
    def forward(ctx, A, UPLO):
        L, V = np.linalg.eigh(A, UPLO=UPLO)
        ctx.save_for_backward(L, V)
        return L, V

    @staticmethod
    def backward(ctx, gL, gV):
        L, V = ctx.saved_tensors
        if not gV.any():
            return _eigvals_backward(gL, V), None
        E = L[..., None, :] - L[..., :, None]
        idx = np.arange(L.shape[-1])
        E[..., idx, idx] = 1.0
        inner = 0.5 * _skew(_T(V) @ gV) / E
        inner[..., idx, idx] = gL
        return V @ inner @ _T(V), None


def _eigvals_backward(gL, V):
    """V diag(gL) V^T: the gradient through the eigenvalues alone (dL_i = v_i^T dA v_i)."""
    return (V * gL[..., None, :]) @ _T(V)


class EigvalsH(Function):
    """The eigenvalues of a symmetric A (ascending); dL_i = v_i^T dA v_i, so
    gA = V diag(gL) V^T, for which forward keeps V when a gradient is needed."""

    @staticmethod
    def forward(ctx, A, UPLO):
        if not ctx.needs_input_grad[0]:
            return np.linalg.eigvalsh(A, UPLO=UPLO)
        L, V = np.linalg.eigh(A, UPLO=UPLO)
        ctx.save_for_backward(V)
        return L

    @staticmethod
    def backward(ctx, gL):
        (V,) = ctx.saved_tensors
        return _eigvals_backward(gL, V), None


def _uplo(UPLO):
    if not isinstance(UPLO, str) or UPLO.upper() not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return UPLO.upper()


def eigh(A, UPLO="L"):
    """torch.linalg.eigh: the named tuple (eigenvalues, eigenvectors) of the symmetric matrices
    A, reading the lower (UPLO="L") or upper ("U") triangle; eigenvalues ascending."""
    check_input("linalg.eigh", A, "linalg_eigh_cpu", square=True)
    return return_types["linalg_eigh"](*Eigh.apply(A, _uplo(UPLO)))


def eigvalsh(A, UPLO="L"):
    """torch.linalg.eigvalsh: the eigenvalues of the symmetric matrices A, ascending."""
    check_input("linalg.eigh", A, "linalg_eigh_cpu", square=True)
    return EigvalsH.apply(A, _uplo(UPLO))


# svd ------------------------------------------------------------------------------------------
class SVD(Function):
    """A = U diag(S) Vh, S descending (np.linalg.svd: LAPACK's gesdd, as PyTorch on the CPU).
    full_matrices=False: U is m x k and Vh k x n, k = min(m, n); True: m x m and n x n, whose
    extra columns (rows) do not enter A and get no gradient.

    Backward (PyTorch's svd_backward). With V = Vh^T, Omega_U = U^T dU and Omega_V = V^T dV
    (skew on the k x k block), U^T dA V = Omega_U diag(S) + diag(dS) - diag(S) Omega_V, so
    dS = diag(U^T dA V) and, off the diagonal, with P = U^T dA V,

        (Omega_U)_ij = (S_j P_ij + S_i P_ji) / E_ij,   (Omega_V)_ij = (S_i P_ij + S_j P_ji) / E_ij,
        E_ij = S_j^2 - S_i^2.

    Collecting <gU, dU> + <gS, dS> + <gVh, dVh> as <gA, dA>:

        inner = (skew(U^T gU) diag(S) + diag(S) skew(Vh gVh^T)) / E + diag(gS)
        gA    = U inner Vh                                                   (m = n)
        gA    = (U inner + (I - U U^T) gU diag(S)^-1) Vh                    (m > n)
        gA    = U (inner Vh + diag(S)^-1 gVh (I - V V^T))                   (m < n)

    the last terms being the parts of dU (dV) outside the span of U (V), which exist when A is
    not square and need A of full rank. With no gradient on U and Vh (a loss of S alone),
    gA = U diag(gS) Vh, finite even where singular values repeat.
    """

    @staticmethod
    def forward(ctx, A, full_matrices):
        U, S, Vh = np.linalg.svd(A, full_matrices=full_matrices)
        ctx.save_for_backward(U, S, Vh)
        return U, S, Vh

    @staticmethod
    def backward(ctx, gU, gS, gVh):
        U, S, Vh = ctx.saved_tensors
        k = S.shape[-1]
        U, Vh, gU, gVh = U[..., :k], Vh[..., :k, :], gU[..., :k], gVh[..., :k, :]   # full_matrices: the first k
        return svd_backward(gU, gS, gVh, U, S, Vh), None


def svd_backward(gU, gS, gVh, U, S, Vh):
    """dL/dA for A = U diag(S) Vh (reduced factors) from the gradients of U, S and Vh."""
    m, n = U.shape[-2], Vh.shape[-1]
    if not gU.any() and not gVh.any():
        return _svdvals_backward(gS, U, Vh)
    S2 = S * S
    E = S2[..., None, :] - S2[..., :, None]
    idx = np.arange(S.shape[-1])
    E[..., idx, idx] = 1.0
    inner = (_skew(_T(U) @ gU) * S[..., None, :] + S[..., :, None] * _skew(Vh @ _T(gVh))) / E
    inner[..., idx, idx] += gS
    if m > n:
        gUSinv = gU / S[..., None, :]
        return (U @ inner + gUSinv - U @ (_T(U) @ gUSinv)) @ Vh
    if m < n:
        SinvgVh = gVh / S[..., :, None]
        return U @ (inner @ Vh + SinvgVh - (SinvgVh @ _T(Vh)) @ Vh)
    return U @ inner @ Vh


def _svdvals_backward(gS, U, Vh):
    """U diag(gS) Vh: dS_i = u_i^T dA v_i."""
    return (U * gS[..., None, :]) @ Vh


class SvdVals(Function):
    """The singular values of A, descending; dS_i = u_i^T dA v_i, so gA = U diag(gS) Vh, for
    which forward computes the (reduced) singular vectors when a gradient is needed."""

    @staticmethod
    def forward(ctx, A):
        if not ctx.needs_input_grad[0]:
            return np.linalg.svd(A, compute_uv=False)
        U, S, Vh = np.linalg.svd(A, full_matrices=False)
        ctx.save_for_backward(U, Vh)
        return S

    @staticmethod
    def backward(ctx, gS):
        U, Vh = ctx.saved_tensors
        return _svdvals_backward(gS, U, Vh)


def _check_driver(driver):
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with "
                           "cuSOLVER backend.")


def svd(A, full_matrices=True, *, driver=None):
    """torch.linalg.svd: the named tuple (U, S, Vh) with A = U diag(S) Vh, S descending;
    full_matrices=True (the default) gives square U and Vh. ``driver`` is a cuSOLVER option
    (CUDA only in PyTorch), so anything but None is an error here."""
    check_input("linalg.svd", A, "linalg_svd_cpu")
    _check_driver(driver)
    return return_types["linalg_svd"](*SVD.apply(A, bool(full_matrices)))


def svdvals(A, *, driver=None):
    """torch.linalg.svdvals: the singular values of A, descending."""
    check_input("linalg.svd", A, "linalg_svd_cpu")
    _check_driver(driver)
    return SvdVals.apply(A)


# eig, eigvals -----------------------------------------------------------------------------------
def _complex_results(name, what):
    raise NotImplementedError(f"minidl.linalg.{name} is not implemented: minidl deliberately does not support "
                              f"complex numbers (torch.linalg.{name} returns complex {what}, even for a real "
                              "matrix); for a symmetric matrix use minidl.linalg.eigh or eigvalsh")


def eig(A):
    """torch.linalg.eig returns complex eigenvalues and eigenvectors: not available in minidl."""
    _complex_results("eig", "eigenvalues and eigenvectors")


def eigvals(A):
    """torch.linalg.eigvals returns complex eigenvalues: not available in minidl."""
    _complex_results("eigvals", "eigenvalues")
