"""Activations: gelu and dropout (``minidl.ops.activation``), and the elementwise and softmax
ops that are also Tensor methods (``minidl.ops``)."""
from ...ops import log_softmax, relu, sigmoid, softmax, tanh  # noqa: F401
from ...ops.activation import dropout, gelu  # noqa: F401
from ...ops.activation_elementwise import (elu, glu, hardtanh, leaky_relu, logsigmoid, mish, prelu,  # noqa: F401
                                           relu6, selu, silu, softplus, softsign, tanhshrink)
