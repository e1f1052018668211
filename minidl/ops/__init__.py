"""Differentiable ops. Each file groups ops of one kind; each op is a Function with its
forward and backward written out in NumPy and its derivative in the docstring."""
from .arithmetic import add, div, mul, neg, pow, sub
from .indexing import compare, getitem, logical_not, masked_fill, where
from .join import cat, stack
from .linalg import matmul
from .reduction import argmax, argmin, max, mean, min, std, sum, var, vector_norm
from .shape import cast, expand, flatten, permute, reshape, squeeze, to_device, transpose, unsqueeze
from .softmax import log_softmax, softmax
from .unary import abs, clamp, clone, exp, log, relu, sigmoid, sqrt, tanh

__all__ = [
    "abs", "add", "argmax", "argmin", "cast", "cat", "clamp", "clone", "compare", "div", "exp", "expand",
    "flatten", "getitem", "log", "log_softmax", "logical_not", "masked_fill", "matmul", "max", "mean", "min",
    "mul", "neg", "permute", "pow", "relu", "reshape", "sigmoid", "softmax", "sqrt", "squeeze", "stack", "sub",
    "sum", "tanh", "to_device", "transpose", "unsqueeze", "var", "where",
]
