"""Tensor -> NumPy, by PyTorch's rule.

``t.numpy()`` hands out the tensor's own memory, so PyTorch refuses it where that array
would mislead:
- the tensor is not on the CPU: there is no host memory to share, and a silent copy
  would make writes through the array vanish (TypeError: use ``t.cpu()``);
- the tensor requires grad while grad mode is on: values read or written through the
  array are invisible to autograd (no node records them, no version counter sees the
  write), so the caller is asked to say ``t.detach().numpy()`` and cut the graph on
  purpose (RuntimeError). Under ``no_grad`` nothing is being recorded, and PyTorch
  allows it.

``t.numpy(force=True)`` is ``t.detach().cpu().numpy()``: the CPU tensor's memory as is,
a host copy off the CPU. ``tolist()`` and ``item()`` return Python values that share
nothing, so PyTorch allows them on any tensor; they read the host values the same way.
NumPy's ``np.asarray(t)`` / ``np.array(t)`` come through ``__array__`` and follow
``numpy()``.

``float(t)`` and ``complex(t)`` of a tensor that requires grad return a number autograd cannot
follow; PyTorch allows them with a UserWarning, once per process (``warn_scalar_of_graph``).
``int``, ``bool`` and ``item()`` do not warn, as in PyTorch.
"""
import warnings

import numpy as np

from .. import backends
from ..autograd import grad_mode


_SCALAR_OF_GRAPH = ("Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
                    "Consider using tensor.detach() first.")
_warned = []      # PyTorch warns once per process


def warn_scalar_of_graph(t):
    """PyTorch's one warning for float() / complex() of a tensor that requires grad."""
    if t.requires_grad and not _warned:
        _warned.append(True)
        warnings.warn(_SCALAR_OF_GRAPH, UserWarning, stacklevel=3)


def host_values(t):
    """The tensor's values in a host ndarray: its own memory on the CPU, a copy elsewhere.
    No check: for reads that hand out no array of the tensor (tolist, item, printing)."""
    data = t._data
    return data if type(data) is np.ndarray else backends.get(backends.device_of(data)).to_host(data)


def numpy(t, force=False):
    if not force:
        if type(t._data) is not np.ndarray and backends.device_of(t._data) != "cpu":
            raise TypeError(f"can't convert {t.device} device type tensor to numpy. Use Tensor.cpu() to copy the "
                            "tensor to host memory first.")
        if grad_mode._state.enabled and t.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                               "instead.")
    return host_values(t)


def array(t, dtype=None, copy=None):
    """``__array__`` under NumPy 2's protocol: ``copy=True`` asks for memory of its own,
    ``copy=False`` for none copied (a dtype change that needs a copy is then a ValueError,
    as NumPy's own arrays answer), None for whichever is needed."""
    a = numpy(t)
    if dtype is not None and np.dtype(dtype) != a.dtype:
        if copy is False:
            raise ValueError(f"Unable to avoid copy while creating an array from a {t.dtype} tensor as dtype "
                             f"{np.dtype(dtype)}: the values must be converted")
        return a.astype(dtype)
    return a.copy() if copy else a
