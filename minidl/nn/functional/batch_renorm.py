"""``batch_renorm``: the functional form of Batch Renormalization (Ioffe 2017; no PyTorch
counterpart). Checks its arguments and calls minidl.ops.normalization.batch_renorm, whose
backward (r and d held constant) is derived there."""
import numbers

from ...ops.normalization.batch_renorm import BatchRenormFunction
from .channel_normalization import (_check_channel_tensor, _check_dtypes, _check_input, _check_momentum,
                                    _verify_batch_size, batch_norm)


def _check_limit(name, value, low):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= low:
        raise ValueError(f"batch_renorm: expected {name} to be a number >= {low:g}, got {value!r}")


def batch_renorm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.01, eps=1e-5,
                 r_max=3.0, d_max=5.0):
    """Batch Renormalization of ``x`` (N, C, *) per channel (dim 1).

    ``training=True``: y = weight * (r * xhat + d) + bias with xhat the batch-normalized input,
    r = clip(sigma_B / sigma, 1 / r_max, r_max) and d = clip((mu_B - mu) / sigma, -d_max, d_max)
    from the batch's (mu_B, sigma_B) and the running (mu, sigma = sqrt(running_var + eps)); the
    running estimates are then updated as BatchNorm's. r and d get no gradient (Ioffe's rule).
    ``training=False``: BatchNorm with the running statistics. Both running tensors are required.
    """
    _check_input("batch_renorm", x)
    c = x.shape[1]
    if running_mean is None or running_var is None:
        raise ValueError("batch_renorm: running_mean and running_var must be given (r and d are measured "
                         "against them, and eval mode normalizes with them)")
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        _check_channel_tensor("batch_renorm", name, t, c, x)
    _check_dtypes("batch_renorm", x, running_mean, running_var, weight, bias)
    if not training:
        return batch_norm(x, running_mean, running_var, weight, bias, False, 0.0, eps)
    _check_momentum("batch_renorm", momentum)
    _check_limit("r_max", r_max, 1.0)
    _check_limit("d_max", d_max, 0.0)
    _verify_batch_size(x.shape)
    return BatchRenormFunction.apply(x, weight, bias, running_mean, running_var, float(r_max), float(d_max),
                                     float(momentum), float(eps), None)
