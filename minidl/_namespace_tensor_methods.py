"""More of torch.Tensor's methods (and their torch.X forms where torch has them), installed by
_namespace.py's tables like the rest: the in-place shape methods and resize_
(tensor/inplace_shape.py), index_put, the view scatters, as_strided, index_reduce
(ops/index_put.py, ops/scatter_views.py, ops/as_strided.py, ops/index_reduce.py), the
per-element Python callables, and the queries whose answer is fixed in a framework without
inference tensors or lazy negation/conjugation (is_inference, is_neg, is_conj: False).
"""
import builtins
import operator

import numpy as np

from .autograd import views
from .ops import as_strided as _as_strided
from .ops import index_put as _index_put
from .ops import index_reduce as _index_reduce
from .ops import scatter_views as _scatter_views
from .tensor import inplace_shape as _shape
from .tensor.inplace import apply_inplace
from .tensor.inplace_overlap import index_put_overlap


def _md():
    import minidl
    return minidl


def index_put_(input, indices, values, accumulate=False):
    """Write (with ``accumulate``, add) ``values`` at ``indices`` into ``input`` in place."""
    overlap = index_put_overlap(input._data, indices, values, "index_put_", accumulate)
    return apply_inplace(input, "index_put_",
                         lambda s: _index_put.index_put(s, indices, values, accumulate), values, overlap=overlap)


def nonzero_static(input, *, size, fill_value=-1):
    """The (size, input.ndim) int64 positions of the nonzero elements, as md.nonzero, cut to
    ``size`` rows or padded to it with ``fill_value`` (a shape that does not hang on the data)."""
    if isinstance(size, builtins.bool) or not isinstance(size, int) and not hasattr(size, "__index__"):
        raise TypeError(f"nonzero_static(): argument 'size' must be int, not {type(size).__name__}")
    size = operator.index(size)
    if size < 0:
        raise RuntimeError("nonzero_static: 'size' must be an non-negative integer")
    found = _md().nonzero(input).numpy(force=True) if input.ndim else np.zeros((1 if input.item() else 0, 0), np.int64)
    out = np.full((size, input.ndim), fill_value, dtype=np.int64)
    k = builtins.min(size, found.shape[0])
    out[:k] = found[:k]
    return _md().tensor(out, device=input.device)


def unsafe_split(tensor, split_size, dim=0):
    """md.split (PyTorch's unsafe form differs only in skipping its view checks)."""
    return _md().split(tensor, split_size, dim)


def unsafe_split_with_sizes(input, split_sizes, dim=0):
    return _md().split(input, [operator.index(n) for n in split_sizes], dim)


def unsafe_chunk(input, chunks, dim=0):
    return _md().chunk(input, chunks, dim)


def resize_as_(input, the_template, *, memory_format=None):
    return _shape.resize_as_(input, the_template, memory_format=memory_format)


def prelu(input, weight):
    """max(0, x) + weight * min(0, x), as nn.functional.prelu."""
    from .nn import functional
    return functional.prelu(input, weight)


def _new_empty_strided(self, size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                       pin_memory=False):
    """md.empty_strided with this tensor's dtype and device unless told otherwise."""
    return _md().empty_strided(size, stride, layout=layout, dtype=self.dtype if dtype is None else dtype,
                               device=self.device if device is None else device, requires_grad=requires_grad)


def _output_nr(self):
    """Which output of the op that made it this tensor is (0 for a leaf)."""
    t = views.current(self)
    return 0 if t._node is None else t._out_index


def _false(input):
    return False


def _itself(input):
    return input


BOTH = {
    "as_strided": _as_strided.as_strided, "narrow_copy": _scatter_views.narrow_copy,
    "select_scatter": _scatter_views.select_scatter, "slice_scatter": _scatter_views.slice_scatter,
    "diagonal_scatter": _scatter_views.diagonal_scatter, "index_put": _index_put.index_put,
    "index_put_": index_put_, "index_reduce": _index_reduce.index_reduce, "nonzero_static": nonzero_static,
    "unsafe_split": unsafe_split, "unsafe_split_with_sizes": unsafe_split_with_sizes, "unsafe_chunk": unsafe_chunk,
    "resize_as_": resize_as_, "prelu": prelu, "is_inference": _false, "is_neg": _false, "is_conj": _false,
    "resolve_neg": _itself, "resolve_conj": _itself,
}

MODULE_ONLY = {}

METHODS_ONLY = {
    "t_": _shape.t_, "transpose_": _shape.transpose_, "swapaxes_": _shape.swapaxes_, "swapdims_": _shape.swapdims_,
    "squeeze_": _shape.squeeze_, "unsqueeze_": _shape.unsqueeze_, "resize_": _shape.resize_,
    "apply_": _shape.apply_, "map_": _shape.map_, "map2_": _shape.map2_, "new_empty_strided": _new_empty_strided,
    "output_nr": property(_output_nr),
}
