"""SyncBatchNorm: BatchNorm whose training statistics span every rank of a process group.

With data-parallel training each rank sees only its slice of the batch; at a few samples per
rank BatchNorm's statistics are noisy (Wu & He 2018). SyncBatchNorm normalizes with the
statistics of the whole global batch instead: the output, the input gradient and the running
estimates equal BatchNorm over the concatenation of the ranks' batches (ranks may hold
different numbers of samples, or none). The math and the exchange (one collective of 2C + 1
numbers per rank in forward, one all-reduce of 2C in backward) are in
minidl.ops.normalization.sync_batch_norm.

PyTorch's semantics and names: ``SyncBatchNorm(num_features, eps, momentum, affine,
track_running_stats, process_group, device, dtype, *, bias)`` for input (N, C, *) of any rank >= 2, and
``SyncBatchNorm.convert_sync_batchnorm(module, process_group=None)``, which replaces every
BatchNorm*d of a model by a SyncBatchNorm that keeps its parameters and buffers (the same
Tensors). In eval mode it is BatchNorm with the running estimates and communicates nothing.
The weight and bias gradients are the rank's own (DistributedDataParallel averages them).

When no process group is initialised (``minidl.distributed.init_process_group``), or it has
one rank, SyncBatchNorm is plain BatchNorm over the local batch, and says so once per process
with a warning (PyTorch falls back silently): a script with ``--norm syncbatch`` then still runs
on one process.

Beyond PyTorch, as minidl's BatchNorm1d: ``forward(x, mask=None)`` for padded sequences (N, C, L),
``mask`` a bool (N, L), True at real tokens: the statistics are those of the real tokens of
every rank together (their global count), padded outputs are 0 and get no gradient. A model
with masked BatchNorm1d (the zoo's encoder with norm="batch") converts with
``convert_sync_batchnorm`` as any other.
"""
import warnings

import numpy as np

from ...ops.normalization.sync_batch_norm import SyncBatchNormFunction
from ...tensor.tensor import Tensor
from .. import functional as F
from ..functional.channel_normalization import _as_mask, _verify_batch_size, check_real_tokens
from .batchnorm import _BatchNorm

_FALLBACK_WARNED = [False]   # the fallback to BatchNorm is announced once per process


def _warn_fallback(reason):
    if not _FALLBACK_WARNED[0]:
        _FALLBACK_WARNED[0] = True
        warnings.warn(f"SyncBatchNorm: {reason}, so it normalizes with the statistics of this process's batch only "
                      "(plain BatchNorm); this is said once per process", UserWarning, stacklevel=3)


class GroupExchange:
    """SyncBatchNorm's two collectives over a process group of minidl.distributed (None: the
    default group), on host float64 vectors: ``gather`` stacks every rank's vector in rank order
    (all_gather_into_tensor), ``sum`` adds them element-wise (all_reduce)."""

    def __init__(self, group=None):
        self.group = group

    def gather(self, vector):
        from ... import distributed as dist
        vector = np.ascontiguousarray(vector, np.float64)
        k = dist.get_world_size(self.group)
        out = Tensor._wrap(np.zeros(k * vector.size), None, 0)
        dist.all_gather_into_tensor(out, Tensor._wrap(vector, None, 0), group=self.group)
        return out.numpy(force=True).reshape(k, vector.size)

    def sum(self, vector):
        from ... import distributed as dist
        t = Tensor._wrap(np.ascontiguousarray(vector, np.float64).copy(), None, 0)
        dist.all_reduce(t, group=self.group)
        return t.numpy(force=True)


def _world(group):
    """The number of ranks to synchronise over, or the reason there is nothing to synchronise with."""
    from ... import distributed as dist
    if not dist.is_initialized():
        return 1, "no process group is initialised (minidl.distributed.init_process_group)"
    k = dist.get_world_size(group)
    return k, (None if k > 1 else "the process group has a single rank")


class SyncBatchNorm(_BatchNorm):
    """BatchNorm over (N, C, *) with the statistics of every rank's batch (see the module docstring)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 process_group=None, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.process_group = process_group

    def _check_input_dim(self, x):
        if not isinstance(x, Tensor):
            raise TypeError(f"SyncBatchNorm: expected a Tensor input, got {type(x).__name__}")
        if x.ndim < 2:
            raise ValueError(f"expected at least 2D input (got {x.ndim}D input)")
        self._check_channels(x)

    def forward(self, x, mask=None):
        self._check_input_dim(x)
        m = None
        if mask is not None:
            if x.ndim != 3:
                raise ValueError(f"SyncBatchNorm: a mask needs an input of shape (N, C, L), got shape "
                                 f"{tuple(x.shape)}")
            m = _as_mask("SyncBatchNorm", mask, x)
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        sync = False
        if bn_training and self.training:
            _, reason = _world(self.process_group)
            sync = reason is None
            if not sync:
                _warn_fallback(reason)
        if bn_training and not sync:   # checked before counting the batch: a rejected one leaves the buffers alone
            if m is None:
                _verify_batch_size(x.shape)
            else:
                check_real_tokens(m, x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked._data[...] += 1
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked._data)
        rm, rv = self._running()
        if not sync:
            if m is None:
                return F.batch_norm(x, rm, rv, self.weight, self.bias, bn_training, factor, self.eps)
            return F.masked_batch_norm(x, m, rm, rv, self.weight, self.bias, bn_training, factor, self.eps)
        exchange = GroupExchange(self.process_group)
        return sync_batch_norm(x, rm, rv, self.weight, self.bias, factor, self.eps, m, exchange)

    def extra_repr(self):
        return super().extra_repr() + ("" if self.process_group is None else f", process_group={self.process_group}")

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every BatchNorm*d (recursively) replaced by a SyncBatchNorm holding the
        same parameters and buffers (the same Tensors) and training mode; a BatchNorm given as
        ``module`` itself is returned converted. Other modules are kept and returned as they are."""
        out = module
        if isinstance(module, _BatchNorm):
            out = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                      process_group)
            if module.affine:
                out.weight = module.weight
                out.bias = module.bias
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                setattr(out, name, getattr(module, name))   # registered buffers (None when not tracked)
            out.training = module.training
        for name, child in list(module._modules.items()):
            if child is not None:
                out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out


def sync_batch_norm(x, running_mean, running_var, weight, bias, momentum, eps, mask, exchange):
    """Training-mode SyncBatchNorm of this rank's ``x`` through ``exchange`` (an object with
    ``gather`` and ``sum``, see SyncBatchNormFunction): the functional form the module calls,
    public so that a test or an experiment can pass a simulated exchange."""
    from ..functional.channel_normalization import _check_channel_tensors, _check_input, _check_momentum
    _check_input("sync_batch_norm", x)
    _check_channel_tensors("sync_batch_norm", x, running_mean, running_var, weight, bias)
    _check_momentum("sync_batch_norm", momentum)
    if mask is not None:
        mask = _as_mask("sync_batch_norm", mask, x)
    return SyncBatchNormFunction.apply(x, weight, bias, running_mean, running_var, float(momentum), float(eps), mask,
                                       exchange)
