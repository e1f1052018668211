"""The running estimates of BatchNorm and InstanceNorm, folded in as PyTorch does, for every device.

    running_mean = (1 - momentum) running_mean + momentum mean
    running_var  = (1 - momentum) running_var  + momentum var n / (n - 1)

``var`` is the biased batch variance (what normalizes) and n the number of values behind each
statistic; n / (n - 1) (Bessel's correction) makes the running variance estimate the
population's. With n == 1 the unbiased variance is 0 / 0: PyTorch stores NaN, and so does this.
An input without values (n == 0: no sample, or no position) estimates nothing and leaves the
estimates as they are.
"""
import numbers

from ...backends import namespace_of


def unbiased_var(var, count):
    """var * n / (n - 1), NaN where n == 1 (PyTorch's 0 / 0). ``count`` is a host number or a
    device scalar (masked BatchNorm on a device counts its real tokens there: never read back)."""
    if isinstance(count, numbers.Number):
        return var * count / (count - 1) if count > 1 else var * float("nan")
    unbiased = var * count / namespace_of(count).maximum(count - 1.0, 1.0)
    return namespace_of(count).where(count > 1, unbiased, unbiased * float("nan"))   # (no scalar upload)


def update_running_stats(running_mean, running_var, mean, var, count, momentum):
    """Fold a batch's ``mean`` and biased ``var`` into the running estimates, in place (either may
    be None). They are (C,), or (N, C) for InstanceNorm, whose estimates take the batch average
    of the instances' mean and unbiased variance."""
    if isinstance(count, numbers.Number) and count == 0:
        return
    if running_mean is not None:
        batch_mean = mean if mean.ndim == 1 else mean.mean(axis=0)
        running_mean *= 1.0 - momentum
        running_mean += (momentum * batch_mean).astype(running_mean.dtype)
    if running_var is not None:
        unbiased = unbiased_var(var, count)
        if unbiased.ndim > 1:
            unbiased = unbiased.mean(axis=0)
        running_var *= 1.0 - momentum
        running_var += (momentum * unbiased).astype(running_var.dtype)
