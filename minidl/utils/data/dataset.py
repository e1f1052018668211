"""Datasets, as PyTorch's ``torch.utils.data``.

- ``Dataset``: map-style, anything with ``__getitem__(i)`` and ``__len__``; ``a + b`` concatenates.
- ``IterableDataset``: a stream, anything with ``__iter__`` (with DataLoader workers, each
  worker iterates its own copy: split the work with ``get_worker_info()``).
- ``TensorDataset(x, y)[i] == (x[i], y[i])``; it also answers a whole batch of indices at once
  (``take``), which the DataLoader uses so that a batch is one fancy-indexing copy per tensor
  instead of N item look-ups and a stack.
- ``Subset``, ``ConcatDataset``, ``random_split`` (lengths, or fractions summing to 1).
"""
import bisect
import math
import numbers
import warnings

import numpy as np

from ...tensor.tensor import Tensor
from .sampler import numpy_generator


class Dataset:
    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __len__")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")

    def __getitem__(self, index):
        raise TypeError(f"{type(self).__name__} is an IterableDataset: it has no __getitem__; iterate over it")

    def __add__(self, other):
        raise TypeError("ConcatDataset does not support IterableDataset")


class TensorDataset(Dataset):
    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        arrays = [t.numpy() if isinstance(t, Tensor) else np.asarray(t) for t in tensors]
        sizes = [a.shape[0] if a.ndim else None for a in arrays]
        if None in sizes or len(set(sizes)) != 1:
            shapes = ", ".join(str(a.shape) for a in arrays)
            raise ValueError(f"TensorDataset: every tensor needs the same size in dim 0, got shapes {shapes}")
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
    lengths = list(lengths)
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
