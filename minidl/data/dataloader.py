"""DataLoader: iterate over a dataset in (optionally shuffled) batches of stacked tensors.

Shuffling is reproducible. With ``seed``, epoch e visits the permutation drawn from
``np.random.default_rng((seed, e))``: the same on every run, different each epoch, and
independent of any other random numbers drawn (resume at epoch e with ``set_epoch(e)``).
Without ``seed`` each epoch's permutation is drawn from minidl's global generator
(``md.manual_seed``), so saving ``md.get_rng_state()`` with a checkpoint resumes it too.
"""
import numpy as np

from .. import random
from ..tensor.tensor import Tensor


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, seed=None, collate_fn=None):
        if int(batch_size) != batch_size or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        self.dataset = dataset
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.seed = seed
        self.collate_fn = collate_fn or default_collate
        self.epoch = 0

    def set_epoch(self, epoch):
        """Choose which epoch's permutation the next iteration uses (with a seed)."""
        self.epoch = int(epoch)

    def __len__(self):
        n, b = len(self.dataset), self.batch_size
        return n // b if self.drop_last else -(-n // b)

    def _order(self):
        n = len(self.dataset)
        if not self.shuffle:
            return np.arange(n)
        if self.seed is not None:
            return np.random.default_rng((int(self.seed), self.epoch)).permutation(n)
        return random.generator().permutation(n)

    def __iter__(self):
        order = self._order()
        self.epoch += 1
        take = getattr(self.dataset, "take", None) if self.collate_fn is default_collate else None
        for i in range(len(self)):
            idx = order[i * self.batch_size:(i + 1) * self.batch_size]
            if take is not None:
                yield take(idx)
            else:
                yield self.collate_fn([self.dataset[int(j)] for j in idx])


def default_collate(items):
    """Stack a list of samples: tuples/lists component-wise, dicts key-wise, tensors, arrays
    and numbers into one tensor with a new leading batch dimension."""
    first = items[0]
    if isinstance(first, (tuple, list)):
        return type(first)(default_collate([it[k] for it in items]) for k in range(len(first)))
    if isinstance(first, dict):
        return {k: default_collate([it[k] for it in items]) for k in first}
    if isinstance(first, Tensor):
        return Tensor._wrap(np.stack([it.numpy() for it in items]), None, 0)
    if isinstance(first, (np.ndarray, np.generic, int, float, bool)):
        arr = np.asarray(items)
        if arr.dtype.kind == "f" and not isinstance(first, (np.ndarray, np.generic)):
            arr = arr.astype(np.float32)   # Python floats become float32, as md.tensor does
        return Tensor._wrap(arr, None, 0)
    raise TypeError(f"default_collate: cannot batch samples of type {type(first).__name__}; "
                    "pass a collate_fn")
