"""The default process group: who this process is among the ranks, and how they talk.

``init_process_group(backend="mpi")`` takes the rank and world size from MPI when the program
runs under ``mpiexec`` (mpi4py over MPICH, the ``[distributed]`` extra); run alone (no MPI
launcher in the environment and no mpi4py), it makes a world of one rank, so single-process
code runs unchanged. Inside a rank of ``minidl.distributed.testing.run_ranks`` it joins that
threaded world instead. The group lives per process, except in those threaded ranks, where
each thread has its own (``_local``).

Under MPI with more than one rank, an uncaught exception on one rank aborts the whole job
(``MPI_Abort``) after printing its traceback, instead of leaving the other ranks waiting in
a collective forever.
"""
import datetime
import os
import sys
import threading
import time

from .thread_communicator import Rendezvous, ThreadCommunicator

DEFAULT_TIMEOUT = datetime.timedelta(minutes=30)        # PyTorch's default_pg_timeout
ABORT_GRACE_S = 0.5    # seconds a rank with an uncaught error waits, its traceback written, before Abort
_NOT_INITIALIZED = "Default process group has not been initialized, please make sure to call init_process_group."
_OTHER_BACKENDS = ("gloo", "nccl", "ucc", "xccl", "cncl", "hccl")
# variables that MPI launchers (MPICH's hydra, Open MPI, PMIx, Slurm's PMI) set in each rank
_LAUNCHER_VARIABLES = ("PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS")


class ProcessGroup:
    """A set of ranks and the communicator that joins them (PyTorch's ``rank()``, ``size()``)."""

    def __init__(self, communicator, backend, timeout):
        self.communicator = communicator
        self.backend = backend
        self.timeout = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)

    def rank(self):
        return self.communicator.rank

    def size(self):
        return self.communicator.size

    def name(self):
        return self.backend

    def __repr__(self):
        return (f"ProcessGroup(backend={self.backend!r}, rank={self.rank()}, size={self.size()}, "
                f"communicator={self.communicator.kind!r})")


class _Local(threading.local):
    group = None        # the group of a threaded rank (run_ranks)
    world = None        # (Rendezvous, rank) of a threaded rank that has not initialised yet


_local = _Local()
_process = {"group": None, "excepthook": None}


class GroupMember:
    """``dist.group.WORLD``: stands for the default group wherever a ``group`` is accepted."""
    WORLD = object()
    NON_GROUP_MEMBER = object()


group = GroupMember


def _in_threaded_world():
    return _local.world is not None or _local.group is not None


def current_group():
    """The default group of this process (or threaded rank), or None."""
    return _local.group if _in_threaded_world() else _process["group"]


def resolve(group_arg):
    """The ProcessGroup a collective's ``group`` argument names (None: the default group)."""
    g = current_group()
    if group_arg is None or group_arg is GroupMember.WORLD or group_arg is g:
        if g is None:
            raise ValueError(_NOT_INITIALIZED)
        return g
    if isinstance(group_arg, ProcessGroup):
        raise ValueError(f"{group_arg!r} is not this rank's default process group (it was destroyed, or belongs "
                         "to another rank); minidl has one group per process, the default one")
    raise TypeError(f"group must be None, dist.group.WORLD or a ProcessGroup, got {type(group_arg).__name__}")


def is_available():
    """True: minidl.distributed is always there (a world of one rank needs no MPI)."""
    return True


def is_mpi_available():
    """Whether mpi4py can be imported (``pip install minidl[distributed]``)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_nccl_available():
    return False


def is_gloo_available():
    return False


def new_group(ranks=None, timeout=None, backend=None, pg_options=None, use_local_synchronization=False,
              group_desc=None, device_id=None):
    """The default group, for ``ranks`` None or all ranks (minidl has no sub-groups)."""
    g = resolve(None)
    if ranks is not None and sorted(int(r) for r in ranks) != list(range(g.size())):
        raise NotImplementedError(f"new_group: minidl.distributed has only the group of all {g.size()} ranks; "
                                  f"got ranks={list(ranks)}")
    return g


def is_initialized():
    return current_group() is not None


def _launched_by_mpi():
    return any(v in os.environ for v in _LAUNCHER_VARIABLES)


def _check_backend(backend):
    name = "mpi" if backend is None else backend
    if not isinstance(name, str):
        raise ValueError(f"Invalid backend: {backend!r}; minidl.distributed supports backend='mpi'")
    name = name.lower()
    if name == "mpi":
        return name
    if name in _OTHER_BACKENDS or ":" in name:
        raise ValueError(f"backend {backend!r} is not available in minidl; minidl.distributed runs on MPI: "
                         "use backend='mpi'")
    raise ValueError(f"Invalid backend: {backend!r}; minidl.distributed supports backend='mpi'")


def _check_placement(world_size, rank, actual_size, actual_rank):
    if world_size not in (-1, None) and int(world_size) != actual_size:
        raise ValueError(f"init_process_group: world_size={world_size} was asked, but the launcher started "
                         f"{actual_size} rank(s) (under MPI, rank and world size come from mpiexec)")
    if rank not in (-1, None) and int(rank) != actual_rank:
        raise ValueError(f"init_process_group: rank={rank} was asked, but this process is rank {actual_rank} "
                         f"of {actual_size} (under MPI, rank and world size come from mpiexec)")


def _checks_enabled():
    return os.environ.get("MINIDL_DISTRIBUTED_CHECKS", "1") != "0"


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1, store=None,
                       group_name="", pg_options=None, device_id=None):
    """Initialise the default process group (PyTorch's signature). ``backend`` is "mpi" (the
    default); ``init_method`` may be None, "env://" or "mpi://" (MPI's launcher places the ranks);
    ``world_size`` and ``rank``, when given, must agree with the launcher's; ``timeout`` (a
    timedelta or seconds, 30 minutes by default) bounds every wait for the other ranks."""
    name = _check_backend(backend)
    if is_initialized():
        raise ValueError("trying to initialize the default process group twice!")
    if init_method not in (None, "env://", "mpi://"):
        raise ValueError(f"init_process_group: init_method {init_method!r} is not supported with MPI, whose "
                         "launcher (mpiexec) places the ranks; leave it None")
    if store is not None:
        raise ValueError("init_process_group: a store is not used with backend='mpi'")
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else float(timeout)
    if not seconds > 0:
        raise ValueError(f"init_process_group: timeout must be positive, got {timeout!r}")
    if _in_threaded_world():
        rendezvous, world_rank = _local.world
        _check_placement(world_size, rank, rendezvous.size, world_rank)
        _local.group = ProcessGroup(ThreadCommunicator(rendezvous, world_rank), name, timeout)
        return
    communicator = _mpi_world() if is_mpi_available() or _launched_by_mpi() else None
    if communicator is None:        # alone, without a usable MPI: a world of one
        communicator = ThreadCommunicator(Rendezvous(1), 0)
    _check_placement(world_size, rank, communicator.size, communicator.rank)
    _process["group"] = ProcessGroup(communicator, name, timeout)
    if communicator.size > 1:
        _install_abort_on_error(communicator)


def _mpi_world():
    """MPI's world, or None for a process run alone whose mpi4py finds no MPI library."""
    try:
        from mpi4py import MPI
    except (ImportError, RuntimeError, OSError) as exc:
        if not _launched_by_mpi():
            return None
        raise RuntimeError(f"this process was started by an MPI launcher but mpi4py cannot be used ({exc}): "
                           "pip install 'minidl[distributed]' (mpi4py, mpich)") from exc
    from .mpi_communicator import MpiCommunicator
    return MpiCommunicator(MPI.COMM_WORLD, check_calls=_checks_enabled())


def _install_abort_on_error(communicator):
    previous = sys.excepthook

    def abort_job(kind, value, tb):
        previous(kind, value, tb)
        sys.stderr.write(f"minidl.distributed: rank {communicator.rank} stopped with an uncaught "
                         f"{kind.__name__}; aborting all {communicator.size} ranks\n")
        sys.stderr.flush()
        # the launcher forwards a rank's output through its proxy process, which Abort kills
        # too: without a pause, the end of the traceback could still be in flight and be lost
        time.sleep(ABORT_GRACE_S)
        communicator.comm.Abort(1)

    _process["excepthook"] = previous
    sys.excepthook = abort_job


def destroy_process_group(group=None):
    """Forget the default group (after which init_process_group may be called again)."""
    if group is not None and group is not GroupMember.WORLD and group is not current_group():
        raise ValueError("destroy_process_group: minidl has only the default group")
    if current_group() is None:
        raise ValueError(_NOT_INITIALIZED)
    if _in_threaded_world():
        _local.group = None
        return
    if _process["group"] is None:
        raise ValueError(_NOT_INITIALIZED)
    _process["group"] = None
    if _process["excepthook"] is not None:
        sys.excepthook, _process["excepthook"] = _process["excepthook"], None


def get_rank(group=None):
    return resolve(group).rank()


def get_world_size(group=None):
    return resolve(group).size()


def get_backend(group=None):
    return resolve(group).backend


def _get_default_group():
    return resolve(None)
