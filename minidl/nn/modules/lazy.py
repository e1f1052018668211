"""Lazy modules: layers whose input size is read from their first input, as PyTorch's
LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d and LazyBatchNorm1d/2d/3d.

Before the first forward the parameters are ``UninitializedParameter`` placeholders (and a
lazy batch norm's running statistics ``UninitializedBuffer``s, uninitialized.py); that forward
builds the real layer (Linear, Conv2d, ...) with the inferred size and this module becomes
it: it takes the real layer's class and state, and each placeholder becomes a Parameter
holding the real one's data, so an optimizer given ``parameters()`` before the first forward
holds the trained tensors. (As in PyTorch, run one batch through a lazy model before building
anything that reads the parameters' shapes.)
"""
from ...tensor.factories import zeros
from ...tensor.tensor import Tensor
from ..parameter import Buffer
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .conv import Conv2d
from .conv3d import Conv3d, ConvTranspose3d
from .conv_nd import Conv1d, ConvTranspose1d, ConvTranspose2d, _ConvNd, _tuple
from .linear import Linear
from .module import _HOOK_REGISTRIES, Module
from .uninitialized import UninitializedBuffer, UninitializedParameter, is_lazy


class LazyModuleMixin(Module):
    """Subclasses set ``cls_to_become``, the placeholder names in ``_lazy_params`` /
    ``_lazy_buffers``, and ``_in_size(input)``, the constructor's first argument."""
    cls_to_become = None
    _lazy_params, _lazy_buffers = (), ()

    def __init__(self, *args, **kwargs):
        super().__init__()
        kwargs = {k: v for k, v in kwargs.items() if not (k in ("device", "dtype") and v is None)}
        object.__setattr__(self, "_lazy_args", (args, kwargs))
        with_bias = kwargs.get("bias", True) if "bias" in self._bias_arg() else True
        factory = {"device": kwargs.get("device"), "dtype": kwargs.get("dtype")}
        for name in self._lazy_params:
            if name == "bias" and not with_bias:
                self.register_parameter("bias", None)
            else:
                setattr(self, name, UninitializedParameter(**factory))
        for name in self._lazy_buffers:
            self.register_buffer(name, UninitializedBuffer(**factory))

    def _bias_arg(self):
        return ("bias",)

    def has_uninitialized_params(self):
        """Whether a parameter or buffer is still a placeholder (PyTorch's check)."""
        return any(isinstance(t, (UninitializedParameter, UninitializedBuffer))
                   for t in list(self._parameters.values()) + list(self._buffers.values()))

    def initialize_parameters(self, input):
        """Build the real layer for this input and become it (see the module docstring)."""
        args, kwargs = self._lazy_args
        real = self.cls_to_become(self._in_size(input), *args, **kwargs)
        real.train(self.training)
        for name, current in self._parameters.items():
            new = real._parameters.get(name)
            if current is None or new is None:
                continue
            if isinstance(current, UninitializedParameter):
                current._become(new._data)
            real._parameters[name] = current   # the object an optimizer may hold; loaded values kept
        for name, current in self._buffers.items():
            if name in real._buffers and current is not None and not is_lazy(current):
                real._buffers[name] = current._as_tensor() if isinstance(current, Buffer) else current
        state = real.__dict__
        for key in _HOOK_REGISTRIES:
            if key in self.__dict__:
                state[key] = self.__dict__[key]
        self.__dict__.clear()
        self.__dict__.update(state)
        self.__class__ = type(real)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """As PyTorch's lazy modules: a placeholder whose entry the state_dict holds is first given
        that entry's shape, so the load fills it; the first forward then keeps the loaded values."""
        for registry in (self._parameters, self._buffers):
            for name, current in registry.items():
                value = state_dict.get(prefix + name)
                if is_lazy(current) and isinstance(value, Tensor) and not is_lazy(value):
                    current.materialize(value.shape)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def __call__(self, *args, **kwargs):
        # only the first call gets here: it makes this module the real layer, whose __call__ is Module's
        if not args:
            raise RuntimeError(f"{type(self).__name__}: the first call needs the input as a positional argument "
                               "to infer its size")
        self.initialize_parameters(args[0])
        return Module.__call__(self, *args, **kwargs)

    def forward(self, *args, **kwargs):
        return self(*args, **kwargs)


def _check_input(module, input, least_ndim, what):
    """``input``, checked to have the ``least_ndim`` dims ``module`` reads ``what`` from."""
    if not hasattr(input, "shape") or input.ndim < least_ndim:
        raise ValueError(f"{type(module).__name__}: expected an input with at least {least_ndim} dims to infer "
                         f"{what} from, got {list(getattr(input, 'shape', [])) or type(input).__name__}")
    return input


class LazyLinear(LazyModuleMixin):
    """Linear with in_features = input.shape[-1] of the first input."""
    cls_to_become = Linear
    _lazy_params = ("weight", "bias")

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(out_features, bias=bias, device=device, dtype=dtype)
        object.__setattr__(self, "in_features", 0)
        object.__setattr__(self, "out_features", int(out_features))

    def _in_size(self, input):
        return _check_input(self, input, 1, "in_features").shape[-1]

    def extra_repr(self):
        return f"in_features=0, out_features={self.out_features}, bias={self.bias is not None}"


class _LazyConv(LazyModuleMixin):
    """The conv layers' arguments (the transposed ones' order for the transposed layers), kept as
    the real layer's attributes so that the repr is the real layer's with in_channels=0."""
    _lazy_params = ("weight", "bias")
    _spatial = 2

    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, bias=True,
                 padding_mode="zeros", device=None, dtype=None):
        super().__init__(out_channels, kernel_size, stride, padding, dilation, groups, bias=bias,
                         padding_mode=padding_mode, device=device, dtype=dtype)
        self._set_geometry(out_channels, kernel_size, stride, padding, dilation, groups, 0)

    def _set_geometry(self, out_channels, kernel_size, stride, padding, dilation, groups, output_padding):
        n = self._spatial
        object.__setattr__(self, "in_channels", 0)
        object.__setattr__(self, "out_channels", int(out_channels))
        for name, v in (("kernel_size", kernel_size), ("stride", stride), ("dilation", dilation),
                        ("output_padding", output_padding), ("padding", padding)):
            object.__setattr__(self, name, v if isinstance(v, str) else _tuple(v, n))
        object.__setattr__(self, "groups", int(groups))

    def _in_size(self, input):
        unbatched = self._spatial + 1
        return _check_input(self, input, unbatched, "the channels").shape[0 if input.ndim == unbatched else 1]

    @property
    def dims(self):
        return self._spatial

    extra_repr = _ConvNd.extra_repr


class _LazyConvTranspose(_LazyConv):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True,
                 dilation=1, padding_mode="zeros", device=None, dtype=None):
        LazyModuleMixin.__init__(self, out_channels, kernel_size, stride, padding, output_padding, groups,
                                 bias=bias, dilation=dilation, padding_mode=padding_mode, device=device, dtype=dtype)
        self._set_geometry(out_channels, kernel_size, stride, padding, dilation, groups, output_padding)


class LazyConv1d(_LazyConv):
    """Conv1d with in_channels read from the first input."""
    cls_to_become, _spatial = Conv1d, 1


class LazyConv2d(_LazyConv):
    """Conv2d with in_channels read from the first input."""
    cls_to_become, _spatial = Conv2d, 2


class LazyConv3d(_LazyConv):
    """Conv3d with in_channels read from the first input."""
    cls_to_become, _spatial = Conv3d, 3


class LazyConvTranspose1d(_LazyConvTranspose):
    """ConvTranspose1d with in_channels read from the first input."""
    cls_to_become, _spatial = ConvTranspose1d, 1


class LazyConvTranspose2d(_LazyConvTranspose):
    """ConvTranspose2d with in_channels read from the first input."""
    cls_to_become, _spatial = ConvTranspose2d, 2


class LazyConvTranspose3d(_LazyConvTranspose):
    """ConvTranspose3d with in_channels read from the first input."""
    cls_to_become, _spatial = ConvTranspose3d, 3


class _LazyBatchNorm(LazyModuleMixin):
    """State-dict version 2, as the eager batch norms it becomes."""
    _lazy_params = ("weight", "bias")
    _unbatched = 2   # the smallest input ndim: (N, C) for 1d
    _version = 2

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None, dtype=None, *,
                 bias=True):
        super().__init__(eps, momentum, affine, track_running_stats, device=device, dtype=dtype, bias=bias)
        if not affine:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:   # PyTorch's placeholders: running stats of unknown size, a count of 0
            for name in ("running_mean", "running_var"):
                self.register_buffer(name, UninitializedBuffer(device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", zeros((), dtype="int64", device=device or "cpu"))
        object.__setattr__(self, "num_features", 0)

    def _in_size(self, input):
        return _check_input(self, input, self._unbatched, "num_features").shape[1]

    def extra_repr(self):
        eps, momentum, affine, track = self._lazy_args[0]
        return (f"0, eps={eps}, momentum={momentum}, affine={affine}, bias={self.bias is not None}, "
                f"track_running_stats={track}")


class LazyBatchNorm1d(_LazyBatchNorm):
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm):
    cls_to_become, _unbatched = BatchNorm2d, 4


class LazyBatchNorm3d(_LazyBatchNorm):
    cls_to_become, _unbatched = BatchNorm3d, 5
