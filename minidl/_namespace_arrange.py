"""More of PyTorch's functions that arrange, select or combine tensors, installed by _namespace.py's
tables like the rest: moving and stacking dims, splitting, selecting and taking elements, flips and
rotations, differences, products (cross, kron, tensordot, mv...), index writes that return a new
tensor (index_copy, masked_scatter, put), and the dtype-promotion queries.

Each differentiable one is a composition of ops that have their own backward (indexing, cat,
matmul, flip...), so its gradient is theirs; none needs a formula of its own.
"""
import builtins
import itertools
import numbers
import operator

import numpy as np

from .ops import _elementwise_args as _args
from .ops import bitwise as _bitwise
from .ops._broadcast import normalize_dim
from .tensor import dtype as _dtypes
from .tensor.tensor import Tensor


def _ops():
    from . import ops
    return ops


def _md():
    import minidl
    return minidl


def _dims_arg(dims):
    return tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)


def _ordered_dims(dims, ndim, op):
    """The dims as non-negative ints, in the order given (normalize_dims sorts them)."""
    return tuple(normalize_dim(d, ndim, op) for d in _dims_arg(dims))


# moving, stacking and splitting dims ------------------------------------------------------------
def movedim(input, source, destination):
    """The dims ``source`` moved to the positions ``destination``, the others keeping their order
    (a view, through permute)."""
    src = _ordered_dims(source, input.ndim, "movedim")
    dst = _ordered_dims(destination, input.ndim, "movedim")
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(_dims_arg(source))} dims) "
                           f"should contain the same number of dims as destination "
                           f"({list(_dims_arg(destination))} dims)")
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(src)}) or `destination` ({list(dst)})")
    order = [d for d in range(input.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return input.permute(*order)


def atleast_1d(*tensors):
    return _each(tensors, lambda t: t.reshape(1) if t.ndim == 0 else t)


def atleast_2d(*tensors):
    return _each(tensors, lambda t: t.reshape(1, -1) if t.ndim == 0 else t.unsqueeze(0) if t.ndim == 1 else t)


def atleast_3d(*tensors):
    """(1, 1, 1) for 0-d, (1, n, 1) for 1-d, (m, n, 1) for 2-d, as PyTorch (and NumPy)."""
    def lift(t):
        if t.ndim == 0:
            return t.reshape(1, 1, 1)
        if t.ndim == 1:
            return t.reshape(1, -1, 1)
        return t.unsqueeze(-1) if t.ndim == 2 else t
    return _each(tensors, lift)


def _each(tensors, fn):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(fn(t) for t in tensors[0])
    return fn(tensors[0]) if len(tensors) == 1 else tuple(fn(t) for t in tensors)


def hstack(tensors):
    """cat along dim 1, or dim 0 for 1-d tensors."""
    ts = atleast_1d(tuple(tensors))
    return _md().cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    return _md().cat(atleast_2d(tuple(tensors)), 0)


def dstack(tensors):
    return _md().cat(atleast_3d(tuple(tensors)), 2)


def column_stack(tensors):
    """1-d (and 0-d) tensors become columns; then hstack."""
    ts = [t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors]
    return hstack(ts)


def tensor_split(input, indices_or_sections=None, dim=0, *, sections=None, indices=None,
                 tensor_indices_or_sections=None):
    """Views of ``input`` split along dim: into n nearly equal parts (the first n % size one
    longer), or at the given indices, as PyTorch (and numpy.array_split). PyTorch's overloads
    name the second argument ``sections``, ``indices`` or ``tensor_indices_or_sections``; a
    tensor holds the number of sections (0-d) or the indices (1-d), as int64."""
    given = [a for a in (indices_or_sections, sections, indices, tensor_indices_or_sections) if a is not None]
    if len(given) != 1:
        raise TypeError("tensor_split() expects one of indices_or_sections, sections, indices or "
                        f"tensor_indices_or_sections, got {len(given)}")
    indices_or_sections = given[0]
    d = normalize_dim(dim, input.ndim, "tensor_split")
    size = input.shape[d]
    if isinstance(indices_or_sections, Tensor):
        t = indices_or_sections
        if t.dtype != _dtypes.int64:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               f"{_legacy_name(t.dtype)}")
        if t.ndim > 1:
            raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {t.ndim} dims")
        indices_or_sections = t.tolist()
    if isinstance(indices_or_sections, numbers.Integral):
        n = int(indices_or_sections)
        if n <= 0:
            raise RuntimeError(f"tensor_split(): number of sections must be larger than 0, got {n}")
        q, r = divmod(size, n)
        bounds = list(itertools.accumulate([q + 1] * r + [q] * (n - r), initial=0))
    else:
        cuts = [operator.index(i) for i in indices_or_sections]
        bounds = [0] + cuts + [size]
    pieces = []
    for start, stop in zip(bounds[:-1], bounds[1:]):
        start, stop = builtins.min(builtins.max(start, 0), size), builtins.min(builtins.max(stop, 0), size)
        pieces.append(input[(slice(None),) * d + (slice(start, builtins.max(start, stop)),)])
    return tuple(pieces)


# selecting and taking ------------------------------------------------------------------------
def select(input, dim, index):
    """The slice at ``index`` along ``dim``, that dim removed (a view)."""
    d = normalize_dim(dim, input.ndim, "select")
    n, i = input.shape[d], operator.index(index)
    if not -n <= i < n:
        raise IndexError(f"select(): index {i} out of range for tensor of size {list(input.shape)} at dimension {d}")
    return input[(slice(None),) * d + (i,)]


def take(input, index):
    """The elements at ``index`` of the flattened input, in index's shape."""
    return input.reshape(-1)[_index_tensor(index, "take")]


def take_along_dim(input, indices, dim=None):
    """gather along dim with input and indices broadcast against each other (dims other than
    dim); with dim None, take() of the flattened input."""
    idx = _index_tensor(indices, "take_along_dim")
    if dim is None:
        return input.reshape(-1)[idx.reshape(-1)]
    d = normalize_dim(dim, input.ndim, "take_along_dim")
    if idx.ndim != input.ndim:
        raise RuntimeError(f"take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {idx.ndim} dimensions for indices")
    shape_x, shape_i = list(input.shape), list(idx.shape)
    shape_x[d] = shape_i[d] = 1
    common = list(np.broadcast_shapes(tuple(shape_x), tuple(shape_i)))
    x = input.expand(*[c if k != d else input.shape[d] for k, c in enumerate(common)])
    i = idx.expand(*[c if k != d else idx.shape[d] for k, c in enumerate(common)])
    return x.gather(d, i)


def _index_tensor(index, op):
    if isinstance(index, Tensor):
        if index.dtype.kind not in "iu":
            raise RuntimeError(f"{op}(): Expected a long tensor for index, but got {index.dtype}")
        return index
    return _md().tensor(np.asarray(index, np.int64))


def fliplr(input):
    if input.ndim < 2:
        raise RuntimeError("fliplr: Input must be >= 2-d.")
    return input.flip(1)


def flipud(input):
    if input.ndim < 1:
        raise RuntimeError("flipud: Input must be >= 1-d.")
    return input.flip(0)


def rot90(input, k=1, dims=(0, 1)):
    """Rotated by k * 90 degrees in the plane of ``dims``, from the first dim towards the second."""
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    d0, d1 = _ordered_dims(dims, input.ndim, "rot90")
    if d0 == d1:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    k = operator.index(k) % 4
    if k == 1:
        return input.flip(d1).transpose(d0, d1)
    if k == 2:
        return input.flip(d0, d1)
    if k == 3:
        return input.flip(d0).transpose(d0, d1)
    return input.clone()


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The n-th forward difference along dim, out[i] = x[i + 1] - x[i] applied n times, after
    ``prepend`` / ``append`` are joined to the input along dim."""
    d = normalize_dim(dim, input.ndim, "diff")
    parts = [p for p in (prepend, input, append) if p is not None]
    x = _md().cat(parts, d) if len(parts) > 1 else input
    for _ in range(operator.index(n)):
        m = x.shape[d]
        if m == 0:
            break
        if x.dtype.kind == "b":
            x = _bitwise.bitwise_xor(x.narrow(d, 1, m - 1), x.narrow(d, 0, m - 1))
        else:
            x = x.narrow(d, 1, m - 1) - x.narrow(d, 0, m - 1)
    return x


def trace(input):
    """The sum of the main diagonal of a 2-d tensor (in float32 under autocast on the CPU, PyTorch's rule)."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    from .amp.policy import run_composite
    return run_composite("trace", lambda a: a.diagonal().sum(), input)


# products ----------------------------------------------------------------------------------
def cross(input, other, dim=None):
    """The cross product of 3-vectors along ``dim`` (None: the first dim of size 3, as
    torch.cross), input and other broadcast: (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0)."""
    shape = np.broadcast_shapes(tuple(input.shape), tuple(other.shape))
    if dim is None:
        dim = next((k for k, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError(f"no dimension of size 3 in input: {list(shape)}")
    d = normalize_dim(dim, len(shape), "cross")
    if shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {d} must have length 3. Got {shape[d]}")
    a, b = input.expand(*shape), other.expand(*shape)
    c = [a.select(d, k) for k in range(3)], [b.select(d, k) for k in range(3)]
    (a0, a1, a2), (b0, b1, b2) = c
    return _md().stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def kron(input, other):
    """The Kronecker product: out[i*p + k, j*q + l] = a[i, j] b[k, l] (for any number of dims)."""
    nd = builtins.max(input.ndim, other.ndim)
    a = input.reshape(*(1,) * (nd - input.ndim), *input.shape)
    b = other.reshape(*(1,) * (nd - other.ndim), *other.shape)
    a_sh = [s for n in a.shape for s in (n, 1)]
    b_sh = [s for n in b.shape for s in (1, n)]
    out = a.reshape(*a_sh) * b.reshape(*b_sh)
    return out.reshape(*[x * y for x, y in zip(a.shape, b.shape)])


def tensordot(a, b, dims=2):
    """Contract the last ``dims`` dims of a with the first of b, or the listed pairs of dims (a and b
    of one dtype). As PyTorch: a matmul of the two flattened, which autocast lowers; but a dot product
    where each side keeps one element (no autocast rule: the inputs' dtype)."""
    if a.dtype != b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, numbers.Integral):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, numbers.Integral) else list(d) for d in dims)
    da, db = list(_ordered_dims(da, a.ndim, "tensordot")), list(_ordered_dims(db, b.ndim, "tensordot"))
    if len(da) != len(db):
        raise RuntimeError(f"both dimension lists should have same length, got {len(da)} and {len(db)}")
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} "
                               f"and second has size {b.shape[j]} in dim {j}")
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k = int(np.prod([a.shape[d] for d in da], dtype=np.int64))
    left = a.permute(*free_a, *da).reshape(-1, k)
    right = b.permute(*db, *free_b).reshape(k, -1)
    shape = [a.shape[d] for d in free_a] + [b.shape[d] for d in free_b]
    if left.shape[0] == 1 and right.shape[1] == 1:
        from .amp.policy import outside_autocast
        return outside_autocast(lambda u, v: u.reshape(-1) @ v.reshape(-1), left, right).reshape(*shape)
    return (left @ right).reshape(*shape)


def inner(input, other):
    """The sum over the last dims of both (a number times a tensor where one is 0-d)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return tensordot(input, other, ([-1], [-1]))


def mv(input, vec):
    """matrix @ vector, in the inputs' dtype under autocast too (torch.mv has no autocast rule, where
    matmul's is to lower)."""
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {vec.ndim}")
    if input.dtype != vec.dtype:
        raise RuntimeError(f"mv: expected the matrix and the vector to have the same dtype, but got {input.dtype} "
                           f"and {vec.dtype}")
    from .amp.policy import outside_autocast
    return outside_autocast(_ops().matmul, input, vec)


def vdot(input, other):
    return _md().dot(input, other)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec)."""
    return _scaled(input, beta) + _scaled(mv(mat, vec), alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """beta * input + alpha * outer(vec1, vec2)."""
    if vec1.ndim != 1 or vec2.ndim != 1:
        raise RuntimeError(f"addr: Expected 1-D argument vec1, vec2, but got {vec1.ndim}-D and {vec2.ndim}-D")
    return _scaled(input, beta) + _scaled(_md().outer(vec1, vec2), alpha)


def _scaled(t, s):
    if s == 1:
        return t
    if s == 0:            # PyTorch: beta == 0 ignores input, NaN and inf included
        return _ops().mul(t, 0).nan_to_num(0.0, 0.0, 0.0)
    return t * s


def block_diag(*tensors):
    """The tensors (0-, 1- or 2-d) as the blocks of a block-diagonal matrix."""
    ts = [t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t for t in tensors]
    for t in ts:
        if t.ndim != 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input has {t.ndim} "
                               f"dimensions")
    if not ts:
        return _md().zeros(1, 0)
    dtype = ts[0].dtype
    for t in ts[1:]:
        dtype = promote_types(dtype, t.dtype)
    rows = []
    width = builtins.sum(t.shape[1] for t in ts)
    col = 0
    for t in ts:
        r, c = t.shape
        left = _md().zeros(r, col, dtype=dtype, device=t.device)
        right = _md().zeros(r, width - col - c, dtype=dtype, device=t.device)
        rows.append(_md().cat([left, t.to(dtype), right], 1))
        col += c
    return _md().cat(rows, 0)


def cartesian_prod(*tensors):
    """All combinations of the 1-d tensors' elements, one per row (a 1-d tensor for one input)."""
    if len(tensors) == 1:
        return tensors[0]
    grids = _md().meshgrid(*tensors, indexing="ij")
    return _md().stack([g.reshape(-1) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):
    """The r-element combinations of a 1-d tensor's elements, in order, one per row."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    if not rows:
        return input[:0].reshape(0) if r != 0 else input[:0]
    return input[_md().tensor(np.asarray(rows, np.int64))]


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """A tensor whose diagonals (between dim1 and dim2, at ``offset``) are input's last dim:
    input written into zeros at (k + max(-offset, 0), k + max(offset, 0)), a differentiable write."""
    n = input.shape[-1] + builtins.abs(offset)
    out_nd = input.ndim + 1
    d1, d2 = normalize_dim(dim1, out_nd, "diag_embed"), normalize_dim(dim2, out_nd, "diag_embed")
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    k = np.arange(input.shape[-1])
    out = input.new_zeros((*input.shape[:-1], n, n))
    out[..., k + builtins.max(-offset, 0), k + builtins.max(offset, 0)] = input
    return movedim(out, (-2, -1), (d1, d2))


def diagflat(input, offset=0):
    return _md().diag(input.reshape(-1), offset)


def tril_indices(row, col, offset=0, *, dtype=None, device="cpu"):
    """The (2, N) row and column indices of the lower triangle of a row x col matrix."""
    r, c = np.tril_indices(row, offset, col)
    return _md().tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or _dtypes.int64, device=device)


def triu_indices(row, col, offset=0, *, dtype=None, device="cpu"):
    r, c = np.triu_indices(row, offset, col)
    return _md().tensor(np.stack([r, c]).astype(np.int64), dtype=dtype or _dtypes.int64, device=device)


# index writes that return a new tensor --------------------------------------------------------
def _legacy_name(dtype):
    """PyTorch's scalar-type name of a dtype in its messages: Float, Long..."""
    return _dtypes.legacy_type_name(dtype).replace("Tensor", "")


def index_copy(input, dim, index, source):
    """A copy of input with the slices at ``index`` along dim replaced by source's."""
    d = normalize_dim(dim, builtins.max(input.ndim, 1), "index_copy")
    if source.dtype != input.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{_legacy_name(input.dtype)} and (source) {_legacy_name(source.dtype)}")
    idx = _index_tensor(index, "index_copy").reshape(-1)
    out = input.clone()
    out[(slice(None),) * d + (idx,)] = source
    return out


def masked_scatter(input, mask, source):
    """A copy of input where the mask (broadcast to input) holds taken, in order, from source's
    leading elements."""
    if source.dtype != input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but got "
                           f"{_legacy_name(input.dtype)} and {_legacy_name(source.dtype)}")
    m = mask.expand(*np.broadcast_shapes(tuple(mask.shape), tuple(input.shape)))
    if m.dtype.kind != "b":
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype {m.dtype}")
    count = int(m.sum().item())
    if count > source.numel():
        raise RuntimeError("masked_scatter: expected source to have at least as many elements as the ones "
                           f"selected by the mask ({count}), got {source.numel()}")
    out = input.expand(*m.shape).clone()
    out[m] = source.reshape(-1)[:count]
    return out


def put(input, index, source, accumulate=False):
    """A copy of input with the flattened positions ``index`` set to (or, accumulating,
    increased by) source's elements."""
    idx = _index_tensor(index, "put").reshape(-1)
    if idx.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of elements, but got "
                           f"source.numel() = {source.numel()}, index.numel() = {idx.numel()}")
    flat = input.reshape(-1).clone()
    if accumulate:
        flat = flat.index_add(0, idx, source.reshape(-1))
    else:
        flat[idx] = source.reshape(-1)
    return flat.reshape(*input.shape)


# dtype queries (PyTorch's promotion rules are written once, in ops/_elementwise_args.py) ----------
def _storage(dtype):
    return np.dtype(_dtypes.to_dtype(dtype))


def promote_types(type1, type2):
    """PyTorch's promotion of two dtypes: the higher category (bool < integer < floating) wins
    whole (int64 with float16 is float16, where NumPy says float64); within a category the
    wider one, float16 with bfloat16 giving float32."""
    return _dtypes.wrap(_args._promote(_storage(type1), _storage(type2)))


def result_type(tensor1, tensor2):
    """The dtype PyTorch's arithmetic gives ``tensor1 op tensor2``: tensors with dims decide,
    then 0-d tensors, then Python numbers, a lower group counting only where its category is
    higher (so int64 tensor + 1.5 is float32, float32 tensor + float64 0-d tensor is float32)."""
    for v in (tensor1, tensor2):
        if not isinstance(v, (Tensor, numbers.Real, np.bool_)):
            raise TypeError(f"result_type(): expected Tensors or numbers, got {type(v).__name__}")
    return _dtypes.wrap(_args.result_dtype(tensor1, tensor2))


def can_cast(from_, to):
    """Whether PyTorch casts ``from_`` to ``to`` implicitly: never floating to integer or
    anything but bool to bool; any width within a category."""
    cf, ct = _args._category(_storage(from_)), _args._category(_storage(to))
    return cf <= ct and not (ct == 0 and cf != 0)


def is_nonzero(input):
    """The truth of a one-element tensor (PyTorch refuses any other size)."""
    if input.numel() != 1:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous" if input.numel() == 0 else
                           "Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(input.item())


def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


def adjoint(input):
    """The conjugate transpose of the last two dims (a view); on real tensors, ``mT``."""
    if input.ndim < 2:
        raise RuntimeError(f"tensor.adjoint() is only supported on matrices or batches of matrices. Got "
                           f"{input.ndim}-D tensor.")
    return input.transpose(-2, -1)


BOTH = {
    "movedim": movedim, "moveaxis": movedim, "tensor_split": tensor_split, "select": select, "take": take,
    "take_along_dim": take_along_dim, "fliplr": fliplr, "flipud": flipud, "rot90": rot90, "diff": diff,
    "trace": trace, "cross": cross, "kron": kron, "inner": inner, "mv": mv, "vdot": vdot, "addmv": addmv,
    "addr": addr, "diag_embed": diag_embed, "diagflat": diagflat, "index_copy": index_copy,
    "masked_scatter": masked_scatter, "is_nonzero": is_nonzero, "is_same_size": is_same_size, "adjoint": adjoint,
    **_bitwise.TABLE,
}

MODULE_ONLY = {
    "atleast_1d": atleast_1d, "atleast_2d": atleast_2d, "atleast_3d": atleast_3d, "hstack": hstack,
    "vstack": vstack, "row_stack": vstack, "dstack": dstack, "column_stack": column_stack,
    "tensordot": tensordot, "block_diag": block_diag, "cartesian_prod": cartesian_prod,
    "combinations": combinations, "tril_indices": tril_indices, "triu_indices": triu_indices,
    "promote_types": promote_types, "result_type": result_type, "can_cast": can_cast,
}

def _where_method(self, condition, y):
    """``t.where(condition, y)`` is ``where(condition, t, y)``."""
    return _md().where(condition, self, y)


METHODS_ONLY = {"where": _where_method, "put": put}
