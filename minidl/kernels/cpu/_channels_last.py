"""Copies of one image between NCHW and a channels-last buffer, for the kernels that work on
channels-last copies of an image (Winograd's transforms, im2col/col2im).

Pixel (h, w) of the image goes to (or comes from) the run of C values at

    X[(h + r0) * row + (p * A) + (q * B) + c]      with w + c0 = 4q + p, 0 <= p < 4, c < C

which covers both layouts: plain padded rows (A = C, B = 4C: column w + c0 at (w + c0) * C)
and Winograd's rows split by column phase mod 4 (A = Q * C, B = C: the columns 4q, then the
columns 4q + 1, and so on).

It is a transpose, one side of it strided by a plane. Eight channels per pass: eight loads a
plane apart, each continuing a cache line the previous pixel opened, and eight contiguous
stores (or the reverse), which LLVM compiles to wide moves; the last C % 8 channels one at a
time. Into the buffer the rows go outermost, out of it the channels, so that each pass writes
eight planes' rows contiguously (the orders and their timings: docs/performance.md, Winograd).
The offsets are unsigned: a signed index makes Numba check for negative wraparound.
"""
import numpy as np
from numba import njit

U = np.uintp


@njit(error_model="numpy", cache=True, inline="always")
def _pixel(h, w, r0, c0, row, A, B):
    """Where pixel (h, w)'s run of channels starts in X."""
    wp = w + c0
    return (h + r0) * row + (wp & 3) * A + (wp >> 2) * B


@njit(error_model="numpy", cache=True, inline="always")
def to_channels_last(x, n, X, r0, c0, row, A, B):
    """Image n of x (N, C, H, W) into X at the runs the module docstring places."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    C8 = C - C % 8
    for h in range(H):
        for c in range(0, C8, 8):
            for w in range(W):
                d = U(_pixel(h, w, r0, c0, row, A, B) + c)
                v0, v1, v2, v3 = x[n, c, h, w], x[n, c + 1, h, w], x[n, c + 2, h, w], x[n, c + 3, h, w]
                v4, v5, v6, v7 = x[n, c + 4, h, w], x[n, c + 5, h, w], x[n, c + 6, h, w], x[n, c + 7, h, w]
                X[d], X[d + U(1)], X[d + U(2)], X[d + U(3)] = v0, v1, v2, v3
                X[d + U(4)], X[d + U(5)], X[d + U(6)], X[d + U(7)] = v4, v5, v6, v7
        for w in range(W):
            d = _pixel(h, w, r0, c0, row, A, B)
            for c in range(C8, C):
                X[d + c] = x[n, c, h, w]


@njit(error_model="numpy", cache=True, inline="always")
def from_channels_last(X, y, n, r0, c0, row, A, B):
    """Image n of y (N, C, H, W) read back from the runs of X (the inverse of to_channels_last)."""
    C, H, W = y.shape[1], y.shape[2], y.shape[3]
    C8 = C - C % 8
    for c in range(0, C8, 8):
        for h in range(H):
            for w in range(W):
                d = U(_pixel(h, w, r0, c0, row, A, B) + c)
                v0, v1, v2, v3 = X[d], X[d + U(1)], X[d + U(2)], X[d + U(3)]
                v4, v5, v6, v7 = X[d + U(4)], X[d + U(5)], X[d + U(6)], X[d + U(7)]
                y[n, c, h, w], y[n, c + 1, h, w], y[n, c + 2, h, w], y[n, c + 3, h, w] = v0, v1, v2, v3
                y[n, c + 4, h, w], y[n, c + 5, h, w], y[n, c + 6, h, w], y[n, c + 7, h, w] = v4, v5, v6, v7
    for c in range(C8, C):
        for h in range(H):
            for w in range(W):
                y[n, c, h, w] = X[_pixel(h, w, r0, c0, row, A, B) + c]
