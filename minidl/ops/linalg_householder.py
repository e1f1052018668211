"""Householder reflectors, LAPACK's compact form of Q: geqrf and linalg.householder_product
(torch.orgqr).

geqrf(A) returns (a, tau): R in the upper triangle of ``a`` and, below the diagonal, the
vectors v_i (v_i has a 1 in row i, zeros above it, and a[i+1:, i] below), such that
Q = H_1 H_2 ... H_k with H_i = I - tau_i v_i v_i^T. It has no derivative, as in PyTorch.

householder_product(A, tau) is the first n columns of H_1 ... H_k built from A's columns and
tau. It is computed as a composition of differentiable ops (reflect the columns of the
identity, H_k first), so its gradients with respect to A and tau are exact; the product is
a polynomial in A and tau.
"""
from collections import namedtuple

import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from .linalg_decompositions import check_cpu, check_input, type_name

geqrf_result = namedtuple("geqrf", ("a", "tau"))


class Geqrf(Function):
    """LAPACK's geqrf (np.linalg.qr mode="raw", transposed back from Fortran order)."""

    @staticmethod
    def forward(ctx, A):
        if A.size == 0:
            return A.copy(), np.zeros(A.shape[:-2] + (min(A.shape[-2:]),), dtype=A.dtype)
        h, tau = np.linalg.qr(A, mode="raw")
        return np.ascontiguousarray(np.swapaxes(h, -1, -2)).astype(A.dtype), tau.astype(A.dtype)

    @staticmethod
    def backward(ctx, ga, gtau):
        raise NotImplementedError("the derivative for 'geqrf' is not implemented.")


def geqrf(input):   # noqa: A002  (PyTorch's name)
    """torch.geqrf: the named tuple (a, tau) of LAPACK's Householder QR of ``input``."""
    check_input("geqrf", input, "geqrf_cpu", name="input")
    return geqrf_result(*Geqrf.apply(input))


def householder_product(A, tau):
    """torch.linalg.householder_product: the first n columns of H_1 ... H_k, H_i = I - tau_i v_i
    v_i^T with v_i the i-th column of A below the diagonal and a unit diagonal entry (m >= n >= k,
    tau of A's batch shape plus k). In float32 under autocast on the CPU, PyTorch's rule."""
    from ..amp.policy import run_composite
    return run_composite("linalg.householder_product", _householder_product, A, tau)


def _householder_product(A, tau):
    import minidl as md
    op = "torch.linalg.householder_product"
    check_cpu("linalg.householder_product", A, tau)
    if not isinstance(A, _op_function.Tensor) or not isinstance(tau, _op_function.Tensor):
        raise TypeError(f"{op}(): arguments 'A' and 'tau' must be Tensors, got {type(A).__name__} and "
                        f"{type(tau).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"{op}: input must have at least 2 dimensions.")
    if tau.ndim < 1:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    m, n, k = A.shape[-2], A.shape[-1], tau.shape[-1]
    if m < n:
        raise RuntimeError(f"{op}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if n < k:
        raise RuntimeError(f"{op}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tuple(tau.shape[:-1]) != tuple(A.shape[:-2]):
        raise RuntimeError(f"{op}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    if tau.dtype != A.dtype:
        raise RuntimeError(f"{op}: tau dtype {type_name(tau.dtype)} does not match input dtype "
                           f"{type_name(A.dtype)}")
    if A.dtype.name not in ("float32", "float64"):
        raise NotImplementedError(f"\"orgqr_cpu\" not implemented for '{type_name(A.dtype)}'")
    eye = md.eye(m, n, dtype=A.dtype)
    V = A.tril(-1) + eye                                   # column i: v_i
    Q = md.zeros(*A.shape, dtype=A.dtype) + eye
    for i in reversed(range(k)):                           # Q <- H_i Q = Q - tau_i v_i (v_i^T Q)
        v = V[..., :, i:i + 1]
        Q = Q - tau[..., i:i + 1].unsqueeze(-1) * (v @ (v.mT @ Q))
    return Q
