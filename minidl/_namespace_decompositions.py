"""PyTorch's top-level matrix decompositions, installed by _namespace.py's tables like the rest:
torch.svd, torch.qr, torch.pinverse, torch.geqrf and torch.orgqr, as functions and Tensor
methods. They are the older spellings of minidl.linalg's functions (ops/linalg_*.py), which
compute them and give their gradients.
"""
from collections import namedtuple

from . import linalg as _linalg
from .ops.linalg_decompositions import check_input
from .ops.linalg_householder import geqrf

svd_result = namedtuple("svd", ("U", "S", "V"))
qr_result = namedtuple("qr", ("Q", "R"))


def svd(input, some=True, compute_uv=True):   # noqa: A002  (PyTorch's names)
    """torch.svd: the named tuple (U, S, V) with input = U diag(S) V^T, where linalg.svd gives
    Vh = V^T. some=True: the reduced factors (linalg.svd's full_matrices=False). With
    compute_uv=False, S alone is computed (and differentiable) and U, V are zero-filled square
    matrices of sizes m and n, whatever ``some`` says."""
    if not compute_uv:
        import minidl as md
        check_input("linalg.svd", input, "linalg_svd_cpu", name="input")
        batch, (m, n) = tuple(input.shape[:-2]), input.shape[-2:]
        return svd_result(md.zeros(*batch, m, m, dtype=input.dtype), _linalg.svdvals(input),
                          md.zeros(*batch, n, n, dtype=input.dtype))
    U, S, Vh = _linalg.svd(input, full_matrices=not some)
    return svd_result(U, S, Vh.mT)


def qr(input, some=True):   # noqa: A002
    """torch.qr: linalg.qr with mode "reduced" (some=True) or "complete"."""
    return qr_result(*_linalg.qr(input, "reduced" if some else "complete"))


def pinverse(input, rcond=1e-15):   # noqa: A002
    """torch.pinverse: linalg.pinv with rtol ``rcond``; under autocast on the CPU all of it in float32
    (PyTorch's table lists pinverse, where linalg.pinv's last matmul would be lowered)."""
    from .amp.policy import run_composite
    return run_composite("pinverse", lambda A: _linalg.pinv(A, rcond), input)


def orgqr(input, tau):   # noqa: A002
    """torch.orgqr: linalg.householder_product."""
    return _linalg.householder_product(input, tau)


BOTH = {"svd": svd, "qr": qr, "pinverse": pinverse, "orgqr": orgqr, "geqrf": geqrf}

MODULE_ONLY = {}

METHODS_ONLY = {}
