"""Masked BatchNorm1d on cuda: BatchNorm of a padded batch (N, C, L) whose real tokens are where
the bool mask (N, L) is True, with the mask kept on the device (the math: the masked part of
minidl/ops/normalization/batch_norm.py's docstring).

Channels become rows, (C, N * L), as in unmasked BatchNorm, and the mask a (1, N * L) weight m
(1 at real tokens, 0 at padding); with M = sum m (a device scalar: never read on the host)

    mean = sum(x m) / M,   var = sum((x - mean)^2 m) / M,   rstd = 1 / sqrt(var + eps),
    xhat = (x - mean) rstd m,   y = (gamma xhat + beta) m,
    dx   = m rstd / M (M d - sum d - xhat sum(d xhat)),   d = gamma dy m   (training)
    dx   = m rstd d                                                       (eval),

every sum over a row, in the accumulator dtype (float32 for float16/32, float64 for float64).
These are compositions of the generic map / zip / reduce kernels; no kernel of its own. Backward
recomputes xhat from x and the statistics (the same expression as forward's) instead of keeping it.
"""
from ._common import xp_of as _xp
from .reduce import accumulator_dtype


def _rows(a):
    """(N, C, L) -> contiguous (C, N * L)."""
    return _xp(a).ascontiguousarray(a.swapaxes(0, 1)).reshape(a.shape[1], a.shape[0] * a.shape[2])


def _unrows(rows, shape):
    return _xp(rows).ascontiguousarray(rows.reshape((shape[1], shape[0]) + tuple(shape[2:])).swapaxes(0, 1))


def _layout(x, mask):
    """x as accumulator-dtype rows (C, N * L) and the mask as a (1, N * L) weight."""
    if type(mask) is not type(x):
        raise TypeError(f"masked batch_norm: the mask must live on the input's device 'cuda', "
                        f"got a {type(mask).__name__}")
    acc = accumulator_dtype(x.dtype)
    return _rows(x).astype(acc, copy=False), mask.reshape(1, -1).astype(acc)


def _normalized(rows, mean, rstd, m):
    return (rows - mean.reshape(-1, 1)) * rstd.reshape(-1, 1) * m


def _output(xhat, m, weight, bias, x):
    y = xhat
    if weight is not None:
        y = y * weight.reshape(-1, 1)
    if bias is not None:
        y = (y + bias.reshape(-1, 1)) * m
    return _unrows(y.astype(x.dtype), x.shape)


def forward(x, weight, bias, eps, mask):
    """Training forward: (y, mean, rstd) from the real tokens' statistics."""
    rows, m = _layout(x, mask)
    count = m.sum()
    mean = (rows * m).sum(axis=1) / count
    centered = rows - mean.reshape(-1, 1)
    var = (centered * centered * m).sum(axis=1) / count
    rstd = 1.0 / _xp(var).sqrt(var + eps)
    return _output(_normalized(rows, mean, rstd, m), m, weight, bias, x), mean, rstd


def apply(x, mean, rstd, weight, bias, mask):
    """y with the given (eval) statistics."""
    rows, m = _layout(x, mask)
    return _output(_normalized(rows, mean, rstd, m), m, weight, bias, x)


def backward(dy, x, mean, rstd, weight, training, mask, need_dx=True, need_dweight=True, need_dbias=True):
    rows, m = _layout(x, mask)
    xhat = _normalized(rows, mean, rstd, m)
    g = _rows(dy).astype(xhat.dtype, copy=False) * m
    dx = dw = db = None
    if need_dx:
        d = g if weight is None else g * weight.reshape(-1, 1)
        if training:
            count = m.sum()
            sum_d = d.sum(axis=1, keepdims=True)
            sum_dxhat = (d * xhat).sum(axis=1, keepdims=True)
            dx_rows = (rstd.reshape(-1, 1) / count) * (count * d - sum_d - xhat * sum_dxhat) * m
        else:
            dx_rows = d * rstd.reshape(-1, 1)
        dx = _unrows(dx_rows.astype(x.dtype), x.shape)
    if need_dweight:
        dw = (g * xhat).sum(axis=1)
    if need_dbias:
        db = g.sum(axis=1)
    return dx, dw, db
