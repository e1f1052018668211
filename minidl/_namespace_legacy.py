"""Tensor attributes and functions that library code and older scripts still use, installed by
_namespace.py's tables like the rest:

- the kind-of-tensor flags (``is_sparse``, ``is_quantized``, ``is_meta``...), False for every
  minidl tensor, as for a dense CPU or cuda PyTorch tensor, and ``layout`` (always md.strided);
- ``is_shared`` / ``share_memory_``, ``dim_order``, ``storage_type``, ``volatile``;
- the legacy constructors and setters ``t.new(...)`` and ``t.set_(source)``;
- ``md.range`` (end included, deprecated in PyTorch), ``md.binomial`` and ``md.put``;
- the complex-number functions on real tensors (ops/real_as_complex.py).
"""
import math
import numbers
import warnings
import weakref

import numpy as np

from . import _namespace_arrange as _arrange
from .autograd import views
from .autograd.grad_mode import is_grad_enabled
from .autograd.versions import bump, storage_of
from .ops import real_as_complex as _complex
from .tensor import dtype as _dtypes
from .tensor import layout as _layout
from .tensor import storage as _storage
from .tensor.sampling import binomial

# PyTorch's flags for kinds of tensor minidl does not have: sparse, quantized, meta, nested,
# MKL-DNN, and the devices other than the CPU and cuda
_FALSE_FLAGS = ("is_sparse", "is_sparse_csr", "is_quantized", "is_meta", "is_nested", "is_mkldnn", "is_xpu",
                "is_mps", "is_ipu", "is_vulkan", "is_maia", "is_mtia", "is_xla")

# the memory share_memory_() was called on, by id of its owner, while that memory lives
_SHARED = {}


def _memory(t):
    return storage_of(t._data)


def share_memory_(self):
    """Mark this tensor's memory as shared and return the tensor. minidl's processes (the ranks of
    minidl.distributed) do not hand tensors to each other through shared memory, so nothing moves;
    ``is_shared()`` reports the mark, as PyTorch's does after the move."""
    owner = _memory(self)
    key = id(owner)
    try:
        _SHARED[key] = weakref.ref(owner, lambda _, key=key: _SHARED.pop(key, None))
    except TypeError:   # an owner that cannot be weakly referenced: kept alive with the mark
        _SHARED[key] = lambda owner=owner: owner
    return self


def is_shared(self):
    """Whether ``share_memory_()`` was called on this tensor's memory (through it or a view of it)."""
    owner = _memory(self)
    ref = _SHARED.get(id(owner))
    return ref is not None and ref() is owner


def _volatile(self):
    warnings.warn("volatile was removed (Variable.volatile is always False)", UserWarning, stacklevel=2)
    return False


def dim_order(self, *, ambiguity_check=False):
    """The dims from outermost to innermost in memory: sorted by stride, largest first (ties in
    dim order). With ``ambiguity_check=True`` a tensor whose order is not unique (a size-1 dim, or
    two dims with one stride) raises RuntimeError, as PyTorch's."""
    strides = self.stride()
    order = tuple(sorted(range(self.ndim), key=lambda d: -strides[d]))
    if ambiguity_check is True and (1 in self.shape or len(set(strides)) < len(strides)):
        raise RuntimeError("The tensor does not have unique dim order, or cannot map to exact one of the given "
                           "memory formats.")
    if ambiguity_check not in (True, False):
        raise TypeError(f"dim_order(): ambiguity_check must be a bool, got {type(ambiguity_check).__name__}")
    return order


def storage_type(self):
    """The type of ``storage()`` (minidl has one TypedStorage type for every dtype)."""
    return _storage.TypedStorage


def new(self, *args, **kwargs):
    """PyTorch's legacy ``t.new(*sizes)`` (zeros here, uninitialised in PyTorch) and ``t.new(data)``:
    a tensor in this tensor's dtype and on its device (``device=`` may move it)."""
    from .tensor.legacy import construct
    kwargs.setdefault("device", self.device)
    return construct(self.dtype, args, kwargs)


def set_(self, source=None):
    """Make this tensor hold ``source``'s memory, shape and strides (or, without a source, an empty
    1-d tensor), counting as an in-place write. Refused where PyTorch would leave autograd a graph
    it cannot differentiate: a leaf that requires grad (outside no_grad, as every in-place op), a
    tensor computed in the graph or a source that requires grad, a view whose base requires grad."""
    from .tensor.tensor import Tensor
    if source is not None and not isinstance(source, Tensor):
        raise TypeError(f"set_(): expected a Tensor source (or none), got {type(source).__name__}")
    if source is None:
        source = Tensor._wrap(np.empty((0,), self._data.dtype), None, 0).to(self.device)
    if source.dtype != self.dtype:
        raise RuntimeError(f"Could not set tensor of type {source.dtype} to a tensor of type {self.dtype}")
    if source.device != self.device:
        raise RuntimeError(f"set_(): source is on {source.device}, this tensor on {self.device}")
    if is_grad_enabled():
        current = views.current(self)
        if current._node is None and current._requires_grad:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        if current._node is not None or source.requires_grad:
            raise RuntimeError("set_() of a tensor computed in the graph, or to a source that requires grad, is "
                               "not differentiable; detach() first (minidl refuses what PyTorch cannot backward)")
    self._data = source._data
    self._base = None
    bump(self._version_counter)
    return self


def range_(start, end, step=1, *, dtype=None, layout=None, device=None, requires_grad=False):
    """start, start + step, ... up to and including ``end``: floor((end - start) / step) + 1 values,
    in the default float dtype unless ``dtype`` says otherwise (also for integer arguments).
    Deprecated in PyTorch (md.arange, which leaves ``end`` out, is the one to use)."""
    warnings.warn("torch.range is deprecated and will be removed in a future release because its behavior is "
                  "inconsistent with Python's range builtin. Instead, use torch.arange, which produces values in "
                  "[start, end).", UserWarning, stacklevel=2)
    _layout.check(layout, "range")
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"range(): argument '{name}' must be a number, got {type(v).__name__}")
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not all(math.isfinite(v) for v in (start, end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    dt = _dtypes.DEFAULT_FLOAT if dtype is None else _dtypes.to_dtype(dtype)
    n = int(math.floor((end - start) / step)) + 1
    from .tensor import factories
    from .tensor.allocation import check_allocation
    check_allocation("range", (n,), np.float64)
    if np.dtype(dt).kind in "iu" and all(isinstance(v, numbers.Integral) for v in (start, end, step)):
        values = start + np.arange(n, dtype=np.int64) * step
    else:
        values = start + np.arange(n, dtype=np.float64) * step
    return factories.tensor(values.astype(dt), requires_grad=requires_grad,
                            device="cpu" if device is None else device)


BOTH = {"conj": _complex.conj, "conj_physical": _complex.conj_physical, "angle": _complex.angle}

MODULE_ONLY = {"layout": _layout.layout, "strided": _layout.strided, "range": range_, "binomial": binomial,
               "put": _arrange.put, "real": _complex.real, "imag": _complex.imag}

METHODS_ONLY = {
    **{name: property(lambda self: False) for name in _FALSE_FLAGS},
    "layout": property(lambda self: _layout.strided),
    "real": property(_complex.real), "imag": property(_complex.imag),
    "volatile": property(_volatile),
    "is_distributed": lambda self: False,
    "is_shared": is_shared, "share_memory_": share_memory_, "dim_order": dim_order, "storage_type": storage_type,
    "new": new, "set_": set_,
}
