"""Activation layers over ``minidl.ops.activation_elementwise``: SiLU, ELU, SELU, CELU, LeakyReLU,
PReLU (a learned slope), ReLU6, Hardtanh, Hardsigmoid, Hardswish, Softplus, Softsign, Mish, GLU,
LogSigmoid, Tanhshrink; over ``minidl.ops.shrink``: Hardshrink, Softshrink, Threshold, RReLU.
``inplace=True`` overwrites the input with the result, as PyTorch's layers do."""
import warnings

import numpy as np

from ...ops import activation_elementwise as A
from ...ops import shrink as S
from ...tensor import dtype as dtypes
from ..parameter import Parameter
from .module import Module


def _inplace(inplace):
    return "inplace=True" if inplace else ""


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return A.silu(input, self.inplace)

    def extra_repr(self):
        return _inplace(self.inplace)


class Mish(SiLU):
    def forward(self, input):
        return A.mish(input, self.inplace)


class SELU(SiLU):
    def forward(self, input):
        return A.selu(input, self.inplace)


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return A.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    def forward(self, input):
        return A.celu(input, self.alpha, self.inplace)


class Hardsigmoid(SiLU):
    def forward(self, input):
        return A.hardsigmoid(input, self.inplace)

    def extra_repr(self):
        return ""   # PyTorch's repr does not show inplace here


class Hardswish(Hardsigmoid):
    def forward(self, input):
        return A.hardswish(input, self.inplace)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return A.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Hardtanh(Module):
    """``min_value`` / ``max_value`` are PyTorch's deprecated spellings of ``min_val`` / ``max_val``:
    accepted, with a FutureWarning, and used in their place."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        if min_val > max_val:
            raise ValueError(f"min_val cannot be greater than max_val; got min_val={min_val}, max_val={max_val}")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return A.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return _inplace(self.inplace)


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return A.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class PReLU(Module):
    """leaky_relu with learned slopes: one shared (num_parameters=1) or one per channel."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = int(num_parameters), init
        dt = dtypes.to_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
        self.weight = Parameter(np.empty(self.num_parameters, dtype=dt))
        self.reset_parameters()
        if device is not None and str(device) != "cpu":
            self.to(device)

    def reset_parameters(self):
        self.weight._data[...] = self.init

    def forward(self, input):
        return A.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class _Plain(Module):
    fn = None   # set by subclasses

    def forward(self, input):
        return type(self).fn(input)


class Softsign(_Plain):
    fn = staticmethod(A.softsign)


class LogSigmoid(_Plain):
    fn = staticmethod(A.logsigmoid)


class Tanhshrink(_Plain):
    fn = staticmethod(A.tanhshrink)


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return A.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return S.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input):
        return S.softshrink(input, self.lambd)


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return S.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}" + (", inplace=True" if self.inplace else "")


class RReLU(Module):
    """leaky_relu with a slope drawn per element from U(lower, upper) in training, (lower + upper) / 2 in eval."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return S.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")
