"""F.pad: constant, reflect, replicate and circular padding, as ``torch.nn.functional.pad``.

``pad`` lists (before, after) amounts from the last dim backwards: (left, right) pads the
last dim, (left, right, top, bottom) the last two. Each padded dim is one gather along that
axis (``minidl.ops.resample``): output position j reads input position j - before, mapped
into the input by the mode (mirrored without repeating the edge, clamped to the edge, or
wrapped), or, for "constant", reads nothing (weight 0) and takes ``value``.

A negative amount crops, in every mode, as PyTorch's: reflect and replicate still mirror or
clamp into the whole input (the crop only drops outputs), while circular wraps around the
cropped input: with c = max(-before, 0) and n' = n - c - max(-after, 0) its length,

    circular:  index(j) = c + (j - max(before, 0)) mod n'

so (2, -1) on [0, 1, 2, 3, 4] is [2, 3, 0, 1, 2, 3], not [3, 4, 0, 1, 2, 3].
"""
import numpy as np

from ..tensor.allocation import check_allocation
from ..tensor.size import as_ints
from ..tensor.tensor import Tensor
from .resample import GatherAxis

MODES = ("constant", "reflect", "replicate", "circular")


def _source(n, before, after, mode):
    """(index, weight) of one padded axis of length n: see the module docstring."""
    src = np.arange(n + before + after) - before
    if mode == "constant":
        inside = (src >= 0) & (src < n)
        return np.clip(src, 0, max(n - 1, 0)), inside
    if mode == "reflect":
        period = 2 * (n - 1)
        s = np.abs(src) % period if period else np.zeros_like(src)
        return np.where(s >= n, period - s, s), None
    if mode == "replicate":
        return np.clip(src, 0, n - 1), None
    crop = max(-before, 0)
    kept = n - crop - max(-after, 0)
    return crop + (np.arange(n + before + after) - max(before, 0)) % kept, None


def _check(input, pad, mode, value):
    if not isinstance(input, Tensor):
        raise TypeError(f"pad: expected input to be a Tensor, got {type(input).__name__}")
    if len(pad) % 2:
        raise RuntimeError(f"Padding length must be divisible by 2, got padding length {len(pad)}")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.ndim}")
    if mode not in MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode}; expected one of {', '.join(MODES)}")
    if mode != "constant" and value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument, got value={value}')
    if mode != "constant":
        k = len(pad) // 2
        if not (k in (1, 2, 3) and k + 1 <= input.ndim <= k + 2):
            raise NotImplementedError(f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor; "
                                      f"non-constant padding of the last {k} dim(s) takes a {k + 1}D or {k + 2}D "
                                      "input")


def pad(input, pad, mode="constant", value=None):
    """As ``torch.nn.functional.pad``; see the module docstring."""
    pad = as_ints(pad, "pad", "pad")
    _check(input, pad, mode, value)
    shape = list(input.shape)
    for k in range(len(pad) // 2):
        shape[input.ndim - 1 - k] += pad[2 * k] + pad[2 * k + 1]
    if min(shape, default=0) >= 0:
        check_allocation("pad", tuple(shape), input.dtype)
    out = input
    for k in range(len(pad) // 2):
        axis = input.ndim - 1 - k
        before, after = pad[2 * k], pad[2 * k + 1]
        if before == 0 and after == 0:
            continue
        n = input.shape[axis]
        if mode == "constant" and n + before + after < 0:
            raise RuntimeError(f"pad: the padding ({before}, {after}) crops dim {axis} of input shape "
                               f"{list(input.shape)} to a negative size; expected a size >= 0")
        if mode == "reflect" and (before >= n or after >= n):
            raise RuntimeError(f"Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({before}, {after}) at dimension {axis} of input "
                               f"{list(input.shape)}")
        if mode != "constant" and n == 0:
            raise RuntimeError(f"pad: {mode} padding expects a non-empty dim, got padding ({before}, {after}) at "
                               f"dimension {axis} of input {list(input.shape)}")
        if mode in ("reflect", "replicate") and n + before + after <= 0:
            raise RuntimeError(f"pad: input (size {n}) is too small: padding ({before}, {after}) at dimension "
                               f"{axis} of input {list(input.shape)} gives an output of size {n + before + after}")
        kept = n - max(-before, 0) - max(-after, 0)
        if mode == "circular" and (before > n or after > n or kept < max(before, after) or n + before + after < 0):
            raise RuntimeError(f"Padding value causes wrapping around more than once: padding ({before}, {after}) "
                               f"at dimension {axis} of size {n} (of which {max(kept, 0)} kept)")
        idx, w = _source(n, before, after, mode)
        constant = None
        if mode == "constant":
            constant = np.where(w, 0.0, float(value or 0.0))
        taps = ((idx, w),) if n else ()    # an empty axis has nothing to read: all value
        out = GatherAxis.apply(out, axis, taps, constant)
    return out
