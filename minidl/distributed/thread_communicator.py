"""The threaded communicator: k ranks as k threads of one process, meeting at a rendezvous.

It gives the collectives exactly the semantics the MPI communicator gives them, for fast,
always-on tests (``minidl.distributed.testing.run_ranks``) and for a process that runs alone
(world size 1 without MPI). Each rank's n-th collective posts its call and a copy of its
input to slot n of the shared ``Rendezvous``; the last rank to arrive checks that all ranks
made the same call (``calls.mismatch``), computes the result once, in rank order, and writes
it into every rank's output arrays, so every rank holds the same bits, as after MPI.

Nothing waits forever: a rank that stops with an exception, or returns while others wait for
it, fails the collectives left open with an error naming it, and a wait past the timeout
fails too.
"""
import threading

import numpy as np

from . import calls, reduce_op


class _Slot:
    """One collective: what each rank posted, and (once all have) the outcome."""

    def __init__(self, size):
        self.calls = [None] * size
        self.payloads = [None] * size
        self.arrived = 0
        self.error = None
        self.event = threading.Event()


class _Request:
    def __init__(self, rendezvous, slot, rank, seq):
        self._rdv, self._slot, self._rank, self._seq = rendezvous, slot, rank, seq

    def test(self):
        if self._slot.event.is_set():
            self._raise()
            return True
        return False

    def wait(self, timeout, describe):
        baton = self._rdv.baton
        if baton is not None:
            baton.release()         # let the other ranks run until they reach this collective
        try:
            done = self._slot.event.wait(timeout)
        finally:
            if baton is not None:
                baton.acquire()
        if not done:
            missing = [r for r, c in enumerate(self._slot.calls) if c is None]
            message = (f"rank {self._rank}: {describe} (collective #{self._seq}) timed out after {timeout:g} s "
                       f"waiting for ranks {missing}")
            self._rdv.abort(f"rank {self._rank} timed out in collective #{self._seq}")
            raise RuntimeError(message)
        self._raise()
        return True

    def _raise(self):
        if self._slot.error is not None:
            raise RuntimeError(f"rank {self._rank}: {self._slot.error}")


class Rendezvous:
    """Where the ranks of one threaded world meet; shared by their communicators.

    With ``turns``, the ranks take turns: each holds the ``baton`` while it runs and hands it on
    only while it waits in a collective, so no two ranks ever run at once (numba's CUDA
    simulator, for one, runs one kernel at a time in a process)."""

    def __init__(self, size, turns=False):
        self.size = size
        self.baton = threading.Lock() if turns else None
        self._lock = threading.Lock()
        self._slots = {}
        self._stopped = {}      # rank -> why it will post nothing more
        self._abort = None

    def post(self, rank, seq, call, payload):
        with self._lock:
            if self._abort is not None:
                raise RuntimeError(f"rank {rank}: collective #{seq} ({call.describe()}) aborted: {self._abort}")
            slot = self._slots.get(seq)
            if slot is None:
                slot = self._slots[seq] = _Slot(self.size)
            slot.calls[rank], slot.payloads[rank] = call, payload
            slot.arrived += 1
            complete = slot.arrived == self.size
            if complete:
                del self._slots[seq]
            elif self._stopped:
                self._fail_waiting(slot, seq)
        if complete:
            self._complete(slot, seq)
        return _Request(self, slot, rank, seq)

    def _complete(self, slot, seq):
        try:
            slot.error = calls.mismatch(seq, slot.calls)
            if slot.error is None:
                _COMBINE[slot.calls[0].kind](slot.calls[0], slot.payloads)
        except BaseException as exc:     # a bug here must reach every rank, not hang them
            slot.error = f"collective #{seq} failed: {type(exc).__name__}: {exc}"
        slot.payloads = None
        slot.event.set()

    def _fail_waiting(self, slot, seq):
        missing = [r for r, c in enumerate(slot.calls) if c is None]
        gone = [r for r in missing if r in self._stopped]
        if gone and not slot.event.is_set():
            first = next(c for c in slot.calls if c is not None)
            slot.error = (f"collective #{seq} ({first.describe()}) can never complete: rank {gone[0]} "
                          f"{self._stopped[gone[0]]}")
            slot.event.set()

    def stopped(self, rank, why):
        """Rank ``rank`` will post nothing more (it returned, or raised): fail what waits for it."""
        with self._lock:
            self._stopped[rank] = why
            for seq, slot in list(self._slots.items()):
                self._fail_waiting(slot, seq)

    def abort(self, why):
        with self._lock:
            if self._abort is None:
                self._abort = why
            for seq, slot in list(self._slots.items()):
                if not slot.event.is_set():
                    slot.error = f"collective #{seq} aborted: {why}"
                    slot.event.set()


class ThreadCommunicator:
    """One rank's side of a threaded world."""

    kind = "threads"

    def __init__(self, rendezvous, rank):
        self.rendezvous = rendezvous
        self.rank = rank
        self.size = rendezvous.size
        self._seq = 0

    def _post(self, call, payload):
        seq = self._seq
        self._seq += 1
        return self.rendezvous.post(self.rank, seq, call, payload)

    def all_reduce(self, buf, op, call, timeout):
        return self._post(call, (buf.copy(), buf, op))

    def broadcast(self, buf, src, call, timeout):
        return self._post(call, (buf.copy() if self.rank == src else None, buf, src))

    def all_gather(self, send, recv, call, timeout):
        return self._post(call, (send.copy(), recv, None))

    def reduce_scatter(self, send, recv, op, call, timeout):
        return self._post(call, (send.copy(), recv, op))

    def barrier(self, call, timeout):
        return self._post(call, None)


def _all_reduce(call, payloads):
    op = payloads[0][2]
    result = reduce_op.combine(op, [p[0] for p in payloads], np.empty_like(payloads[0][0]))
    for _, out, _ in payloads:
        out[...] = result


def _broadcast(call, payloads):
    src = payloads[0][2]
    value = payloads[src][0]
    for _, out, _ in payloads:
        out[...] = value


def _all_gather(call, payloads):
    stacked = np.stack([p[0] for p in payloads])
    for _, out, _ in payloads:
        out[...] = stacked


def _reduce_scatter(call, payloads):
    op = payloads[0][2]
    sends = [p[0] for p in payloads]
    for r, (_, out, _) in enumerate(payloads):
        reduce_op.combine(op, [s[r] for s in sends], out)


_COMBINE = {"all_reduce": _all_reduce, "broadcast": _broadcast, "all_gather": _all_gather,
            "all_gather_into_tensor": _all_gather, "reduce_scatter": _reduce_scatter,
            "reduce_scatter_tensor": _reduce_scatter, "barrier": lambda call, payloads: None}
