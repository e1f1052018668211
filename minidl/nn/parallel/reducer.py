"""The Reducer: averages DistributedDataParallel's gradients across ranks while backward runs.

Each parameter has a post-accumulate-grad hook (``Tensor.register_post_accumulate_grad_hook``).
After a forward that is to be synchronised (``prepare``), the hook copies the parameter's
fresh ``.grad`` into its slot of a flat host bucket; when a bucket's last gradient has arrived
the bucket is divided by the world size and its all-reduce (SUM) is started without blocking,
so it runs while backward goes on with the layers below (each later ready gradient also tests
the all-reduces in flight, which is when MPI makes progress on them). Buckets start in the same order on
every rank (bucket i only after bucket i - 1), as collectives must. A final callback queued
on the backward pass waits for the all-reduces and copies the averages back into ``.grad``.

Unused parameters: with ``find_unused_parameters``, the parameters the forward's outputs do
not depend on are marked ready at the first hook (contributing their current ``.grad``, or
zeros), a small all-reduce finds the ones no rank used, and those keep their ``.grad``
untouched, as PyTorch. Without it, a parameter that received no gradient leaves its bucket
unfinished, and the end of backward raises PyTorch's error naming it.

cuda parameters: their gradients are copied into host buckets and back (staged through the
host, like every minidl collective).
"""
import time
import weakref

import numpy as np

from ... import distributed as dist
from ...autograd import backward_callbacks
from ...autograd.graph import leaves_reached
from ...tensor.tensor import Tensor
from . import buckets as bucketing
from .coalesce import host_values, write_values

_UNFINISHED = ("Expected to have finished reduction in the prior iteration before starting a new one. This error "
               "indicates that your module has parameters that were not used in producing loss. You can enable "
               "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
               "`minidl.nn.parallel.DistributedDataParallel`, and by making sure all `forward` function outputs "
               "participate in calculating loss.")


class _Bucket:
    def __init__(self, indices, params):
        self.indices = indices
        dtype = params[indices[0]]._data.dtype
        self.offsets, at = [], 0
        for i in indices:
            self.offsets.append(at)
            at += int(params[i]._data.size)
        self.flat = Tensor._wrap(np.zeros(at, dtype), None, 0)
        self.pending = len(indices)
        self.work = None


class Reducer:
    def __init__(self, params, names, group, bucket_cap_bytes, first_bucket_bytes, find_unused_parameters):
        self.params = params
        self.names = names
        self.group = group
        self.find_unused = find_unused_parameters
        self.world = dist.get_world_size(group)
        self.buckets = [_Bucket(ix, params) for ix in bucketing.assign(params, bucket_cap_bytes, first_bucket_bytes)]
        self.where = {}             # param index -> (bucket index, slot within it)
        for b, bucket in enumerate(self.buckets):
            for s, i in enumerate(bucket.indices):
                self.where[i] = (b, s)
        self.expecting = False      # a synchronised forward ran; its backward is to reduce
        self.started = False        # the first hook of that backward has run
        self.unused = []
        self.ready = [False] * len(params)
        self.n_ready = 0
        self.next_bucket = self.done_bucket = 0
        self.timing = {}
        me = weakref.ref(self)
        self.handles = [p.register_post_accumulate_grad_hook(_hook(me, i)) for i, p in enumerate(params)]

    # the iteration ---------------------------------------------------------------------
    def prepare(self, outputs):
        """A synchronised forward has run; its backward will reduce. With
        find_unused_parameters, ``outputs`` (the forward's tensors) tell which parameters
        will get no gradient."""
        if self.started:
            raise RuntimeError(_UNFINISHED)
        self.expecting = True
        self.ready = [False] * len(self.params)
        self.next_bucket = self.done_bucket = 0
        for bucket in self.buckets:
            bucket.pending = len(bucket.indices)
            bucket.work = None
        self.unused = _unreached(self.params, outputs) if self.find_unused else []
        self.timing = {"buckets": len(self.buckets), "bytes": sum(b.flat._data.nbytes for b in self.buckets),
                       "ready_at_launch": []}
        self.n_ready = 0

    def cancel(self):
        self.expecting = False

    def on_grad_ready(self, i):
        if not self.expecting:
            return          # no_sync(), or a backward not preceded by a synchronised forward
        if not self.started:
            self.started = True
            self.timing["first_ready"] = time.perf_counter()
            backward_callbacks.queue_callback(self.finalize)
            for u in self.unused:
                if not self.ready[u]:
                    self._mark_ready(u)
        if self.ready[i]:
            raise RuntimeError(f"Expected to mark a variable ready only once: parameter {i} ({self.names[i]}) "
                               "received its gradient twice in one backward (a module used twice with "
                               "find_unused_parameters, or a second backward through the same forward?)")
        self._mark_ready(i)
        self._progress()

    def _progress(self):
        """Ask the all-reduces in flight whether they are done. MPI moves a non-blocking
        collective's data only inside MPI calls; these tests, one per ready gradient, are what
        lets a bucket's all-reduce advance while backward computes the next gradients."""
        while self.done_bucket < self.next_bucket and self.buckets[self.done_bucket].work.is_completed():
            self.done_bucket += 1

    def _mark_ready(self, i):
        self.ready[i] = True
        self.n_ready += 1
        b, s = self.where[i]
        bucket = self.buckets[b]
        p = self.params[i]
        start, n = bucket.offsets[s], int(p._data.size)
        view = bucket.flat._data[start:start + n]
        if p._grad is None:
            view[...] = 0
        else:
            view[...] = host_values(p._grad).reshape(-1)
        bucket.pending -= 1
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            self._launch(self.buckets[self.next_bucket])
            self.next_bucket += 1

    def _launch(self, bucket):
        data = bucket.flat._data
        if data.dtype.kind in "fc":
            np.divide(data, self.world, out=data)
        else:
            np.floor_divide(data, self.world, out=data)
        bucket.work = dist.all_reduce(bucket.flat, group=self.group, async_op=True)
        self.timing["ready_at_launch"].append(self.n_ready)

    def finalize(self):
        """End of backward: wait for the all-reduces, copy the averages into ``.grad``."""
        self.expecting, self.started = False, False
        t0 = time.perf_counter()
        unlaunched = self.buckets[self.next_bucket:]
        try:
            for bucket in self.buckets[:self.next_bucket]:
                bucket.work.wait()
        finally:
            self.timing["wait_s"] = time.perf_counter() - t0
            self.timing["backward_s_after_first_ready"] = t0 - self.timing.get("first_ready", t0)
        if unlaunched:
            missing = [i for b in unlaunched for i in b.indices if not self.ready[i]]
            raise RuntimeError(_UNFINISHED + " Parameters which did not receive grad for rank "
                               f"{dist.get_rank(self.group)}: " + ", ".join(self.names[i] for i in missing)
                               + f"\nParameter indices which did not receive grad: {missing}")
        skip = self._globally_unused() if self.find_unused else set()
        for bucket in self.buckets:
            values = bucket.flat._data
            for s, i in enumerate(bucket.indices):
                if i in skip:
                    continue
                p = self.params[i]
                start, n = bucket.offsets[s], int(p._data.size)
                piece = values[start:start + n]
                if p._grad is None:
                    p._grad = _new_grad(p, piece)
                else:
                    write_values(p._grad, piece)

    def _globally_unused(self):
        """The unused parameters that no rank used either (their ``.grad`` is left alone)."""
        flags = np.zeros(len(self.params), np.int32)
        flags[self.unused] = 1
        t = Tensor._wrap(flags, None, 0)
        dist.all_reduce(t, op=dist.ReduceOp.MIN, group=self.group)
        return set(np.nonzero(flags)[0].tolist())

    def remove_hooks(self):
        for h in self.handles:
            h.remove()


def _hook(reducer_ref, i):
    def hook(param):
        reducer = reducer_ref()
        if reducer is not None:
            reducer.on_grad_ready(i)
    return hook


def _new_grad(p, values):
    from ... import backends
    array = values.reshape(p._data.shape).copy()
    if p.device.type != "cpu":
        array = backends.get(p.device.type).from_host(array)
    return Tensor._wrap(array, None, 0)


def _unreached(params, outputs):
    """Indices of ``params`` that the graph of ``outputs`` does not reach (an output with no
    node, a leaf itself, counts as reached)."""
    reached = {id(t) for t in outputs if t._node is None} | {id(t) for t in leaves_reached(outputs)}
    return [i for i, p in enumerate(params) if id(p) not in reached]
