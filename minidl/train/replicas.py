"""A training run spread over the ranks of minidl.distributed (data parallel), as ``fit`` sees it.

Under ``mpiexec -n K`` every rank runs the same program: the same model (DistributedDataParallel
keeps the parameters identical), its own shard of each step's batch. What must then hold:

- rank 0 alone writes: the checkpoint, metrics.csv / metrics.json / loss.png, the progress bar
  and the messages (the other ranks print nothing), so K processes never race on one file;
- every rank reads the checkpoint when resuming (each restores its model, optimizer, scheduler,
  RNG and data position from the same file: one machine, or a directory every host sees);
- the ranks take every decision together, at the same step: after each step one all-reduce of
  [loss, items, stop requested, signal] gives every rank the mean of the ranks' losses (what is
  logged, and what decides divergence), the items of the whole global batch (the throughput)
  and whether any rank was asked to stop. A decision taken by one rank alone (a Ctrl-C seen
  by one process first, a NaN on one shard) would leave the others waiting in the next
  collective.

``Replicas.of_default_group()`` reads the default process group; without one (or with one
rank) it is the single-process run, ``Replicas()``, and none of the above costs anything.
"""
import numpy as np


class Replicas:
    """``rank`` of ``world_size`` ranks, for the training loop (see the module docstring); the
    default is the single-process run. ``Replicas.of_default_group()`` reads minidl.distributed."""

    def __init__(self, rank=0, world_size=1):
        self.rank, self.world_size = int(rank), int(world_size)

    @classmethod
    def of_default_group(cls):
        from .. import distributed as dist
        if not dist.is_initialized():
            return cls()
        return cls(dist.get_rank(), dist.get_world_size())

    @classmethod
    def join(cls):
        """The ranks of this run: under an MPI launcher (``mpiexec -n K minidl train ...``) the
        default process group is initialised here (once), otherwise the single-process run."""
        from .. import distributed as dist
        if not dist.is_initialized() and dist.process_group._launched_by_mpi():
            dist.init_process_group("mpi")
        return cls.of_default_group()

    @property
    def main(self):
        """True on the rank that writes files and prints (rank 0)."""
        return self.rank == 0

    def agree(self, loss, items, signum):
        """(mean loss over the ranks, items over the ranks, the stop signal any rank received or
        None), the same on every rank; ``signum`` is this rank's (None: no stop request)."""
        if self.world_size == 1:
            return loss, items, signum
        from .. import distributed as dist
        from ..tensor.tensor import Tensor
        t = Tensor._wrap(np.array([loss, items, 0.0 if signum is None else 1.0, signum or 0.0]), None, 0)
        dist.all_reduce(t)
        total_loss, total_items, stopped, signals = t.numpy(force=True).tolist()
        return total_loss / self.world_size, total_items, int(round(signals / stopped)) if stopped else None
