"""The object collectives, with PyTorch's signatures: any picklable Python objects, sent as the
bytes of their pickles through the tensor collectives and messages (so they are checked and
ordered as those are).

Each object is pickled on its rank and unpickled on the ranks that receive it. Unpickling runs
code that the pickle names: use these calls only among ranks that trust each other, as with
PyTorch. Pickles of different lengths travel padded to the longest, after the ranks have
exchanged their lengths.
"""
import pickle

import numpy as np

from .collectives import all_gather_into_tensor, broadcast
from .point_to_point import recv, send
from .process_group import resolve
from .ranks import check_rank
from .rooted import gather, scatter


def _tensor(array):
    from ..tensor.factories import from_numpy
    return from_numpy(np.ascontiguousarray(array))


def _pickle(obj):
    return np.frombuffer(pickle.dumps(obj), np.uint8)


def _unpickle(array):
    return pickle.loads(array.tobytes())


def _padded(data, length):
    out = np.zeros(length, np.uint8)
    out[:len(data)] = data
    return out


def all_gather_object(object_list, obj, group=None):
    """Set ``object_list[r]`` to rank r's ``obj``, on every rank."""
    size = resolve(group).size()
    data = _pickle(obj)
    lengths = _tensor(np.zeros(size, np.int64))
    all_gather_into_tensor(lengths, _tensor(np.array([data.size], np.int64)), group=group)
    lengths = lengths.numpy(force=True)
    longest = int(lengths.max())
    gathered = _tensor(np.zeros(size * longest, np.uint8))
    all_gather_into_tensor(gathered, _tensor(_padded(data, longest)), group=group)
    gathered = gathered.numpy(force=True).reshape(size, longest)
    for r in range(size):
        object_list[r] = _unpickle(gathered[r, :lengths[r]])


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """Set ``object_gather_list[r]`` on rank ``dst`` (0 by default) to rank r's ``obj``; the
    list is given on ``dst`` only."""
    g = resolve(group)
    root = check_rank(dst, group_dst, g.size(), "gather_object", "root", default=0)
    am_root = g.rank() == root
    if am_root and not object_gather_list:
        raise ValueError("Argument ``gather_list`` must be specified on destination rank.")
    if not am_root and object_gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    data = _pickle(obj)
    lengths = _tensor(np.zeros(g.size(), np.int64))
    all_gather_into_tensor(lengths, _tensor(np.array([data.size], np.int64)), group=group)
    lengths = lengths.numpy(force=True)
    longest = int(lengths.max())
    pieces = [_tensor(np.zeros(longest, np.uint8)) for _ in range(g.size())] if am_root else None
    gather(_tensor(_padded(data, longest)), pieces, group=group, group_dst=root)
    if am_root:
        for r, piece in enumerate(pieces):
            object_gather_list[r] = _unpickle(piece.numpy(force=True)[:lengths[r]])


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Replace the objects of ``object_list`` on every rank with rank ``src``'s (0 by default),
    in place; every rank's list has the same length."""
    g = resolve(group)
    root = check_rank(src, group_src, g.size(), "broadcast_object_list", "root", default=0)
    am_root = g.rank() == root
    pickles = [_pickle(obj) for obj in object_list] if am_root else None
    lengths = np.array([p.size for p in pickles], np.int64) if am_root else np.zeros(len(object_list), np.int64)
    lengths_t = _tensor(lengths)
    broadcast(lengths_t, group=group, group_src=root)
    lengths = lengths_t.numpy(force=True)
    data = _tensor(np.concatenate(pickles) if am_root and pickles else np.zeros(int(lengths.sum()), np.uint8))
    broadcast(data, group=group, group_src=root)
    if not am_root:
        _unpack_into(object_list, data.numpy(force=True), lengths)


def _unpack_into(object_list, data, lengths):
    start = 0
    for i, n in enumerate(lengths):
        object_list[i] = _unpickle(data[start:start + n])
        start += int(n)


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None, group=None,
                        group_src=None):
    """Set ``scatter_object_output_list[0]`` on rank r to ``scatter_object_input_list[r]`` of
    rank ``src`` (0 by default), whose input list holds one object per rank."""
    g = resolve(group)
    root = check_rank(src, group_src, g.size(), "scatter_object_list", "root", default=0)
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size at least 1.")
    am_root = g.rank() == root
    if am_root and scatter_object_input_list is None:
        raise ValueError("source rank must provide non-None scatter_object_input_list")
    pickles = [_pickle(obj) for obj in scatter_object_input_list] if am_root else []
    longest = _tensor(np.array([max((p.size for p in pickles), default=0)], np.int64))
    broadcast(longest, group=group, group_src=root)
    longest = int(longest.item())
    piece, length = _tensor(np.zeros(longest, np.uint8)), _tensor(np.zeros(1, np.int64))
    scatter(piece, [_tensor(_padded(p, longest)) for p in pickles] if am_root else None, group=group,
            group_src=root)
    scatter(length, [_tensor(np.array([p.size], np.int64)) for p in pickles] if am_root else None, group=group,
            group_src=root)
    scatter_object_output_list[0] = _unpickle(piece.numpy(force=True)[:int(length.item())])


def send_object_list(object_list, dst=None, group=None, device=None, group_dst=None, use_batch=False):
    """Send the objects of ``object_list`` to rank ``dst`` (two messages: their pickles'
    lengths, then the pickles)."""
    g = resolve(group)
    peer = check_rank(dst, group_dst, g.size(), "send_object_list", "destination")
    if peer == g.rank():
        raise ValueError("Invalid destination rank: destination rank should not be the same as the rank of the "
                         "current process.")
    pickles = [_pickle(obj) for obj in object_list]
    send(_tensor(np.array([p.size for p in pickles], np.int64)), group=group, group_dst=peer)
    send(_tensor(np.concatenate(pickles) if pickles else np.zeros(0, np.uint8)), group=group, group_dst=peer)


def recv_object_list(object_list, src=None, group=None, device=None, group_src=None, use_batch=False):
    """Replace the objects of ``object_list`` with those rank ``src`` (None: any rank) sends with
    ``send_object_list`` (as many as the list holds); return the sender's rank."""
    g = resolve(group)
    peer = None if src is None and group_src is None else check_rank(src, group_src, g.size(),
                                                                     "recv_object_list", "source")
    lengths = _tensor(np.zeros(len(object_list), np.int64))
    sender = recv(lengths, group=group, group_src=peer)
    lengths = lengths.numpy(force=True)
    data = _tensor(np.zeros(int(lengths.sum()), np.uint8))
    recv(data, group=group, group_src=sender)      # from the rank that sent the lengths, whoever it was
    _unpack_into(object_list, data.numpy(force=True), lengths)
    return sender
