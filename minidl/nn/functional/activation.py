"""Activations: gelu and dropout (``minidl.ops.activation``), and the elementwise and softmax
ops that are also Tensor methods (``minidl.ops``).

``inplace=True`` is PyTorch's: the input is overwritten with the result and returned (with
the rules of every in-place write, tensor/inplace.py); the ``*_`` forms are the same calls
with ``inplace=True``.
"""
from ... import ops as _ops
from ...ops import log_softmax, sigmoid, softmax, tanh  # noqa: F401
from ...ops.activation import dropout, gelu  # noqa: F401
from ...ops.activation_elementwise import (celu, elu, glu, hardsigmoid, hardswish, hardtanh, leaky_relu,  # noqa: F401
                                           logsigmoid, mish, prelu, relu6, selu, silu, softplus, softsign,
                                           tanhshrink)
from ...ops.softmax_variants import gumbel_softmax, softmin  # noqa: F401
from ...ops import shrink as _shrink
from ...ops.shrink import hardshrink, rrelu, softshrink, threshold  # noqa: F401
from ...ops.alpha_dropout import alpha_dropout, feature_alpha_dropout  # noqa: F401
from ...tensor.inplace import maybe_inplace


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
