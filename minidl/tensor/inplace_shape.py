"""Methods that change a tensor itself rather than its values: the in-place shape methods
(``t_``, ``transpose_``, ``swapaxes_``/``swapdims_``, ``squeeze_``, ``unsqueeze_``), ``resize_``
and ``resize_as_``; and the element-by-element Python callables ``apply_``, ``map_``, ``map2_``.

In-place shape methods, as PyTorch's: the tensor becomes the view the out-of-place method
would return (same memory, new shape and strides). In autograd it is an in-place op: the
tensor takes that view op as its history (``y.t_()`` on a non-leaf gives y the transpose's
node, so its gradient is transposed back on its way to y's old history), its version is
bumped (a node that saved its values refuses to backpropagate through the stale shape), and
a leaf that requires grad refuses it in grad mode (under no_grad it just changes shape and
stays a leaf). A non-leaf keeps its history correct under no_grad too: the view op is
recorded all the same (PyTorch would keep the old node, whose gradient no longer has the
tensor's shape).

``resize_(size)``, as PyTorch's: the tensor becomes the C-ordered run of ``numel`` elements of
its storage from its storage offset (ops/as_strided.py says what the storage is), its old
values read in storage order. When the storage is too short, the tensor gets a longer one
holding the old storage's values, then uninitialised elements; other tensors over the old
storage keep the old memory (PyTorch's storage grows for all of them). A tensor that
requires grad cannot be resized.
"""
import numbers

import numpy as np

from .. import ops as _ops
from ..autograd import op_function, grad_mode, versions, views
from ..ops.as_strided import flat_storage
from .inplace import _check_recordable


def _restride(t, name, make):
    """Make t the view ``make(t)`` of its own memory (see the module docstring)."""
    views.current(t)
    keep_history = t._requires_grad and t._node is not None
    state = grad_mode._state
    if state.enabled and t._requires_grad:
        _check_recordable(t, name)
    # the op reads a stand-in for t as it is (same memory, counter and history): the node keeps
    # its input, whose shape its gradient must have, while t itself changes shape
    old = op_function.Tensor._wrap(t._data, t._node, t._out_index)
    old._requires_grad, old._version_counter, old._base = t._requires_grad, t._version_counter, t._base
    if t._base is not None:
        old._view_version = t._view_version
    enabled, state.enabled = state.enabled, state.enabled or keep_history
    try:
        new = make(old)
    finally:
        state.enabled = enabled
    t._data = new._data
    if new._node is not None:
        t._node, t._out_index = new._node, new._out_index
    versions.bump(t._version_counter)
    if t._base is not None:
        t._view_version = t._version_counter.value
    return t


def t_(self):
    """Transpose a matrix in place (a 0-d or 1-d tensor keeps its shape)."""
    if self.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return _restride(self, "t_", lambda s: _ops.transpose(s, 0, 1) if s.ndim == 2 else _ops.reshape(s, *s.shape))


def transpose_(self, dim0, dim1):
    return _restride(self, "transpose_", lambda s: _ops.transpose(s, dim0, dim1))


def swapaxes_(self, axis0, axis1):
    return _restride(self, "swapaxes_", lambda s: _ops.transpose(s, axis0, axis1))


def swapdims_(self, dim0, dim1):
    return _restride(self, "swapdims_", lambda s: _ops.transpose(s, dim0, dim1))


def squeeze_(self, dim=None):
    return _restride(self, "squeeze_", lambda s: _ops.squeeze(s, dim))


def unsqueeze_(self, dim):
    return _restride(self, "unsqueeze_", lambda s: _ops.unsqueeze(s, dim))


# resize_ ---------------------------------------------------------------------------------------
def _size_arg(op, sizes):
    size = sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    out = []
    for n in size:
        if isinstance(n, bool) or not isinstance(n, (numbers.Integral, np.integer)) and not hasattr(n, "__index__"):
            raise TypeError(f"{op}(): argument 'size' (position 1) must be tuple of ints, not {type(n).__name__}")
        out.append(int(n.__index__()))
    if any(n < 0 for n in out):
        raise RuntimeError(f"{op}: Trying to create tensor with negative dimension "
                           f"{next(n for n in out if n < 0)}: {out}")
    return tuple(out)


def resize_(self, *sizes, memory_format=None):
    """Give the tensor shape ``sizes`` over its storage (see the module docstring)."""
    from . import memory_format as _formats
    _formats.check(memory_format)
    size = _size_arg("resize_", sizes)
    if views.current(self)._requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    data = self._data
    if type(data) is not np.ndarray:
        raise NotImplementedError(f"resize_ is not implemented for device '{self.device}': it reshapes the host "
                                  "storage of a CPU tensor; move the tensor to the CPU with .cpu()")
    if size != data.shape:
        flat, offset = flat_storage(data)
        n = int(np.prod(size, dtype=np.int64))
        if offset + n > flat.size:
            grown = np.empty(offset + n, dtype=data.dtype)
            grown[:flat.size] = flat
            flat = grown
        self._data = flat[offset:offset + n].reshape(size)
    versions.bump(self._version_counter)
    if self._base is not None:
        self._view_version = self._version_counter.value
    return self


def resize_as_(self, the_template, memory_format=None):
    """``resize_`` to the template tensor's shape."""
    if not isinstance(the_template, op_function.Tensor):
        raise TypeError(f"resize_as_(): argument 'the_template' (position 1) must be Tensor, not "
                        f"{type(the_template).__name__}")
    return resize_(self, tuple(the_template.shape), memory_format=memory_format)


# Python callables per element ------------------------------------------------------------------
class CpuOnly(TypeError, NotImplementedError):
    """PyTorch's TypeError for a host-only method called on a device tensor, which is also the
    NotImplementedError minidl raises for an op a device does not run."""


def _check_callable_target(name, tensors):
    for t in tensors:
        if views.current(t)._requires_grad:
            raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use var.detach().{name}() "
                               "instead.")
        if type(t._data) is not np.ndarray:
            raise CpuOnly(f"{name} is only implemented on CPU tensors, got a tensor on {t.device}")


def _others(name, self, others):
    """The other operands broadcast to self's shape, refused unless of self's dtype."""
    from .dtype import legacy_type_name
    out = []
    for arg, o in others:
        if not isinstance(o, op_function.Tensor):
            raise TypeError(f"{name}(): argument '{arg}' must be Tensor, not {type(o).__name__}")
        if o.dtype != self.dtype:
            raise TypeError(f"{name}: expected minidl.{legacy_type_name(self.dtype)} for '{arg}' (got "
                            f"minidl.{legacy_type_name(o.dtype)})")
        try:
            out.append(np.broadcast_to(o._data, self._data.shape))
        except ValueError:
            raise RuntimeError(f"{name}: the size of '{arg}' {list(o.shape)} must broadcast to self's size "
                               f"{list(self.shape)}") from None
    return out


def _write_elementwise(name, self, fn, arrays):
    """self[i] = fn(self[i], other[i]...) with Python numbers, cast back to self's dtype."""
    if not callable(fn):
        raise TypeError(f"'{type(fn).__name__}' object is not callable")
    if not self._data.flags.writeable:
        raise RuntimeError(f"{name}: the tensor's memory is read-only (an expanded tensor); clone() it first")
    result = np.frompyfunc(fn, len(arrays), 1)(*(a.astype(object) for a in arrays))
    result = np.asarray(result, dtype=object)
    for r in result.reshape(-1):
        if not isinstance(r, (numbers.Number, np.number, np.bool_)) or isinstance(r, complex):
            raise TypeError(f"must be real number, not {type(r).__name__}")
    self._data[...] = result.astype(self._data.dtype)
    return self


def apply_(self, callable):   # noqa: A002  (PyTorch's argument name)
    """Replace each element x by callable(x) (a Python number in, one out); CPU only, outside
    autograd, as PyTorch's."""
    _check_callable_target("apply_", [self])
    return _write_elementwise("apply_", self, callable, [self._data])


def map_(self, tensor, callable):   # noqa: A002
    """self[i] = callable(self[i], tensor[i]), tensor broadcast to self's shape; CPU only."""
    _check_callable_target("map_", [self, tensor] if isinstance(tensor, op_function.Tensor) else [self])
    (other,) = _others("map_", self, [("tensor", tensor)])
    return _write_elementwise("map_", self, callable, [self._data, other])


def map2_(self, x, y, callable):   # noqa: A002
    """self[i] = callable(self[i], x[i], y[i]), x and y broadcast to self's shape; CPU only."""
    _check_callable_target("map2_", [t for t in (self, x, y) if isinstance(t, op_function.Tensor)])
    a, b = _others("map2_", self, [("x", x), ("y", y)])
    return _write_elementwise("map2_", self, callable, [self._data, a, b])
