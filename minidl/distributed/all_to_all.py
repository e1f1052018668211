"""The all-to-alls, with PyTorch's signatures: every rank sends a piece to every rank.

``all_to_all(output_tensor_list, input_tensor_list)``: ``input_tensor_list[j]`` goes to rank j,
and ``output_tensor_list[i]`` receives rank i's piece. ``all_to_all_single(output, input,
output_split_sizes, input_split_sizes)``: the same with each tensor split along dim 0, evenly
when the split sizes are not given, else into rows of those sizes, in rank order.

The pieces may differ in size from rank to rank, so the ranks do not make equal calls: each
one's call carries how many elements it sends to and expects from every rank, and the
communicators check, before any data moves, that rank i expects from rank j exactly what rank
j sends it (calls.py); a difference raises on every rank.
"""
import math

import numpy as np

from . import calls, staging
from .collectives import _check_tensor, _run
from .process_group import resolve
from .rooted import check_tensor_list, same_dtype


def _rows(tensor, splits, size, name):
    """How many rows (along dim 0) of ``tensor`` go to (or come from) each rank."""
    if tensor.dim() == 0:
        raise RuntimeError(f"all_to_all_single: {name} must have at least one dimension to split, got a 0-d tensor")
    n = int(tensor.shape[0])
    if splits is None or len(splits) == 0:
        if n % size:
            raise RuntimeError(f"Tensor's dim 0 does not divide equally across group size: {name} has {n} rows "
                               f"for {size} ranks")
        return [n // size] * size
    splits = [int(s) for s in splits]
    if len(splits) != size:
        raise RuntimeError(f"Number of tensor splits not equal to group size: {name}_split_sizes has "
                           f"{len(splits)} entries for {size} ranks")
    if sum(splits) != n or min(splits) < 0:
        raise RuntimeError(f"Split sizes doesn't match total dim 0 size: {name}_split_sizes {splits} for "
                           f"{n} rows")
    return splits


def _exchange(g, kind, send, sends, recv, recvs, dtype, finish, async_op, tensors):
    if np.shares_memory(send, recv):        # MPI may not read and write the same memory at once
        send = send.copy()
    call = calls.exchange(kind, dtype, sends, recvs)
    request = g.communicator.all_to_all(send, sends, recv, recvs, call, g.timeout)
    return _run(g, request, finish, call.describe(), async_op, tensors)


def all_to_all_single(output, input, output_split_sizes=None, input_split_sizes=None, group=None,  # noqa: A002
                      async_op=False):
    """Split ``input`` along dim 0, send piece j to rank j, and concatenate the pieces received
    from ranks 0, 1, ... into ``output``."""
    _check_tensor("output", output, "all_to_all_single")
    _check_tensor("input", input, "all_to_all_single")
    same_dtype(output, [input])
    g = resolve(group)
    size = g.size()
    in_rows = _rows(input, input_split_sizes, size, "input")
    out_rows = _rows(output, output_split_sizes, size, "output")
    in_row, out_row = math.prod(input.shape[1:]), math.prod(output.shape[1:])
    send = staging.Staged(input).array.reshape(-1)
    recv = staging.Staged(output, copy_in=False)
    staging.mark_written(output)
    return _exchange(g, "all_to_all_single", send, [n * in_row for n in in_rows], recv.array.reshape(-1),
                     [n * out_row for n in out_rows], output._data.dtype, [recv.write_back], async_op, [output])


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    """Send ``input_tensor_list[j]`` to rank j; receive rank i's piece into
    ``output_tensor_list[i]``."""
    check_tensor_list("output_tensor_list", output_tensor_list, "all_to_all")
    check_tensor_list("input_tensor_list", input_tensor_list, "all_to_all")
    g = resolve(group)
    size = g.size()
    for name, values in (("output", output_tensor_list), ("input", input_tensor_list)):
        if len(values) != size:
            raise RuntimeError(f"all_to_all: {name} tensor list size {len(values)} does not match world size {size}")
    same_dtype(output_tensor_list[0], output_tensor_list[1:] + input_tensor_list)
    wire = staging.wire_dtype(output_tensor_list[0]._data.dtype)
    send = np.concatenate([staging.Staged(t).array.reshape(-1) for t in input_tensor_list]).astype(wire, copy=False)
    sends = [t.numel() for t in input_tensor_list]
    recvs = [t.numel() for t in output_tensor_list]
    recv = np.empty(sum(recvs), wire)

    def fill_outputs():
        start = 0
        for out, n in zip(output_tensor_list, recvs):
            staged = staging.Staged(out, copy_in=False)
            staged.array.reshape(-1)[...] = recv[start:start + n]
            staged.write_back()
            staging.mark_written(out)
            start += n
    return _exchange(g, "all_to_all", send, sends, recv, recvs, output_tensor_list[0]._data.dtype, [fill_outputs],
                     async_op, list(output_tensor_list))
