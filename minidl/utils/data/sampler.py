"""Samplers: the order in which a DataLoader visits a map-style dataset, as PyTorch's.

- ``SequentialSampler``: 0, 1, ..., n - 1.
- ``RandomSampler``: a fresh permutation every epoch (or ``num_samples`` draws with
  ``replacement``), from ``generator``, by default minidl's global generator (so
  ``md.manual_seed`` and ``md.get_rng_state``/``set_rng_state`` make it reproducible).
- ``SubsetRandomSampler``, ``WeightedRandomSampler``.
- ``BatchSampler``: groups another sampler's indices into lists of ``batch_size``.

A ``generator`` is None, an ``md.Generator`` or a ``numpy.random.Generator``.
"""
import numbers

import numpy as np

from ...tensor.generator import numpy_generator  # noqa: F401  (re-exported for the loader and datasets)


def _positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value!r}")
    return int(value)


class Sampler:
    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        numpy_generator(generator)
        _positive_int("num_samples", self.num_samples)   # an empty dataset too, as PyTorch

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n, count = len(self.data_source), self.num_samples
        rng = numpy_generator(self.generator)
        if self.replacement:
            if n == 0:
                raise ValueError("RandomSampler with replacement cannot draw from an empty dataset")
            yield from rng.integers(0, n, size=count).tolist()
            return
        for _ in range(count // n if n else 0):
            yield from rng.permutation(n).tolist()
        if n:
            yield from rng.permutation(n)[:count % n].tolist()

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a fresh random order every epoch."""

    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator
        numpy_generator(generator)

    def __iter__(self):
        for i in numpy_generator(self.generator).permutation(len(self.indices)).tolist():
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class InvalidWeightsError(RuntimeError, ValueError):
    """Weights no distribution has (negative, infinite, NaN or all zero). PyTorch raises
    RuntimeError ("invalid multinomial distribution") when it draws; minidl checks when the
    sampler is made, and its error is also the ValueError it was before."""


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights`` (kept, as
    PyTorch keeps them, as a float64 tensor)."""

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        from ...tensor.tensor import Tensor
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement!r}")
        weights = np.array(weights.numpy(force=True) if hasattr(weights, "numpy") else weights, dtype=np.float64)
        if weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {weights.shape}")
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
            raise InvalidWeightsError("invalid multinomial distribution: weights must be finite, non-negative and "
                                      "not all zero")
        self.weights = Tensor._wrap(weights, None, 0)
        self.num_samples = _positive_int("num_samples", num_samples)
        if not replacement and self.num_samples > np.count_nonzero(weights):
            raise RuntimeError(f"cannot draw {self.num_samples} samples without replacement from "
                               f"{np.count_nonzero(weights)} non-zero weights")
        self.replacement = replacement
        self.generator = generator
        numpy_generator(generator)

    def __iter__(self):
        w = np.asarray(self.weights.numpy(force=True), dtype=np.float64)
        p = w / w.sum()
        draws = numpy_generator(self.generator).choice(len(p), size=self.num_samples, replace=self.replacement, p=p)
        return iter(draws.tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    def __init__(self, sampler, batch_size, drop_last):
        self.batch_size = _positive_int("batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler = sampler
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class EpochSeededSampler(Sampler):
    """minidl's ``DataLoader(shuffle=True, seed=s)``: epoch e visits the permutation of
    ``np.random.default_rng((s, e))``, the same on every run and independent of all other
    random draws, so a run resumed at epoch e (``DataLoader.set_epoch(e)``) sees the same order."""

    def __init__(self, data_source, seed):
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"seed must be an int, got {seed!r} ({type(seed).__name__})")
        self.data_source = data_source
        self.seed = int(seed)
        self.epoch = 0

    def __iter__(self):
        order = np.random.default_rng((self.seed, self.epoch)).permutation(len(self.data_source))
        return iter(order.tolist())

    def __len__(self):
        return len(self.data_source)
