"""Writing into a tensor at indexed positions: index_add, index_fill, scatter, scatter_add,
as PyTorch defines them (the in-place ``_`` methods write these results into the tensor:
tensor/inplace.py).

Along ``dim`` (d), with x the input and g = dL/dout:

- ``index_add(x, d, index, source, alpha)``: index is a vector of length source.size(d);
  out[..., index[i], ...] += alpha * source[..., i, ...], repeated indices accumulating.
      dL/dx = g,   dL/dsource = alpha * g.index_select(d, index)
- ``index_fill(x, d, index, value)``: out[..., index[i], ...] = value.
      dL/dx = g with the filled slices zeroed,
      dL/dvalue = sum of g over the filled slices (each slice once, however often named)
- ``scatter(x, d, index, src)``: index has x's number of dims; for every position p of
  index, out[p with p_d replaced by index[p]] = src[p] (a number ``value`` in place of src
  writes that number). When index names one position twice, which write lands is not
  specified (as in PyTorch).
      dL/dx = g with the written positions zeroed,
      dL/dsrc = g gathered at the written positions, zero where src is not read
  (its part of src is index's shape: src may be larger; where index names one position
  twice, each of those src elements gets that position's gradient, PyTorch's formula).
  With ``reduce="add"`` or ``"multiply"`` the values are combined into x instead; as in
  PyTorch that form has no derivative.
- ``scatter_add(x, d, index, src)``: as scatter, adding: out[...] += src[p].
      dL/dx = g,   dL/dsrc = g gathered at the written positions (zero elsewhere)

Every index is checked against the size of dim before anything is written (on cuda too: the
check reads the device index's verdict back before any kernel runs), and backward reads its own
copy of the index (the caller may change theirs: ops/_saved.py).
index_fill accepts negative indices (counted from the end, as PyTorch); index_add, scatter
and scatter_add refuse them, as PyTorch does.

The ops run on every device: the writes are ops/scatter_along.py's (NumPy's ufunc.at on the CPU,
the kernels of kernels/cuda/scatter.py on cuda) and the array namespace's indexing; the index
must live on the input's device, as in PyTorch.
"""
import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ._broadcast import normalize_dim
from ._saved import keep_for_backward
from ._higher_order import into_zeros, keep_where
from .scatter_along import gather_along, scatter_along, scatter_coords


class IndexOutOfRange(IndexError, RuntimeError):
    """An index outside its dim: an IndexError, and the RuntimeError PyTorch raises for
    index_add and scatter."""


def _slices(dim, idx):
    """The index tuple that selects ``idx`` along axis ``dim`` (every other axis whole)."""
    return (slice(None),) * dim + (idx,)


_scatter_coords = scatter_coords   # the index tuple of scatter's written positions (ops/scatter_along.py)


def _crop(shape):
    """The leading block of that shape (the part of src that scatter reads)."""
    return tuple(slice(0, n) for n in shape)


class IndexAdd(Function):
    """out = x with alpha * source added at index along dim;
    dL/dx = g,  dL/dsource = alpha * take(g, index, dim)."""

    @staticmethod
    def forward(ctx, x, source, dim, idx, alpha):
        ctx.dim, ctx.alpha = dim, alpha
        ctx.idx = keep_for_backward(ctx, idx)
        out = x.copy()
        np.add.at(out, _slices(dim, idx), source if alpha == 1 else source * alpha)
        return out

    @staticmethod
    def backward(ctx, g):
        nx, ns = ctx.needs_input_grad[:2]
        gs = None
        if ns:
            gs = np.take(g, ctx.idx, axis=ctx.dim)
            if ctx.alpha != 1:
                gs = gs * ctx.alpha
        return (g if nx else None), gs, None, None, None


class IndexFill(Function):
    """out = x with value at index along dim;  dL/dx = g zeroed there,
    dL/dvalue = sum of g over the filled slices (each once)."""

    @staticmethod
    def forward(ctx, x, value, dim, idx):
        ctx.dim = dim
        ctx.idx = namespace_of(idx).unique(idx) if any(ctx.needs_input_grad) else None   # a fresh array
        out = x.copy()
        out[_slices(dim, idx)] = value
        return out

    @staticmethod
    def backward(ctx, g):
        nx, nv = ctx.needs_input_grad[:2]
        where = _slices(ctx.dim, ctx.idx)
        gx = gv = None
        if nx:
            gx = g.copy()
            gx[where] = 0
        if nv:
            gv = g[where].sum()
        return gx, gv, None, None


class Scatter(Function):
    """out = x with src (or a number) written at index's positions along dim;
    dL/dx = g zeroed there,  dL/dsrc = g gathered there (zero where src is not read)."""

    @staticmethod
    def forward(ctx, x, src, dim, idx, reduce):
        ctx.reduce, ctx.src_shape, ctx.dim = reduce, np.shape(src), dim
        ctx.idx = keep_for_backward(ctx, idx)
        values = src[_crop(idx.shape)] if np.ndim(src) else src
        out = x.copy()
        scatter_along(out, dim, idx, values, "set" if reduce is None else reduce)
        return out

    @staticmethod
    def backward(ctx, g):
        if ctx.reduce is not None:
            raise RuntimeError("the derivative of scatter with reduce= is not implemented (as in PyTorch); use "
                               "scatter_add for a differentiable reduce='add'")
        nx, ns = ctx.needs_input_grad[:2]
        gx = gs = None
        if nx:
            gx = scatter_along(g.copy(), ctx.dim, ctx.idx, 0, "set")
        if ns:
            gs = _gather_into(g, ctx.dim, ctx.idx, ctx.src_shape)
        return gx, gs, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        if ctx.reduce is not None:
            raise RuntimeError("the derivative of scatter with reduce= is not implemented (as in PyTorch); use "
                               "scatter_add for a differentiable reduce='add'")
        nx, ns = ctx.needs_input_grad[:2]
        gx = gs = None
        if nx:
            written = scatter_along(namespace_of(ctx.idx).zeros(g.shape, bool), ctx.dim, ctx.idx, True, "set")
            gx = keep_where(~written, g)
        if ns:
            gs = into_zeros(g[_scatter_coords(ctx.dim, ctx.idx)], ctx.src_shape)
        return gx, gs, None, None, None


class ScatterAdd(Function):
    """out = x with src added at index's positions along dim;
    dL/dx = g,  dL/dsrc = g gathered there (zero where src is not read)."""

    @staticmethod
    def forward(ctx, x, src, dim, idx):
        ctx.src_shape, ctx.dim = src.shape, dim
        ctx.idx = keep_for_backward(ctx, idx)
        return scatter_along(x.copy(), dim, idx, src[_crop(idx.shape)], "add")

    @staticmethod
    def backward(ctx, g):
        nx, ns = ctx.needs_input_grad[:2]
        return (g if nx else None), (_gather_into(g, ctx.dim, ctx.idx, ctx.src_shape) if ns else None), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        nx, ns = ctx.needs_input_grad[:2]
        gs = into_zeros(g[_scatter_coords(ctx.dim, ctx.idx)], ctx.src_shape) if ns else None
        return (g if nx else None), gs, None, None


def _gather_into(g, dim, idx, src_shape):
    """g at scatter's written positions, placed in a zero array of src's shape."""
    gs = namespace_of(g).zeros(src_shape, dtype=g.dtype)
    gs[_crop(idx.shape)] = gather_along(g, dim, idx)
    return gs


# argument checks ---------------------------------------------------------------------------

def _same_device(op, input, *tensors):
    """Every tensor (the index among them) on input's device, as PyTorch requires."""
    for t in tensors:
        if t is not None and hasattr(t, "device") and t.device != input.device:
            raise RuntimeError(f"{op}: expected all tensors to be on the same device, but found at least two "
                               f"devices, {input.device} and {t.device}!")


def _index_array(op, index, allowed="int32/int64", input=None):
    """The index's array, on input's device (a list or ndarray index is put there)."""
    Tensor = _op_function.Tensor
    if isinstance(index, Tensor):
        if input is not None:
            _same_device(op, input, index)
        idx = index._data
    else:
        idx = np.asarray(index)
        if input is not None and type(input._data) is not np.ndarray:
            idx = namespace_of(input._data).asarray(idx)
    if idx.dtype not in (np.int32, np.int64):
        raise RuntimeError(f"{op}: Expected dtype {allowed} for index but got: {idx.dtype}")
    return idx


def _check_range(op, idx, size, dim, negative_ok):
    """Every index in [0, size) (or [-size, size) with ``negative_ok``), before any write."""
    if idx.size == 0:
        return idx
    low = -size if negative_ok else 0
    bad = (idx < low) | (idx >= size)
    if bad.any():
        raise IndexOutOfRange(f"{op}: index {int(idx[bad].reshape(-1)[0])} is out of bounds for dimension {dim} "
                              f"with size {size}")
    return idx % size if negative_ok and (idx < 0).any() else idx


def _as_1d(x):
    """A 0-d tensor is treated as a 1-element vector (PyTorch accepts dim 0 or -1 for it)."""
    return x.reshape(1) if x.ndim == 0 else x


def _like_input(out, input):
    return out.reshape(()) if input.ndim == 0 else out


def _vector_index(op, idx, message):
    if idx.ndim > 1:
        raise IndexError(f"{op}: {message}, but got an index of {idx.ndim} dims, shape {list(idx.shape)}")
    return idx.reshape(-1)


# the ops ---------------------------------------------------------------------------------

def index_add(input, dim, index, source, *, alpha=1):
    """As ``torch.index_add``: ``input`` with ``alpha * source`` added at ``index`` along dim."""
    Tensor = _op_function.Tensor
    op = "index_add"
    _same_device(op, input, source)
    if not isinstance(source, Tensor):
        raise TypeError(f"{op}: source must be a Tensor, got {type(source).__name__}")
    check_same_dtype(op, [("self", input), ("source", source)])
    if input._data.dtype.kind in "iub" and isinstance(alpha, float):
        raise RuntimeError(f"{op}: for integral input tensors, argument alpha must not be a floating point number")
    x, s = _as_1d(input), _as_1d(source)
    d = normalize_dim(dim, x.ndim, op)
    idx = _vector_index(op, _index_array(op, index, input=input), "index is supposed to be a vector")
    if s.ndim != x.ndim or s.shape[:d] + s.shape[d + 1:] != x.shape[:d] + x.shape[d + 1:]:
        raise RuntimeError(f"{op}: source tensor shape must match self tensor shape, excluding the specified "
                           f"dimension. Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}")
    if idx.size != s.shape[d]:
        raise RuntimeError(f"{op}: Number of indices ({idx.size}) should be equal to source.size(dim): "
                           f"({s.shape[d]}), for dim: {dim}")
    idx = _check_range(op, idx, x.shape[d], d, negative_ok=False)
    return _like_input(IndexAdd.apply(x, s, d, idx, alpha), input)


def index_fill(input, dim, index, value):
    """As ``torch.index_fill``: ``input`` with ``value`` (a number or a 0-d tensor) at
    ``index`` along dim; negative indices count from the end."""
    Tensor = _op_function.Tensor
    op = "index_fill"
    if isinstance(value, Tensor) and value.device != input.device and value.ndim == 0:
        value = value.to(input.device)   # a 0-d value moves to the input's device, as PyTorch's scalars
    _same_device(op, input, value if isinstance(value, Tensor) else None)
    x = _as_1d(input)
    d = normalize_dim(dim, x.ndim, op)
    idx = _index_array(op, index, "int64", input)
    if idx.ndim > 1:
        raise RuntimeError(f"{op}: Index has to be a vector/scalar, got shape {list(idx.shape)}")
    idx = _check_range(op, idx.reshape(-1), x.shape[d], d, negative_ok=True)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"{op}_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
        if value._data.dtype != input._data.dtype:
            value = value.to(input.dtype)
    else:
        value = _number(op, value, input._data.dtype)
    return _like_input(IndexFill.apply(x, value, d, idx), input)


def _number(op, value, dtype):
    """A Python number as the value written into a tensor of ``dtype`` (cast as PyTorch does)."""
    if isinstance(value, (bool, int, float, np.number)):
        return np.asarray(value).astype(dtype)[()]
    raise TypeError(f"{op}: value must be a number or a Tensor, got {type(value).__name__}")


def _scatter_index(op, input, x, dim, index, src_shape):
    """The checked index of scatter/scatter_add on x (input, made 1-d if it was 0-d): the
    axis and the index array."""
    d = normalize_dim(dim, x.ndim, op)
    idx = _index_array(op, index, "int64", input)
    idx = idx.reshape(1) if idx.ndim == 0 and input.ndim == 0 else idx
    if idx.ndim != x.ndim:
        raise RuntimeError(f"{op}: Index tensor must have the same number of dimensions as self tensor (index has "
                           f"{idx.ndim}, self {x.ndim})")
    too_big = any(n > m for k, (n, m) in enumerate(zip(idx.shape, x.shape)) if k != d)
    if src_shape is not None:
        too_big = too_big or len(src_shape) != idx.ndim or any(n > m for n, m in zip(idx.shape, src_shape))
    if too_big:
        src = "" if src_shape is None else f" and to be no larger size than src {list(src_shape)}"
        raise RuntimeError(f"{op}: Expected index {list(idx.shape)} to be no larger than self {list(x.shape)} apart "
                           f"from dimension {d}{src}")
    return d, _check_range(op, idx, x.shape[d], d, negative_ok=False)


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """As ``torch.scatter``: ``input`` with ``src`` (a tensor, or a number) written at
    ``index`` along dim; ``value=`` names a number; ``reduce`` is None, "add" or "multiply"."""
    Tensor = _op_function.Tensor
    op = "scatter"
    if (src is None) == (value is None):
        raise TypeError(f"{op}: give exactly one of src (a Tensor or a number) and value (a number)")
    src = value if src is None else src
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError(f"{op}: reduce argument must be either add or multiply, got {reduce!r}")
    _same_device(op, input, src if isinstance(src, Tensor) else None)
    x = _as_1d(input)
    if isinstance(src, Tensor):
        check_same_dtype(op, [("self", input), ("src", src)])
        s = _as_1d(src) if input.ndim == 0 else src
        d, idx = _scatter_index(op, input, x, dim, index, s.shape)
    else:
        s = _number(op, src, input._data.dtype)
        d, idx = _scatter_index(op, input, x, dim, index, None)
    return _like_input(Scatter.apply(x, s, d, idx, reduce), input)


def scatter_add(input, dim, index, src):
    """As ``torch.scatter_add``: ``input`` with ``src`` added at ``index`` along dim."""
    Tensor = _op_function.Tensor
    op = "scatter_add"
    if not isinstance(src, Tensor):
        raise TypeError(f"{op}: src must be a Tensor, got {type(src).__name__}")
    _same_device(op, input, src)
    check_same_dtype(op, [("self", input), ("src", src)])
    x = _as_1d(input)
    s = _as_1d(src) if input.ndim == 0 else src
    d, idx = _scatter_index(op, input, x, dim, index, s.shape)
    return _like_input(ScatterAdd.apply(x, s, d, idx), input)
