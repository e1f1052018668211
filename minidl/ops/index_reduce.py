"""index_reduce: combine slices of ``source`` into a copy of ``x`` at the slices ``index`` names
along ``dim``, by "prod", "mean", "amax" or "amin", as torch.index_reduce.

    out[..., index[i], ...]  combines  source[..., i, ...]  (and x's own slice with include_self)

It is scatter_reduce with the index vector spread over source's shape (every element of the
slice source[..., i, ...] goes to the slice index[i] of x), so the values and the gradients are
ScatterReduce's (ops/scatter_reduce.py has the formulas): for mean, g / N to each factor; for
prod, g times the product of the other factors; for amax/amin, g shared evenly among the
factors equal to the result.
"""
import numpy as np

from ..autograd import op_function as _op_function
from ..tensor.dtype import legacy_type_name
from ._broadcast import normalize_dim
from .scatter import _as_1d, _like_input, _same_device
from .scatter_reduce import ScatterReduce

REDUCTIONS = ("prod", "mean", "amax", "amin")


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """As ``torch.index_reduce``: ``input`` with the slices of ``source`` combined by ``reduce``
    into the slices ``index`` names along ``dim``."""
    Tensor = _op_function.Tensor
    op = "index_reduce_()"
    if reduce not in REDUCTIONS:
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    if not isinstance(source, Tensor) or not isinstance(index, Tensor):
        bad = source if not isinstance(source, Tensor) else index
        raise TypeError(f"index_reduce(): expected Tensor index and source, got {type(bad).__name__}")
    _same_device("index_reduce", input, source, index)
    x, s = _as_1d(input), _as_1d(source)
    d = normalize_dim(dim, x.ndim, "index_reduce")
    idx = index._data
    if idx.dtype not in (np.int32, np.int64):
        raise RuntimeError(f"{op}: Expected dtype int32/int64 for index but got: "
                           f"{legacy_type_name(idx.dtype).replace('Tensor', '')}")
    if idx.ndim > 1:
        raise IndexError(f"{op}: Index is supposed to be a vector, but got dim: {idx.ndim} with size: "
                         f"{list(idx.shape)}")
    idx = idx.reshape(-1)
    if source.dtype != input.dtype:
        raise RuntimeError(f"{op}: self ({legacy_type_name(input.dtype).replace('Tensor', '')}) and source "
                           f"({legacy_type_name(source.dtype).replace('Tensor', '')}) must have the same scalar type")
    if s.ndim != x.ndim or s.shape[:d] + s.shape[d + 1:] != x.shape[:d] + x.shape[d + 1:]:
        raise RuntimeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}")
    if idx.size != s.shape[d]:
        raise RuntimeError(f"{op}: Number of indices ({idx.size}) should be equal to source.size(dim): "
                           f"({s.shape[d]}), for dim: {d}")
    if idx.size and ((idx < 0) | (idx >= x.shape[d])).any():
        raise IndexError("index out of range in self")
    along = [1] * s.ndim
    along[d] = idx.size
    spread = np.broadcast_to(idx.astype(np.int64).reshape(along), tuple(s.shape)).copy()
    return _like_input(ScatterReduce.apply(x, s, d, spread, reduce, bool(include_self)), input)
