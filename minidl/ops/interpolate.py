"""F.interpolate (and nn.Upsample): nearest, (bi/tri)linear, bicubic and area resizing of the
spatial dims of an (N, C, d1, ...) input, as ``torch.nn.functional.interpolate``.

Both are separable: one gather per spatial axis (``minidl.ops.resample``). Output position
j of an axis of input length n and output length m maps to the input coordinate

    nearest:        i = min(floor(j s), n - 1)                    (s = n / m, or 1 / scale_factor)
    nearest-exact:  i = min(floor((j + 1/2) s), n - 1)
    linear:         x = (j + 1/2) s - 1/2, clamped at 0            (align_corners=False)
                    x = j (n - 1) / (m - 1)                        (align_corners=True)

and linear reads the two neighbours i0 = floor(x), i1 = min(i0 + 1, n - 1) with weights
1 - l and l, l = x - i0.

bicubic (4-D input) maps j as linear does but without the clamp at 0, and reads the four
neighbours i0 - 1 .. i0 + 2, each clamped into [0, n - 1], with the cubic convolution weights
(Keys, A = -0.75) of their distances 1 + t, t, 1 - t, 2 - t (t = x - i0):

    W(d) = (A + 2) d**3 - (A + 3) d**2 + 1     for d <= 1
    W(d) = A d**3 - 5A d**2 + 8A d - 4A        for 1 < d < 2

area is adaptive average pooling to the output size: output j averages the input bin
[floor(j n / m), ceil((j + 1) n / m)), one tap per bin position.

The gradient is the scatter-add along the same taps.
"""
import math
import numbers

import numpy as np

from ..backends import namespace_of
from ..tensor.allocation import check_allocation
from ..tensor.tensor import Tensor
from .resample import GatherAxis

_LINEAR = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}   # the modes taking align_corners
MODES = ("nearest", "nearest-exact") + tuple(_LINEAR) + ("area",)
_CUBIC_A = -0.75


def _cubic_weights(t):
    """The four cubic convolution weights of taps i0 - 1 .. i0 + 2 at fraction t (module docstring)."""
    A = _CUBIC_A
    near = lambda d: ((A + 2) * d - (A + 3)) * d * d + 1          # noqa: E731  (d <= 1)
    far = lambda d: ((A * d - 5 * A) * d + 8 * A) * d - 4 * A     # noqa: E731  (1 < d < 2)
    return far(t + 1), near(t), near(1 - t), far(2 - t)


def _area_bins(n, m):
    """The bounds [lo, hi) of the m adaptive bins over n positions."""
    return (np.arange(m) * n) // m, -((-(np.arange(m) + 1) * n) // m)


def _area_taps(n, m):
    """The taps summing each bin: one per position of the longest bin, a mask (not a weight 0,
    which would turn an inf into NaN) dropping the positions past a shorter bin's end."""
    lo, hi = _area_bins(n, m)
    return tuple((np.minimum(lo + k, hi - 1), lo + k < hi) for k in range(int((hi - lo).max())))


def _taps(n, m, mode, align_corners, scale):
    j = np.arange(m)
    if mode == "area":
        return _area_taps(n, m)
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(scale)   # PyTorch maps nearest positions in float32
        offset = np.float32(0.5 if mode == "nearest-exact" else 0.0)
        return ((np.minimum(np.floor((j.astype(np.float32) + offset) * s).astype(np.int64), n - 1), None),)
    if align_corners:
        x = j * ((n - 1) / (m - 1)) if m > 1 else np.zeros(m)
    else:
        x = (j + 0.5) * scale - 0.5
        if mode != "bicubic":
            x = np.maximum(x, 0.0)
    if mode == "bicubic":
        i0 = np.floor(x).astype(np.int64)
        return tuple((np.clip(i0 + k - 1, 0, n - 1), w) for k, w in enumerate(_cubic_weights(x - i0)))
    i0 = np.minimum(np.floor(x).astype(np.int64), n - 1)
    i1 = np.minimum(i0 + 1, n - 1)
    lam = x - i0
    return ((i0, 1.0 - lam), (i1, lam))


def _tuple(v, k, name):
    if isinstance(v, (tuple, list)):
        if len(v) != k:
            raise ValueError(f"Input and {name} must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {k} and {name} {tuple(v)}")
        return tuple(v)
    return (v,) * k


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """As ``torch.nn.functional.interpolate`` for modes nearest, nearest-exact, linear,
    bilinear, bicubic, trilinear and area; see the module docstring."""
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate: expected input to be a Tensor, got {type(input).__name__}")
    if mode not in MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported; expected one of {', '.join(MODES)}")
    if input.ndim not in (3, 4, 5):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: {' | '.join(MODES)} (got {mode})")
    if mode in _LINEAR and input.ndim != _LINEAR[mode]:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR[mode]}D input "
                                  f"(interpolate mode {mode!r})")
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         f"linear | bilinear | bicubic | trilinear, got mode {mode!r}")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    if input.dtype.kind != "f":
        raise NotImplementedError(f"interpolate: expected a floating point input, got dtype {input.dtype}")
    k = input.ndim - 2
    spatial = input.shape[2:]
    if size is not None:
        out = tuple(int(s) for s in _tuple(size, k, "output size"))
        scales = [n / m if m else 0.0 for n, m in zip(spatial, out)]
    else:
        factors = _tuple(scale_factor, k, "scale_factor")
        for f, n in zip(factors, spatial):
            if isinstance(f, bool) or not isinstance(f, numbers.Real):
                raise TypeError(f"interpolate: expected scale_factor to be a float or a tuple of floats, got "
                                f"{scale_factor!r}")
            # PyTorch's error type (RuntimeError) for all three; int(floor(n * inf)) is an OverflowError
            if not math.isfinite(f) or not abs(n * float(f)) < 2 ** 63:
                raise RuntimeError(f"interpolate: scale_factor {scale_factor!r} for input of spatial size "
                                   f"{list(spatial)} gives an output size that cannot be converted to int64")
            if not f > 0:
                raise RuntimeError(f"interpolate: expected positive scale factors, got {scale_factor!r}")
        out = tuple(int(math.floor(n * float(f))) for n, f in zip(spatial, factors))
        scales = [1.0 / float(f) if not recompute_scale_factor else (n / m if m else 0.0)
                  for f, n, m in zip(factors, spatial, out)]
    if any(m <= 0 for m in out):
        raise RuntimeError(f"interpolate: expected an output of positive size, got {list(out)} for input "
                           f"of spatial size {list(spatial)}")
    if any(n == 0 for n in spatial):
        raise RuntimeError(f"interpolate: expected an input of non-empty spatial dims, got shape {list(input.shape)}")
    check_allocation("interpolate", tuple(input.shape[:2]) + out, input.dtype)
    y = input
    for d, (n, m, s) in enumerate(zip(spatial, out, scales)):
        y = GatherAxis.apply(y, 2 + d, _taps(n, m, mode, bool(align_corners), s), None)
        if mode == "area":   # the bins' sums to their means
            lo, hi = _area_bins(n, m)
            inv = namespace_of(y._data).asarray((1.0 / (hi - lo)).reshape((m,) + (1,) * (k - 1 - d)), dtype=y.dtype)
            y = y * Tensor._wrap(inv, None, 0)
    return y
