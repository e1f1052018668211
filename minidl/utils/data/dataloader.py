"""DataLoader: iterate over a dataset in batches, with PyTorch's arguments and semantics.

The sampler gives the order (``SequentialSampler``, or ``RandomSampler`` with
``shuffle=True``, drawing from ``generator`` or minidl's global generator), the batch sampler
groups it into lists of ``batch_size`` indices (``drop_last`` drops a short last batch), the
dataset is indexed and ``collate_fn`` (default_collate) stacks each batch. ``batch_size=None``
turns batching off (each sample, converted by default_convert). With ``num_workers > 0`` the
batches are made in worker processes (worker.py), and come in the same order.

Beyond PyTorch: ``seed=s`` with ``shuffle=True`` makes epoch e visit a permutation fixed by
(s, e) alone (``set_epoch(e)`` resumes at epoch e; each pass over the loader moves to the
next epoch). ``pin_memory`` is accepted and does nothing (there is no pinned host memory on
the CPU backend; without an accelerator it warns as PyTorch's does); ``in_order=False`` is
accepted and still yields in order.
"""
import math
import multiprocessing
import numbers
import warnings

from ... import accelerator
from .collate import default_collate, default_convert
from .dataset import IterableDataset
from .fetch import make_fetcher
from .sampler import BatchSampler, EpochSeededSampler, RandomSampler, SequentialSampler, numpy_generator
from .worker import MultiProcessIterator


class DataLoader:
    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True, seed=None):
        if isinstance(num_workers, bool) or not isinstance(num_workers, numbers.Integral) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             f"multiprocessing, got num_workers={num_workers!r}")
        if not isinstance(timeout, numbers.Real) or timeout < 0:
            raise ValueError(f"timeout option should be non-negative, got timeout={timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing. Let num_workers "
                             "> 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and (not isinstance(prefetch_factor, numbers.Integral) or prefetch_factor < 1):
            raise ValueError(f"prefetch_factor option should be a positive integer, got {prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        if not (collate_fn is None or callable(collate_fn)):
            raise TypeError(f"collate_fn must be callable, got {type(collate_fn).__name__}")
        if not (worker_init_fn is None or callable(worker_init_fn)):
            raise TypeError(f"worker_init_fn must be callable, got {type(worker_init_fn).__name__}")
        numpy_generator(generator)
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value not in (None, False):
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, "
                                     f"but got {name}={value!r}")
        elif not hasattr(dataset, "__getitem__"):
            # no __len__ is needed with a sampler that does not ask for it (as PyTorch)
            raise TypeError(f"DataLoader needs a map-style dataset (with __getitem__) or an IterableDataset, "
                            f"got {type(dataset).__name__}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if seed is not None and generator is not None:
            raise ValueError("seed and generator are two ways to fix the shuffling order; give one, not both")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None:
            if drop_last:
                raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                                 "drop_last")
        elif isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size!r}")
        if not self._iterable and sampler is None:
            if shuffle and seed is not None:
                sampler = EpochSeededSampler(dataset, seed)
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if not self._iterable and batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, int(batch_size), bool(drop_last))

        self.dataset = dataset
        self.batch_size = None if batch_size is None else int(batch_size)
        self.drop_last = bool(drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.num_workers = int(num_workers)
        self.prefetch_factor = prefetch_factor
        self.pin_memory = bool(pin_memory)
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self._multiprocessing_context()      # checked now, not in the first epoch
        self.generator = generator
        self.persistent_workers = bool(persistent_workers)
        self.in_order = in_order
        self.seed = seed
        self.epoch = 0
        self.collate_fn = collate_fn if collate_fn is not None else (
            default_collate if self._auto_collation else default_convert)
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None or (self._iterable and self.batch_size is not None)

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def set_epoch(self, epoch):
        """Choose which epoch's permutation the next pass uses (with ``seed``)."""
        self.epoch = int(epoch)

    def _multiprocessing_context(self):
        ctx = self.multiprocessing_context
        if ctx is None:
            return multiprocessing.get_context()
        if isinstance(ctx, str):
            methods = multiprocessing.get_all_start_methods()
            if ctx not in methods:
                raise ValueError(f"multiprocessing_context option should specify a valid start method in "
                                 f"{methods!r}, but got multiprocessing_context={ctx!r}")
            return multiprocessing.get_context(ctx)
        if not hasattr(ctx, "Process"):
            raise TypeError(f"multiprocessing_context option should be a valid context object or a string "
                            f"specifying the start method, but got multiprocessing_context={ctx!r}")
        return ctx

    def _draw_base_seed(self):
        """The workers' base seed, drawn once per iterator (whatever num_workers is, so the
        shuffling order drawn after it does not depend on num_workers)."""
        return int(numpy_generator(self.generator).integers(0, 2 ** 62))

    def _warn_about_pinning(self):
        """PyTorch's warnings as each new iterator starts: pinned memory needs an accelerator
        (without one the batches stay in pageable memory, as they always do here)."""
        if self.pin_memory and self.pin_memory_device:
            warnings.warn("pin_memory_device is deprecated, the current accelerator will be used as the device,"
                          f"ignore pin_memory_device='{self.pin_memory_device}'.", stacklevel=3)
        if self.pin_memory and not accelerator.is_available():
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned "
                          "memory won't be used.", stacklevel=3)

    def __iter__(self):
        if isinstance(self.sampler, EpochSeededSampler):
            self.sampler.epoch = self.epoch
        self.epoch += 1
        if self.num_workers == 0:
            self._warn_about_pinning()
            return _SingleProcessIterator(self)
        if self.persistent_workers:
            if self._iterator is None:
                self._warn_about_pinning()
                self._iterator = MultiProcessIterator(self)
            else:
                self._iterator._reset()
            return self._iterator
        self._warn_about_pinning()
        return MultiProcessIterator(self)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)     # TypeError where the dataset has no length, as PyTorch
            if self.batch_size is not None:
                n = n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)
            return n
        return len(self._index_sampler)


class _SingleProcessIterator:
    def __init__(self, loader):
        self._loader = loader
        loader._draw_base_seed()
        self._indices = None if loader._iterable else iter(loader._index_sampler)
        self._fetcher = make_fetcher(loader._iterable, loader.dataset, loader._auto_collation, loader.collate_fn,
                                     loader.batch_size, loader.drop_last)

    def __iter__(self):
        return self

    def __len__(self):
        return len(self._loader)

    def __next__(self):
        index = None if self._indices is None else next(self._indices)
        return self._fetcher.fetch(index)
