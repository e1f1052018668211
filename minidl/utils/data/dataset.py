"""Datasets, as PyTorch's ``torch.utils.data``.

- ``Dataset``: map-style, anything with ``__getitem__(i)`` and ``__len__``; ``a + b`` concatenates.
- ``IterableDataset``: a stream, anything with ``__iter__`` (with DataLoader workers, each
  worker iterates its own copy: split the work with ``get_worker_info()``).
- ``TensorDataset(x, y)[i] == (x[i], y[i])``; it also answers a whole batch of indices at once
  (``take``), which the DataLoader uses so that a batch is one fancy-indexing copy per tensor
  instead of N item look-ups and a stack.
- ``Subset``, ``ConcatDataset``, ``random_split`` (lengths, or fractions summing to 1).
- ``StackDataset(a, b)[i] == (a[i], b[i])`` (or a dict, from keyword datasets); ``ChainDataset``
  (also ``stream_a + stream_b``): iterable datasets one after the other.
"""
import bisect
import math
import numbers
import warnings

import numpy as np

from ...tensor.tensor import Tensor
from .sampler import numpy_generator


class Dataset:
    """Map-style: subclasses define ``__getitem__`` and, usually, ``__len__``. As in PyTorch the base
    class has no ``__len__``: ``len()`` of a dataset without one (a stream) is a TypeError, which
    ``list(loader)``'s length hint and ``hasattr(ds, "__len__")`` rely on."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__ (subclasses of Dataset "
                                  "should implement __getitem__)")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} is an IterableDataset: it has no __getitem__; iterate over it")

    def __add__(self, other):
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """Iterable datasets one after the other (checked lazily, as PyTorch: when iterated or measured)."""

    def __init__(self, datasets):
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self):
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class StackDataset(Dataset):
    """Datasets of one length side by side: ``StackDataset(a, b)[i] == (a[i], b[i])``,
    ``StackDataset(x=a, y=b)[i] == {"x": a[i], "y": b[i]}``."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or ``dict``- (via ``kwargs``) like "
                             "input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices):
        """The samples at ``indices``, each part through its own ``__getitems__`` where it has one."""
        named = isinstance(self.datasets, dict)
        parts = self.datasets.items() if named else enumerate(self.datasets)
        columns = {}
        for key, d in parts:
            getitems = getattr(d, "__getitems__", None)
            items = getitems(list(indices)) if callable(getitems) else [d[i] for i in indices]
            if len(items) != len(indices):
                raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, got {len(items)}")
            columns[key] = items
        if named:
            return [{k: columns[k][j] for k in columns} for j in range(len(indices))]
        return [tuple(columns[k][j] for k in columns) for j in range(len(indices))]

    def __len__(self):
        return self._length


class _SizeMismatch(ValueError, AssertionError):
    """TensorDataset's size check: an AssertionError in PyTorch (an ``assert``), a ValueError in
    minidl before; both catch it."""


class TensorDataset(Dataset):
    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        arrays = [t.numpy(force=True) if isinstance(t, Tensor) else np.asarray(t) for t in tensors]
        sizes = [a.shape[0] if a.ndim else None for a in arrays]
        if None in sizes or len(set(sizes)) != 1:
            shapes = ", ".join(str(a.shape) for a in arrays)
            raise _SizeMismatch(f"Size mismatch between tensors: TensorDataset needs every tensor to have the same "
                                f"size in dim 0, got shapes {shapes}")
        self.tensors = tuple(t if isinstance(t, Tensor) else Tensor._wrap(a, None, 0)
                             for t, a in zip(tensors, arrays))
        self._arrays = arrays

    def __getitem__(self, index):
        return tuple(Tensor._wrap(a[index], None, 0) for a in self._arrays)

    def __len__(self):
        return self._arrays[0].shape[0]

    def take(self, indices):
        """The batch at ``indices`` (a list of ints), as default_collate would give it: a list
        of one tensor per component."""
        indices = np.asarray(indices, dtype=np.int64)
        return [Tensor._wrap(a[indices], None, 0) for a in self._arrays]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices):
        inner = getattr(self.dataset, "__getitems__", None)
        if inner is not None:
            return inner([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self):
        return len(self.indices)


class ConcatDataset(Dataset):
    """The samples of several map-style datasets, one after the other."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]).tolist())

    def __len__(self):
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        if idx >= len(self):
            raise IndexError(f"index {idx} is out of range for a ConcatDataset of length {len(self)}")
        which = bisect.bisect_right(self.cumulative_sizes, idx)
        start = self.cumulative_sizes[which - 1] if which > 0 else 0
        return self.datasets[which][idx - start]


def random_split(dataset, lengths, generator=None):
    """Split ``dataset`` into non-overlapping ``Subset``s of the given lengths, or of the given
    fractions of its length (summing to 1: the floors, then one more each, round-robin, until
    all samples are placed), drawn from ``generator`` (default: minidl's global one)."""
    n = len(dataset)
    # 0-d tensors (PyTorch's lengths may be tensors) as their numbers
    lengths = [x.item() if hasattr(x, "item") and not isinstance(x, numbers.Real) else x for x in lengths]
    if not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in lengths):
        raise TypeError(f"random_split lengths must be ints or fractions, got {lengths!r:.80}")
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        if any(not 0 <= f <= 1 for f in lengths):
            raise ValueError(f"Fraction at index {next(i for i, f in enumerate(lengths) if not 0 <= f <= 1)} "
                             "is not between 0 and 1")
        sizes = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=2)
        lengths = sizes
    if any(int(x) != x or x < 0 for x in lengths):
        raise ValueError(f"random_split lengths must be non-negative integers (or fractions summing to 1), "
                         f"got {lengths}")
    if sum(lengths) != n:
        raise ValueError(f"Sum of input lengths does not equal the length of the input dataset! "
                         f"(lengths sum to {sum(lengths)}, the dataset has {n})")
    order = numpy_generator(generator).permutation(n).tolist()
    bounds = np.cumsum([0] + [int(x) for x in lengths]).tolist()
    return [Subset(dataset, order[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
