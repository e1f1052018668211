"""DistributedSampler: each rank's share of a dataset, as PyTorch's
``torch.utils.data.distributed.DistributedSampler``.

Every epoch all ranks draw the same order (a permutation seeded by ``seed + epoch``, or
0..n-1 without ``shuffle``) and rank r takes every ``num_replicas``-th index from position r,
so the ranks' shares are disjoint and together cover the dataset. PyTorch's padding rule:
without ``drop_last`` the order is extended by repeating its beginning until it divides
evenly (each rank gets ceil(n / num_replicas) indices); with ``drop_last`` the tail that does
not divide evenly is dropped (each rank gets floor(n / num_replicas)).

The permutation comes from ``md.Generator().manual_seed(seed + epoch)`` and ``md.randperm``:
the same semantics as PyTorch's, but minidl's generator is not PyTorch's, so the orders differ
from PyTorch's for the same seed. Call ``set_epoch(e)`` before each epoch to reshuffle (the
epoch is part of a checkpoint, so a resumed run visits the same orders).
"""
import math
import numbers

from .sampler import Sampler


class DistributedSampler(Sampler):
    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        from ... import distributed as dist
        if num_replicas is None:
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            num_replicas = dist.get_world_size()
        if rank is None:
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            rank = dist.get_rank()
        for name, value in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise TypeError(f"DistributedSampler: {name} must be an int, got {value!r}")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be at least 1, got {num_replicas}")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        for name, value in (("shuffle", shuffle), ("drop_last", drop_last)):
            if not isinstance(value, bool):
                raise TypeError(f"DistributedSampler: {name} must be a bool, got {value!r}")
        self.dataset = dataset
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % self.num_replicas != 0:
            self.num_samples = math.ceil((n - self.num_replicas) / self.num_replicas)
        else:
            self.num_samples = math.ceil(n / self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas
        self.shuffle = shuffle
        self.seed = int(seed)

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            from ...tensor.factories import randperm
            from ...tensor.generator import Generator
            g = Generator()
            g.manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=g).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            elif indices:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Make the next iteration draw epoch ``epoch``'s order (the same on every rank)."""
        if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral):
            raise TypeError(f"DistributedSampler.set_epoch: epoch must be an int, got {epoch!r}")
        self.epoch = int(epoch)
