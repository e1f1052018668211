"""``weight_standardization``: every output channel's filter at zero mean and unit variance
(Qiao et al. 2019; no PyTorch counterpart). The op and its backward: minidl.ops.weight_standardization."""
import numbers

from ...ops.weight_standardization import WeightStandardization
from ...tensor.tensor import Tensor


def weight_standardization(weight, eps=1e-5):
    """``weight`` (O, *) standardized over all dims but the first: (w - mean) / sqrt(var + eps),
    biased variance, per output channel. Differentiable (closed-form backward)."""
    if not isinstance(weight, Tensor):
        raise TypeError(f"weight_standardization: expected a Tensor weight, got {type(weight).__name__}")
    if weight.dtype.kind != "f":
        raise TypeError(f"weight_standardization: expected a floating point weight, got dtype {weight.dtype}")
    if weight.ndim < 2:
        raise ValueError(f"weight_standardization: expected a weight of shape (out_channels, *) with at least 2 "
                         f"dims, got shape {tuple(weight.shape)}")
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not eps >= 0:
        raise ValueError(f"weight_standardization: expected eps >= 0, got {eps!r}")
    return WeightStandardization.apply(weight, float(eps))
