"""Linear (y = x W^T + b) and Identity."""

import numpy as np

from ...tensor import dtype as dtypes
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _empty(shape, dtype):
    return Parameter(np.empty(shape, dtype=dtypes.to_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT))


def _add_weight_and_bias(module, weight_shape, bias, bias_size, dtype, device):
    """The layers' common set-up: ``weight`` of ``weight_shape``, ``bias`` of (bias_size,) when
    ``bias`` (else registered as None), both filled by the module's ``reset_parameters``, then
    the module moved to ``device``."""
    module.weight = _empty(weight_shape, dtype)
    if bias:
        module.bias = _empty((bias_size,), dtype)
    else:
        module.register_parameter("bias", None)
    module.reset_parameters()
    if device is not None and str(device) != "cpu":
        module.to(device)


class Identity(Module):
    """Returns its input; accepts (and ignores) any constructor arguments, as PyTorch."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b with W (out_features, in_features) ~ kaiming_uniform(a=sqrt 5), i.e.
    U(-1/sqrt(in), 1/sqrt(in)), and b ~ U(-1/sqrt(in), 1/sqrt(in)), as PyTorch."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        if self.in_features < 0 or self.out_features < 0:
            raise RuntimeError(f"Linear: in_features and out_features must be non-negative, got "
                               f"in_features={in_features}, out_features={out_features}")
        _add_weight_and_bias(self, (self.out_features, self.in_features), bias, self.out_features, dtype, device)

    def reset_parameters(self):
        init.default_layer_init_(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear by another name: PyTorch's type for MultiheadAttention's ``out_proj``, which its
    dynamic quantization leaves alone (the attention reads out_proj's weight and bias directly,
    never calls it). Kept so that the module tree, its repr and isinstance checks match PyTorch's."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
