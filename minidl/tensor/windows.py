"""The window functions of spectral analysis, as torch.hann_window and its siblings.

Each is a factory: a new 1-D leaf tensor of ``window_length`` samples w[n], n = 0 .. N-1, with
PyTorch's formulas (computed in float64, then stored in ``dtype``, the default float dtype
when not given):

    hamming   w[n] = alpha - beta cos(2 pi n / (N - 1))            (alpha 0.54, beta 0.46)
    hann      the Hamming window with alpha = beta = 0.5
    blackman  w[n] = 0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))
    bartlett  w[n] = 1 - |2 n / (N - 1) - 1|
    kaiser    w[n] = I0(beta sqrt(1 - ((n - m) / m)^2)) / I0(beta),  m = (N - 1) / 2   (beta 12)

``periodic=True`` (the default) gives the window of length N + 1 without its last sample: the
window that, repeated, is periodic with period N, which is what a short-time Fourier transform
wants; ``periodic=False`` the symmetric window (NumPy's np.hanning, np.hamming, np.blackman,
np.bartlett, np.kaiser). A length of 1 is [1.], of 0 an empty tensor.
"""
import math
import operator

import numpy as np

from . import dtype as dtypes
from .factories import _leaf


def _window(op, window_length, periodic, dtype, device, requires_grad, formula):
    if isinstance(window_length, bool) or not hasattr(window_length, "__index__"):
        raise TypeError(f"{op}(): argument 'window_length' must be int, not {type(window_length).__name__}")
    n = operator.index(window_length)
    if n < 0:
        raise RuntimeError(f"{op} requires non-negative window_length, got window_length={n}")
    dt = dtypes.wrap(dtypes.DEFAULT_FLOAT if dtype is None else dtypes.to_dtype(dtype))
    if not dt.is_floating_point:
        raise RuntimeError(f"{op} expects floating point dtypes, got: {dt}")
    if n <= 1:
        values = np.ones(n)
    else:
        m = n + 1 if periodic else n
        values = formula(np.arange(m, dtype=np.float64), m)[:n]
    return _leaf(values.astype(dt.dtype), requires_grad, device)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, layout=None, device=None,
                   requires_grad=False):
    """alpha - beta cos(2 pi n / (N - 1)); see the module docstring."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, m: alpha - beta * np.cos(k * (2 * math.pi / (m - 1))))


def hann_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """0.5 - 0.5 cos(2 pi n / (N - 1)) = sin^2(pi n / (N - 1)); see the module docstring."""
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, m: 0.5 - 0.5 * np.cos(k * (2 * math.pi / (m - 1))))


def blackman_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1)); see the module docstring."""
    def formula(k, m):
        w = k * (math.pi / (m - 1))
        return 0.08 * np.cos(4 * w) - 0.5 * np.cos(2 * w) + 0.42
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad, formula)


def bartlett_window(window_length, periodic=True, *, dtype=None, layout=None, device=None, requires_grad=False):
    """The triangle 1 - |2 n / (N - 1) - 1|; see the module docstring."""
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   lambda k, m: 1 - np.abs(k * (2 / (m - 1)) - 1))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, layout=None, device=None,
                  requires_grad=False):
    """I0(beta sqrt(1 - ((n - m) / m)^2)) / I0(beta) with m = (N - 1) / 2; see the module docstring."""
    def formula(k, m):
        half = (m - 1) / 2
        return np.i0(beta * np.sqrt(np.clip(1 - ((k - half) / half) ** 2, 0, None))) / np.i0(beta)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, formula)
