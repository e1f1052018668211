"""GroupNorm, with PyTorch's semantics, names and defaults.

Each sample's C channels are split into ``num_groups`` groups of consecutive channels, each
normalized over its channels and spatial positions; then a per-channel affine (``weight``
ones, ``bias`` zeros (absent with the keyword ``bias=False``), shape (C,), when ``affine``).
No running statistics: train and eval compute the same thing. The math is in
minidl.ops.normalization.group_norm.
"""
import numpy as np

from ...tensor.size import check_sizes
from ...tensor.tensor import Tensor
from .. import functional as F
from ..parameter import Parameter
from .batchnorm import _factory_dtype, _to_device
from .module import Module


class GroupNorm(Module):
    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        dt = _factory_dtype(dtype)
        if int(num_groups) <= 0:
            raise ValueError(f"GroupNorm: num_groups must be positive, got {num_groups}")
        check_sizes("GroupNorm", num_channels=num_channels)
        if num_channels % num_groups != 0:
            raise ValueError(f"GroupNorm: num_channels must be divisible by num_groups, got num_channels="
                             f"{num_channels} and num_groups={num_groups}")
        self.num_groups = int(num_groups)
        self.num_channels = int(num_channels)
        self.eps = eps
        self.affine = affine
        if affine:
            self.weight = Parameter(np.ones(self.num_channels, dt))
            if bias:
                self.bias = Parameter(np.zeros(self.num_channels, dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        _to_device(self, device)

    def reset_parameters(self):
        if self.affine:
            self.weight._data[...] = 1
            if self.bias is not None:
                self.bias._data[...] = 0

    def forward(self, x):
        self._check_input(x)
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def _check_input(self, x):
        if not isinstance(x, Tensor):
            raise TypeError(f"GroupNorm: expected a Tensor input, got {type(x).__name__}")
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise ValueError(f"GroupNorm: expected input of shape (N, {self.num_channels}, *), "
                             f"got input of shape {tuple(x.shape)}")

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
