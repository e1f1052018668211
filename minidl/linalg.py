"""minidl.linalg: PyTorch's torch.linalg.

The Functions with their backward derivations live in minidl/ops: ops/linalg_solve.py (det,
slogdet, inv, solve, solve_triangular), ops/linalg_factor.py (cholesky, lu, matrix_exp),
ops/linalg_decompositions.py (qr, eigh, svd), ops/linalg_pseudoinverse.py (pinv, lstsq,
matrix_rank, cond) and ops/linalg_householder.py. What this module writes itself composes
differentiable ops (matmul, sum, abs, amax, reshape), so its gradients are theirs.

``vector_norm`` is the one place a p-norm is dispatched (``md.norm`` and ``Tensor.norm`` call it
too): a finite ord > 0 is the VectorNorm op (ops/reduction.py), whose backward gives PyTorch's
zero subgradient at an all-zero x; inf, -inf, 0 and a negative ord are compositions of abs,
amax/amin, sum and pow, whose gradients are those ops'. ``matrix_norm`` composes the same pieces
over two dims (and the singular values for "nuc", 2 and -2), and ``norm`` picks one of the two as
torch.linalg.norm does. eig and eigvals raise NotImplementedError: their results are complex.
"""
import math
import numbers
import operator

from . import ops as _ops
from .ops._broadcast import normalize_dims
from .ops.linalg_decompositions import eig, eigh, eigvals, eigvalsh, qr, svd, svdvals
from .ops.linalg_factor import cholesky, cholesky_ex, lu, lu_factor, lu_factor_ex, lu_solve, matrix_exp
from .ops.linalg_householder import householder_product
from .ops.linalg_pseudoinverse import cond, lstsq, matrix_rank, pinv
from .ops.linalg_solve import LinAlgError, det, inv, inv_ex, slogdet, solve, solve_ex, solve_triangular, type_name

__all__ = ["vector_norm", "matrix_norm", "norm",
           "LinAlgError", "det", "slogdet", "inv", "inv_ex", "solve", "solve_ex", "solve_triangular", "cholesky",
           "cholesky_ex", "lu_factor", "lu_factor_ex", "lu", "lu_solve", "matrix_power", "multi_dot", "matrix_exp",
           "matmul", "cross", "diagonal", "vecdot", "vander", "tensorinv", "tensorsolve",
           "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv", "lstsq", "matrix_rank", "cond", "householder_product",
           "eig", "eigvals"]


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
    largest/smallest row sum; "nuc", 2 and -2 the sum, largest and smallest of the singular values
    (svdvals, whose backward is PyTorch's)."""
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
    if ord in ("nuc", 2, -2) and not isinstance(ord, bool):
        if A.dtype.name in ("float16", "bfloat16"):   # (refused before autocast could cast it for svdvals)
            raise RuntimeError(f"linalg.matrix_norm: Low precision dtypes not supported. Got {type_name(A.dtype)}")
        s = svdvals(A.movedim(d, (-2, -1)))
        out = s.sum(-1) if ord == "nuc" else s.amax(-1) if ord == 2 else s.amin(-1)
        return out.unsqueeze(min(d)).unsqueeze(max(d)) if keepdim else out
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


def matmul(input, other):
    """torch.linalg.matmul: md.matmul."""
    return _ops.matmul(input, other)


def matrix_power(A, n):
    """A^n for integer n, as torch.linalg.matrix_power: by repeated squaring (gradients through
    matmul); a negative n is inv(A)^-n; n = 0 gives the identity (a zero gradient reaches A)."""
    op = "linalg.matrix_power"
    if A.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{op}: A must be batches of square matrices, but they are {A.shape[-2]} by "
                           f"{A.shape[-1]} matrices")
    n = operator.index(n)
    if n == 0:
        import minidl
        eye = minidl.eye(A.shape[-1], dtype=A.dtype, device=A.device)
        return _ops.where(minidl.ones(A.shape, dtype=minidl.bool, device=A.device), eye, A)
    if n < 0:
        A, n = inv(A), -n
    out, base = None, A
    while True:
        if n & 1:
            out = base if out is None else _ops.matmul(out, base)
        n >>= 1
        if not n:
            break
        base = _ops.matmul(base, base)
    return out.clone() if out is A else out


def _chain_order(dims):
    """split[i][j]: where the cheapest product of matrices i..j splits, from the dims (d0, d1, ...,
    dn) of a chain of n matrices (the classic O(n^3) dynamic programme, as torch and NumPy)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors):
    """The product of a chain of matrices in the order with the fewest multiplications, as
    torch.linalg.multi_dot: the first may be a 1-D row vector and the last a 1-D column vector."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    for i, t in enumerate(tensors):
        end = "the first tensor" if i == 0 else "the last tensor" if i == len(tensors) - 1 else f"tensor {i}"
        if t.ndim != 2 and not (t.ndim == 1 and i in (0, len(tensors) - 1)):
            raise RuntimeError(f"multi_dot(): {end} must be {'1D or 2D' if i in (0, len(tensors) - 1) else '2D'} "
                               f"but got {t.ndim}D")
        if t.dtype != tensors[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{type_name(tensors[0].dtype).lower()} and tensor {i} {type_name(t.dtype).lower()}")
    mats = list(tensors)
    if mats[0].ndim == 1:
        mats[0] = mats[0].unsqueeze(0)
    if mats[-1].ndim == 1:
        mats[-1] = mats[-1].unsqueeze(-1)
    for i in range(len(mats) - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(mats[i].shape)} and "
                               f"{list(mats[i + 1].shape)} cannot be multiplied")
    split = _chain_order([mats[0].shape[0]] + [m.shape[1] for m in mats])

    def product(i, j):
        if i == j:
            return mats[i]
        return _ops.matmul(product(i, split[i][j]), product(split[i][j] + 1, j))

    out = product(0, len(mats) - 1)
    if tensors[0].ndim == 1:
        out = out.squeeze(0)
    if tensors[-1].ndim == 1:
        out = out.squeeze(-1)
    return out


def cross(input, other, *, dim=-1):   # noqa: A002
    """The cross product of 3-vectors along ``dim`` (input and other broadcast), as torch.linalg.cross."""
    from ._namespace_arrange import cross as _cross
    if input.ndim != other.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions. Got {input.ndim} and "
                           f"{other.ndim}")
    d = normalize_dims(dim, input.ndim, "linalg.cross")[0]
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {input.shape[d]} and "
                           f"{other.shape[d]}")
    return _cross(input, other, dim=d)


def diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of the matrices over (dim1, dim2), as torch.linalg.diagonal (a view)."""
    return A.diagonal(offset, dim1, dim2)


def vecdot(x, y, *, dim=-1):
    """sum(x * y) over ``dim`` with x and y broadcast, as torch.linalg.vecdot (real tensors); under
    autocast on the CPU in the low dtype (PyTorch lists it with matmul)."""
    from .amp.policy import run_composite
    return run_composite("linalg.vecdot", lambda a, b: _vecdot(a, b, dim), x, y)


def _vecdot(x, y, dim):
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{type_name(x.dtype)} and y of type {type_name(y.dtype)} instead")
    return (x * y).sum(dim)


def vander(x, N=None):
    """The Vandermonde matrix [1, x, x^2, ..., x^(N-1)] along a new last dim, as torch.linalg.vander
    (N defaults to x's last dim): a row of ones and the cumulative products of x, as PyTorch builds it."""
    import minidl
    x_ = x.unsqueeze(-1) if x.ndim == 0 else x
    n = x_.shape[-1] if N is None else operator.index(N)
    if n <= 1:
        raise RuntimeError("linalg.vander: N must be greater than 1.")
    powers = minidl.cumprod(x_.unsqueeze(-1).expand(*x_.shape, n - 1), -1)
    ones = minidl.ones(tuple(x_.shape) + (1,), dtype=powers.dtype, device=x.device)
    return minidl.cat([ones, powers], -1)


def tensorinv(A, ind=2):
    """The inverse of A as a linear map from its dims ind: to its dims :ind, as torch.linalg.tensorinv:
    inv(A.reshape(q, q)).reshape(A.shape[ind:] + A.shape[:ind])."""
    ind = operator.index(ind)
    if ind <= 0:
        raise RuntimeError(f"linalg.tensorinv: Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError(f"linalg.tensorinv: Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    return inv(A.reshape(rows, cols)).reshape(*A.shape[ind:], *A.shape[:ind])


def tensorsolve(A, B, dims=None):
    """X with tensordot(A, X, X.ndim) = B, as torch.linalg.tensorsolve: the dims ``dims`` of A move
    to the end, A becomes a square matrix and X = solve(A, B.flatten()).reshape(A.shape[B.ndim:])."""
    if dims is not None:
        dims = [dims] if isinstance(dims, numbers.Integral) else list(dims)
        A = A.movedim(dims, list(range(A.ndim - len(dims), A.ndim)))
    shape = tuple(A.shape[B.ndim:])
    n, m = math.prod(shape), B.numel()
    if n != m:
        raise RuntimeError(f"linalg.tensorsolve: Expected self to satisfy the requirement prod(self.shape[other.ndim:])"
                           f" == prod(self.shape[:other.ndim]), but got {n} != {m}")
    if A.numel() != n * n:
        raise RuntimeError(f"linalg.tensorsolve: A of shape {list(A.shape)} is not a square matrix of size {n} once "
                           f"reshaped; B has shape {list(B.shape)}")
    return solve(A.reshape(n, n), B.flatten()).reshape(*shape)
