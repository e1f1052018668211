"""Turning one index (or list of indices) from the sampler into one batch: the work both the
main process and every DataLoader worker do.

Map-style: ``collate_fn([dataset[i] for i in indices])``, through ``dataset.__getitems__``
when the dataset has one (PyTorch's batched fetch), or ``dataset.take`` (TensorDataset: the
collated batch in one indexing copy per tensor) with the default collate. Iterable: the next
``batch_size`` samples of the dataset's iterator (StopIteration once it is exhausted, or when
``drop_last`` and fewer remain); without auto-batching, the next sample.
"""
from .collate import default_collate


class MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, batch_size, drop_last):
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        self._take = getattr(dataset, "take", None) if collate_fn is default_collate else None
        self._getitems = getattr(dataset, "__getitems__", None)

    def fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if self._take is not None:
            return self._take(index)
        samples = self._getitems(index) if self._getitems is not None else [self.dataset[i] for i in index]
        return self.collate_fn(samples)


class IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, batch_size, drop_last):
        self.auto_collation, self.collate_fn = auto_collation, collate_fn
        self.batch_size, self.drop_last = batch_size, drop_last
        self._iterator = iter(dataset)
        self._ended = False

    def fetch(self, index=None):
        if self._ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self._iterator))
        samples = []
        for _ in range(self.batch_size):
            try:
                samples.append(next(self._iterator))
            except StopIteration:
                self._ended = True
                break
        if not samples or (self.drop_last and len(samples) < self.batch_size):
            raise StopIteration
        return self.collate_fn(samples)


def make_fetcher(iterable, dataset, auto_collation, collate_fn, batch_size, drop_last):
    kind = IterableFetcher if iterable else MapFetcher
    return kind(dataset, auto_collation, collate_fn, batch_size, drop_last)
