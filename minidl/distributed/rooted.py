"""The rooted collectives, with PyTorch's signatures: ``reduce`` (the result only on ``dst``),
``gather`` (every rank's tensor into ``dst``'s list) and ``scatter`` (``src``'s list, one
tensor to each rank).

Like every collective, all ranks call them, in the same order, with tensors of the same shape
and dtype, and name the same root; the communicators check that before any data moves. The
list (``gather_list``, ``scatter_list``) is given on the root only, as in PyTorch.
"""
import numpy as np

from . import calls, staging
from .collectives import _check_tensor, _divide, _run
from .process_group import resolve
from .ranks import check_rank
from .reduce_op import ReduceOp, check_op


def check_tensor_list(name, values, collective):
    from ..tensor.tensor import Tensor
    if not isinstance(values, list):
        raise TypeError(f"{collective}: invalid function argument. Expected parameter `{name}` of type "
                        f"List[minidl.Tensor] but got {type(values)} instead.")
    if not all(isinstance(v, Tensor) for v in values):
        raise TypeError(f"{collective}: invalid function argument. Expected parameter `{name}` of type "
                        f"List[minidl.Tensor] but got {type(values)} with elements of type "
                        f"{[type(v) for v in values]}.")
    return values


def same_dtype(tensor, tensors):
    for t in tensors:
        if t.dtype != tensor.dtype:
            raise ValueError(f"Invalid usage of tensors with different dtypes. Found {tensor.dtype} and {t.dtype}")


def _check_pieces(values, tensor, size, collective, which):
    if len(values) != size:
        raise RuntimeError(f"{collective}: Incorrect {which} list size {len(values)}. {which.capitalize()} list size "
                           f"should be {size}, same as size of the process group.")
    for i, t in enumerate(values):
        if tuple(t.shape) != tuple(tensor.shape):
            raise RuntimeError(f"{collective}: invalid tensor size at index {i} (expected {tuple(tensor.shape)}, "
                               f"got {tuple(t.shape)})")


def _with_root_list(collective, tensor, values, name, rank, group_rank, group, role, which):
    """What gather and scatter check before any data moves: ``tensor``, the root (0 by default), and
    ``values`` as the list only the root gives, one tensor per rank of ``tensor``'s shape and dtype
    (PyTorch's messages). Returns the group, the root, whether this rank is it, and the list ([]
    elsewhere)."""
    _check_tensor("tensor", tensor, collective)
    g = resolve(group)
    root = check_rank(rank, group_rank, g.size(), collective, "root", default=0)
    am_root = g.rank() == root
    values = [] if not values else check_tensor_list(name, values, collective)
    if am_root and not values:
        raise ValueError(f"Argument ``{name}`` must be specified on {role} rank.")
    if not am_root and values:
        raise ValueError(f"Argument ``{name}`` must NOT be specified on non-{role} ranks.")
    same_dtype(tensor, values)
    if am_root:
        _check_pieces(values, tensor, g.size(), collective, which)
    return g, root, am_root, values


def reduce(tensor, dst=None, op=ReduceOp.SUM, group=None, async_op=False, group_dst=None):
    """Reduce ``tensor`` across all ranks with ``op`` into ``tensor`` on rank ``dst``; the other
    ranks' tensors are left as they were."""
    g = resolve(group)
    root = check_rank(dst, group_dst, g.size(), "reduce", "root")
    _check_tensor("tensor", tensor, "reduce")
    op = check_op(op, tensor._data.dtype, "reduce")
    am_root = g.rank() == root
    buf = staging.Staged(tensor)
    if am_root:
        staging.mark_written(tensor)
    call = calls.call("reduce", tensor._data, op, root)
    request = g.communicator.reduce(buf.array, root, op, call, g.timeout)
    finish = []
    if am_root:
        finish = ([_divide(buf.array, g.size())] if op is ReduceOp.AVG else []) + [buf.write_back]
    return _run(g, request, finish, call.describe(), async_op, [tensor] if am_root else [])


def _fill(tensors, stacked):
    for out, piece in zip(tensors, stacked):
        staged = staging.Staged(out, copy_in=False)
        staged.array[...] = piece
        staged.write_back()
        staging.mark_written(out)


def gather(tensor, gather_list=None, dst=None, group=None, async_op=False, group_dst=None):
    """Fill ``gather_list[r]`` on rank ``dst`` (0 by default) with rank r's ``tensor``."""
    g, root, am_root, gather_list = _with_root_list("gather", tensor, gather_list, "gather_list", dst, group_dst,
                                                    group, "destination", "output")
    send = staging.Staged(tensor)
    recv = np.empty((g.size(),) + tuple(send.array.shape), send.array.dtype) if am_root else None
    call = calls.call("gather", tensor._data, None, root)
    request = g.communicator.gather(send.array, recv, root, call, g.timeout)
    finish = [lambda: _fill(gather_list, recv)] if am_root else []
    return _run(g, request, finish, call.describe(), async_op, list(gather_list))


def scatter(tensor, scatter_list=None, src=None, group=None, async_op=False, group_src=None):
    """Copy ``scatter_list[r]`` of rank ``src`` (0 by default) into ``tensor`` on rank r."""
    g, root, am_root, scatter_list = _with_root_list("scatter", tensor, scatter_list, "scatter_list", src, group_src,
                                                     group, "source", "input")
    send = None
    if am_root:
        wire = staging.wire_dtype(tensor._data.dtype)
        send = np.stack([staging.Staged(t).array for t in scatter_list]).astype(wire, copy=False)
    recv = staging.Staged(tensor, copy_in=False)
    staging.mark_written(tensor)
    call = calls.call("scatter", tensor._data, None, root)
    request = g.communicator.scatter(send, recv.array, root, call, g.timeout)
    return _run(g, request, [recv.write_back], call.describe(), async_op, [tensor])
