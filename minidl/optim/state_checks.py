"""Checks of loaded optimizer and scheduler state.

A state dict comes from a file, maybe from another model or another version, maybe
damaged; loading one that does not fit must fail at once with a ValueError naming what
does not fit (not later, inside ``step()``, with a bare NumPy error), and must change
nothing. These helpers check one value each and return it in the form it is kept in.
"""
import copy
import math
import numbers

import numpy as np

from .. import backends
from ..tensor import dtype as dtypes
from ..tensor.tensor import Tensor


def is_real(x):
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def is_index(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def like(where, current, loaded):
    """``loaded``, checked to be the same kind of value as ``current``: a bool for a bool, a
    number for a number (int and float alike), a string for a string, a list or tuple of as
    many such for a list or tuple (returned as ``current``'s type); a 1-element Tensor also
    stands for a number, as a Tensor lr does in PyTorch. Values whose current
    form is anything else (None, say) are not checked; all are copied."""
    if isinstance(current, (bool, np.bool_)):
        if not isinstance(loaded, (bool, np.bool_)):
            raise ValueError(f"{where}: expected a bool, got {_show(loaded)}")
        return bool(loaded)
    if is_real(current):
        if isinstance(loaded, Tensor) and loaded.numel() == 1:
            return loaded.clone()   # a Tensor lr (PyTorch allows one in place of a number)
        if not is_real(loaded):
            raise ValueError(f"{where}: expected a number, got {_show(loaded)}")
        return loaded.item() if isinstance(loaded, np.generic) else loaded
    if isinstance(current, str):
        if not isinstance(loaded, str):
            raise ValueError(f"{where}: expected a string, got {_show(loaded)}")
        return loaded
    if isinstance(current, (list, tuple)):
        if not isinstance(loaded, (list, tuple)) or len(loaded) != len(current):
            raise ValueError(f"{where}: expected a sequence of {len(current)} values like {current!r}, "
                             f"got {_show(loaded)}")
        return type(current)(like(f"{where}[{i}]", c, v) for i, (c, v) in enumerate(zip(current, loaded)))
    return copy.deepcopy(loaded)


def count(where, value):
    """A step count: an int >= 0 (also a 0-d array, or a whole float, as PyTorch saves it)."""
    value = host(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not is_real(value) or not math.isfinite(value) or value != int(value) or value < 0:
        raise ValueError(f"{where}: expected a step count (an int >= 0), got {_show(value)}")
    return int(value)


def real(where, value):
    """A finite number kept per parameter (also a 0-d array, as PyTorch saves its scalars)."""
    value = host(value)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not is_real(value) or not math.isfinite(value):
        raise ValueError(f"{where}: expected a finite number, got {_show(value)}")
    return float(value)


def param_shaped(where, value, param):
    """A private host copy of a state array that must have ``param``'s shape, cast to its dtype."""
    value = host(value)
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        array = None
    kinds = "biufc" if np.dtype(param.dtype).kind == "c" else "biuf"
    if array is None or not dtypes.holds_numbers(array.dtype, kinds):
        raise ValueError(f"{where}: expected an array of numbers of shape {tuple(param.shape)}, got {_show(value)}")
    if array.shape != tuple(param.shape):
        raise ValueError(f"{where}: expected shape {tuple(param.shape)} (the parameter's), got {array.shape}")
    return np.array(array, dtype=param.dtype, copy=True)


def host(value):
    """A Tensor's or device array's values as a NumPy array; anything else as it is."""
    if isinstance(value, Tensor):
        return value.numpy(force=True)
    device = backends.device_of(value)
    return value if device == "cpu" else backends.get(device).to_host(value)


def _show(value):
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    text = repr(value)
    return f"{text if len(text) <= 60 else text[:57] + '...'} ({type(value).__name__})"
