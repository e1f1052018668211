"""minidl.linalg: PyTorch's torch.linalg norms.

``vector_norm`` is the one place a p-norm is dispatched (``md.norm`` and ``Tensor.norm`` call it
too): a finite ord > 0 is the VectorNorm op (ops/reduction.py), whose backward gives PyTorch's
zero subgradient at an all-zero x; inf, -inf, 0 and a negative ord are compositions of abs,
amax/amin, sum and pow, whose gradients are those ops'. ``matrix_norm`` composes the same pieces
over two dims, and ``norm`` picks one of the two as torch.linalg.norm does.
"""
import math
import numbers

from . import ops as _ops
from .ops._broadcast import normalize_dims

__all__ = ["vector_norm", "matrix_norm", "norm"]


def _check_floating(x, op):
    if x.dtype.kind not in "fV":   # V: bfloat16
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got {x.dtype}")


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):   # noqa: A002  (PyTorch's name)
    """(sum |x|**ord)**(1/ord) over ``dim`` (all elements when None), as torch.linalg.vector_norm;
    ord=inf/-inf is the largest/smallest |x|, ord=0 the number of non-zero elements. ``dtype``:
    x is cast to it first."""
    if dtype is not None:
        x = x.to(dtype)
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real):
        raise TypeError(f"linalg.vector_norm(): argument 'ord' must be a number, got {type(ord).__name__} "
                        f"({ord!r})")
    _check_floating(x, "linalg.vector_norm")
    ord = float(ord)
    if ord == math.inf:
        return x.abs().amax(dim=dim, keepdim=keepdim)
    if ord == -math.inf:
        return x.abs().amin(dim=dim, keepdim=keepdim)
    if ord == 0:
        return (x != 0).to(x.dtype).sum(dim=dim, keepdim=keepdim)
    if ord > 0:
        return _ops.vector_norm(x, ord, dim, keepdim)
    return (x.abs() ** ord).sum(dim=dim, keepdim=keepdim) ** (1.0 / ord)


# ord -> (reduce |A| over which of the two dims first, then the extremum over the other)
_INDUCED = {1: (0, "amax"), -1: (0, "amin"), math.inf: (1, "amax"), -math.inf: (1, "amin")}


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):   # noqa: A002
    """The norm of the matrices over the two dims ``dim``, as torch.linalg.matrix_norm: "fro" is
    the 2-norm of their elements; 1/-1 the largest/smallest column sum of |A|, inf/-inf the
    largest/smallest row sum. (The singular-value norms "nuc", 2 and -2 are not implemented.)"""
    if dtype is not None:
        A = A.to(dtype)
    _check_floating(A, "linalg.matrix_norm")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {dim!r}")
    d = tuple(normalize_dims(x, A.ndim, "linalg.matrix_norm")[0] for x in dim)
    if d[0] == d[1]:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({dim[0]}, {dim[1]})")
    if ord == "fro":
        return _ops.vector_norm(A, 2, d, keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} (a norm of the singular values) is not "
                                  "implemented in minidl; 'fro', 1, -1, inf and -inf are")
    if isinstance(ord, bool) or ord not in _INDUCED:
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    first, extremum = _INDUCED[ord]
    sums = A.abs().sum(dim=d[first], keepdim=True)
    out = getattr(sums, extremum)(dim=d[1 - first], keepdim=True)
    return out if keepdim else out.squeeze(d)


def norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):   # noqa: A002
    """torch.linalg.norm: a vector norm for one dim (or for a 1-D A), a matrix norm for two dims
    (or for a 2-D A); with neither ord nor dim, the 2-norm of all of A's elements."""
    if dim is not None:
        dims = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
        if len(dims) == 1:
            return vector_norm(A, 2 if ord is None else ord, dims, keepdim, dtype=dtype)
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got {A.ndim}D.")
