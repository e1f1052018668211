"""DistributedDataParallel: data-parallel training over the ranks of the default process group,
with PyTorch's interface.

    model = DistributedDataParallel(model)         # after dist.init_process_group("mpi")
    loss_fn(model(x_local), y_local).backward()    # .grad: the average over all ranks' batches
    opt.step()                                     # the same step on every rank

At construction the ranks check that their modules have the same parameters (count, shapes and
dtypes, compared through a checksum; a difference raises on every rank naming it), then every
rank takes rank 0's parameter and buffer values. Backward averages the gradients in buckets
whose all-reduces overlap the rest of backward (reducer.py). With ``broadcast_buffers`` each
synchronised forward first gives every rank rank 0's buffers (BatchNorm's running statistics).
``no_sync()`` skips the reduction (gradients accumulate locally until the next synchronised
backward). The wrapped module is ``.module``; ``state_dict()`` keys carry the "module." prefix.

Accepted and without effect in minidl: ``device_ids``/``output_device``/``dim`` (one device per
process), ``check_reduction``, ``static_graph``, ``gradient_as_bucket_view`` (the averaged
gradients are copied into ``.grad``, not viewed).
"""
import contextlib
import zlib

import numpy as np

from ... import distributed as dist
from ...autograd import grad_mode
from ...distributed.calls import dtype_code, dtype_name
from ...tensor.tensor import Tensor
from ..modules.module import Module
from .buckets import FIRST_BUCKET_BYTES
from .coalesce import broadcast_coalesced
from .reducer import Reducer

_MB = 1024 * 1024


class DistributedDataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0, broadcast_buffers=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False, check_reduction=False,
                 gradient_as_bucket_view=False, static_graph=False, delay_all_reduce_named_params=None,
                 param_to_hook_all_reduce=None, mixed_precision=None, device_mesh=None):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel expects an nn.Module, got {type(module).__name__}")
        for name, value in (("mixed_precision", mixed_precision), ("device_mesh", device_mesh),
                            ("delay_all_reduce_named_params", delay_all_reduce_named_params),
                            ("param_to_hook_all_reduce", param_to_hook_all_reduce)):
            if value is not None:
                raise NotImplementedError(f"DistributedDataParallel: {name} is not supported by minidl")
        group = dist.process_group.resolve(process_group)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        cap = 25 if bucket_cap_mb is None else bucket_cap_mb
        if not cap > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb!r}")
        self.module = module
        object.__setattr__(self, "process_group", group)
        object.__setattr__(self, "broadcast_buffers", bool(broadcast_buffers))
        object.__setattr__(self, "find_unused_parameters", bool(find_unused_parameters))
        object.__setattr__(self, "bucket_bytes_cap", int(cap * _MB))
        object.__setattr__(self, "device_ids", device_ids)
        object.__setattr__(self, "output_device", output_device)
        object.__setattr__(self, "dim", dim)
        object.__setattr__(self, "gradient_as_bucket_view", gradient_as_bucket_view)
        object.__setattr__(self, "static_graph", static_graph)
        object.__setattr__(self, "require_backward_grad_sync", True)
        object.__setattr__(self, "require_forward_param_sync", True)
        _verify_same_parameters(module, group)
        object.__setattr__(self, "modules_buffers", [b for _, b in module.named_buffers()])
        state = [p for _, p in module.named_parameters()] + self.modules_buffers
        if group.size() > 1:
            with grad_mode.no_grad():
                broadcast_coalesced(state, 0, group, dist.broadcast)
        # PyTorch's small first bucket only with the default cap
        first = min(FIRST_BUCKET_BYTES, self.bucket_bytes_cap) if bucket_cap_mb is None else self.bucket_bytes_cap
        object.__setattr__(self, "reducer", Reducer([p for _, p in named], [n for n, _ in named], group,
                                                    self.bucket_bytes_cap, first, self.find_unused_parameters))

    def forward(self, *inputs, **kwargs):
        if self.require_forward_param_sync and self.broadcast_buffers and self.modules_buffers \
                and self.process_group.size() > 1:
            with grad_mode.no_grad():
                broadcast_coalesced(self.modules_buffers, 0, self.process_group, dist.broadcast)
        output = self.module(*inputs, **kwargs)
        if grad_mode.is_grad_enabled() and self.require_backward_grad_sync:
            object.__setattr__(self, "require_forward_param_sync", True)
            self.reducer.prepare(list(_find_tensors(output)) if self.find_unused_parameters else [])
        else:
            object.__setattr__(self, "require_forward_param_sync", False)
            self.reducer.cancel()
        return output

    @contextlib.contextmanager
    def no_sync(self):
        """Inside the block, backward accumulates gradients locally without reducing them; the
        first synchronised backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        object.__setattr__(self, "require_backward_grad_sync", False)
        try:
            yield
        finally:
            object.__setattr__(self, "require_backward_grad_sync", old)

    @property
    def last_reduction(self):
        """What the last synchronised backward's reduction did: the number of buckets and bytes,
        ``wait_s`` (time the end of backward waited for the all-reduces: the communication
        backward did not hide), ``backward_s_after_first_ready`` (backward time that ran
        after the first gradient was ready) and ``ready_at_launch`` (per bucket, how many
        gradients were ready when its all-reduce started: fewer than all means it overlapped
        the rest of backward)."""
        return {k: v for k, v in self.reducer.timing.items() if k != "first_ready"}

    def extra_repr(self):
        return f"bucket_cap_mb={self.bucket_bytes_cap / _MB:g}, find_unused_parameters={self.find_unused_parameters}"


def _find_tensors(obj):
    if isinstance(obj, Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _find_tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _find_tensors(x)


def _signature(params):
    """Per parameter: ndim, up to 6 dims, a dtype code, a checksum of the full shape."""
    rows = np.full((len(params), 9), -1, np.int64)
    for k, p in enumerate(params):
        shape = tuple(int(n) for n in p.shape)
        rows[k, 0] = len(shape)
        rows[k, 1:1 + min(6, len(shape))] = shape[:6]
        rows[k, 7] = dtype_code(np.dtype(p._data.dtype).name)
        rows[k, 8] = zlib.crc32(repr(shape).encode())
    return rows


def _verify_same_parameters(module, group):
    """Raise on every rank unless all ranks' modules have parameters of the same count, shapes
    and dtypes, in the same order: one all_gather of a checksum, and only on a difference a
    second exchange that finds and names it."""
    params = list(module.parameters())
    names = [n for n, _ in module.named_parameters()]
    rows = _signature(params)
    size = group.size()
    if size == 1:
        return
    mine = Tensor._wrap(np.array([len(params), zlib.crc32(rows.tobytes())], np.int64), None, 0)
    everyone = Tensor._wrap(np.zeros((size, 2), np.int64), None, 0)
    dist.all_gather_into_tensor(everyone, mine, group=group)
    sums = everyone._data
    if (sums == sums[0]).all():
        return
    longest = int(sums[:, 0].max())
    padded = np.full((longest, 9), -2, np.int64)
    padded[:len(params)] = rows
    table = Tensor._wrap(np.zeros((size, longest, 9), np.int64), None, 0)
    dist.all_gather_into_tensor(table, Tensor._wrap(padded, None, 0), group=group)
    table = table._data
    rank = group.rank()
    for r in range(1, size):
        if sums[r, 0] != sums[0, 0]:
            raise RuntimeError(f"DistributedDataParallel: the module has {int(sums[0, 0])} parameters on rank 0 but "
                               f"{int(sums[r, 0])} on rank {r}; every rank must wrap the same model (this is "
                               f"rank {rank})")
        k = int(np.nonzero((table[r] != table[0]).any(axis=1))[0][0])
        here = f" (named {names[k]!r} here, on rank {rank})" if k < len(names) else ""
        raise RuntimeError(f"DistributedDataParallel: parameter {k}{here} differs across ranks: "
                           f"{_row_text(table[0][k])} on rank 0, {_row_text(table[r][k])} on rank {r}; every rank "
                           "must wrap the same model")


def _row_text(row):
    ndim = int(row[0])
    dims = [int(n) for n in row[1:1 + min(6, ndim)]] + (["..."] if ndim > 6 else [])
    return f"shape ({', '.join(map(str, dims))}{',' if ndim == 1 else ''}) and dtype {dtype_name(row[7])}"
