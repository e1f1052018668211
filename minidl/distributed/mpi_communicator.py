"""The MPI communicator: collectives among processes started by ``mpiexec``, through mpi4py.

Only mpi4py's buffer interface is used (``Iallreduce``, ``Ibcast``, ``Iallgather``,
``Ireduce_scatter_block``, ``Ibarrier`` on contiguous NumPy arrays): the data moves as raw
memory, never pickled. Every collective is non-blocking underneath; a blocking call is the
same request waited at once, so the group's timeout applies to both.

Before its data moves, each collective's description (16 integers per rank, see calls.py) is
exchanged with ``Iallgather``: MPI given buffers of different sizes on different ranks would
truncate, overrun or hang, and the check turns that into the same clear error on every rank.
The check does not block the caller either: it runs on a duplicate of the communicator, and a
collective's data collective starts once its check has completed (found by the next test or
wait of any request), strictly in call order, so both communicators see their collectives in
the same order on every rank, as MPI requires. MPI makes progress only inside MPI calls: the
tests that DistributedDataParallel makes as gradients become ready are what move the data
during backward.
"""
from collections import deque

import numpy as np

from . import calls
from .reduce_op import ReduceOp
from .work import poll


def _mpi_op(MPI, op, dtype):
    if np.dtype(dtype) == np.bool_:
        return {ReduceOp.SUM: MPI.LOR, ReduceOp.AVG: MPI.LOR, ReduceOp.MAX: MPI.LOR, ReduceOp.BOR: MPI.LOR,
                ReduceOp.PRODUCT: MPI.LAND, ReduceOp.MIN: MPI.LAND, ReduceOp.BAND: MPI.LAND,
                ReduceOp.BXOR: MPI.LXOR}[op]
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD, ReduceOp.MIN: MPI.MIN,
            ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND, ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[op]


class _Request:
    """One collective: its check (``check``, the all-gathered descriptions) and then its data
    collective (``start()`` makes ``request``); ``keep`` holds the buffers MPI uses meanwhile."""

    def __init__(self, owner, seq, call, start, keep):
        self.owner, self.seq, self.call, self.start, self.keep = owner, seq, call, start, keep
        self.check = self.rows = self.request = self.error = None

    def test(self):
        self.owner.advance()
        if self.error is not None:
            raise RuntimeError(self.error)
        if self.request is None:
            return False
        if self.request.Test():
            self.keep = None
            return True
        return False

    def wait(self, timeout, describe):
        poll(self.test, timeout, f"{describe} (collective #{self.seq})", self.owner.rank)
        return True


class MpiCommunicator:
    kind = "mpi"

    def __init__(self, comm, check_calls=True):
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.check_calls = check_calls and self.size > 1
        self.check_comm = comm.Dup() if self.size > 1 else None
        self._seq = 0
        self._unstarted = deque()       # requests whose check is in flight, in call order

    def _submit(self, call, start, keep):
        seq = self._seq
        self._seq += 1
        req = _Request(self, seq, call, start, keep)
        if not self.check_calls:
            req.request = start()
            return req
        req.rows = np.empty((self.size, calls.ROW), np.int64)
        req.mine = calls.encode(seq, call)
        req.check = self.check_comm.Iallgather(req.mine, req.rows)
        self._unstarted.append(req)
        self.advance()
        return req

    def advance(self):
        """Start the data collectives whose checks have completed, in call order."""
        while self._unstarted and self._unstarted[0].check.Test():
            req = self._unstarted.popleft()
            req.error = self._disagreement(req)
            if req.error is None:
                req.request = req.start()

    def _disagreement(self, req):
        rows = req.rows
        if (rows == rows[0]).all():
            return None
        if (rows[:, 0] != req.seq).any():
            at = {r: int(rows[r, 0]) for r in range(self.size)}
            return (f"rank {self.rank}: the ranks are at different collectives: collective numbers {at} (a rank "
                    f"skipped or added one); rank {self.rank} called {req.call.describe()}")
        return f"rank {self.rank}: " + calls.mismatch(req.seq, [calls.decode(row, req.call) for row in rows])

    def all_reduce(self, buf, op, call, timeout):
        mpi_op = _mpi_op(self.MPI, op, buf.dtype)
        return self._submit(call, lambda: self.comm.Iallreduce(self.MPI.IN_PLACE, buf, op=mpi_op), buf)

    def broadcast(self, buf, src, call, timeout):
        return self._submit(call, lambda: self.comm.Ibcast(buf, root=src), buf)

    def all_gather(self, send, recv, call, timeout):
        return self._submit(call, lambda: self.comm.Iallgather(send, recv), (send, recv))

    def reduce_scatter(self, send, recv, op, call, timeout):
        mpi_op = _mpi_op(self.MPI, op, send.dtype)
        return self._submit(call, lambda: self.comm.Ireduce_scatter_block(send, recv, op=mpi_op), (send, recv))

    def barrier(self, call, timeout):
        return self._submit(call, self.comm.Ibarrier, None)
