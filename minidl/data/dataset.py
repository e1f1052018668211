"""Datasets: anything with ``__len__`` and ``__getitem__(i)``; TensorDataset zips tensors.

``TensorDataset(images, labels)[i]`` is ``(images[i], labels[i])``. It also answers a whole
batch of indices at once (``take``), which the DataLoader uses so that a batch is one
fancy-indexing copy per tensor instead of N item look-ups and a stack.
"""
import numpy as np

from ..tensor.tensor import Tensor


class Dataset:
    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __len__")


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
        """The batch at ``indices`` (an int array): one tensor per component."""
        return tuple(Tensor._wrap(a[indices], None, 0) for a in self._arrays)
