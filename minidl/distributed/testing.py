"""Run k ranks of a distributed program in one process, one thread per rank.

    from minidl.distributed.testing import run_ranks

    def step(rank):
        t = md.tensor([float(rank)])
        dist.all_reduce(t)                 # every collective works as under mpiexec
        return t.item()

    run_ranks(4, step)                     # [6.0, 6.0, 6.0, 6.0]

``run_ranks(world_size, fn, *args, **kwargs)`` calls ``fn(rank, *args, **kwargs)`` in each of
``world_size`` threads, with that thread's default process group initialised (rank ``rank``
of ``world_size``; ``init=False`` leaves the call to ``dist.init_process_group`` to ``fn``,
as a script run under mpiexec makes it) and destroyed afterwards, and returns the ranks'
results in rank order. The ranks talk through the threaded communicator
(thread_communicator.py), with the semantics and the cross-rank checks of MPI's.

The ranks take turns: one runs at a time, until it waits in a collective (``work.wait()``, or
any collective called without ``async_op``), when another one runs. So the ranks never race
on the state they share (the default generator, numba's CUDA simulator, which runs one
kernel at a time); the order in which waiting ranks resume is unspecified, so a rank should
build its model and data from what it is given, not from draws of the shared generator.
``concurrent=True`` runs the ranks at the same time instead (a rank that polls
``is_completed()`` in a loop needs that).

When a rank raises, the collectives the others wait in fail at once, and run_ranks raises
the first failure (by rank) with a note naming the rank; a collective that waits longer than
``timeout`` seconds fails rather than hangs.
"""
import threading

from . import process_group
from .thread_communicator import Rendezvous


def run_ranks(world_size, fn, *args, timeout=60.0, init=True, concurrent=False, **kwargs):
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"run_ranks: world_size must be a positive integer, got {world_size!r}")
    if not callable(fn):
        raise TypeError(f"run_ranks: fn must be callable, got {type(fn).__name__}")
    rendezvous = Rendezvous(world_size, turns=not concurrent)
    baton = rendezvous.baton
    results = [None] * world_size
    errors = [None] * world_size

    def rank_main(rank):
        if baton is not None:
            baton.acquire()
        process_group._local.world = (rendezvous, rank)
        try:
            if init:
                process_group.init_process_group("mpi", timeout=timeout)
            results[rank] = fn(rank, *args, **kwargs)
            why = "returned"
        except BaseException as exc:
            errors[rank] = exc
            why = f"raised {type(exc).__name__}: {exc}"
        finally:
            rendezvous.stopped(rank, f"has finished ({why.splitlines()[0]})")
            process_group._local.group = None
            process_group._local.world = None
            if baton is not None:
                baton.release()

    threads = [threading.Thread(target=rank_main, args=(r,), name=f"minidl-rank-{r}", daemon=True)
               for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [r for r, e in enumerate(errors) if e is not None]
    if failed:
        # the cause, not the consequence: prefer a rank whose error is not a failed collective
        # caused by another rank's stop
        roots = [r for r in failed if not _is_consequence(errors[r])] or failed
        r = roots[0]
        exc = errors[r]
        if hasattr(exc, "add_note"):
            exc.add_note(f"(in rank {r} of {world_size} run by minidl.distributed.testing.run_ranks"
                         + (f"; ranks {[q for q in failed if q != r]} failed too)" if len(failed) > 1 else ")"))
        raise exc
    return results


def _is_consequence(exc):
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can never complete: rank" in text or "aborted:" in text)


# ---------------------------------------------------------------------------------------------
# Real processes: mpiexec

ONE_THREAD = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}


def mpiexec_path():
    """The ``mpiexec`` beside this Python (a virtual environment with the mpich wheel), else the
    one on PATH, or None when there is none or mpi4py is missing."""
    import os
    import shutil
    import sys
    if not process_group.is_mpi_available():
        return None
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


def run_mpiexec(script, n=2, args=(), timeout=120.0, env=None, threads_per_rank=1):
    """Run ``python script *args`` as ``n`` MPI ranks; return the CompletedProcess (text stdout
    and stderr). Each rank gets ``threads_per_rank`` Numba/BLAS threads (1 by default, so n
    ranks share n cores without oversubscription). Past ``timeout`` seconds the whole job is
    killed and ``subprocess.TimeoutExpired`` raised, so a rank stuck in a collective fails a
    test instead of hanging it."""
    import os
    import signal
    import subprocess
    import sys
    launcher = mpiexec_path()
    if launcher is None:
        raise RuntimeError("run_mpiexec: no mpiexec (or no mpi4py): pip install 'minidl[distributed]'")
    child_env = dict(os.environ)
    if threads_per_rank is not None:
        child_env.update({k: str(threads_per_rank) for k in ONE_THREAD})
    child_env.update(env or {})
    cmd = [launcher, "-n", str(n), sys.executable, str(script), *map(str, args)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, output=out, stderr=err) from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
