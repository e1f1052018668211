"""Sampling from distributions given as tensors: md.normal, md.bernoulli, md.multinomial,
md.binomial.

As PyTorch's, and like md.rand they draw from ``generator`` or minidl's global generator.
The samples are not differentiable (neither are PyTorch's bernoulli and multinomial; its
normal with tensor parameters is, which minidl leaves out).
"""
import numbers

import numpy as np

from .generator import numpy_generator
from .allocation import check_allocation
from .tensor import Tensor


def _values(x):
    return x.numpy(force=True) if isinstance(x, Tensor) else x


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device="cpu", requires_grad=False):
    """Samples of N(mean, std**2): ``normal(mean_tensor, std_tensor)`` (broadcast against each
    other), ``normal(mean, std_tensor)``, ``normal(mean_tensor, std=1.0)``, or
    ``normal(mean, std, size)`` for numbers."""
    from .factories import _leaf, _sampled, _shape
    rng = numpy_generator(generator)
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if tensors:
        if size is not None:
            raise RuntimeError("normal: size cannot be given with tensor mean or std; their shape decides")
        m, s = np.asarray(_values(mean)), np.asarray(_values(std))
        if (s < 0).any():
            raise RuntimeError(f"normal expects all elements of std >= 0.0, got min {float(s.min())}")
        shape = np.broadcast_shapes(m.shape, s.shape)
        out_dt = next(t for t in tensors if t.dtype.is_floating_point).dtype if any(
            t.dtype.is_floating_point for t in tensors) else None
        if out_dt is None:
            raise NotImplementedError("normal: expected a floating point mean or std tensor")
        check_allocation("normal", shape, np.float64)
        data = (m + s * rng.standard_normal(shape)).astype(out_dt.dtype)
        return _leaf(data, requires_grad, tensors[0].device)
    if size is None:
        raise TypeError("normal() with a number mean and std needs a size, e.g. md.normal(0.0, 1.0, size=(2, 3))")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
    dt = _sampled(dtype, "normal")
    shape = _shape(tuple(size) if isinstance(size, (tuple, list)) else (size,), "normal")
    check_allocation("normal", shape, np.float64)
    data = (mean + std * rng.standard_normal(shape)).astype(dt)
    return _leaf(data, requires_grad, device)


def bernoulli(input, p=None, *, generator=None):   # noqa: A002  (PyTorch's parameter name)
    """1 with probability ``input`` (or ``p``, a number, for every element), else 0, in
    ``input``'s shape and dtype."""
    from .factories import _leaf
    if not isinstance(input, Tensor):
        raise TypeError(f"bernoulli: expected a Tensor of probabilities, got {type(input).__name__}")
    prob = np.asarray(input.numpy(force=True), dtype=np.float64) if p is None else np.full(input.shape, float(p))
    if prob.size and not ((prob >= 0) & (prob <= 1)).all():
        raise RuntimeError("bernoulli: expected all probabilities in [0, 1]")
    draws = numpy_generator(generator).random(prob.shape) < prob
    return _leaf(draws.astype(input._data.dtype), False, input.device)


def multinomial(input, num_samples, replacement=False, *, generator=None):   # noqa: A002
    """Indices of categories drawn with probabilities proportional to the rows of ``input``
    (1-d: one distribution; 2-d: one per row), int64 of shape (num_samples,) or
    (rows, num_samples); without ``replacement`` no category is drawn twice in a row."""
    from .factories import _leaf
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial: expected a Tensor of weights, got {type(input).__name__}")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"prob_dist must be 1 or 2 dim, got {input.ndim} dims")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: {input.dtype}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral) or num_samples <= 0:
        raise RuntimeError(f"cannot sample n_sample <= 0 samples, got num_samples={num_samples!r}")
    w = np.asarray(input.numpy(force=True), dtype=np.float64).reshape(-1, input.shape[-1])
    n_cat = w.shape[1]
    if n_cat == 0:
        raise RuntimeError("multinomial: the distribution has no categories (last dim is 0)")
    if not replacement and num_samples > n_cat:
        raise RuntimeError(f"cannot sample n_sample > prob_dist.size(-1) samples without replacement, got "
                           f"num_samples={num_samples} and {n_cat} categories")
    if not np.isfinite(w).all() or (w < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    sums = w.sum(axis=1)
    if (sums <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if not replacement and ((w > 0).sum(axis=1) < num_samples).any():
        raise RuntimeError(f"invalid multinomial distribution: fewer categories with nonzero probability than "
                           f"num_samples={num_samples}, drawn without replacement")
    check_allocation("multinomial", (w.shape[0], int(num_samples)), np.int64)
    rng = numpy_generator(generator)
    out = np.stack([rng.choice(n_cat, size=int(num_samples), replace=bool(replacement), p=row / total)
                    for row, total in zip(w, sums)]).astype(np.int64)
    return _leaf(out.reshape(input.shape[:-1] + (int(num_samples),)), False, input.device)



def binomial(count, prob, generator=None):
    """The number of successes in ``count`` trials that each succeed with probability ``prob``
    (tensors broadcast against each other), in count's floating dtype, which prob must share, as
    PyTorch. Counts are whole numbers of trials (a fractional one is rounded down); a negative
    count, a probability outside [0, 1] or a NaN is refused."""
    from .factories import _leaf
    for name, t in (("count", count), ("prob", prob)):
        if not isinstance(t, Tensor):
            raise TypeError(f"binomial(): argument '{name}' must be Tensor, not {type(t).__name__}")
    if not count.dtype.is_floating_point:
        raise ValueError(f"binomial only supports floating-point dtypes for count, got: {count.dtype}")
    if prob.dtype != count.dtype:
        raise RuntimeError(f"binomial: found dtype {prob.dtype} for prob but expected {count.dtype} (count's)")
    n, p = np.asarray(count.numpy(force=True), np.float64), np.asarray(prob.numpy(force=True), np.float64)
    try:
        shape = np.broadcast_shapes(n.shape, p.shape)
    except ValueError:
        raise RuntimeError(f"binomial: the shapes of count {list(count.shape)} and prob {list(prob.shape)} do not "
                           "broadcast") from None
    if not (n >= 0).all():
        raise RuntimeError("binomial: expected all counts >= 0 (and not NaN)")
    if not ((p >= 0) & (p <= 1)).all():
        raise RuntimeError("binomial: expected all probabilities in [0, 1] (and not NaN)")
    check_allocation("binomial", shape, np.float64)
    draws = numpy_generator(generator).binomial(np.floor(n).astype(np.int64), p, size=shape)
    return _leaf(draws.astype(count._data.dtype), False, count.device)


__all__ = ["bernoulli", "binomial", "multinomial", "normal"]
