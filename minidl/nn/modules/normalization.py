"""Norms over each sample's trailing features: LayerNorm, RMSNorm, ScaleNorm, FixNorm.

Each holds its parameters (PyTorch's names and initial values, so state dicts line up) and
calls ``minidl.nn.functional``; the math and the hand-derived backwards are in
``minidl.ops.normalization``. None of them keeps running statistics, so train and eval
modes compute the same thing.
"""
import math
import numbers

import numpy as np

from ...tensor import dtype as dtypes
from ...tensor.size import as_ints
from .. import functional as F
from ..parameter import Parameter
from .batchnorm import _factory_dtype, _to_device
from .module import Module


def _as_shape(normalized_shape, op):
    values = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) else normalized_shape
    if not isinstance(values, (tuple, list)):
        raise TypeError(f"{op}(): argument 'normalized_shape' must be an int or a tuple of ints, got "
                        f"{type(normalized_shape).__name__} ({normalized_shape!r})")
    shape = as_ints(values, op, "normalized_shape")
    if any(n < 0 for n in shape):   # NumPy: "negative dimensions are not allowed"; PyTorch's type
        raise RuntimeError(f"{op}: normalized_shape must hold non-negative sizes, got {list(shape)} (Trying to "
                           f"create tensor with negative dimension {min(shape)})")
    return shape


class LayerNorm(Module):
    """y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias over the trailing ``normalized_shape``.

    Parameters (when ``elementwise_affine``): ``weight`` (ones) and ``bias`` (zeros, absent with
    ``bias=False``), both of shape ``normalized_shape``.
    """

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        dt = _factory_dtype(dtype)
        self.normalized_shape = _as_shape(normalized_shape, "LayerNorm")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dt))
            if bias:
                self.bias = Parameter(np.zeros(self.normalized_shape, dt))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        _to_device(self, device)

    def reset_parameters(self):
        if self.weight is not None:
            self.weight._data[...] = 1
        if self.bias is not None:
            self.bias._data[...] = 0

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """y = x / sqrt(mean(x^2) + eps) * weight over the trailing ``normalized_shape``
    (Zhang & Sennrich, 2019). ``eps=None`` uses the machine epsilon of the input's dtype.
    Parameter (when ``elementwise_affine``): ``weight`` (ones)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        dt = _factory_dtype(dtype)
        self.normalized_shape = _as_shape(normalized_shape, "RMSNorm")
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(np.ones(self.normalized_shape, dt))
        else:
            self.register_parameter("weight", None)
        _to_device(self, device)

    def reset_parameters(self):
        if self.weight is not None:
            self.weight._data[...] = 1

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class ScaleNorm(Module):
    """y = scale * x / max(||x||_2, eps) over the last dim (Nguyen & Salazar, 2019,
    "Transformers without Tears"): one learned scalar instead of LayerNorm's 2*D affine
    parameters. ``scale`` has shape (1,) and starts at sqrt(dim), so that at initialisation
    each output row has unit root mean square, as after LayerNorm."""

    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.dim = int(dim)
        self.eps = eps
        self.scale = Parameter(np.full((1,), math.sqrt(self.dim), dtypes.DEFAULT_FLOAT))

    def reset_parameters(self):
        self.scale._data[...] = math.sqrt(self.dim)

    def _check(self, x):
        if x.ndim == 0 or x.shape[-1] != self.dim:
            raise RuntimeError(f"{type(self).__name__}: expected input with last dim {self.dim} "
                               f"(shape [*, {self.dim}]), but got input of size {list(x.shape)}")

    def forward(self, x):
        self._check(x)
        return F.scale_norm(x, self.scale, self.eps)

    def extra_repr(self):
        return f"{self.dim}, eps={self.eps}"


class FixNorm(ScaleNorm):
    """ScaleNorm with the scale fixed, not learned: y = sqrt(dim) * x / max(||x||_2, eps).

    FixNorm (Nguyen & Chiang, 2018, "Improving Lexical Choice in Neural Machine Translation")
    fixes the length of every vector (there: word embeddings and the final hidden state) to a
    constant radius, so that only directions carry information and no token wins by having a
    longer vector. Here the radius is ScaleNorm's initial value sqrt(dim) (unit root mean
    square per feature). It has no parameters; the radius is the attribute ``radius``.
    """

    def __init__(self, dim, eps=1e-5):
        Module.__init__(self)
        self.dim = int(dim)
        self.eps = eps
        self.radius = math.sqrt(self.dim)

    def reset_parameters(self):
        pass

    def forward(self, x):
        self._check(x)
        return F.scale_norm(x, self.radius, self.eps)
