"""Point-to-point messages, with PyTorch's signatures: ``send``/``recv`` (blocking),
``isend``/``irecv`` (a Work to wait on), ``batch_isend_irecv`` of ``P2POp``s, and
``monitored_barrier``, which is built on them.

Unlike a collective, a message involves two ranks: a send to rank ``dst`` with a ``tag`` meets
the oldest receive on ``dst`` that names this rank (or any rank: ``src=None``) and the same tag.
A send is done once its data has left the tensor (the tensor may then change); a receive is
done once the data is in its tensor, after the receiver checked that the sender's tensor had
the same dtype and shape (a difference is a RuntimeError naming both, on the receiving rank).
Sends do not wait for their receive to be posted (small messages under MPI, all of them in a
threaded world), but a program should not count on that: exchanging ranks each post their
receive first, or use ``batch_isend_irecv``, as with PyTorch.
"""
import time

import numpy as np

from . import calls, staging
from .collectives import _check_tensor
from .process_group import GroupMember, resolve
from .ranks import check_rank
from .work import Work, _seconds

USER, INTERNAL = 0, 1       # the channels: the program's messages, and minidl's own (monitored_barrier)


def _check_tag(tag, communicator):
    if isinstance(tag, bool) or not isinstance(tag, (int, np.integer)):
        raise TypeError(f"tag must be an int, got {type(tag).__name__}")
    if tag < 0:
        raise RuntimeError("Tag must be nonnegative")
    limit = getattr(communicator, "tag_ub", None)
    if limit is not None and tag > limit:
        raise RuntimeError(f"tag {tag} is larger than the largest tag MPI allows here ({limit})")
    return int(tag)


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Start sending ``tensor`` to rank ``dst``; return a Work (sending to this rank itself is
    allowed, as in PyTorch, when the receive is an ``irecv``)."""
    g = resolve(group)
    peer = check_rank(dst, group_dst, g.size(), "isend", "destination")
    _check_tensor("tensor", tensor, "isend")
    tag = _check_tag(tag, g.communicator)
    buf = staging.Staged(tensor)
    call = calls.call("send", tensor._data)
    request = g.communicator.send(buf.array, peer, tag, call, g.timeout, USER)
    return Work(request, [], g.timeout, f"{call.describe()} to rank {peer} (tag {tag})", [tensor])


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    """Start receiving into ``tensor`` from rank ``src`` (None: from any rank); return a Work
    (its ``_source_rank()`` is the sender's rank once it is done)."""
    g = resolve(group)
    peer = None if src is None and group_src is None else check_rank(src, group_src, g.size(), "irecv", "source")
    _check_tensor("tensor", tensor, "irecv")
    tag = _check_tag(tag, g.communicator)
    buf = staging.Staged(tensor, copy_in=False)
    staging.mark_written(tensor)
    call = calls.call("recv", tensor._data)
    request = g.communicator.recv(buf.array, peer, tag, call, g.timeout, USER)
    sender = "any rank" if peer is None else f"rank {peer}"
    return Work(request, [buf.write_back], g.timeout, f"{call.describe()} from {sender} (tag {tag})", [tensor])


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """Send ``tensor`` to rank ``dst`` (not this rank) and return once it has left."""
    g = resolve(group)
    peer = check_rank(dst, group_dst, g.size(), "send", "destination")
    if peer == g.rank():
        raise ValueError("Invalid destination rank: destination rank should not be the same as the rank of the "
                         "current process.")
    isend(tensor, group=group, tag=tag, group_dst=peer).wait()


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """Receive into ``tensor`` from rank ``src`` (None: any rank); return the sender's rank."""
    work = irecv(tensor, src=src, group=group, tag=tag, group_src=group_src)
    work.wait()
    return work._source_rank()


class P2POp:
    """One send or receive for ``batch_isend_irecv``: ``op`` is ``isend`` or ``irecv``, ``peer``
    the rank to send to or receive from."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        if op is not isend and op is not irecv:
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``minidl.distributed.isend`` or "
                             "``minidl.distributed.irecv``.")
        _check_tensor("tensor", tensor, "P2POp")
        self.op = op
        self.tensor = tensor
        self.group = resolve(group)
        role = "destination" if op is isend else "source"
        self.peer = self.group_peer = check_rank(peer, group_peer, self.group.size(), "P2POp", role)
        self.tag = tag

    def __repr__(self):
        me = self.group.rank()
        src, dst = (me, self.peer) if self.op is isend else (self.peer, me)
        return f"P2POp({self.op.__name__} pg=default_pg, group_src={src}, group_dst={dst}, {self.tensor.shape}, " \
               f"{self.tensor.dtype})"


def batch_isend_irecv(p2p_op_list):
    """Start every send and receive of ``p2p_op_list``; return their Works, in list order.
    Their order within the list cannot deadlock: none of them waits for another."""
    if not isinstance(p2p_op_list, list) or not all(isinstance(op, P2POp) for op in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to to be of type "
                         "``minidl.distributed.P2POp``.")
    if not p2p_op_list:
        raise IndexError("batch_isend_irecv: p2p_op_list is empty; it needs at least one P2POp")
    if any(op.group is not p2p_op_list[0].group for op in p2p_op_list):
        raise ValueError("All ops need to use the same group.")
    works = []
    for op in p2p_op_list:
        if op.op is isend:
            works.append(isend(op.tensor, group=op.group, tag=op.tag, group_dst=op.peer))
        else:
            works.append(irecv(op.tensor, group=op.group, tag=op.tag, group_src=op.peer))
    return works


def monitored_barrier(group=GroupMember.WORLD, timeout=None, wait_all_ranks=False):
    """A barrier that names the ranks that did not reach it in ``timeout`` (a timedelta or
    seconds; the group's timeout by default). Every other rank reports to rank 0, which waits
    for them (for the first missing rank only, or for all with ``wait_all_ranks``) and then
    sends each its verdict: rank 0 raises naming the missing ranks, and so does every rank that
    receives a failed verdict. A rank waits for the verdict at most twice ``timeout``, the
    longest rank 0 can take when it is itself on time."""
    g = resolve(group)
    seconds = g.timeout if timeout is None else _seconds(timeout)
    if not seconds > 0:
        raise ValueError(f"monitored_barrier: timeout must be positive, got {timeout!r}")
    comm, me, size = g.communicator, g.rank(), g.size()
    count = getattr(g, "_monitored_barriers", 0)
    g._monitored_barriers = count + 1
    tag = count % (getattr(comm, "tag_ub", None) or 32767)      # a late report never meets a later barrier
    ms = int(round(seconds * 1000))
    if me != 0:
        token = np.ones(1, np.int64)
        comm.send(token, 0, tag, calls.call("send", token), seconds, INTERNAL)
        verdict = np.zeros(size, np.int64)
        request = comm.recv(verdict, 0, tag, calls.call("recv", verdict), seconds, INTERNAL)
        try:
            request.wait(2 * seconds, "monitored_barrier")
        except RuntimeError as exc:
            raise RuntimeError(f"[Rank {me}]: Rank {me} successfully reached monitoredBarrier, but received errors "
                               f"while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank "
                               f"({exc})") from None
        failed = [int(r) for r in np.flatnonzero(verdict)]
        if failed:
            raise RuntimeError(f"[Rank {me}]: Rank {me} successfully reached monitoredBarrier, but rank 0 reported "
                               f"that {_ranks(failed)} failed to pass monitoredBarrier in {ms} ms")
        return None
    reports = {r: comm.recv(np.zeros(1, np.int64), r, tag, calls.call("recv", np.zeros(1, np.int64)), seconds,
                            INTERNAL) for r in range(1, size)}
    deadline = time.perf_counter() + seconds
    failed = []
    for r, request in reports.items():
        if failed and not wait_all_ranks:
            request.cancel()
            continue
        try:
            request.wait(max(deadline - time.perf_counter(), 0.0), "monitored_barrier")
        except RuntimeError:
            request.cancel()
            failed.append(r)
    verdict = np.zeros(size, np.int64)
    verdict[failed] = 1
    for r in range(1, size):
        comm.send(verdict, r, tag, calls.call("send", verdict), seconds, INTERNAL)
    if failed:
        raise RuntimeError(f"[Rank 0]: {_ranks(failed)} failed to pass monitoredBarrier in {ms} ms")
    return None


def _ranks(ranks):
    return f"Rank {ranks[0]}" if len(ranks) == 1 else f"Ranks {', '.join(map(str, ranks))}"
