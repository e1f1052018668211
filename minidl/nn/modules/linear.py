"""Linear (y = x W^T + b) and Identity."""

import numpy as np

from ...tensor import dtype as dtypes
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


def _empty(shape, dtype):
    return Parameter(np.empty(shape, dtype=dtypes.to_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT))


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
        self.weight = _empty((self.out_features, self.in_features), dtype)
        if bias:
            self.bias = _empty((self.out_features,), dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()
        if device is not None and str(device) != "cpu":
            self.to(device)

    def reset_parameters(self):
        init.default_layer_init_(self.weight, self.bias)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
