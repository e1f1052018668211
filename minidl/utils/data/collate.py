"""default_collate and default_convert, with PyTorch's rules.

``default_collate(samples)`` merges a list of samples into a batch, recursively by the first
sample's type: tensors, NumPy arrays and NumPy scalars are stacked along a new first dimension;
Python floats become a float64 tensor, ints an int64 tensor, bools a bool tensor; strings and
bytes stay a list; a dict (or other mapping) is collated key by key; a namedtuple field by
field; a tuple or list position by position -- a tuple becomes a *list*, as in PyTorch, and
every sample must then have the same length; there a column of strings is a *tuple* (the
column zip makes), where a batch of strings at the top level or under a key stays a list.
``default_convert`` (the DataLoader's ``batch_size=None`` path) only turns NumPy arrays and
scalars into tensors, recursively.
"""
import collections.abc
import copy

import numpy as np

from ...tensor.tensor import Tensor

_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _tensor(array):
    return Tensor._wrap(np.asarray(array), None, 0)


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _stack(arrays):
    """np.stack, with PyTorch's RuntimeError (not NumPy's ValueError) for samples of unequal shapes."""
    for i, a in enumerate(arrays):
        if a.shape != arrays[0].shape:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(arrays[0].shape)} at "
                               f"entry 0 and {list(a.shape)} at entry {i}")
    return np.stack(arrays)


def default_collate(batch):
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _tensor(_stack([t.numpy(force=True) for t in batch]))
    if isinstance(elem, (np.ndarray, np.generic)) and not isinstance(elem, (np.str_, np.bytes_)):
        if elem.dtype.kind in "SaUO":
            raise TypeError(_ERROR.format(elem.dtype))
        return _tensor(_stack([np.asarray(b) for b in batch]) if isinstance(elem, np.ndarray) else np.asarray(batch))
    if isinstance(elem, bool):
        return _tensor(np.asarray(batch, dtype=np.bool_))
    if isinstance(elem, float):
        return _tensor(np.asarray(batch, dtype=np.float64))
    if isinstance(elem, int):
        return _tensor(np.asarray(batch, dtype=np.int64))
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        merged = {key: default_collate([d[key] for d in batch]) for key in elem}
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(merged)
            return clone
        try:
            return type(elem)(merged)
        except TypeError:
            return merged
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(field) for field in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        # each column is the tuple zip makes: a column of strings stays that tuple, as in PyTorch
        columns = [default_collate(column) for column in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        if isinstance(elem, collections.abc.MutableSequence):
            clone = copy.copy(elem)
            clone[:] = columns
            return clone
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(_ERROR.format(type(elem)))


def default_convert(data):
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_, np.bytes_)):
        return data if data.dtype.kind in "SaUO" else _tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()}) \
            if isinstance(data, dict) else {k: default_convert(v) for k, v in data.items()}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            return type(data)([default_convert(d) for d in data])
        except TypeError:
            return [default_convert(d) for d in data]
    return data
