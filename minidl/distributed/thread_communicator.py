"""The threaded communicator: k ranks as k threads of one process, meeting at a rendezvous.

It gives the collectives exactly the semantics the MPI communicator gives them, for fast,
always-on tests (``minidl.distributed.testing.run_ranks``) and for a process that runs alone
(world size 1 without MPI). Each rank's n-th collective posts its call and a copy of its
input to slot n of the shared ``Rendezvous``; the last rank to arrive checks that all ranks
made the same call (``calls.mismatch``), computes the result once, in rank order, and writes
it into every rank's output arrays, so every rank holds the same bits, as after MPI.

Point-to-point messages go through a mailbox per receiving rank instead: a send copies its
tensor into the mailbox (or straight into the receive already waiting for it) and is done, as
MPI's eager sends of small messages are; a receive takes the oldest message that matches its
source (any, for ``src=None``) and tag, in the order the receives were posted, and checks
that its dtype and shape are the ones it expects (``calls.p2p_mismatch``).

Nothing waits forever: a rank that stops with an exception, or returns while others wait for
it, fails the collectives and receives left open with an error naming it, and a wait past the
timeout fails too.
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
        if not _wait(self._rdv, self._slot.event, timeout):
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


def _wait(rendezvous, event, timeout):
    """Wait for ``event``, handing the baton (if the ranks take turns) to the others meanwhile."""
    baton = rendezvous.baton
    if baton is not None:
        baton.release()         # let the other ranks run until they reach this collective
    try:
        return event.wait(timeout)
    finally:
        if baton is not None:
            baton.acquire()


class _Receive:
    """One posted receive: what it waits for (``src`` None: any rank) and, once met, from whom."""

    def __init__(self, rendezvous, rank, src, tag, channel, call, out):
        self._rdv, self.rank, self.src, self.tag, self.channel = rendezvous, rank, src, tag, channel
        self.call, self.out = call, out
        self.source = None
        self.error = None
        self.event = threading.Event()

    def matches(self, src, tag):
        return self.tag == tag and self.src in (None, src)

    def test(self):
        if self.event.is_set():
            self._raise()
            return True
        return False

    def wait(self, timeout, describe):
        self._rdv.blocked(self)
        if not _wait(self._rdv, self.event, timeout):
            self.cancel()
            if not self.event.is_set():
                peer = "any rank" if self.src is None else f"rank {self.src}"
                raise RuntimeError(f"rank {self.rank}: {describe} timed out after {timeout:g} s waiting for {peer}")
        self._raise()
        return True

    def cancel(self):
        """Withdraw the receive if no message has met it yet (a later message stays in the mailbox)."""
        self._rdv.withdraw(self)

    def _raise(self):
        if self.error is not None:
            raise RuntimeError(f"rank {self.rank}: {self.error}")


class _Sent:
    """A send: done once its data is in the mailbox (or the receive), which is at once."""
    source = None

    def test(self):
        return True

    def wait(self, timeout, describe):
        return True

    def cancel(self):
        pass


class Rendezvous:
    """Where the ranks of one threaded world meet; shared by their communicators.

    With ``turns``, the ranks take turns: each holds the ``baton`` while it runs and hands it on
    only while it waits (for a collective or a message), so no two ranks ever run at once (numba's CUDA
    simulator, for one, runs one kernel at a time in a process)."""

    def __init__(self, size, turns=False):
        self.size = size
        self.baton = threading.Lock() if turns else None
        self._lock = threading.Lock()
        self._slots = {}
        self._stopped = {}      # rank -> why it will post nothing more
        self._abort = None
        self._mail = {}         # (rank, channel) -> [(src, tag, call, array)], oldest first
        self._receives = {}     # (rank, channel) -> [_Receive], in the order they were posted

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
            for waiting in self._receives.values():
                for r in list(waiting):
                    self._fail_unmatchable(r, waiting)

    def abort(self, why):
        with self._lock:
            if self._abort is None:
                self._abort = why
            for seq, slot in list(self._slots.items()):
                if not slot.event.is_set():
                    slot.error = f"collective #{seq} aborted: {why}"
                    slot.event.set()
            for waiting in self._receives.values():
                for r in waiting:
                    r.error = f"recv (tag {r.tag}) aborted: {why}"
                    r.event.set()
                waiting.clear()

    # -- point to point ------------------------------------------------------------------------

    def send(self, src, dst, tag, channel, call, array):
        with self._lock:
            if self._abort is not None:
                raise RuntimeError(f"rank {src}: send to rank {dst} aborted: {self._abort}")
            waiting = self._receives.get((dst, channel), [])
            receive = next((r for r in waiting if r.matches(src, tag)), None)
            if receive is None:
                self._mail.setdefault((dst, channel), []).append((src, tag, call, array.copy()))
            else:
                waiting.remove(receive)
                _deliver(receive, src, call, array)
        return _Sent()

    def receive(self, rank, src, tag, channel, call, out):
        receive = _Receive(self, rank, src, tag, channel, call, out)
        with self._lock:
            if self._abort is not None:
                raise RuntimeError(f"rank {rank}: recv (tag {tag}) aborted: {self._abort}")
            mail = self._mail.get((rank, channel), [])
            message = next((m for m in mail if receive.matches(m[0], m[1])), None)
            if message is not None:
                mail.remove(message)
                _deliver(receive, message[0], message[2], message[3])
            else:
                waiting = self._receives.setdefault((rank, channel), [])
                waiting.append(receive)
                self._fail_unmatchable(receive, waiting)
        return receive

    def withdraw(self, receive):
        with self._lock:
            waiting = self._receives.get((receive.rank, receive.channel), [])
            if receive in waiting:
                waiting.remove(receive)

    def blocked(self, receive):
        """``receive``'s rank now waits for it, so it will send nothing meanwhile: fail the
        receive if no other rank that could send it a message is running."""
        with self._lock:
            waiting = self._receives.get((receive.rank, receive.channel), [])
            if receive in waiting:
                self._fail_unmatchable(receive, waiting, waiting_self=True)

    def _fail_unmatchable(self, receive, waiting, waiting_self=False):
        """Fail ``receive`` if every rank that could still send it a message has stopped."""
        senders = range(self.size) if receive.src is None else [receive.src]
        if any(r not in self._stopped and not (waiting_self and r == receive.rank) for r in senders):
            return
        if receive.src is None:
            reason = "every other rank has finished" if self.size > 1 else "no rank but this one, which waits"
        elif receive.src == receive.rank and receive.src not in self._stopped:
            reason = "the sender is this rank, which waits for it"
        else:
            reason = f"rank {receive.src} {self._stopped[receive.src]}"
        peer = "any rank" if receive.src is None else f"rank {receive.src}"
        receive.error = f"recv from {peer} (tag {receive.tag}) can never complete: {reason}"
        waiting.remove(receive)
        receive.event.set()


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

    def reduce(self, buf, root, op, call, timeout):
        return self._post(call, (buf.copy(), buf if self.rank == root else None, (op, root)))

    def gather(self, send, recv, root, call, timeout):
        return self._post(call, (send.copy(), recv, root))

    def scatter(self, send, recv, root, call, timeout):
        return self._post(call, (send.copy() if self.rank == root else None, recv, root))

    def all_to_all(self, send, sends, recv, recvs, call, timeout):
        return self._post(call, (send.copy(), recv, (sends, recvs)))

    def send(self, array, dst, tag, call, timeout, channel=0):
        return self.rendezvous.send(self.rank, dst, tag, channel, call, array)

    def recv(self, out, src, tag, call, timeout, channel=0):
        return self.rendezvous.receive(self.rank, src, tag, channel, call, out)


def _deliver(receive, src, call, array):
    receive.error = calls.p2p_mismatch(call, receive.call, src, receive.tag)
    if receive.error is None:
        receive.out[...] = array
    receive.source = src
    receive.event.set()


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


def _reduce(call, payloads):
    op, root = payloads[0][2]
    reduce_op.combine(op, [p[0] for p in payloads], payloads[root][1])


def _gather(call, payloads):
    root = payloads[0][2]
    payloads[root][1][...] = np.stack([p[0] for p in payloads])


def _scatter(call, payloads):
    pieces = payloads[payloads[0][2]][0]
    for r, (_, out, _) in enumerate(payloads):
        out[...] = pieces[r]


def _offsets(counts):
    return np.concatenate([[0], np.cumsum(counts)]).astype(int)


def _all_to_all(call, payloads):
    for j, (_, out, (_, recvs)) in enumerate(payloads):
        at = _offsets(recvs)
        for i, (send, _, (sends, _)) in enumerate(payloads):
            start = _offsets(sends)[j]
            out[at[i]:at[i + 1]] = send[start:start + sends[j]]


_COMBINE = {"all_reduce": _all_reduce, "broadcast": _broadcast, "all_gather": _all_gather,
            "all_gather_into_tensor": _all_gather, "reduce_scatter": _reduce_scatter,
            "reduce_scatter_tensor": _reduce_scatter, "barrier": lambda call, payloads: None,
            "reduce": _reduce, "gather": _gather, "scatter": _scatter, "all_to_all": _all_to_all,
            "all_to_all_single": _all_to_all}
