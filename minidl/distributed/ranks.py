"""Ranks: checking the rank a call names, translating between group and global ranks, and a
process's rank on its node.

minidl has one group, the default one of all ranks, so a group rank and a global rank are the
same number; the translations still check that the rank is in the group, as PyTorch's do for a
group other than ``group.WORLD``.
"""
import os

import numpy as np

from . import process_group
from .process_group import GroupMember, resolve

# variables in which MPI launchers give a process its rank on its node (MPICH's hydra, Open MPI, Slurm)
_LOCAL_RANK_VARIABLES = ("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")


def check_rank(rank, group_rank, size, collective, role, default=None):
    """The rank a call names with ``rank`` or ``group_rank`` (one of them, as PyTorch's
    ``dst``/``group_dst``), or ``default`` when neither is given; ``role`` ("root",
    "destination", "source") names it in the error for a rank outside [0, size)."""
    if rank is not None and group_rank is not None:
        raise ValueError("Can't specify both group_rank and global_rank")
    value = rank if rank is not None else group_rank if group_rank is not None else default
    if value is None:
        raise ValueError("Must specify global_rank or group_rank")
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{collective}: the {role} rank must be an int, got {type(value).__name__}")
    if not 0 <= int(value) < size:
        raise RuntimeError(f"{collective}: invalid {role} rank: {int(value)} (the ranks of the group are 0 to "
                           f"{size - 1})")
    return int(value)


def _translate(group, rank, what):
    if group is GroupMember.WORLD:
        return rank
    g = resolve(group)
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 0 <= rank < g.size():
        raise ValueError(f"{what} rank {rank} is not part of group {g}")
    return int(rank)


def get_group_rank(group, global_rank):
    """The rank in ``group`` of global rank ``global_rank`` (the same number: one group)."""
    return _translate(group, global_rank, "Global")


def get_global_rank(group, group_rank):
    """The global rank of rank ``group_rank`` of ``group`` (the same number: one group)."""
    return _translate(group, group_rank, "Group")


def get_process_group_ranks(group):
    """The global ranks of ``group`` (None: the default group) in group-rank order."""
    return list(range(resolve(group).size()))


def get_node_local_rank(fallback_rank=None):
    """This process's rank among those on its node, for choosing its device. In a threaded
    world (run_ranks) every rank is on this one node, so it is the rank itself; otherwise it
    comes from ``LOCAL_RANK`` or the launcher's own variable (mpiexec's ``MPI_LOCALRANKID``),
    else ``fallback_rank``."""
    if process_group._in_threaded_world() and process_group.current_group() is not None:
        return process_group.current_group().rank()
    for name in _LOCAL_RANK_VARIABLES:
        if name in os.environ:
            return int(os.environ[name])
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment. Consider passing fallback_rank to allow "
                       "`get_node_local_rank` to work, assuming you are not running in a multi-device context and "
                       "want the code to run locally instead.")


def is_torchelastic_launched():
    """False: minidl's processes are started by mpiexec (or run alone), never by torchelastic."""
    return False
