"""Channel dropout, as ``torch.nn.functional.dropout1d`` / ``dropout2d`` / ``dropout3d``:
each (sample, channel) feature map is zeroed as a whole with probability p and the kept ones
scaled by 1/(1-p). It is ``minidl.ops.activation``'s Dropout (y = x m, dy/dx = m) with a mask
of shape (N, C, 1, ...) broadcast over the map, so neighbouring pixels, which are strongly
correlated, drop together. ``inplace=True`` writes the result into the input, as PyTorch."""
import warnings

from ..tensor.inplace import maybe_inplace
from .activation import Dropout, check_dropout_dtype, dropout_mask


def _channel_dropout(input, p, training, inplace, spatial, op, other_ranks=None):
    """An input of another rank is refused (dropout1d), or taken with PyTorch's deprecation warning
    as its dropout2d takes it, batched (N, C, ...) from rank 2 up (``other_ranks="batched"``), or as
    its dropout3d, unbatched (C, ...) from rank 1 up ("unbatched")."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")
    ranks = (spatial + 1, spatial + 2)
    lowest = {"batched": 2, "unbatched": 1}.get(other_ranks, 0)
    if input.ndim not in ranks and (other_ranks is None or input.ndim < lowest):
        if other_ranks is not None:
            raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
        raise RuntimeError(f"{op}: Expected {spatial + 1}D or {spatial + 2}D input, but received a {input.ndim}D "
                           f"input of shape {list(input.shape)}")
    if input.ndim not in ranks:
        warnings.warn(f"{op}: Received a {input.ndim}-D input to {op}, which is deprecated and will result in an "
                      "error in a future release. To retain the behavior and silence this warning, please use dropout "
                      f"instead. Note that {op} exists to provide channel-wise dropout on inputs with {spatial} "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. "
                      f"{spatial + 1}D or {spatial + 2}D inputs).", UserWarning, stacklevel=3)
    if not training or p == 0.0:
        return input
    check_dropout_dtype(op, input, p)
    batched = input.ndim == spatial + 2 or (input.ndim != spatial + 1 and other_ranks == "batched")
    lead = input.shape[:2] if batched else input.shape[:1]
    mask = dropout_mask(tuple(lead) + (1,) * (input.ndim - len(lead)), p, input.dtype)
    if input.device != "cpu":
        from .. import backends
        mask = backends.get(input.device).from_host(mask)
    return maybe_inplace(input, inplace, f"{op}_", lambda x: Dropout.apply(x, mask))


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, L) or (C, L) input; see the module docstring."""
    return _channel_dropout(input, p, training, inplace, 1, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, H, W) input; see the module docstring. A 3-d input is
    read as PyTorch reads it, as a batch (N, C, L) with 1-d channels (not as one unbatched
    (C, H, W) image), with PyTorch's warning. Other ranks from 2 up are taken as (N, C, ...), with
    PyTorch's deprecation warning (a 2-d input thus drops single elements)."""
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                      "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                      "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                      "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                      "dropout1d instead.", UserWarning, stacklevel=2)
        return _channel_dropout(input, p, training, inplace, 1, "dropout2d")
    return _channel_dropout(input, p, training, inplace, 2, "dropout2d", other_ranks="batched")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of an (N, C, D, H, W) or (C, D, H, W) input; see the module docstring. Other
    ranks from 1 up are taken as one unbatched (C, ...), with PyTorch's deprecation warning."""
    return _channel_dropout(input, p, training, inplace, 3, "dropout3d", other_ranks="unbatched")
