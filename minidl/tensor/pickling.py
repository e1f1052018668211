"""Pickling and copying Tensors (``pickle``, ``copy.copy``, ``copy.deepcopy``), as PyTorch's.

A Tensor is rebuilt from its *storage*, the array that owns its memory, and where it sits in
it (offset and strides, in elements), so tensors pickled or deep-copied together that shared
memory (a tensor and its views) share it again afterwards: the storage is one object, which
pickle's memo (and deepcopy's) writes and copies once. As in PyTorch, that is the whole
storage, even for a small view of it. What travels is the values, the class (a Parameter
stays one), ``requires_grad`` and the slots a subclass adds; never the autograd graph or the
hooks, so a non-leaf comes back as a leaf that requires grad. The gradient travels with
``copy.deepcopy`` only (and not for a Parameter: see Parameter.__deepcopy__), and deep-copying
a non-leaf raises RuntimeError, as PyTorch's. A tensor on a device is pickled as its host
values and moved back to that device when loaded.
"""
import copy

import numpy as np

from .. import backends
from ..ops.as_strided import flat_of, shared_place, strided_view


def _subclass_state(t):
    """The slots (and ``__dict__``) a Tensor subclass adds, by name."""
    from .tensor import Tensor
    state = {}
    for klass in type(t).__mro__:
        if klass is Tensor:
            break
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and hasattr(t, name):
                state[name] = getattr(t, name)
    state.update(getattr(t, "__dict__", {}))
    return state


def reduce(t):
    """``t.__reduce_ex__``: ``(rebuild, args)``."""
    data, device = t._data, None
    if type(data) is not np.ndarray:
        device = backends.device_of(data)
        data = backends.get(device).to_host(data)
    place = shared_place(data)
    if place is None or place[0] is data:
        storage, geometry = data, None
    else:
        storage, _, offset, stride = place
        geometry = (offset, tuple(data.shape), stride)
    return rebuild, (type(t), storage, data.dtype, geometry, bool(t.requires_grad), device, _subclass_state(t))


def rebuild(cls, storage, dtype, geometry, requires_grad, device, state):
    """The tensor ``reduce`` describes: of class ``cls``, over ``storage`` (the array itself, or
    the ``geometry`` ``(offset, shape, stride)`` view of its memory read as ``dtype``)."""
    if geometry is None:
        data = storage
    else:
        offset, shape, stride = geometry
        data = strided_view(flat_of(storage, dtype), shape, stride, offset)
    t = cls._wrap(data, None, 0)
    if device is not None:
        t._data = t.to(device)._data
    if requires_grad:
        t.requires_grad_(True)
    for name, value in state.items():
        object.__setattr__(t, name, value)
    return t


def deepcopy(t, memo):
    """``t.__deepcopy__``: a copy of the values (its storage copied once per deepcopy call, so
    views stay views of one another), with requires_grad and a copy of the gradient."""
    if not t.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support the deepcopy "
                           "protocol at the moment")
    _, (cls, storage, dtype, geometry, requires_grad, device, state) = reduce(t)
    new = rebuild(cls, copy.deepcopy(storage, memo), dtype, geometry, requires_grad, device,
                  copy.deepcopy(state, memo))
    memo[id(t)] = new
    if t._grad is not None:
        new._grad = copy.deepcopy(t._grad, memo)
    return new
