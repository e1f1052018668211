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

antialias=True (bilinear, bicubic, and lanczos, which needs it; 4-D input) filters as it
resamples, as PIL does: with s the scale as above (n / m, 1 / scale_factor, or (n - 1) / (m - 1)
under align_corners), a filter f of half-width r (bilinear's triangle 1 - |d|, r = 1; bicubic's
cubic convolution with A = -0.5, r = 2; lanczos's sinc(d) sinc(d / 3), r = 3) is stretched by s
when downsampling, so every input position under the output's footprint contributes:

    support = r max(s, 1),   c = s (j + 1/2),   lo = max(trunc(c - support + 1/2), 0)
    hi = min(trunc(c + support + 1/2), n),      w_i = f((i - c + 1/2) / max(s, 1))  for lo <= i < hi

and the weights are divided by their sum (so they sum to 1 at the borders too). Each output
reads at most 2 ceil(support) + 1 positions; the taps past hi are masked off.

The gradient is the scatter-add along the same taps.
"""
import math
import numbers

import numpy as np

from ..backends import namespace_of
from ..tensor.allocation import check_allocation
from ..tensor.tensor import Tensor
from .resample import GatherAxis

_LINEAR = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5, "lanczos": 4}   # those taking align_corners
MODES = ("nearest", "nearest-exact") + tuple(_LINEAR) + ("area",)
_CUBIC_A = -0.75
_ANTIALIAS = ("bilinear", "bicubic", "lanczos")


def _triangle(d):
    return np.maximum(1.0 - np.abs(d), 0.0)


def _cubic_aa(d, A=-0.5):
    """The cubic convolution kernel with PIL's A = -0.5 (the antialiased bicubic's filter)."""
    d = np.abs(d)
    far = np.where(d < 2, ((A * d - 5 * A) * d + 8 * A) * d - 4 * A, 0.0)
    return np.where(d < 1, ((A + 2) * d - (A + 3)) * d * d + 1, far)


def _lanczos3(d):
    return np.where(np.abs(d) < 3, np.sinc(d) * np.sinc(d / 3), 0.0)


_AA_FILTERS = {"bilinear": (1, _triangle), "bicubic": (2, _cubic_aa), "lanczos": (3, _lanczos3)}


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


def _antialias_taps(n, m, mode, scale):
    """The antialiased filter's taps (module docstring): tap k of output j reads lo[j] + k, masked
    off past hi[j], with the normalised filter weight."""
    r, f = _AA_FILTERS[mode]
    stretch = max(scale, 1.0)
    support = r * stretch
    width = 2 * int(math.ceil(support)) + 1
    center = scale * (np.arange(m) + 0.5)
    lo = np.maximum((center - support + 0.5).astype(np.int64), 0)    # astype truncates, as C's cast
    count = np.clip(np.minimum((center + support + 0.5).astype(np.int64), n) - lo, 0, width)
    k = np.arange(width)[:, None]
    inside = k < count
    w = np.where(inside, f((k + lo - center + 0.5) / stretch), 0.0)
    total = w.sum(axis=0)
    w = w / np.where(total != 0, total, 1.0)
    idx = np.minimum(lo + k, n - 1)
    return tuple((idx[t], w[t], inside[t]) for t in range(width))


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
    bilinear, bicubic, trilinear, area and (antialiased only) lanczos; see the module docstring."""
    if not isinstance(input, Tensor):
        raise TypeError(f"interpolate: expected input to be a Tensor, got {type(input).__name__}")
    if mode not in MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported; expected one of {', '.join(MODES)}")
    if input.ndim not in (3, 4, 5):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: {' | '.join(MODES)} (got {mode})")
    if antialias and not (mode in _ANTIALIAS and input.ndim == 4):
        raise ValueError(f"Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                         f"4-D tensor as input, got mode {mode!r} and a {input.ndim}-D input")
    if mode in _LINEAR and input.ndim != _LINEAR[mode]:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_LINEAR[mode]}D input "
                                  f"(interpolate mode {mode!r})")
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         f"linear | bilinear | bicubic | trilinear, got mode {mode!r}")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "lanczos" and align_corners:
        raise ValueError("Lanczos mode does not support align_corners=True")
    if mode == "lanczos" and not antialias:
        raise ValueError("Lanczos mode requires antialias=True")
    if input.dtype.kind != "f":
        raise NotImplementedError(f"interpolate: expected a floating point input, got dtype {input.dtype}")
    k = input.ndim - 2
    spatial = input.shape[2:]
    if size is not None:
        sizes = _tuple(size, k, "output size")
        if isinstance(size, (tuple, list)) and not all(isinstance(v, numbers.Integral) or
                                                       (isinstance(v, Tensor) and v.dtype.kind in "iu") for v in size):
            raise TypeError(f"expected size to be one of int or Tuple[int] or Tuple[int, int] or Tuple[int, int, int], "
                            f"but got size with types {[type(v) for v in size]}")
        out = tuple(int(s) for s in sizes)
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
        if antialias:
            s = ((n - 1) / (m - 1) if m > 1 else 0.0) if align_corners else s
            taps = _antialias_taps(n, m, mode, s)
        else:
            taps = _taps(n, m, mode, bool(align_corners), s)
        y = GatherAxis.apply(y, 2 + d, taps, None)
        if mode == "area":   # the bins' sums to their means
            lo, hi = _area_bins(n, m)
            inv = namespace_of(y._data).asarray((1.0 / (hi - lo)).reshape((m,) + (1,) * (k - 1 - d)), dtype=y.dtype)
            y = y * Tensor._wrap(inv, None, 0)
    return y
