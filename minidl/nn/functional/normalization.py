"""Functional forms of the norms that normalize over the trailing feature dims:
``layer_norm``, ``rms_norm`` and ``scale_norm``, and the residual add fused with the first two,
``add_layer_norm`` and ``add_rms_norm`` (a Pre-LN Transformer's ``x + f(x)`` followed by the next
norm). Each checks its arguments and calls the Function in ``minidl.ops.normalization``, whose
backward is written out by hand."""
import numbers

import numpy as np

from ...ops.normalization import LayerNormFunction, RMSNormFunction, ScaleNormFunction
from ...ops.normalization.residual_norm import AddLayerNormFunction, AddRMSNormFunction
from ...tensor.dtype import check_same_dtype
from ...tensor.tensor import Tensor


def _normalized_shape(op, x, normalized_shape):
    """normalized_shape as a tuple, checked against the trailing dims of x; returns (shape, D)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor input, got {type(x).__name__}")
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating point input, got dtype {x.dtype}")
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    shape = tuple(int(s) for s in normalized_shape)
    if len(shape) == 0:
        raise ValueError(f"{op}: normalized_shape must have at least one dim, got {shape}")
    k = len(shape)
    if x.ndim < k or tuple(x.shape[x.ndim - k:]) != shape:
        raise RuntimeError(f"{op}: given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size {list(x.shape)}")
    return shape, int(np.prod(shape))


def _check_param(op, name, p, shape):
    if p is None:
        return
    if not isinstance(p, Tensor):
        raise TypeError(f"{op}: expected {name} to be a Tensor or None, got {type(p).__name__}")
    if tuple(p.shape) != shape:
        raise RuntimeError(f"{op}: expected {name} of shape {list(shape)} (the normalized_shape), "
                           f"but got {name} of shape {list(p.shape)}")


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalize over the trailing ``normalized_shape`` dims to zero mean and unit (biased)
    variance, then ``* weight + bias`` (each optional, of shape ``normalized_shape``)."""
    shape, d = _normalized_shape("layer_norm", x, normalized_shape)
    _check_param("layer_norm", "weight", weight, shape)
    _check_param("layer_norm", "bias", bias, shape)
    check_same_dtype("layer_norm", [("input", x), ("weight", weight), ("bias", bias)], float16_with_float32=True)
    return LayerNormFunction.apply(x, weight, bias, d, float(eps))


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the trailing ``normalized_shape`` dims, ``* weight``.
    ``eps=None`` uses the machine epsilon of x's dtype, as PyTorch."""
    shape, d = _normalized_shape("rms_norm", x, normalized_shape)
    _check_param("rms_norm", "weight", weight, shape)
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    return RMSNormFunction.apply(x, weight, d, float(eps))


def _check_residual(op, x, residual):
    if not isinstance(residual, Tensor):
        raise TypeError(f"{op}: expected a Tensor residual, got {type(residual).__name__}")
    if tuple(residual.shape) != tuple(x.shape):
        raise RuntimeError(f"{op}: expected residual of the input's shape {list(x.shape)}, but got residual "
                           f"of size {list(residual.shape)} (the fused add does not broadcast)")
    check_same_dtype(op, [("input", x), ("residual", residual)])


def add_layer_norm(x, residual, normalized_shape, weight=None, bias=None, eps=1e-5, return_sum=True):
    """(s, layer_norm(s, ...)) with s = x + residual, in one pass over memory each way: the same
    values as ``s = x + residual; y = layer_norm(s, normalized_shape, weight, bias, eps)``, and the
    gradients of both uses of s summed inside the op. ``residual`` has x's shape and dtype.
    ``return_sum=False``: only y (the sum is not needed later, as after a Post-LN sublayer)."""
    shape, d = _normalized_shape("add_layer_norm", x, normalized_shape)
    _check_residual("add_layer_norm", x, residual)
    _check_param("add_layer_norm", "weight", weight, shape)
    _check_param("add_layer_norm", "bias", bias, shape)
    check_same_dtype("add_layer_norm", [("input", x), ("weight", weight), ("bias", bias)], float16_with_float32=True)
    return AddLayerNormFunction.apply(x, residual, weight, bias, d, float(eps), bool(return_sum))


def add_rms_norm(x, residual, normalized_shape, weight=None, eps=None, return_sum=True):
    """(s, rms_norm(s, ...)) with s = x + residual, fused as ``add_layer_norm``; ``eps=None`` uses
    the machine epsilon of x's dtype, as rms_norm; ``return_sum`` as in add_layer_norm."""
    shape, d = _normalized_shape("add_rms_norm", x, normalized_shape)
    _check_residual("add_rms_norm", x, residual)
    _check_param("add_rms_norm", "weight", weight, shape)
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    return AddRMSNormFunction.apply(x, residual, weight, d, float(eps), bool(return_sum))


def scale_norm(x, scale, eps=1e-5):
    """scale * x / max(||x||_2, eps) over the last dim; ``scale`` is a (1,) Tensor (learned,
    as in nn.ScaleNorm) or a Python number (fixed, as in nn.FixNorm)."""
    if not isinstance(x, Tensor):
        raise TypeError(f"scale_norm: expected a Tensor input, got {type(x).__name__}")
    if x.dtype.kind != "f" or x.ndim == 0:
        raise TypeError(f"scale_norm: expected a floating point input with at least one dim, "
                        f"got dtype {x.dtype} and shape {list(x.shape)}")
    if isinstance(scale, Tensor):
        if scale.numel() != 1:
            raise RuntimeError(f"scale_norm: expected scale with one element (shape [1]), "
                               f"got shape {list(scale.shape)}")
    elif not isinstance(scale, numbers.Real):
        raise TypeError(f"scale_norm: expected scale to be a Tensor or a number, got {type(scale).__name__}")
    # as layer_norm (PyTorch has no ScaleNorm); rms_norm instead follows PyTorch's, which takes any mix
    check_same_dtype("scale_norm", [("input", x), ("scale", scale if isinstance(scale, Tensor) else None)],
                     float16_with_float32=True)
    return ScaleNormFunction.apply(x, scale, float(eps))
