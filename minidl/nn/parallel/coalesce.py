"""Many tensors as few flat host buffers, one per dtype: how DistributedDataParallel moves
parameters and buffers in one collective per dtype instead of one per tensor."""
import numpy as np

from ... import backends
from ...tensor.tensor import Tensor


def host_values(t):
    """``t``'s values as a host ndarray (the array itself for a CPU tensor)."""
    return backends.get(t.device.type).to_host(t._data)


def write_values(t, values):
    """Copy the host array ``values`` into ``t``'s memory, wherever it lives."""
    values = values.reshape(t._data.shape)
    if type(t._data) is np.ndarray:
        t._data[...] = values
    else:
        t._data[...] = backends.get(t.device.type).from_host(np.ascontiguousarray(values))


def by_dtype(tensors):
    groups = {}
    for t in tensors:
        groups.setdefault(np.dtype(t._data.dtype), []).append(t)
    return groups


def flatten(tensors, dtype):
    """One flat host Tensor holding the values of ``tensors`` (all of ``dtype``), in order."""
    sizes = [int(t._data.size) for t in tensors]
    flat = np.empty(sum(sizes), dtype)
    at = 0
    for t, n in zip(tensors, sizes):
        flat[at:at + n] = host_values(t).reshape(-1)
        at += n
    return Tensor._wrap(flat, None, 0)


def unflatten_into(flat, tensors):
    at = 0
    values = flat._data
    for t in tensors:
        n = int(t._data.size)
        write_values(t, values[at:at + n])
        at += n


def broadcast_coalesced(tensors, src, group, broadcast):
    """Give every rank rank ``src``'s values of ``tensors``: one broadcast per dtype."""
    for dtype, members in sorted(by_dtype(tensors).items(), key=lambda kv: kv[0].str):
        flat = flatten(members, dtype)
        broadcast(flat, src, group=group)
        unflatten_into(flat, members)
