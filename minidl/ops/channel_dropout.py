"""Channel dropout, as ``torch.nn.functional.dropout1d`` / ``dropout2d`` / ``dropout3d``:
each (sample, channel) feature map is zeroed as a whole with probability p and the kept ones
scaled by 1/(1-p). It is ``minidl.ops.activation``'s Dropout (y = x m, dy/dx = m) with a mask
of shape (N, C, 1, ...) broadcast over the map, so neighbouring pixels, which are strongly
correlated, drop together. ``inplace=True`` writes the result into the input, as PyTorch."""
from ..tensor.inplace import maybe_inplace
from .activation import Dropout, check_dropout_dtype, dropout_mask


def _channel_dropout(input, p, training, inplace, spatial, op):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    if input.ndim not in (spatial + 1, spatial + 2):
        raise RuntimeError(f"{op}: Expected {spatial + 1}D or {spatial + 2}D input, but received a {input.ndim}D "
                           f"input of shape {list(input.shape)}")
    if not training or p == 0.0:
        return input
    check_dropout_dtype(op, input, p)
    batched = input.ndim == spatial + 2
    lead = input.shape[:2] if batched else input.shape[:1]
    mask = dropout_mask(tuple(lead) + (1,) * spatial, p, input.dtype)
    if input.device != "cpu":
        from .. import backends
        mask = backends.get(input.device).from_host(mask)
    return maybe_inplace(input, inplace, f"{op}_", lambda x: Dropout.apply(x, mask))


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, L) or (C, L) input; see the module docstring."""
    return _channel_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, H, W) or (C, H, W) input; see the module docstring."""
    return _channel_dropout(input, p, training, inplace, 2, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input; see the module docstring."""
    return _channel_dropout(input, p, training, inplace, 3, "dropout3d")
