"""More of PyTorch's functions that summarise or count, installed by _namespace.py's tables like the
rest: NaN-ignoring reductions, aminmax, running maxima (cummax/cummin), quantiles,
cov/corrcoef, renorm; and the counting ones that give no gradient: histc, bincount,
searchsorted/bucketize, unique_consecutive; logspace.

The differentiable ones are compositions of ops with their own backward (where, sum, gather,
sort, logsumexp...), so their gradients are those ops' gradients.
"""
import builtins
from collections import namedtuple

import numpy as np

from .ops import cumulative as _cumulative
from .ops._broadcast import normalize_dim
from .tensor import dtype as _dtypes
from .tensor.tensor import Tensor

aminmax_result = namedtuple("aminmax", ("min", "max"))
cummax_result = namedtuple("cummax", ("values", "indices"))
cummin_result = namedtuple("cummin", ("values", "indices"))


def _md():
    import minidl
    return minidl


def _host(t):
    return t.detach().cpu().numpy()


def _wrap(array, like=None):
    t = Tensor._wrap(np.asarray(array), None, 0)
    return t if like is None or like.device.type == "cpu" else t.to(like.device)


# NaN-ignoring reductions --------------------------------------------------------------------
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum with NaNs counted as 0 (their gradient is 0)."""
    if input.dtype.kind not in "fV":
        return input.sum(dim, keepdim, dtype=dtype)
    kept = _md().where(input.isnan(), 0.0, input)
    return kept.sum(dim, keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the non-NaN elements (NaN where there are none)."""
    if input.dtype.kind not in "fV":
        raise RuntimeError(f"nanmean(): expected input to have floating point dtype but got {input.dtype}")
    count = (~input.isnan()).sum(dim, keepdim).to(input.dtype if dtype is None else dtype)
    return nansum(input, dim, keepdim, dtype=dtype) / count


def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) as a named tuple, over all elements or along dim."""
    if input.numel() == 0 and dim is None:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has "
                           "no identity.")
    return aminmax_result(input.amin(dim, keepdim), input.amax(dim, keepdim))


# running maxima ---------------------------------------------------------------------------
def _running(input, dim, largest):
    d = normalize_dim(dim, builtins.max(input.ndim, 1), "cummax" if largest else "cummin")
    a = _host(input)
    if input.ndim == 0:
        a = a.reshape(1)
    moved = np.moveaxis(a, d, -1)
    idx = np.zeros(moved.shape, np.int64)
    if moved.shape[-1]:
        best = moved[..., 0].copy()
        for i in range(1, moved.shape[-1]):
            v = moved[..., i]
            # a later equal value takes over (as PyTorch), and a NaN, once seen, stays
            take = (v >= best) if largest else (v <= best)
            take |= np.isnan(v)
            take &= ~np.isnan(best) | np.isnan(v)
            best = np.where(take, v, best)
            idx[..., i] = np.where(take, i, idx[..., i - 1])
    idx = np.moveaxis(idx, -1, d)
    indices = _wrap(idx.reshape(input.shape), input)
    values = input.gather(d, indices) if input.ndim else input.clone()
    return values, indices


def cummax(input, dim):
    """The running maximum along dim and the index where each was found (the latest on ties)."""
    return cummax_result(*_running(input, dim, True))


def cummin(input, dim):
    return cummin_result(*_running(input, dim, False))


# quantiles ----------------------------------------------------------------------------------
_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles along dim (of all elements when None): the sorted values at position
    q * (n - 1), interpolated between the neighbours by ``interpolation``. A NaN in a row gives NaN."""
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile over the non-NaN values of each row (NaN for a row of NaNs)."""
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    name = "nanquantile" if ignore_nan else "quantile"
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    if input.dtype.kind not in "fV":
        raise RuntimeError(f"{name}() input tensor must be either float or double dtype")
    scalar_q = not isinstance(q, Tensor) or q.ndim == 0
    qs = np.atleast_1d(np.asarray(_host(q) if isinstance(q, Tensor) else q, np.float64))
    if qs.ndim > 1:
        raise RuntimeError(f"{name}() q must be a scalar or 1D tensor")
    if ((qs < 0) | (qs > 1)).any():
        raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else normalize_dim(dim, builtins.max(input.ndim, 1), name)
    if x.shape[d] == 0:
        raise RuntimeError(f"{name}() input tensor must be non-empty")
    moved = x.movedim(d, -1)
    values = moved.sort(-1).values                       # NaNs sort last
    n_valid = (~moved.isnan()).sum(-1, keepdim=True).detach()
    has_nan = n_valid < moved.shape[-1]
    n = n_valid if ignore_nan else _md().full_like(n_valid, moved.shape[-1])
    outs = []
    for qv in qs:
        pos = qv * (n.to(_dtypes.float64) - 1).clamp(min=0)
        lo, hi = pos.floor(), pos.ceil()
        if interpolation == "lower":
            hi = lo
        elif interpolation == "higher":
            lo = hi
        elif interpolation == "nearest":
            lo = hi = pos.round()
        a = values.gather(-1, lo.to(_dtypes.int64))
        b = values.gather(-1, hi.to(_dtypes.int64))
        if interpolation == "midpoint":
            out = a + (b - a) * 0.5
        elif interpolation == "linear":
            out = a + (b - a) * (pos - lo).to(input.dtype)
        else:
            out = a
        bad = (n_valid == 0) if ignore_nan else has_nan
        out = _md().where(bad, float("nan"), out).squeeze(-1)
        if keepdim:
            out = out.unsqueeze(d) if dim is not None else out.reshape(*([1] * input.ndim))
        outs.append(out)
    return outs[0] if scalar_q else _md().stack(outs, 0)


def nanmedian(input, dim=None, keepdim=False):
    """The lower median of the non-NaN values; with dim, (values, indices) as median."""
    if dim is None:
        flat = input.reshape(-1)
        keep = flat[~flat.isnan()]
        return keep.median() if keep.numel() else flat.sum() * float("nan")
    d = normalize_dim(dim, builtins.max(input.ndim, 1), "nanmedian")
    a = _host(input)
    moved = np.moveaxis(a.reshape(1) if input.ndim == 0 else a, d, -1)
    order = np.argsort(moved, axis=-1, kind="stable")              # NaNs last
    valid = (~np.isnan(moved)).sum(-1, keepdims=True)
    k = np.maximum(valid - 1, 0) // 2
    k = np.where(valid == 0, (moved.shape[-1] - 1) // 2, k)         # all NaN: a NaN
    idx = np.take_along_axis(order, k, -1)
    from .ops import selection
    return selection._select("nanmedian", input, np.moveaxis(idx, -1, d), d, keepdim, input.ndim == 0)


# covariance -------------------------------------------------------------------------------
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the variables in input's rows (observations in its columns), weighted by
    fweights * aweights: sum_k w_k (x_ik - m_i)(x_jk - m_j) / (sum w - correction * sum(w a) / sum w)."""
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if x.dtype.kind not in "fV":
        x = x.to(_dtypes.DEFAULT_FLOAT)
    w = None
    if fweights is not None:
        w = fweights.to(x.dtype)
    if aweights is not None:
        w = aweights.to(x.dtype) if w is None else w * aweights.to(x.dtype)
    if w is None:
        total = float(x.shape[1])
        mean = x.mean(1, keepdim=True)
        norm = total - correction
        centered = x - mean
        c = centered @ centered.t()
    else:
        total = w.sum()
        mean = (x * w).sum(1, keepdim=True) / total
        norm = total - (correction * (w * aweights.to(x.dtype)).sum() / total if aweights is not None
                        else correction)
        centered = x - mean
        c = (centered * w) @ centered.t()
    out = c / (norm.clamp(min=0) if isinstance(norm, Tensor) else builtins.max(norm, 0))
    return out.reshape(()) if input.ndim < 2 else out


def corrcoef(input):
    """Pearson's correlation coefficients of input's rows, clipped to [-1, 1]."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = c.diagonal().sqrt()
    return (c / d.unsqueeze(1) / d.unsqueeze(0)).clamp(-1, 1)


def renorm(input, p, dim, maxnorm):
    """Each sub-tensor along dim scaled down to p-norm at most maxnorm (untouched where smaller):
    x_i * min(1, maxnorm / (||x_i||_p + 1e-7))."""
    if p <= 0:
        raise RuntimeError(f"renorm: non-positive-norm not supported, got p={p}")
    d = normalize_dim(dim, input.ndim, "renorm")
    others = tuple(k for k in range(input.ndim) if k != d)
    norms = input.abs().pow(p).sum(others, keepdim=True).pow(1.0 / p) if others else input.abs()
    scale = _md().where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)
    return input * scale.detach().to(input.dtype)


# counting (no gradient) ----------------------------------------------------------------------
def histc(input, bins=100, min=0, max=0):   # noqa: A002 (PyTorch's names)
    """Counts of the elements in ``bins`` equal-width bins over [min, max] (both 0: the data's
    range); elements outside are ignored; a float tensor of input's dtype."""
    a = _host(input)
    if a.dtype.kind not in "fV":
        raise _dtypes.DtypeNotImplementedError(f"histc: not implemented for {input.dtype} tensors (as PyTorch: "
                                               "floating point only)")
    lo, hi = float(min), float(max)
    if lo == hi and a.size:
        lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    if lo > hi:
        raise RuntimeError("torch.histc: max must be larger than min")
    counts, _ = np.histogram(a[np.isfinite(a)], bins=int(bins), range=(lo, hi))
    return _wrap(counts.astype(a.dtype), input)


def bincount(input, weights=None, minlength=0):
    """The number of occurrences of each non-negative integer (weights summed instead, when given)."""
    a = _host(input)
    if a.dtype.kind not in "iu":
        raise _dtypes.DtypeNotImplementedError(f"bincount: not implemented for {input.dtype} tensors (as PyTorch: "
                                               "integer tensors only)")
    if input.ndim != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if a.size and a.min() < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    w = None if weights is None else _host(weights)
    out = np.bincount(a, w, minlength=int(minlength))
    if w is None:
        out = out.astype(np.int64)
    elif w.dtype == np.float32:
        out = out.astype(np.float32)
    return _wrap(out, input)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value, the index where it would be inserted into the sorted innermost rows of
    ``sorted_sequence`` to keep them sorted (after equal values when right / side="right")."""
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of "
                               "left while right was True")
        right = side == "right"
    seq = _host(sorted_sequence)
    if sorter is not None:
        seq = np.take_along_axis(seq, _host(sorter), -1)
    values = _host(input) if isinstance(input, Tensor) else np.asarray(input)
    how = "right" if right else "left"
    if seq.ndim == 1:
        out = np.searchsorted(seq, values, side=how)
    else:
        if seq.shape[:-1] != values.shape[:-1]:
            raise RuntimeError(f"torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                               f"dimensions of boundaries tensor and input value tensor must match, but we got "
                               f"boundaries tensor {list(seq.shape)} and input value tensor {list(values.shape)}")
        rows, vals = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
        out = np.stack([np.searchsorted(r, v, side=how) for r, v in zip(rows, vals)]).reshape(values.shape)
    return _wrap(np.asarray(out, np.int32 if out_int32 else np.int64),
                 sorted_sequence if isinstance(sorted_sequence, Tensor) else None)


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value among the sorted 1-d ``boundaries`` (searchsorted with the roles
    of its arguments swapped)."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """The input with each run of equal consecutive elements (or slices along dim) kept once."""
    a = _host(input)
    if dim is None:
        flat = a.reshape(-1)
        starts = np.ones(flat.shape[0], bool)
        starts[1:] = flat[1:] != flat[:-1]
        values = flat[starts]
        inverse_shape = a.shape
    else:
        d = normalize_dim(dim, a.ndim, "unique_consecutive")
        moved = np.moveaxis(a, d, 0).reshape(a.shape[d], -1)
        starts = np.ones(moved.shape[0], bool)
        starts[1:] = (moved[1:] != moved[:-1]).any(1)
        values = np.moveaxis(np.compress(starts, np.moveaxis(a, d, 0), axis=0), 0, d)
        inverse_shape = (a.shape[d],)
    res = [_wrap(np.ascontiguousarray(values), input)]
    if return_inverse:
        res.append(_wrap((np.cumsum(starts) - 1).astype(np.int64).reshape(inverse_shape), input))
    if return_counts:
        res.append(_wrap(np.diff(np.append(np.flatnonzero(starts), starts.shape[0])).astype(np.int64), input))
    return res[0] if len(res) == 1 else tuple(res)


def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False, device="cpu"):
    """``steps`` values base**e for e evenly spaced from start to end."""
    if steps < 0:
        raise RuntimeError(f"number of steps must be non-negative, got {steps}")
    dt = _dtypes.DEFAULT_FLOAT if dtype is None else _dtypes.to_dtype(dtype)
    values = np.power(float(base), np.linspace(float(start), float(end), int(steps)))
    return _md().tensor(values.astype(dt), dtype=dt, requires_grad=requires_grad, device=device)


BOTH = {
    "nansum": nansum, "nanmean": nanmean, "aminmax": aminmax, "cummax": cummax, "cummin": cummin,
    "logcumsumexp": _cumulative.logcumsumexp, "quantile": quantile, "nanquantile": nanquantile, "nanmedian": nanmedian,
    "cov": cov, "corrcoef": corrcoef, "renorm": renorm, "histc": histc, "bincount": bincount,
    "unique_consecutive": unique_consecutive,
}

MODULE_ONLY = {"searchsorted": searchsorted, "bucketize": bucketize, "logspace": logspace}

METHODS_ONLY = {}
