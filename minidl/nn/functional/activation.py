"""Activations: gelu and dropout (``minidl.ops.activation``), and the elementwise and softmax
ops that are also Tensor methods (``minidl.ops``).

softmax and log_softmax take PyTorch's ``dtype``: the input is cast to it before the op (a
recorded cast, so the gradient comes back in the input's dtype), which lets a float32 or
bfloat16 activation be normalized in float64, say.

``inplace=True`` is PyTorch's: the input is overwritten with the result and returned (with
the rules of every in-place write, tensor/inplace.py); the ``*_`` forms are the same calls
with ``inplace=True``.
"""
from ... import ops as _ops
import warnings

from ...ops import sigmoid, tanh  # noqa: F401
from ...ops.activation import dropout, gelu  # noqa: F401
from ...ops.activation_elementwise import (celu, elu, glu, hardsigmoid, hardswish, hardtanh, leaky_relu,  # noqa: F401
                                           logsigmoid, mish, prelu, relu6, selu, silu, softplus, softsign,
                                           tanhshrink)
from ...ops.softmax_variants import gumbel_softmax, implicit_softmax_dim, softmin  # noqa: F401
from ...ops import shrink as _shrink
from ...ops.shrink import hardshrink, rrelu, softshrink, threshold  # noqa: F401
from ...ops.alpha_dropout import alpha_dropout, feature_alpha_dropout  # noqa: F401
from ...tensor.inplace import maybe_inplace


def _softmax_input(input, dim, dtype, op, stacklevel):
    """(input cast to ``dtype``, dim): PyTorch's implicit dim (with its warning) when none is given."""
    if dim is None:
        warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call to include dim=X "
                      f"as an argument.", UserWarning, stacklevel=stacklevel)
        dim = implicit_softmax_dim(input.ndim)
    return (input if dtype is None else input.to(dtype)), dim


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """As ``torch.nn.functional.softmax``: ``dtype`` casts the input before the op."""
    x, dim = _softmax_input(input, dim, dtype, "softmax", _stacklevel)
    return _ops.softmax(x, dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """As ``torch.nn.functional.log_softmax``: ``dtype`` casts the input before the op."""
    x, dim = _softmax_input(input, dim, dtype, "log_softmax", _stacklevel)
    return _ops.log_softmax(x, dim)


def relu(input, inplace=False):
    """max(x, 0), as ``torch.nn.functional.relu``."""
    return maybe_inplace(input, inplace, "relu_", _ops.relu)


def relu_(input):
    return relu(input, inplace=True)


def elu_(input, alpha=1.0):
    return elu(input, alpha, inplace=True)


def celu_(input, alpha=1.0):
    return celu(input, alpha, inplace=True)


def selu_(input):
    return selu(input, inplace=True)


def leaky_relu_(input, negative_slope=0.01):
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    return hardtanh(input, min_val, max_val, inplace=True)


def threshold_(input, threshold, value):
    return _shrink.threshold(input, threshold, value, inplace=True)   # (the parameter shadows the function)


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, inplace=True)
