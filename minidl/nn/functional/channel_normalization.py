"""Functional forms of the norms that normalize per channel: ``batch_norm``,
``masked_batch_norm``, ``instance_norm`` and ``group_norm``. Each checks its arguments
(errors name the expected and the actual shapes) and calls the Function in
``minidl.ops.normalization``, whose backward is written out by hand."""
import numbers

import numpy as np

from ...ops.normalization.batch_norm import BatchNormFunction, BatchNormReLUFunction
from ...ops.normalization.group_norm import GroupNormFunction, GroupNormReLUFunction
from ...ops.normalization.instance_norm import InstanceNormFunction
from ...ops.shape_error import ShapeError
from ...tensor.dtype import check_same_dtype
from ...tensor.tensor import Tensor


def _check_input(op, x, min_dim=2):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor input, got {type(x).__name__}")
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating point input, got dtype {x.dtype}")
    if x.ndim < min_dim:
        raise ShapeError(f"{op}: expected an input of shape (N, C, *) with at least {min_dim} dims, "
                         f"got shape {tuple(x.shape)}")


def _check_channel_tensor(op, name, t, c, x):
    if t is None:
        return
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected {name} to be a Tensor or None, got {type(t).__name__}")
    if tuple(t.shape) != (c,):
        raise ShapeError(f"{op}: expected {name} of shape ({c},) for an input with {c} channels "
                         f"(input shape {tuple(x.shape)}), got {name} of shape {tuple(t.shape)}")


def _check_momentum(op, momentum):
    if momentum is None or not isinstance(momentum, numbers.Real):
        raise TypeError(f"{op}: expected momentum to be a float, got {momentum!r} (momentum=None, the "
                        "cumulative average, needs num_batches_tracked: use the module, which passes "
                        "1 / num_batches_tracked)")


def _check_dtypes(op, x, running_mean, running_var, weight, bias):
    """The parameters and running statistics in x's dtype, or float32 for a float16 x (as PyTorch)."""
    check_same_dtype(op, [("input", x), ("running_mean", running_mean), ("running_var", running_var),
                          ("weight", weight), ("bias", bias)], float16_with_float32=True)


def _verify_batch_size(shape):
    size = shape[0] * int(np.prod(shape[2:]))
    if size == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {tuple(shape)}")


def _as_mask(op, mask, x):
    m = mask._data if isinstance(mask, Tensor) else mask
    if type(m) is not np.ndarray and x.device != "cpu" and hasattr(m, "dtype"):
        return _device_mask(op, m, x)
    m = mask.numpy(force=True) if isinstance(mask, Tensor) else np.asarray(mask)
    if x.ndim != 3:
        raise ValueError(f"{op}: a mask needs an input of shape (N, C, L), got shape {tuple(x.shape)}")
    expected = (x.shape[0], x.shape[2])
    if m.shape != expected:
        raise ValueError(f"{op}: expected a mask of shape (N, L) = {expected} for an input of shape "
                         f"{tuple(x.shape)}, got mask of shape {tuple(m.shape)}")
    if m.dtype != np.bool_:
        raise TypeError(f"{op}: expected a bool mask (True at real tokens), got dtype {m.dtype}")
    if x.device != "cpu":   # a host mask for a device input: copied up (one counted upload)
        from ...backends import get
        return get(x.device).from_host(np.ascontiguousarray(m))
    return np.ascontiguousarray(m)


def _device_mask(op, m, x):
    """A mask on x's device, checked without reading it (its shape and dtype are host metadata)."""
    from ...backends import device_of
    if device_of(m) != x.device:
        raise ValueError(f"{op}: the mask is on device {device_of(m)!r} but the input on {x.device!r}")
    if x.ndim != 3:
        raise ValueError(f"{op}: a mask needs an input of shape (N, C, L), got shape {tuple(x.shape)}")
    expected = (x.shape[0], x.shape[2])
    if tuple(m.shape) != expected:
        raise ValueError(f"{op}: expected a mask of shape (N, L) = {expected} for an input of shape "
                         f"{tuple(x.shape)}, got mask of shape {tuple(m.shape)}")
    if m.dtype != np.bool_:
        raise TypeError(f"{op}: expected a bool mask (True at real tokens), got dtype {m.dtype}")
    return m


def check_real_tokens(m, x):
    """Training needs more than one real token per channel; on a device the count is checked
    there and reported at the next read (no host round trip). An empty batch (no sample, or no
    position) passes: as unmasked BatchNorm on an empty batch, its output is empty."""
    if m.size == 0:
        return
    if type(m) is not np.ndarray:
        from ...backends import device_of, get
        get(device_of(m)).assert_all(m.sum() > 1, ValueError,
                                     f"Expected more than 1 value per channel when training, got at most 1 real "
                                     f"token in an input of size {tuple(x.shape)} (checked on device)")
        return
    real = int(np.count_nonzero(m))
    if real <= 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got {real} real "
                         f"token(s) in an input of size {tuple(x.shape)}")


def _check_batch_norm_arguments(op, x, running_mean, running_var, weight, bias, training, momentum):
    """batch_norm's argument checks (``op`` names the function in the errors)."""
    _check_input(op, x)
    _check_channel_tensors(op, x, running_mean, running_var, weight, bias)
    if training:
        _check_momentum(op, momentum)
        _verify_batch_size(x.shape)
    elif running_mean is None or running_var is None:
        raise ValueError(f"{op}: training=False normalizes with the running statistics, so "
                         "running_mean and running_var must be given")


def _check_channel_tensors(op, x, running_mean, running_var, weight, bias):
    """The four per-channel tensors: each None or of shape (C,), and of x's dtype."""
    c = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        _check_channel_tensor(op, name, t, c, x)
    _check_dtypes(op, x, running_mean, running_var, weight, bias)


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalize each channel (dim 1) of ``x`` (N, C, *) over every other dim.

    ``training=True``: normalize with the batch mean and biased variance and, when
    ``running_mean``/``running_var`` are given, update them in place with the batch mean and
    the *unbiased* variance: ``running = (1 - momentum) * running + momentum * batch``.
    ``training=False``: normalize with ``running_mean`` / ``running_var``.
    """
    _check_batch_norm_arguments("batch_norm", x, running_mean, running_var, weight, bias, training, momentum)
    return BatchNormFunction.apply(x, weight, bias, running_mean, running_var, bool(training),
                           float(momentum) if training else 0.0, float(eps), None)


def batch_norm_relu(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """``relu(batch_norm(x, ...))`` as one op, with batch_norm's arguments and the same results
    and gradients: on the CPU both run in BatchNorm's passes over memory (no ReLU pass, no ReLU
    mask). Not in PyTorch (whose fused BatchNorm + ReLU is a quantization module); the zoo's
    CNNs use it for each BatchNorm2d that a ReLU follows."""
    _check_batch_norm_arguments("batch_norm_relu", x, running_mean, running_var, weight, bias, training, momentum)
    return BatchNormReLUFunction.apply(x, None, weight, bias, running_mean, running_var, bool(training),
                                       float(momentum) if training else 0.0, float(eps))


def batch_norm_add_relu(x, residual, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                        eps=1e-5):
    """``relu(batch_norm(x, ...) + residual)`` as one op (not in PyTorch), with batch_norm's
    arguments and the same results and gradients as the ops in turn: the end of a ResNet block,
    ``residual`` its shortcut, a tensor of x's shape and dtype. On the CPU the add and the ReLU
    run inside BatchNorm's passes."""
    _check_batch_norm_arguments("batch_norm_add_relu", x, running_mean, running_var, weight, bias, training, momentum)
    _check_residual("batch_norm_add_relu", residual, x)
    return BatchNormReLUFunction.apply(x, residual, weight, bias, running_mean, running_var, bool(training),
                                       float(momentum) if training else 0.0, float(eps))


def _check_residual(op, residual, x):
    if not isinstance(residual, Tensor):
        raise TypeError(f"{op}: expected a Tensor residual, got {type(residual).__name__}")
    if tuple(residual.shape) != tuple(x.shape) or residual.dtype != x.dtype or residual.device != x.device:
        raise ValueError(f"{op}: expected a residual of the input's shape {tuple(x.shape)}, dtype {x.dtype} and "
                         f"device {x.device}, got shape {tuple(residual.shape)}, dtype {residual.dtype}, "
                         f"device {residual.device}")


def masked_batch_norm(x, mask, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                      eps=1e-5):
    """BatchNorm of a padded batch of sequences ``x`` (N, C, L) whose real tokens are where the
    bool ``mask`` (N, L) is True: padding enters neither the statistics nor the running ones;
    the result equals ``batch_norm`` of the real tokens alone. Padded positions of the output
    are 0 and their input gradient is 0."""
    _check_input("masked_batch_norm", x, min_dim=3)
    m = _as_mask("masked_batch_norm", mask, x)
    _check_channel_tensors("masked_batch_norm", x, running_mean, running_var, weight, bias)
    if training:
        _check_momentum("masked_batch_norm", momentum)
        check_real_tokens(m, x)
    elif running_mean is None or running_var is None:
        raise ValueError("masked_batch_norm: training=False normalizes with the running statistics, so "
                         "running_mean and running_var must be given")
    return BatchNormFunction.apply(x, weight, bias, running_mean, running_var, bool(training),
                           float(momentum) if training else 0.0, float(eps), m)


def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Normalize each (sample, channel) of ``x`` (N, C, *) over its spatial dims.

    ``use_input_stats=True`` uses the instance's own statistics and, when running tensors are
    given, updates them with the batch average of the instances' mean and unbiased variance;
    ``use_input_stats=False`` normalizes with ``running_mean`` / ``running_var``.
    """
    _check_input("instance_norm", x, min_dim=3)
    c = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight),
                    ("bias", bias)):
        _check_channel_tensor("instance_norm", name, t, c, x)
    _check_dtypes("instance_norm", x, None, None, weight, bias)   # PyTorch converts the running stats here
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: use_input_stats=False needs running_mean and running_var")
        return BatchNormFunction.apply(x, weight, bias, running_mean, running_var, False, 0.0, float(eps), None)
    if int(np.prod(x.shape[2:])) == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {tuple(x.shape)}")
    if running_mean is not None or running_var is not None:
        _check_momentum("instance_norm", momentum)
    return InstanceNormFunction.apply(x, weight, bias, running_mean, running_var,
                              0.0 if momentum is None else float(momentum), float(eps))


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalize each sample's channels in ``num_groups`` groups of consecutive channels (over
    the group's channels and every spatial position), then a per-channel affine."""
    _check_group_norm_arguments("group_norm", x, num_groups, weight, bias)
    return GroupNormFunction.apply(x, int(num_groups), weight, bias, float(eps))


def group_norm_relu(x, num_groups, weight=None, bias=None, eps=1e-5):
    """``relu(group_norm(x, ...))`` as one op, as ``batch_norm_relu`` (not in PyTorch): on the CPU
    the ReLU runs inside GroupNorm's passes over memory."""
    _check_group_norm_arguments("group_norm_relu", x, num_groups, weight, bias)
    return GroupNormReLUFunction.apply(x, None, int(num_groups), weight, bias, float(eps))


def group_norm_add_relu(x, residual, num_groups, weight=None, bias=None, eps=1e-5):
    """``relu(group_norm(x, ...) + residual)`` as one op, as ``batch_norm_add_relu`` (not in
    PyTorch)."""
    _check_group_norm_arguments("group_norm_add_relu", x, num_groups, weight, bias)
    _check_residual("group_norm_add_relu", residual, x)
    return GroupNormReLUFunction.apply(x, residual, int(num_groups), weight, bias, float(eps))


def _check_group_norm_arguments(op, x, num_groups, weight, bias):
    _check_input(op, x)
    c = x.shape[1]
    if not isinstance(num_groups, numbers.Integral) or num_groups <= 0 or c % num_groups:
        raise ShapeError(f"{op}: expected num_channels ({c}, dim 1 of input shape {tuple(x.shape)}) "
                         f"to be divisible by num_groups, got num_groups={num_groups!r}")
    _check_channel_tensor(op, "weight", weight, c, x)
    _check_channel_tensor(op, "bias", bias, c, x)
    _check_dtypes(op, x, None, None, weight, bias)
