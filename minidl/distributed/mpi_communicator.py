"""The MPI communicator: collectives among processes started by ``mpiexec``, through mpi4py.

Only mpi4py's buffer interface is used (``Iallreduce``, ``Ibcast``, ``Iallgather``,
``Ireduce_scatter_block``, ``Ibarrier``, ``Ireduce``, ``Igather``, ``Iscatter``, ``Ialltoallv``,
``Isend`` and matched probes on contiguous NumPy arrays): the data moves as raw memory, never
pickled. Every collective is non-blocking underneath; a blocking call is the
same request waited at once, so the group's timeout applies to both.

Before its data moves, each collective's description (16 integers per rank, see calls.py) is
exchanged with ``Iallgather``: MPI given buffers of different sizes on different ranks would
truncate, overrun or hang, and the check turns that into the same clear error on every rank.
The check does not block the caller either: it runs on a duplicate of the communicator, and a
collective's data collective starts once its check has completed (found by the next test or
wait of any request), strictly in call order, so both communicators see their collectives in
the same order on every rank, as MPI requires. MPI makes progress only inside MPI calls: the
tests that DistributedDataParallel makes as gradients become ready are what move the data
during backward. An all-to-all's row carries its element counts as well (calls.py).

Point-to-point messages travel on communicators of their own (one for the user's sends, one
for minidl's internal ones, such as monitored_barrier's), so they never meet a collective's.
A send is one message: the sender's Call (16 integers, the tag in place of the collective
number) followed by the data's bytes. A receive finds its message with a matched probe
(``Improbe``, which takes the message off MPI's queue, so no other receive can meet it), learns
its size and source, receives it whole and only then compares the Call with its own: a send
of another shape or dtype is a clear error on the receiving rank, not a truncated buffer.
Pending receives probe in the order they were posted, and one never probes ahead of an older
one that could take the same message, so messages meet receives in MPI's order.
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
        self.owner.advance_p2p()        # a receive posted before this collective may be what a peer waits on
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
        self.p2p_comms = (comm.Dup(), comm.Dup())     # channel 0: the user's messages; 1: minidl's
        self.tag_ub = comm.Get_attr(MPI.TAG_UB)
        self._receives = []             # receives that have not met their message, in posting order
        self._sending = []              # sends in flight: their buffers live here until MPI is done with them

    def _submit(self, call, start, keep):
        seq = self._seq
        self._seq += 1
        req = _Request(self, seq, call, start, keep)
        if not self.check_calls:
            req.request = start()
            return req
        req.rows = np.empty((self.size, calls.ROW + 2 * self.size), np.int64)
        req.mine = calls.encode(seq, call, self.size)
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
        if (rows[:, :calls.ROW] == rows[0, :calls.ROW]).all() and req.call.kind not in calls.EXCHANGES:
            return None
        if (rows[:, 0] != req.seq).any():
            at = {r: int(rows[r, 0]) for r in range(self.size)}
            return (f"rank {self.rank}: the ranks are at different collectives: collective numbers {at} (a rank "
                    f"skipped or added one); rank {self.rank} called {req.call.describe()}")
        error = calls.mismatch(req.seq, [calls.decode(row, req.call) for row in rows])
        return None if error is None else f"rank {self.rank}: " + error

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

    def reduce(self, buf, root, op, call, timeout):
        mpi_op = _mpi_op(self.MPI, op, buf.dtype)
        if self.rank == root:
            return self._submit(call, lambda: self.comm.Ireduce(self.MPI.IN_PLACE, buf, op=mpi_op, root=root), buf)
        return self._submit(call, lambda: self.comm.Ireduce(buf, None, op=mpi_op, root=root), buf)

    def gather(self, send, recv, root, call, timeout):
        return self._submit(call, lambda: self.comm.Igather(send, recv, root=root), (send, recv))

    def scatter(self, send, recv, root, call, timeout):
        return self._submit(call, lambda: self.comm.Iscatter(send, recv, root=root), (send, recv))

    def all_to_all(self, send, sends, recv, recvs, call, timeout):
        def start():
            return self.comm.Ialltoallv([send, (sends, _displacements(sends))],
                                        [recv, (recvs, _displacements(recvs))])
        return self._submit(call, start, (send, recv))

    # -- point to point ------------------------------------------------------------------------

    def send(self, array, dst, tag, call, timeout, channel=0):
        header = calls.encode(tag, call)
        packed = np.empty(header.nbytes + array.nbytes, np.uint8)
        packed[:header.nbytes] = header.view(np.uint8)
        packed[header.nbytes:] = array.reshape(-1).view(np.uint8)
        sending = _Send(self, self.p2p_comms[channel].Isend(packed, dest=dst, tag=tag), packed)
        self._sending.append(sending)
        return sending

    def recv(self, out, src, tag, call, timeout, channel=0):
        receive = _Receive(self, out, src, tag, channel, call)
        self._receives.append(receive)
        self.advance_p2p()
        return receive

    def advance_p2p(self):
        """Let each pending receive, oldest first, take the message it matches, if one came, and
        let go of the sends MPI is done with (whether or not anyone waits for them)."""
        MPI = self.MPI
        self._sending = [s for s in self._sending if not s.finished()]
        unmet = []
        for receive in list(self._receives):
            if any(older.could_take_what(receive) for older in unmet):
                continue
            status = MPI.Status()
            source = MPI.ANY_SOURCE if receive.src is None else receive.src
            message = self.p2p_comms[receive.channel].Improbe(source, receive.tag, status)
            if message is None:
                unmet.append(receive)
                continue
            self._receives.remove(receive)
            receive.source = status.Get_source()
            receive.packed = np.empty(status.Get_count(MPI.BYTE), np.uint8)
            receive.request = message.Irecv(receive.packed)


def _displacements(counts):
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int).tolist()


class _Send:
    def __init__(self, owner, request, packed):
        self.owner, self.request, self.packed = owner, request, packed
        self.source = None

    def finished(self):
        if self.packed is not None and self.request.Test():
            self.packed = None
        return self.packed is None

    def test(self):
        self.owner.advance_p2p()        # a send to this rank itself needs its receive to probe
        return self.finished()

    def wait(self, timeout, describe):
        poll(self.test, timeout, describe, self.owner.rank)
        return True

    def cancel(self):
        pass


class _Receive:
    """A receive: unmatched (in the owner's list) until a probe finds its message, then the
    transfer of the whole message (``request``), then the check of the sender's Call."""

    def __init__(self, owner, out, src, tag, channel, call):
        self.owner, self.out, self.src, self.tag, self.channel, self.call = owner, out, src, tag, channel, call
        self.source = self.request = self.packed = self.error = None
        self.done = False

    def could_take_what(self, later):
        """Whether this receive could take a message that ``later`` (posted after it) matches."""
        return (self.channel == later.channel and self.tag == later.tag
                and (self.src is None or later.src is None or self.src == later.src))

    def test(self):
        if not self.done:
            self.owner.advance_p2p()
            if self.request is None or not self.request.Test():
                return False
            self.done = True
            self._unpack()
        if self.error is not None:
            raise RuntimeError(self.error)
        return True

    def _unpack(self):
        head = calls.ROW * 8
        sent = calls.decode(self.packed[:head].view(np.int64), self.call)
        self.error = calls.p2p_mismatch(sent, self.call, self.source, self.tag)
        if self.error is None:
            self.out.reshape(-1).view(np.uint8)[...] = self.packed[head:]
        else:
            self.error = f"rank {self.owner.rank}: {self.error}"
        self.packed = None

    def wait(self, timeout, describe):
        try:
            poll(self.test, timeout, describe, self.owner.rank)
        except RuntimeError:
            if not self.done:
                self.cancel()
            raise
        return True

    def cancel(self):
        """Withdraw the receive if no message has met it yet."""
        if self in self.owner._receives:
            self.owner._receives.remove(self)
