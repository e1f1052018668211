"""BatchNorm1d and BatchNorm2d, with PyTorch's semantics, names and defaults.

Parameters (when ``affine``): ``weight`` (ones) and ``bias`` (zeros, absent with the keyword
``bias=False``), shape (C,). Buffers (when
``track_running_stats``): ``running_mean`` (zeros), ``running_var`` (ones) and
``num_batches_tracked`` (int64 0-d). In training the batch statistics normalize and are folded
into the running ones (``momentum=None``: a cumulative average, factor 1 / num_batches_tracked);
in eval the running statistics normalize, unless ``track_running_stats=False``, in which case
the batch statistics are used in both modes. The math is in minidl.ops.normalization.batch_norm.
"""
import numpy as np

from ...ops.shape_error import ShapeError
from ...tensor import dtype as dtypes
from ...tensor.device import device as Device
from ...tensor.size import as_ints, check_sizes
from ...tensor.tensor import Tensor
from .. import functional as F
from ..functional.channel_normalization import _as_mask, _verify_batch_size, check_real_tokens
from ..parameter import Parameter
from .module import Module


def _buffer(array):
    return Tensor._wrap(array, None, 0)


def _factory_dtype(dtype):
    """The storage dtype of a norm layer's parameters and running statistics (PyTorch's factory
    keyword ``dtype``): the one asked for, else the default float."""
    return dtypes.to_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT


def _to_device(module, device):
    """Moves a freshly built module to the factory keyword ``device`` (built on the host first); a
    value that names no device (a bool passed positionally where ``bias`` was meant) is a TypeError."""
    if device is None:
        return
    if isinstance(device, bool) or not isinstance(device, (str, int, Device)):
        raise TypeError(f"{type(module).__name__}: argument 'device' must be a device, a string or an int, "
                        f"got {type(device).__name__} ({device!r})")
    if str(device) != "cpu":
        module.to(device)


class _NormBase(Module):
    """What BatchNorm and InstanceNorm share: parameters, running buffers, extra_repr.

    State-dict version 2 (PyTorch's): version 2 added ``num_batches_tracked``, so loading an
    older (or unversioned) state dict that lacks it keeps the module's counter."""
    _version = 2

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        dt = _factory_dtype(dtype)
        check_sizes(type(self).__name__, num_features=as_ints((num_features,), type(self).__name__,
                                                             "num_features")[0])
        if int(num_features) == 0:
            raise ValueError(f"{type(self).__name__}: num_features must be positive, got {num_features}")
        self.num_features = int(num_features)
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = Parameter(np.ones(self.num_features, dt))
            if bias:
                self.bias = Parameter(np.zeros(self.num_features, dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", _buffer(np.zeros(self.num_features, dt)))
            self.register_buffer("running_var", _buffer(np.ones(self.num_features, dt)))
            self.register_buffer("num_batches_tracked", _buffer(np.array(0, np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        _to_device(self, device)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """A state dict without ``num_batches_tracked`` (a checkpoint written before that buffer
        existed, whose metadata says no version 2) loads with the counter kept as it is, as PyTorch's."""
        key = prefix + "num_batches_tracked"
        version = local_metadata.get("version")
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            state_dict[key] = self.num_batches_tracked.detach().clone()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean._data[...] = 0
            self.running_var._data[...] = 1
            self.num_batches_tracked._data[...] = 0

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            self.weight._data[...] = 1
            if self.bias is not None:
                self.bias._data[...] = 0

    def _check_channels(self, x):
        if x.shape[1] != self.num_features:
            raise ShapeError(f"{type(self).__name__}: expected input with {self.num_features} channels (dim 1), "
                             f"got input of shape {tuple(x.shape)}")

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    _dims = ()

    def _check_input_dim(self, x):
        if not isinstance(x, Tensor):
            raise TypeError(f"{type(self).__name__}: expected a Tensor input, got {type(x).__name__}")
        if x.ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"{type(self).__name__}: expected {want} input, got {x.ndim}D input of shape "
                             f"{tuple(x.shape)}")
        self._check_channels(x)

    def _factor_and_mode(self, x, mask):
        """(momentum factor, use batch statistics?), counting the batch when tracked."""
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        if bn_training:
            # checked before counting the batch, so a rejected batch leaves the buffers alone
            if mask is None:
                _verify_batch_size(x.shape)
            else:
                check_real_tokens(mask, x)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked._data[...] += 1
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked._data)
        return factor, bn_training

    def _running(self):
        """The running tensors to use or update: none when only batch statistics are used."""
        if not self.training or self.track_running_stats:
            return self.running_mean, self.running_var
        return None, None

    def forward(self, x):
        return self._normalize(x, F.batch_norm)

    def _relu_forward(self, x):
        """relu(self(x)) as one op (F.batch_norm_relu), with forward's checks, mode, running
        statistics and batch count; the zoo's CNNs call it where a ReLU follows (hooks aside)."""
        return self._normalize(x, F.batch_norm_relu)

    def _add_relu_forward(self, x, residual):
        """relu(self(x) + residual) as one op (F.batch_norm_add_relu), as ``_relu_forward``."""
        return self._normalize(x, lambda x, *args: F.batch_norm_add_relu(x, residual, *args))

    def _normalize(self, x, functional):
        self._check_input_dim(x)
        factor, bn_training = self._factor_and_mode(x, None)
        rm, rv = self._running()
        return functional(x, rm, rv, self.weight, self.bias, bn_training, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """BatchNorm over (N, C) or (N, C, L).

    Beyond PyTorch: ``forward(x, mask=None)`` for padded sequences (N, C, L), ``mask`` a bool
    (N, L) tensor or array, True at real tokens: padding enters neither the statistics nor the
    running estimates (the result equals BatchNorm of the real tokens alone); padded outputs
    are 0 and get no gradient.
    """
    _dims = (2, 3)

    def forward(self, x, mask=None):
        if mask is None:
            return super().forward(x)
        self._check_input_dim(x)
        if x.ndim != 3:
            raise ValueError(f"BatchNorm1d: a mask needs an input of shape (N, C, L), got shape {tuple(x.shape)}")
        m = _as_mask("BatchNorm1d", mask, x)
        factor, bn_training = self._factor_and_mode(x, m)
        rm, rv = self._running()
        return F.masked_batch_norm(x, m, rm, rv, self.weight, self.bias, bn_training, factor, self.eps)


class BatchNorm2d(_BatchNorm):
    """BatchNorm over (N, C, H, W): statistics per channel over N, H and W."""
    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """BatchNorm over (N, C, D, H, W): statistics per channel over N, D, H and W."""
    _dims = (5,)
