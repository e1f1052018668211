"""The collectives, with PyTorch's signatures: each checks its arguments on this rank, stages
the tensors as host buffers (staging.py), hands them to the group's communicator (MPI, or
threads for run_ranks and a world of one) and returns a Work (``async_op=True``) or waits
for it (None).

All ranks must call the same collectives in the same order with tensors of the same shape
and dtype; the communicators check that before any data moves and raise on every rank,
naming the ranks and what differed.
"""
import numpy as np

from . import calls, staging
from .process_group import resolve
from .reduce_op import ReduceOp, check_op
from .work import Work


def _check_tensor(name, value, collective):
    from ..tensor.tensor import Tensor
    if not isinstance(value, Tensor):
        raise TypeError(f"{collective}: invalid function argument. Expected parameter `{name}` of type "
                        f"minidl.Tensor but got {type(value)} instead.")
    return value


def _check_list(name, values, collective, size):
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{collective}: invalid function argument. Expected parameter `{name}` of type "
                        f"List[minidl.Tensor] but got {type(values)} instead.")
    for i, v in enumerate(values):
        _check_tensor(f"{name}[{i}]", v, collective)
    if len(values) != size:
        raise ValueError(f"{collective}: `{name}` must hold one tensor per rank ({size}), got {len(values)}")
    return values


def _same_layout(what, tensors, reference, collective):
    for i, t in enumerate(tensors):
        if tuple(t.shape) != tuple(reference.shape) or t.dtype != reference.dtype:
            raise ValueError(f"{collective}: {what}[{i}] has shape {tuple(t.shape)} and dtype {t.dtype}; expected "
                             f"shape {tuple(reference.shape)} and dtype {reference.dtype}, as the tensor it "
                             "pairs with")


def _divide(array, size):
    def step():
        np.divide(array, size, out=array, casting="unsafe")
    return step


def _run(group, request, finish, describe, async_op, tensors):
    work = Work(request, finish, group.timeout, describe, tensors)
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``tensor`` across all ranks with ``op``, in place: afterwards every rank holds the
    result (the same bits on every rank)."""
    g = resolve(group)
    _check_tensor("tensor", tensor, "all_reduce")
    op = check_op(op, tensor._data.dtype, "all_reduce")
    buf = staging.Staged(tensor)
    staging.mark_written(tensor)
    call = calls.call("all_reduce", tensor._data, op)
    request = g.communicator.all_reduce(buf.array, op, call, g.timeout)
    finish = ([_divide(buf.array, g.size())] if op is ReduceOp.AVG else []) + [buf.write_back]
    return _run(g, request, finish, call.describe(), async_op, [tensor])


def _source(src, group_src, collective, size):
    if src is not None and group_src is not None and src != group_src:
        raise ValueError(f"{collective}: src={src} and group_src={group_src} disagree (there is one group)")
    root = src if src is not None else group_src
    if root is None:
        raise ValueError(f"{collective}: the source rank `src` must be given")
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= int(root) < size:
        raise ValueError(f"{collective}: src must be a rank in [0, {size - 1}], got {root!r}")
    return int(root)


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every other rank."""
    g = resolve(group)
    _check_tensor("tensor", tensor, "broadcast")
    root = _source(src, group_src, "broadcast", g.size())
    buf = staging.Staged(tensor, copy_in=g.rank() == root)
    if g.rank() != root:
        staging.mark_written(tensor)
    call = calls.call("broadcast", tensor._data, None, root)
    request = g.communicator.broadcast(buf.array, root, call, g.timeout)
    return _run(g, request, [buf.write_back], call.describe(), async_op, [tensor])


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Fill ``tensor_list[r]`` with rank r's ``tensor``, on every rank."""
    g = resolve(group)
    _check_tensor("tensor", tensor, "all_gather")
    _check_list("tensor_list", tensor_list, "all_gather", g.size())
    _same_layout("tensor_list", tensor_list, tensor, "all_gather")
    send = staging.Staged(tensor)
    recv = np.empty((g.size(),) + tuple(send.array.shape), send.array.dtype)
    call = calls.call("all_gather", tensor._data)
    request = g.communicator.all_gather(send.array, recv, call, g.timeout)

    def scatter_into_list():
        for r, out in enumerate(tensor_list):
            piece = staging.Staged(out, copy_in=False)
            piece.array[...] = recv[r]
            piece.write_back()
            staging.mark_written(out)
    return _run(g, request, [scatter_into_list], call.describe(), async_op, list(tensor_list))


def _stacked_shape(big, small, size, collective, big_name, small_name):
    if big.dtype != small.dtype:
        raise ValueError(f"{collective}: {big_name} has dtype {big.dtype} but {small_name} has {small.dtype}; "
                         "they must match")
    shape, piece = tuple(big.shape), tuple(small.shape)
    stacked = (size,) + piece
    concatenated = ((size * piece[0],) + piece[1:]) if piece else None
    if shape != stacked and shape != concatenated:
        expected = f"{stacked}" + (f" or {concatenated}" if concatenated else "")
        raise ValueError(f"{collective}: {big_name} must be world_size ({size}) times the size of {small_name} "
                         f"{piece}: shape {expected}, got {shape}")
    return stacked


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Gather every rank's ``input_tensor`` into ``output_tensor``, stacked (shape
    ``(world_size, *input.shape)``) or concatenated along dim 0, in rank order."""
    g = resolve(group)
    _check_tensor("output_tensor", output_tensor, "all_gather_into_tensor")
    _check_tensor("input_tensor", input_tensor, "all_gather_into_tensor")
    stacked = _stacked_shape(output_tensor, input_tensor, g.size(), "all_gather_into_tensor",
                             "output_tensor", "input_tensor")
    send = staging.Staged(input_tensor)
    recv = staging.Staged(output_tensor, shape=stacked, copy_in=False)
    staging.mark_written(output_tensor)
    call = calls.call("all_gather_into_tensor", input_tensor._data)
    request = g.communicator.all_gather(send.array, recv.array, call, g.timeout)
    return _run(g, request, [recv.write_back], call.describe(), async_op, [output_tensor])


def _reduce_scatter(collective, output, send, op, g, async_op, dtype):
    op = check_op(op, dtype, collective)
    recv = staging.Staged(output, copy_in=False)
    staging.mark_written(output)
    call = calls.call(collective, output._data, op)
    request = g.communicator.reduce_scatter(send, recv.array, op, call, g.timeout)
    finish = ([_divide(recv.array, g.size())] if op is ReduceOp.AVG else []) + [recv.write_back]
    return _run(g, request, finish, call.describe(), async_op, [output])


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce ``input_list[r]`` across the ranks into rank r's ``output``."""
    g = resolve(group)
    _check_tensor("output", output, "reduce_scatter")
    _check_list("input_list", input_list, "reduce_scatter", g.size())
    _same_layout("input_list", input_list, output, "reduce_scatter")
    wire = staging.wire_dtype(output._data.dtype)
    send = np.stack([staging.Staged(t).array for t in input_list]).astype(wire, copy=False)
    return _reduce_scatter("reduce_scatter", output, send, op, g, async_op, output._data.dtype)


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):  # noqa: A002
    """Reduce ``input`` (world_size times ``output``, stacked or concatenated along dim 0)
    across the ranks; rank r's ``output`` gets the r-th piece."""
    g = resolve(group)
    _check_tensor("output", output, "reduce_scatter_tensor")
    _check_tensor("input", input, "reduce_scatter_tensor")
    stacked = _stacked_shape(input, output, g.size(), "reduce_scatter_tensor", "input", "output")
    send = staging.Staged(input, shape=stacked).array
    return _reduce_scatter("reduce_scatter_tensor", output, send, op, g, async_op, output._data.dtype)


def barrier(group=None, async_op=False, device_ids=None):
    """Return once every rank has called barrier."""
    g = resolve(group)
    call = calls.call("barrier")
    request = g.communicator.barrier(call, g.timeout)
    return _run(g, request, [], "barrier", async_op, [])
