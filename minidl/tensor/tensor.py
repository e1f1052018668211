"""Tensor: an array (NumPy on the CPU) plus what autograd needs to know about it.

A Tensor holds
- ``_data``: the array itself (``.numpy()`` gives it for a CPU tensor outside the graph, by
  PyTorch's rule: conversion.py; ``.data`` is a Tensor over the same memory, cut from the
  graph, as in PyTorch);
- ``requires_grad`` and ``grad``: whether to compute d(loss)/d(this), and where it lands;
- ``_node`` / ``_out_index``: the Function node that produced it (None for leaves), used by
  the engine to walk the graph backwards;
- ``_version_counter``: bumped by every in-place write, shared with the tensors that view
  the same memory (see autograd/versions.py);
- ``_base``: for a view made by an op (reshape, a slice...), the tensor whose memory it
  views (None otherwise), and ``_view_version``, the version its history belongs to (an
  older one when the memory was written in place since: autograd/views.py);
- ``_hooks``: the gradient hooks of a leaf (a non-leaf's live on its node).

The in-place methods (``add_``, ``+=``, ``fill_``...) are in inplace.py.

Every differentiable method is a thin call into ``minidl.ops``, where the op's forward
and backward are written out; this file only routes and wraps.
"""
import warnings
import weakref

import numpy as np

from .. import backends
from .. import ops as _ops
from ..autograd import api, backward_callbacks, hooks, views
from ..autograd.op_function import register_tensor_type
from ..autograd.versions import VersionCounter
from ..ops import bitwise as _bitwise
from ..ops import rounding_division as _rdiv
from ..ops import scatter as _scatter
from ..ops import scatter_reduce as _scatter_reduce
from ..ops import selection as _selection
from . import conversion as _conversion
from . import dtype as dtypes
from . import memory_format as _formats
from . import printing as _printing
from .device import cuda_device, of_name
from .deprecated_overloads import alpha_first
from .inplace import InplaceMethods, apply_inplace
from .size import Size
from .to_arguments import parse_to_args as _parse_to_args

# floating, though NumPy files it under kind "V" (a structured stand-in when ml_dtypes is absent)
_BFLOAT16 = dtypes.bfloat16.dtype if dtypes.bfloat16 is not None else np.dtype([("bfloat16", "u2")])


class Tensor(InplaceMethods):
    __slots__ = ("_data", "_node", "_out_index", "_requires_grad", "_grad", "_version_counter", "_base", "_hooks",
                 "_view_version", "__weakref__")
    __array_priority__ = 1000  # so ndarray <op> Tensor defers to Tensor's reflected operators

    # construction --------------------------------------------------------------
    @classmethod
    def _wrap(cls, array, node, index):
        t = object.__new__(cls)
        if type(array) is not np.ndarray:
            array = _as_array(array)
        t._data = array
        t._node = node
        t._out_index = index
        t._requires_grad = node is not None and (array.dtype.kind == "f" or array.dtype == _BFLOAT16)
        t._grad = None
        t._version_counter = VersionCounter()
        t._base = None
        t._hooks = None
        return t

    def __new__(cls, *args, **kwargs):
        """``md.Tensor(data)`` or ``md.Tensor(*sizes)``, PyTorch's legacy constructor (tensor/legacy.py).
        minidl's own tensors, and those pickle and copy rebuild (pickling.py), are built by ``_wrap``,
        which does not come here."""
        if cls is not Tensor and not args and not kwargs:
            return object.__new__(cls)
        from .legacy import construct
        return construct(None, args, kwargs)

    def __reduce_ex__(self, protocol):
        """Pickled as its storage and place in it, class and requires_grad (see pickling.py)."""
        from .pickling import reduce
        return reduce(self)

    def __deepcopy__(self, memo):
        from .pickling import deepcopy
        return deepcopy(self, memo)

    # attributes ------------------------------------------------------------------
    @property
    def data(self):
        """A Tensor over the same memory, outside the graph, with a version counter of its
        own: as in PyTorch, writes through ``.data`` are not seen by autograd's checks."""
        return Tensor._wrap(self._data, None, 0)

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError(f"data must be set to a Tensor, got {type(value).__name__}")
        self._data = value._data

    @property
    def grad(self):
        """The gradient accumulated by backward() (None until then). It may be assigned a
        Tensor of this tensor's shape, dtype and device, or None. Reading it on a non-leaf that
        does not retain its grad warns, as in PyTorch: backward never fills it."""
        g = self._grad
        if g is None and self._node is not None and not self.retains_grad:
            warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                          "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
                          "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. "
                          "If you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor "
                          "instead.", UserWarning, stacklevel=2)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value.shape != self.shape:
                raise RuntimeError(f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of "
                                   f"size '{list(self.shape)}'. Please ensure that the gradient and the tensor are "
                                   "the same size")
            if value.dtype != self.dtype:
                raise RuntimeError(f"attempting to assign a gradient with dtype '{value.dtype}' to a tensor with "
                                   f"dtype '{self.dtype}'; the gradient must have the tensor's dtype")
            if value.device != self.device:
                raise RuntimeError(f"attempting to assign a gradient on device '{value.device}' to a tensor on "
                                   f"device '{self.device}'")
        self._grad = value

    @grad.deleter
    def grad(self):
        self._grad = None

    @property
    def _version(self):
        """How many in-place writes this tensor's memory has seen (shared with its views)."""
        return self._version_counter.value

    @property
    def shape(self):
        return Size.of_shape(self._data.shape)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def dtype(self):
        return dtypes.wrap(self._data.dtype)

    @property
    def device(self):
        return of_name(backends.device_of(self._data))

    @property
    def is_leaf(self):
        return views.current(self)._node is None

    @property
    def grad_fn(self):
        return views.current(self)._node

    @property
    def requires_grad(self):
        return views.current(self)._requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        if not self.is_leaf and flag:
            raise RuntimeError("you can only change requires_grad flags of leaf variables.")
        self.requires_grad_(flag)

    def requires_grad_(self, flag=True):
        """Make this leaf (not) require grad. On a tensor computed in the graph (which requires
        grad already) ``requires_grad_()`` is allowed and changes nothing, as in PyTorch."""
        if not self.is_leaf:
            if flag:
                return self
            raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use a "
                               "computed variable in a subgraph that doesn't require differentiation use "
                               "var_no_grad = var.detach().")
        if flag and self.dtype.kind != "f":
            raise RuntimeError(f"only floating point tensors can require gradients, got dtype {self.dtype}")
        self._requires_grad = bool(flag)
        return self

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return self.ndim

    def numel(self):
        return int(self._data.size)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        """The sub-tensors along dim 0. (Without this, Python would iterate by indexing until
        an IndexError, and a 0-d tensor would pass for an empty sequence.)"""
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # conversion ------------------------------------------------------------------
    def numpy(self, *, force=False):
        """The CPU tensor's memory as an ndarray; refused when it requires grad or is off the
        CPU unless ``force`` (then ``detach().cpu().numpy()``), as in PyTorch (conversion.py)."""
        return _conversion.numpy(self, force)

    def __array__(self, dtype=None, copy=None):
        return _conversion.array(self, dtype, copy)

    def tolist(self):
        return _conversion.host_values(self).tolist()

    def item(self):
        if self.numel() != 1:
            raise RuntimeError(f"a Tensor with {self.numel()} elements cannot be converted to a scalar")
        return _conversion.host_values(self).reshape(()).item()

    def __float__(self):
        _conversion.warn_scalar_of_graph(self)
        return float(self.item())

    def __complex__(self):
        _conversion.warn_scalar_of_graph(self)
        return complex(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu":
            raise TypeError(f"only integer tensors can be used as an index, got {self.dtype}")
        return int(self.item())

    def detach(self):
        """The same values, cut from the graph (shares memory and the version counter)."""
        t = Tensor._wrap(self._data, None, 0)
        t._version_counter = self._version_counter
        return t

    def detach_(self):
        """Cut this tensor from the graph, in place: it becomes a leaf. (Not for a view, whose
        history follows its base's, as in PyTorch: use detach().)"""
        if self._base is not None:
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._node, self._out_index, self._requires_grad = None, 0, False
        return self

    def clone(self, *, memory_format=_formats.preserve_format):
        """A copy (differentiable). ``memory_format`` changes no value (tensor/memory_format.py); a
        channels-last one needs the rank it is defined for, as PyTorch."""
        _formats.copies(self, memory_format)
        return _ops.clone(self)

    def contiguous(self, memory_format=_formats.contiguous_format):
        """This tensor when its elements are laid out in C order; else a C-ordered copy
        (differentiable, as clone), so writing to the result never changes a view's base.
        A channels-last format is ``to(memory_format=...)`` (see tensor/memory_format.py)."""
        if _formats.check(memory_format) in (_formats.channels_last, _formats.channels_last_3d):
            return self.to(memory_format=memory_format)
        return self if self.is_contiguous() else self.clone()

    def is_contiguous(self, memory_format=_formats.contiguous_format):
        """Whether the storage holds the elements in C order (NumPy's relaxed rule: the stride
        of a size-1 dim does not count). A channels-last format is accepted for any layout, as
        ``to(memory_format=...)`` accepts it (tensor/memory_format.py)."""
        if _formats.check(memory_format) in (_formats.channels_last, _formats.channels_last_3d):
            return True
        data = self._data
        return bool(data.flags.c_contiguous) if type(data) is np.ndarray else bool(data.is_contiguous())

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(other_tensor)``, then
        PyTorch's ``non_blocking=False, copy=False, *, memory_format=md.preserve_format``;
        differentiable. This tensor itself when nothing changes, unless ``copy=True``.
        ``non_blocking`` is accepted: every copy between host and device has finished when
        ``to`` returns, so the result can be used at once either way. ``memory_format`` changes
        no value (see tensor/memory_format.py)."""
        device, dtype, copy, memory_format = _parse_to_args(args, kwargs)
        out = self
        if dtype is not None and dtype != self.dtype:
            out = _ops.cast(out, dtype)
        if device is not None and backends.get(device).name != self.device:
            out = _ops.to_device(out, device)
        if out is self and (copy or _formats.copies(self, memory_format)):
            out = _ops.clone(self)
        return out

    def cpu(self, memory_format=_formats.preserve_format):
        return self.to("cpu", memory_format=memory_format)

    def cuda(self, device=None, non_blocking=False, memory_format=_formats.preserve_format):
        """On the GPU (``device``: None, an index or a cuda device); ``non_blocking`` as in ``to``."""
        return self.to(cuda_device(device), non_blocking=non_blocking, memory_format=memory_format)

    def float(self):
        return self.to(dtypes.float32)

    def double(self):
        return self.to(dtypes.float64)

    def half(self):
        return self.to(dtypes.float16)

    def bfloat16(self):
        return self.to(dtypes.bfloat16)

    def long(self):
        return self.to(dtypes.int64)

    def int(self):
        return self.to(dtypes.int32)

    def bool(self):
        return self.to(dtypes.bool_)

    def type_as(self, other):
        return self.to(other.dtype)

    # autograd --------------------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate d(self)/d(leaf) (times ``gradient``) into every leaf's ``.grad`` (or
        only into ``inputs``'); see autograd.backward."""
        api.backward(self, None if gradient is None else [gradient], retain_graph, create_graph, inputs=inputs)

    def register_hook(self, hook):
        """Call ``hook(grad)`` with this tensor's gradient each time it is computed; a
        Tensor it returns (of the same shape and dtype) replaces the gradient. Returns a
        handle whose ``remove()`` unregisters the hook."""
        if not views.current(self)._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._node is None:
            if self._hooks is None:
                self._hooks = hooks.HookDict()
            return hooks.add(self._hooks, hook)
        per_output = self._node.__dict__.setdefault("_output_hooks", {})
        return hooks.add(per_output.setdefault(self._out_index, hooks.HookDict()), hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(self)`` once this leaf's ``.grad`` holds its gradient, during each
        backward (while the rest of the graph is still being differentiated). Returns a handle
        whose ``remove()`` unregisters the hook."""
        return backward_callbacks.register_post_accumulate_grad_hook(views.current(self), hook)

    def retain_grad(self):
        """Keep this non-leaf tensor's gradient in ``.grad`` during backward (leaves always do)."""
        if not views.current(self)._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._node is not None:
            self._node.__dict__.setdefault("_retained", {})[self._out_index] = weakref.ref(self)

    @property
    def retains_grad(self):
        node = self._node
        if node is None:
            return False
        ref = node.__dict__.get("_retained", {}).get(self._out_index)
        return ref is not None and ref() is self

    # printing --------------------------------------------------------------------
    def __repr__(self):
        """As PyTorch prints (tensor/printing.py has the rules), under md.set_printoptions."""
        return _printing.tensor_repr(self)

    def __format__(self, spec):
        """A 0-d tensor formats as its number (``f"{loss:.4f}"``); others as their repr."""
        if self.ndim == 0:
            return format(self.item(), spec)
        if spec:
            raise TypeError(f"unsupported format string {spec!r} passed to Tensor.__format__ "
                            f"(only a 0-d tensor formats as a number; this one has shape {list(self.shape)})")
        return repr(self)

    __hash__ = object.__hash__

    # operators -------------------------------------------------------------------
    def __add__(self, o): return _ops.add(self, o)
    def __radd__(self, o): return _ops.add(o, self)
    def __sub__(self, o): return _ops.sub(self, o)
    def __rsub__(self, o): return _ops.sub(o, self)
    def __mul__(self, o): return _ops.mul(self, o)
    def __rmul__(self, o): return _ops.mul(o, self)
    def __truediv__(self, o): return _ops.div(self, o)
    def __rtruediv__(self, o): return _ops.div(o, self)
    def __floordiv__(self, o): return _rdiv.floor_divide(self, o)
    def __rfloordiv__(self, o): return _rdiv.floor_divide(o, self)
    def __mod__(self, o): return _rdiv.remainder(self, o)
    def __rmod__(self, o): return _rdiv.remainder(o, self)
    def __pow__(self, o): return _ops.pow(self, o)
    def __rpow__(self, o): return _ops.pow(o, self)
    def __matmul__(self, o): return _ops.matmul(self, o)
    def __rmatmul__(self, o): return _ops.matmul(o, self)
    def __neg__(self): return _ops.neg(self)
    def __abs__(self): return _ops.abs(self)
    def __getitem__(self, index):
        _refuse_string_index(index)
        return _ops.getitem(self, index)

    def __setitem__(self, index, value):
        """``x[index] = value`` in place; differentiable for x and value (ops/setitem.py)."""
        _refuse_string_index(index)
        from ..ops.indexing import split_index
        from ..ops.setitem import setitem_overlap, setitem_split, write_indexed
        first, second = split_index(index, self.ndim)
        apply_inplace(self, "index assignment", lambda old: setitem_split(old, first, second, value), value,
                      write=lambda memory, result: write_indexed(memory, result, first, second),
                      overlap=setitem_overlap(self, first, second, value))

    # comparisons give bool tensors and are not differentiable; with None or a string they hand Python
    # NotImplemented, so ``t == None`` is False and ``t < None`` a TypeError (as PyTorch)
    def __lt__(self, o): return _ops.compare("less", self, o) if _comparable(o) else NotImplemented
    def __le__(self, o): return _ops.compare("less_equal", self, o) if _comparable(o) else NotImplemented
    def __gt__(self, o): return _ops.compare("greater", self, o) if _comparable(o) else NotImplemented
    def __ge__(self, o): return _ops.compare("greater_equal", self, o) if _comparable(o) else NotImplemented
    def __eq__(self, o): return _ops.compare("equal", self, o) if _comparable(o) else NotImplemented
    def __ne__(self, o): return _ops.compare("not_equal", self, o) if _comparable(o) else NotImplemented
    # bitwise logic (logical on bool tensors), not differentiable
    def __invert__(self): return _bitwise.bitwise_not(self)
    def __and__(self, o): return _bitwise.bitwise_and(self, o)
    def __or__(self, o): return _bitwise.bitwise_or(self, o)
    def __xor__(self, o): return _bitwise.bitwise_xor(self, o)
    def __lshift__(self, o): return _bitwise.bitwise_left_shift(self, o)
    def __rshift__(self, o): return _bitwise.bitwise_right_shift(self, o)
    def __rand__(self, o): return _bitwise.bitwise_and(o, self)
    def __ror__(self, o): return _bitwise.bitwise_or(o, self)
    def __rxor__(self, o): return _bitwise.bitwise_xor(o, self)
    def __rlshift__(self, o): return _bitwise.bitwise_left_shift(o, self)
    def __rrshift__(self, o): return _bitwise.bitwise_right_shift(o, self)

    # methods ---------------------------------------------------------------------
    def add(self, o, *alpha_first_form, alpha=1):
        """self + alpha * o; the deprecated ``add(alpha, o)`` is read too, with PyTorch's warning."""
        return _ops.add(self, *alpha_first("add", o, alpha_first_form, alpha))

    def sub(self, o, *alpha_first_form, alpha=1):
        return _ops.sub(self, *alpha_first("sub", o, alpha_first_form, alpha))

    def mul(self, o): return _ops.mul(self, o)
    def div(self, o, *, rounding_mode=None): return _rdiv.div(self, o, rounding_mode=rounding_mode)
    def pow(self, o): return _ops.pow(self, o)
    def matmul(self, o): return _ops.matmul(self, o)
    def exp(self): return _ops.exp(self)
    def log(self): return _ops.log(self)
    def sqrt(self): return _ops.sqrt(self)
    def rsqrt(self): return _ops.pow(self, -0.5)
    def tanh(self): return _ops.tanh(self)
    def sigmoid(self): return _ops.sigmoid(self)
    def relu(self): return _ops.relu(self)
    def abs(self): return _ops.abs(self)
    def neg(self): return _ops.neg(self)
    def square(self): return _ops.pow(self, 2)
    def clamp(self, min=None, max=None): return _ops.clamp(self, min, max)
    def sum(self, dim=None, keepdim=False, *, dtype=None):
        if dtype is None and self.dtype.kind in "biu":
            dtype = dtypes.int64           # PyTorch sums bool and integer tensors in int64
        return _ops.sum(self if dtype is None else self.to(dtype), dim, keepdim)

    def mean(self, dim=None, keepdim=False, *, dtype=None):
        return _ops.mean(self if dtype is None else self.to(dtype), dim, keepdim)

    def var(self, dim=None, unbiased=True, keepdim=False, *, correction=None):
        return _ops.var(self, dim, unbiased, keepdim, correction=correction)

    def std(self, dim=None, unbiased=True, keepdim=False, *, correction=None):
        return _ops.std(self, dim, unbiased, keepdim, correction=correction)

    def max(self, dim=None, keepdim=False):
        """max() of all elements is a Tensor; max(dim) is the named tuple (values, indices)."""
        if dim is None:
            return _ops.max(self, None, keepdim)
        return _selection.max_dim(self, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        if dim is None:
            return _ops.min(self, None, keepdim)
        return _selection.min_dim(self, dim, keepdim)

    def amax(self, dim=None, keepdim=False): return _ops.max(self, dim, keepdim)
    def amin(self, dim=None, keepdim=False): return _ops.min(self, dim, keepdim)
    def sort(self, dim=-1, descending=False, stable=False): return _selection.sort(self, dim, descending, stable)
    def argsort(self, dim=-1, descending=False, stable=False):
        return _selection.argsort(self, dim, descending, stable)
    def topk(self, k, dim=-1, largest=True, sorted=True): return _selection.topk(self, k, dim, largest, sorted)
    def kthvalue(self, k, dim=-1, keepdim=False): return _selection.kthvalue(self, k, dim, keepdim)
    def median(self, dim=None, keepdim=False): return _selection.median(self, dim, keepdim)
    def mode(self, dim=-1, keepdim=False): return _selection.mode(self, dim, keepdim)

    def argmax(self, dim=None, keepdim=False): return _ops.argmax(self, dim, keepdim)
    def argmin(self, dim=None, keepdim=False): return _ops.argmin(self, dim, keepdim)
    def softmax(self, dim, dtype=None): return _ops.softmax(self if dtype is None else self.to(dtype), dim)
    def log_softmax(self, dim, dtype=None): return _ops.log_softmax(self if dtype is None else self.to(dtype), dim)
    def reshape(self, *shape): return _ops.reshape(self, *shape)
    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (dtypes.DType, np.dtype, type)):
            return self._view_as_dtype(shape[0])
        from ..ops.shape import view
        return view(self, *shape)

    def _view_as_dtype(self, dtype):
        """``view(dtype)``: the same bytes read as another dtype (outside the graph); the last dim
        scales by the ratio of the item sizes, which needs a contiguous last dim."""
        target = dtypes.to_dtype(dtype)
        data = self._data
        if not isinstance(data, np.ndarray):
            raise NotImplementedError(f"view(dtype) of a tensor on {self.device} is not implemented in minidl")
        if target.itemsize != data.dtype.itemsize:
            if self.ndim == 0 or data.strides[-1] != data.dtype.itemsize:
                raise RuntimeError("self.stride(-1) must be 1 to view " + f"{self.dtype} as {dtypes.wrap(target)} "
                                   "(different element sizes)")
            if (self.shape[-1] * data.dtype.itemsize) % target.itemsize:
                raise RuntimeError(f"self.size(-1) must be divisible by {target.itemsize // data.dtype.itemsize or 1}"
                                   f" to view {self.dtype} as {dtypes.wrap(target)} (different element sizes)")
        out = Tensor._wrap(data.view(target), None, 0)
        out._version_counter = self._version_counter
        return out
    def transpose(self, dim0, dim1): return _ops.transpose(self, dim0, dim1)
    def permute(self, *dims): return _ops.permute(self, *dims)
    def unsqueeze(self, dim): return _ops.unsqueeze(self, dim)
    def squeeze(self, dim=None): return _ops.squeeze(self, dim)
    def flatten(self, start_dim=0, end_dim=-1): return _ops.flatten(self, start_dim, end_dim)
    def expand(self, *sizes): return _ops.expand(self, *sizes)
    def masked_fill(self, mask, value): return _ops.masked_fill(self, mask, value)
    def index_fill(self, dim, index, value): return _scatter.index_fill(self, dim, index, value)
    def scatter_add(self, dim, index, src): return _scatter.scatter_add(self, dim, index, src)

    def index_add(self, dim, index, source, *, alpha=1):
        return _scatter.index_add(self, dim, index, source, alpha=alpha)

    def scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
        return _scatter_reduce.scatter_reduce(self, dim, index, src, reduce, include_self=include_self)

    def scatter(self, dim, index, src=None, value=None, *, reduce=None):
        return _scatter.scatter(self, dim, index, src, value, reduce=reduce)

    def t(self):
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
        return _ops.transpose(self, 0, 1) if self.ndim == 2 else self

    @property
    def T(self):
        return _ops.permute(self, *reversed(range(self.ndim)))


register_tensor_type(Tensor)   # the one place autograd and the ops take the Tensor type from

def _device_array_types():
    return tuple(b.array_type for b in backends._BACKENDS.values())


def _as_array(value):
    """A device array as it is; anything else (a NumPy scalar from a full reduction, a
    Python number) as an ndarray."""
    if isinstance(value, np.generic) or not isinstance(value, _device_array_types()):
        return np.asarray(value)
    return value



class StringIndexError(TypeError, IndexError):
    """A string used as an index. PyTorch raises TypeError for a one-character string and IndexError for
    a longer one (it reads that as a sequence of indices); this is both."""


def _refuse_string_index(index):
    if isinstance(index, (str, bytes)):
        raise StringIndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                               f"are valid indices (got {type(index).__name__} {index!r})")


def _comparable(o):
    """None and strings take no part in comparisons (ops/indexing.py's ``compare`` refuses them)."""
    return not (o is None or isinstance(o, (str, bytes)))
