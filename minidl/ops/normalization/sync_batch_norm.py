"""SyncBatchNorm: BatchNorm whose statistics run over the samples of every rank of a process group.

Each of the k ranks holds its own part of the batch, x_r of shape (N_r, C, *). Training
normalizes channel c with the mean and biased variance of the union of all the parts, exactly
as BatchNorm of the concatenated batch (math: minidl.ops.normalization.batch_norm); eval mode
uses the running estimates and is BatchNorm itself (nothing crosses the ranks).

Forward. Rank r computes, per channel, its local count n_r (values per channel: N_r * prod(*),
or its real tokens with a mask), mean m_r and sum of squared deviations M2_r = sum_i (x_i - m_r)^2,
each with the stable one- or two-pass statistics of the BatchNorm kernels. A rank without values
sends (0, 0, 0). The ranks exchange these (one collective of a packed vector [n_r, m_r, M2_r]
per rank: 2C + 1 numbers) and every rank merges them, in rank order, with Chan et al.'s formula

    n    = sum_r n_r
    mean = sum_r n_r m_r / n
    M2   = sum_r M2_r + sum_r n_r (m_r - mean)^2        (every term >= 0: no cancellation)
    var  = M2 / n,   rstd = 1 / sqrt(var + eps)

which is the identity sum_i (x_i - mean)^2 = sum_r [sum_{i in r} (x_i - m_r)^2 + n_r (m_r - mean)^2]
(the cross term vanishes because sum_{i in r} (x_i - m_r) = 0). Unequal n_r are exact, and
unlike the sums of x and x^2 (var = E[x^2] - E[x]^2) nothing cancels when |mean| >> std. Every
rank merges the same table in the same order, so all ranks hold bit-identical statistics.
y = gamma (x - mean) rstd + beta on each rank's own values. The running estimates take the
global mean and the unbiased global variance var * n / (n - 1) (running_stats.py, the rule
every BatchNorm shares); n == 1 is an error on every rank (as BatchNorm with one value), n == 0
leaves the estimates as they are.

Backward. Write g_i = dL/dy_i and d_i = gamma g_i over the union of the ranks' values, with L
the sum of the ranks' losses. BatchNorm's closed form (derived in batch_norm.py) is

    dL/dx_j = (rstd / n) (n d_j - sum_i d_i - xhat_j sum_i d_i xhat_i)

where the sums run over all n values: over every rank. Each rank sums its own part,

    A_r = sum_{i in r} g_i,   B_r = sum_{i in r} g_i (x_i - mean)       (mean: the global one)

and one all-reduce gives A = sum_r A_r and B = sum_r B_r; then, on each rank's own values,

    dL/dx_j = gamma rstd (g_j - A / n - (x_j - mean) rstd^2 B / n)

(sum d = gamma A, sum d xhat = gamma rstd B). dL/dgamma and dL/dbeta are the rank's own
sums rstd B_r and A_r, as PyTorch's SyncBatchNorm returns them: DistributedDataParallel
averages them over the ranks like any other parameter gradient (their sum over the ranks is
BatchNorm's gradient of the concatenated batch). The all-reduce runs only when dL/dx is
needed, as in PyTorch (every rank's graph has the same shape, so all ranks take part or none).

Masked (padded sequences, (N, C, L) with a bool mask (N, L), True at real tokens): every sum
above runs over the real tokens only, n counts the real tokens of all ranks, padded outputs are
0 and get no gradient: the result is masked BatchNorm of the ranks' sequences put together.

Implementations: the unmasked CPU path runs the BatchNorm kernels' local passes
(minidl.kernels.cpu.sync_batch_norm); the masked variant and other devices run the references
below (array-namespace code: on cuda the few per-channel numbers are staged through the host
for the exchange, the tensors stay on the device).
"""
import numpy as np

from ...autograd.op_function import Function
from ...backends import device_of, get as get_backend, namespace_of
from .._saved import keep_for_backward
from ._dispatch import NORMS, affine_meta, param_grads
from .batch_norm import _axes, _mask_like, _per_channel, batch_norm_apply_reference
from .running_stats import update_running_stats

batch_norm_apply_reference = batch_norm_apply_reference   # re-exported: the registry looks it up here


def _count(x, mask):
    """The number of values per channel (host number)."""
    if mask is not None:
        return float(_host(mask.astype(np.float64).sum()))
    return float(x.size // x.shape[1]) if x.shape[1] else 0.0


def sync_batch_norm_moments_reference(x, mask=None):
    """(count, mean, M2) of each channel of the local batch (two-pass, float64): count a host
    number, mean and M2 (C,) arrays on x's device; zeros when the batch has no values."""
    xp = namespace_of(x)
    c = x.shape[1]
    count = _count(x, mask)
    if count == 0:
        return 0.0, xp.zeros(c, np.float64), xp.zeros(c, np.float64)
    axes = _axes(x)
    xf = x.astype(np.float64)
    w = 1.0 if mask is None else _mask_like(mask, x).astype(np.float64)
    mean = (xf * w).sum(axis=axes) / count
    centered = xf - _per_channel(mean, x)
    return count, mean, (centered * centered * w).sum(axis=axes)


def sync_batch_norm_grad_sums_reference(dy, x, mean, mask=None):
    """The local (sum g, sum g (x - mean)) per channel, float64, ``mean`` the global mean."""
    xp = namespace_of(x)
    c = x.shape[1]
    if x.size == 0:
        return xp.zeros(c, np.float64), xp.zeros(c, np.float64)
    axes = _axes(x)
    g = dy.astype(np.float64)
    if mask is not None:
        g = xp.where(_mask_like(mask, x), g, 0.0)
    return g.sum(axis=axes), (g * (x.astype(np.float64) - _per_channel(mean, x))).sum(axis=axes)


def sync_batch_norm_input_grad_reference(dy, x, mean, rstd, weight, sum_dy, sum_dy_xmu, count, mask=None):
    """dL/dx = gamma rstd (g - A / n - (x - mean) rstd^2 B / n), A, B and n over every rank."""
    xp = namespace_of(x)
    if x.size == 0:
        return xp.empty(x.shape, x.dtype)
    p = rstd if weight is None else rstd * weight.astype(np.float64)
    q = -p * rstd * rstd * sum_dy_xmu / count
    o = -p * sum_dy / count
    dx = (_per_channel(p, x) * dy.astype(np.float64) + _per_channel(q, x) * (x.astype(np.float64)
          - _per_channel(mean, x)) + _per_channel(o, x))
    if mask is not None:
        dx = xp.where(_mask_like(mask, x), dx, 0.0)
    return dx.astype(x.dtype)


_NAMES = ("sync_batch_norm_moments", "sync_batch_norm_grad_sums", "sync_batch_norm_input_grad", "batch_norm_apply")
SYNC_BATCH_NORM = NORMS.kernels(_NAMES, __name__, cpu="minidl.kernels.cpu.sync_batch_norm")
# the masked variant (short padded sequences) runs the reference on every device
MASKED_SYNC_BATCH_NORM = NORMS.kernels(_NAMES, __name__)


def _host(a):
    """A device array (or number) as a host float64 array."""
    if isinstance(a, (int, float, np.ndarray, np.generic)):
        return np.asarray(a, np.float64)
    return np.asarray(get_backend(device_of(a)).to_host(a), np.float64)


def _on(like, a):
    """The host array ``a`` on the device of ``like``."""
    if isinstance(like, np.ndarray):
        return a
    return get_backend(device_of(like)).from_host(np.ascontiguousarray(a))


def pack_moments(count, mean, m2):
    """The vector a rank contributes to the exchange: [count, mean (C), M2 (C)], host float64."""
    return np.concatenate([[float(count)], _host(mean).reshape(-1), _host(m2).reshape(-1)])


def merge_moments(table):
    """Chan et al.'s merge of the ranks' (count, mean, M2) rows (``table``: (k, 2C + 1), one row
    per rank as ``pack_moments`` makes it), in rank order: (n, mean, biased var), float64; NaN
    mean and var for n == 0 (the statistics of no values, as BatchNorm's)."""
    table = np.asarray(table, np.float64)
    c = (table.shape[1] - 1) // 2
    counts, means, m2s = table[:, 0], table[:, 1:1 + c], table[:, 1 + c:]
    n = float(counts.sum())
    if n == 0:
        return 0.0, np.full(c, np.nan), np.full(c, np.nan)
    mean = (counts[:, None] * means).sum(axis=0) / n
    spread = means - mean
    m2 = m2s.sum(axis=0) + (counts[:, None] * spread * spread).sum(axis=0)
    return n, mean, m2 / n


class SyncBatchNormFunction(Function):
    """Training-mode SyncBatchNorm (see the module docstring). ``exchange`` crosses the ranks:
    ``exchange.gather(v)`` returns every rank's host vector ``v`` stacked in rank order (k, len),
    ``exchange.sum(v)`` their element-wise sum (minidl.nn.modules.syncbatchnorm makes one over a
    process group of minidl.distributed). Saves x and the two (C,) global statistics."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps, mask, exchange):
        impl = ctx.impl = (SYNC_BATCH_NORM if mask is None else MASKED_SYNC_BATCH_NORM).select(x)
        count, mean, m2 = impl.sync_batch_norm_moments(x, mask)
        n, mean, var = merge_moments(exchange.gather(pack_moments(count, mean, m2)))
        if n == 1:   # every rank sees the same n: all of them raise
            raise ValueError(f"Expected more than 1 value per channel when training, got 1 value in all across the "
                             f"ranks (this rank's input size {tuple(x.shape)})")
        rstd = 1.0 / np.sqrt(var + eps)
        mean, rstd = _on(x, mean), _on(x, rstd)
        y = impl.batch_norm_apply(x, mean, rstd, weight, bias, mask)
        if n > 0 and (running_mean is not None or running_var is not None):
            update_running_stats(running_mean, running_var, mean, _on(x, var), n, momentum)
        ctx.save_for_backward(x, weight, mean, rstd, keep_for_backward(ctx, mask))   # the caller's mask may change
        ctx.count, ctx.exchange, ctx.affine = n, exchange, affine_meta(weight, bias)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd, mask = ctx.saved_tensors
        need = ctx.needs_input_grad[:3]
        impl = ctx.impl
        sum_dy, sum_dy_xmu = impl.sync_batch_norm_grad_sums(dy, x, mean, mask)
        dx = None
        if need[0]:
            c = x.shape[1]
            total = ctx.exchange.sum(np.concatenate([_host(sum_dy), _host(sum_dy_xmu)]))
            dx = impl.sync_batch_norm_input_grad(dy, x, mean, rstd, weight, _on(x, total[:c]), _on(x, total[c:]),
                                                 ctx.count, mask)
        grads = param_grads(ctx.affine, need[1:], (rstd * sum_dy_xmu, sum_dy))
        return (dx,) + grads + (None,) * 6
