"""More of PyTorch's top-level functions, installed by _namespace.py's tables like the rest:
conversion (asarray), broadcasting (broadcast_shapes, broadcast_tensors), the cat aliases,
numerical integration and differentiation of samples (trapezoid, cumulative_trapezoid,
gradient), histogram, a few factories (poisson, randint_like, empty_strided), and the
process-wide settings set_printoptions (defined with the printing rules in tensor/printing.py) and
get/set_default_device.

The differentiable ones compose ops that have their own backward (slicing, arithmetic, sum,
cumsum, cat, expand) and use PyTorch's formulas in PyTorch's order, so their values and
gradients are theirs; only poisson is a Function of its own (its gradient is zero).
"""
import builtins
import math
import numbers
from collections import namedtuple

import numpy as np

from .autograd.op_function import Function
from .ops._broadcast import normalize_dim
from .ops.shape_error import ShapeError
from .tensor import dtype as _dtypes
from .tensor import factories as _factories
from .tensor.allocation import check_allocation
from .tensor.generator import numpy_generator
from .tensor.layout import check as check_layout
from .tensor.size import Size, as_ints
from .tensor.printing import set_printoptions
from .tensor.tensor import Tensor


def _md():
    import minidl
    return minidl


def _along(t, d, start, stop=None):
    """``t[..., start:stop, ...]`` with the slice on dim ``d`` (a view)."""
    return t[(slice(None),) * d + (slice(start, stop),)]


# conversion and broadcasting -----------------------------------------------------------------
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """``obj`` as a tensor, sharing its memory where it can, as torch.asarray.

    A NumPy array (or anything with ``__array__``) of a supported dtype is shared when neither
    ``dtype`` nor ``device`` asks for a conversion; a Tensor likewise (returned itself when it
    is already a leaf with the asked ``requires_grad``, else a detached view of it). Other data
    (numbers, nested lists) is copied, as by md.tensor. ``copy=True`` always copies;
    ``copy=False`` never does and raises ValueError where a copy would be needed. The result
    never carries ``obj``'s autograd history: it is a leaf that requires grad only if asked.
    """
    dt = None if dtype is None else _dtypes.to_dtype(dtype)
    dev = None if device is None else _md().device(device)
    if isinstance(obj, Tensor):
        out = _tensor_as(obj, dt, dev, copy, requires_grad)
    elif isinstance(obj, (np.ndarray, np.generic)) or hasattr(obj, "__array_interface__") or \
            (hasattr(obj, "__array__") and not isinstance(obj, (list, tuple))):
        out = _array_as(np.asarray(obj), dt, dev, copy)
    else:
        if copy is False:
            raise ValueError("asarray: can't alias arbitrary sequence into a tensor (copy=False was given for "
                             f"{type(obj).__name__} data)")
        out = _factories.tensor(obj, dtype=dt, device="cpu" if dev is None else dev)
    if out is obj:
        return out
    if requires_grad:
        out.requires_grad_(True)
    return out


def _tensor_as(t, dt, dev, copy, requires_grad):
    convert = (dt is not None and dt != t.dtype) or (dev is not None and dev != t.device)
    if convert and copy is False:
        raise ValueError(f"asarray: can't alias tensor with dtype {t.dtype} on {t.device} into dtype "
                         f"{dt if dt is not None else t.dtype} on {dev if dev is not None else t.device} "
                         "(copy=False was given)")
    if not convert and not copy and t.is_leaf and t.requires_grad == builtins.bool(requires_grad):
        return t
    out = t.detach()
    if convert:
        out = out.to(device=dev if dev is not None else t.device, dtype=dt if dt is not None else t.dtype)
    if copy and (not convert or out._data is t._data):
        out = out.clone()
    return out


def _array_as(array, dt, dev, copy):
    _dtypes.to_dtype(array.dtype)   # TypeError naming the supported dtypes for complex, strings, objects...
    native = _dtypes.native(array)
    convert = (dt is not None and np.dtype(dt) != array.dtype) or (dev is not None and dev != "cpu")
    if copy is False and native is not array:
        raise ValueError(f"asarray: can't alias a NumPy array in non-native byte order ({array.dtype.str}) into a "
                         "tensor (copy=False was given)")
    if copy is False and convert:
        raise ValueError(f"asarray: can't alias a NumPy array of dtype {array.dtype} into dtype "
                         f"{dt if dt is not None else array.dtype} on {dev or 'cpu'} (copy=False was given)")
    if dt is not None:
        native = native.astype(dt, copy=False)
    if copy and native is array:
        native = native.copy()
    out = Tensor._wrap(native, None, 0)
    return out if dev is None or dev == "cpu" else out.to(dev)


def broadcast_shapes(*shapes):
    """The shape tensors of ``shapes`` broadcast to (an int stands for a 1-d shape), as an
    md.Size; RuntimeError naming the first shape that does not fit."""
    shapes = [(s,) if isinstance(s, numbers.Integral) and not isinstance(s, builtins.bool) else
              as_ints(s, "broadcast_shapes", "shape") for s in shapes]
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for k, s in enumerate(shapes):
        if builtins.any(n < 0 for n in s):
            raise ValueError(f"broadcast_shapes: Attempting to broadcast a dimension with negative length! "
                             f"(shape {list(s)})")
        for i in range(1, len(s) + 1):
            if s[-i] != 1 and out[-i] != 1 and s[-i] != out[-i]:
                raise RuntimeError(f"broadcast_shapes: Attempting to broadcast a dimension of length {s[-i]} at "
                                   f"{-i}! Mismatching argument at index {k} had {tuple(s)}; but expected shape "
                                   f"should be broadcastable to {out}")
            if s[-i] != 1:
                out[-i] = s[-i]
    return Size(out)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common shape: views (through expand), whose gradients sum
    back over the broadcast dims."""
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"broadcast_tensors(): expected Tensor as element {i}, but got {type(t).__name__}")
    shape = ()
    for i, t in enumerate(tensors):
        try:
            shape = np.broadcast_shapes(shape, tuple(t.shape))
        except ValueError:
            raise ShapeError(f"broadcast_tensors: shape {list(t.shape)} of tensor {i} does not broadcast with "
                             f"{list(shape)}, the shape of the tensors before it (The size of tensor a must match "
                             "the size of tensor b at every non-singleton dimension)") from None
    return tuple(t if tuple(t.shape) == shape else t.expand(*shape) for t in tensors)


def concat(tensors, dim=0, *, axis=None):
    """md.cat under NumPy's name (``axis=`` for ``dim=``, as PyTorch allows)."""
    return _md().cat(tensors, dim if axis is None else axis)


def is_complex(input):
    """False: minidl has no complex dtypes (see md.complex64)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"is_complex(): argument 'input' must be Tensor, not {type(input).__name__}")
    return False


# integrating and differentiating samples -----------------------------------------------------
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along ``dim``: sum_i (x[i+1] - x[i]) * (y[i+1] + y[i]) / 2, with the
    sample points ``x`` (1-d, of y's length along dim, or broadcastable to y) or a constant
    spacing ``dx`` (default 1): then (sum_i y[i] - (y[0] + y[-1]) / 2) * dx. No samples give 0."""
    d, dx = _integration_args("trapezoid", y, x, dx, dim)
    if y.shape[d] == 0:
        return _md().zeros(*(n for i, n in enumerate(y.shape) if i != d), dtype=y.dtype, device=y.device)
    if x is None:
        return (y.sum(d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * dx
    return ((dx * (_along(y, d, 1) + _along(y, d, 0, -1))) / 2.0).sum(d)


def trapz(y, x=None, *, dx=None, dim=-1):
    """md.trapezoid under its older name: ``trapz(y, x, *, dim=-1)`` or ``trapz(y, *, dx=1, dim=-1)``."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running trapezoidal rule along ``dim``: element i is the integral over the first i + 2
    samples (one element fewer than y along dim), as trapezoid's terms summed by cumsum."""
    d, dx = _integration_args("cumulative_trapezoid", y, x, dx, dim)
    return (dx / 2.0 * (_along(y, d, 0, -1) + _along(y, d, 1))).cumsum(d)


def _integration_args(op, y, x, dx, dim):
    """(dim as an axis, the spacing: a number, or x's differences shaped to broadcast with y)."""
    if not isinstance(y, Tensor):
        raise TypeError(f"{op}(): argument 'y' must be Tensor, not {type(y).__name__}")
    if x is not None and dx is not None:
        raise TypeError(f"{op}(): give either the sample points x or the spacing dx, not both")
    if x is not None and not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'x' must be Tensor, not {type(x).__name__} (a constant spacing is dx=)")
    d = normalize_dim(dim, y.ndim, op)
    if y.dtype == _dtypes.bool_ or (x is not None and x.dtype == _dtypes.bool_):
        raise RuntimeError(f"{op}: received a bool input for `x` or `y`, but bool is not supported")
    if x is None:
        dx = 1 if dx is None else dx
        if not _real(dx):
            raise RuntimeError(f"{op}: Currently, we only support dx as a real number, got {dx!r}")
        return d, dx
    if x.ndim == 1:
        if x.shape[0] != y.shape[d]:
            raise RuntimeError(f"{op}: There must be one `x` value for each sample point ({y.shape[d]} samples "
                               f"along dim {d}, x has {x.shape[0]})")
        x = x.reshape(*[x.shape[0] if i == d else 1 for i in range(y.ndim)])
    elif x.ndim < y.ndim:
        x = x.reshape(*([1] * (y.ndim - x.ndim) + list(x.shape)))
    return d, _along(x, d, 1) - _along(x, d, 0, -1)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """The derivative of the samples ``input`` along each dim in ``dim`` (all by default), one
    tensor per dim, by central differences inside and one-sided ones (of first or second order,
    ``edge_order``) at the ends. ``spacing``: one number for all dims, a number per dim, or per
    dim a 1-d tensor of coordinates (the second-order formula for uneven steps h1, h2 then gives
    f' = (-h2 / (h1 (h1 + h2))) f[i-1] + ((h2 - h1) / (h1 h2)) f[i] + (h1 / (h2 (h1 + h2))) f[i+1])."""
    if not isinstance(input, Tensor):
        raise TypeError(f"gradient(): argument 'input' must be Tensor, not {type(input).__name__}")
    dims = _gradient_dims(input, dim)
    spacings = _gradient_spacing(input, spacing, dims, dim is not None)
    if input.dtype == _dtypes.uint8:
        raise RuntimeError("torch.gradient does not support uint8 input.")
    if edge_order not in (1, 2) or isinstance(edge_order, builtins.bool):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order!r}")
    if input.dtype == _dtypes.bool_:
        raise RuntimeError("gradient: bool input is not supported (its differences are not numbers)")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError(f"torch.gradient expected each dimension size to be at least edge_order+1 "
                               f"(dim {d} has size {input.shape[d]}, edge_order is {edge_order})")
    out = []
    for d, h in zip(dims, spacings):
        if isinstance(h, Tensor):
            if h.ndim != 1:
                raise RuntimeError(f"torch.gradient expected each element of spacing to have one dimension, but "
                                   f"got an element with {h.ndim} dimensions!")
            if h.shape[0] != input.shape[d]:
                raise RuntimeError(f"gradient: the coordinates for dim {d} must hold one value per sample "
                                   f"({input.shape[d]}), got {h.shape[0]}")
            out.append(_gradient_coordinates(input, h, d, edge_order))
        else:
            out.append(_gradient_uniform(input, h, d, edge_order))
    return tuple(out)


def _gradient_dims(input, dim):
    if dim is None:
        return list(range(input.ndim))
    dims = [normalize_dim(d, input.ndim, "gradient") for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return dims


def _gradient_spacing(input, spacing, dims, dim_given):
    """One spacing per dim in ``dims``: numbers, or 1-d coordinate tensors."""
    if isinstance(spacing, Tensor) and spacing.ndim == 0:
        spacing = spacing.item()
    if _real(spacing):
        return [spacing] * len(dims)
    if not isinstance(spacing, (list, tuple)):
        raise TypeError(f"gradient(): spacing must be a number, or a list or tuple of numbers or of 1-d tensors, "
                        f"got {type(spacing).__name__}")
    if len(spacing) != len(dims):
        if dim_given:
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                               f"arguments to have the same length, but got a spacing argument of length "
                               f"{len(spacing)} and a dim argument of length {len(dims)}.")
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length equal "
                           f"to 'self.dim() = {input.ndim}', since dim argument was not given, but got a list of "
                           f"length {len(spacing)}")
    kinds = {Tensor if isinstance(s, Tensor) else _real(s) for s in spacing}
    if len(kinds) > 1 or False in kinds:
        raise TypeError(f"gradient(): spacing must hold only numbers or only 1-d tensors, got {spacing!r}")
    return list(spacing)


def _real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, (builtins.bool, np.bool_))


def _gradient_uniform(f, h, d, edge_order):
    center = (_along(f, d, 2) - _along(f, d, 0, -2)) / h
    if edge_order == 1:
        first = (_along(f, d, 1, 2) - _along(f, d, 0, 1)) / h
        last = (_along(f, d, -1) - _along(f, d, -2, -1)) / h
    else:   # second order: f'(0) = (-3/2 f0 + 2 f1 - 1/2 f2) / h, mirrored at the end
        first = (_along(f, d, 0, 1) * -1.5 + _along(f, d, 1, 2) * 2 - _along(f, d, 2, 3) * 0.5) / h
        last = (_along(f, d, -3, -2) * 0.5 + _along(f, d, -2, -1) * -2 + _along(f, d, -1) * 1.5) / h
    return _md().cat([first, center / 2, last], d)


def _gradient_coordinates(f, x, d, edge_order):
    shape = [-1 if i == d else 1 for i in range(f.ndim)]
    h = x[1:] - x[:-1]
    h1, h2 = h[:-1], h[1:]
    a = (-h2 / (h1 * (h1 + h2))).reshape(*shape)
    b = ((h2 - h1) / (h1 * h2)).reshape(*shape)
    c = (h1 / (h2 * (h1 + h2))).reshape(*shape)
    center = a * _along(f, d, 0, -2) + b * _along(f, d, 1, -1) + c * _along(f, d, 2)
    if edge_order == 1:
        first = (_along(f, d, 1, 2) - _along(f, d, 0, 1)) / h[0]
        last = (_along(f, d, -1) - _along(f, d, -2, -1)) / h[-1]
    else:   # the quadratic through the first (last) three samples, differentiated at the end point
        a = -(2.0 * h[0] + h[1]) / (h[0] * (h[0] + h[1]))
        b = (h[0] + h[1]) / (h[0] * h[1])
        c = -h[0] / (h[1] * (h[0] + h[1]))
        first = a * _along(f, d, 0, 1) + b * _along(f, d, 1, 2) + c * _along(f, d, 2, 3)
        a = h[-1] / (h[-2] * (h[-1] + h[-2]))
        b = -(h[-1] + h[-2]) / (h[-1] * h[-2])
        c = (2 * h[-1] + h[-2]) / (h[-1] * (h[-1] + h[-2]))
        last = a * _along(f, d, -3, -2) + b * _along(f, d, -2, -1) + c * _along(f, d, -1)
    return _md().cat([first, center, last], d)


# histogram ----------------------------------------------------------------------------------
histogram_result = namedtuple("histogram", ("hist", "bin_edges"))


def histogram(input, bins, *, range=None, weight=None, density=False):   # noqa: A002  (PyTorch's name)
    """(hist, bin_edges): the count (or total ``weight``) of the elements of ``input`` in each bin,
    and the bins' edges. ``bins`` is a count of equal bins over ``range`` (default: the values'
    min to max, widened by 0.5 each way when they are equal) or a 1-d tensor of edges. A bin
    holds [left, right), the last also its right edge; values outside are not counted. With
    ``density`` the result is normalized to integrate to 1. Not differentiable."""
    if not isinstance(input, Tensor):
        raise TypeError(f"histogram(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.dtype not in (_dtypes.float16, _dtypes.float32, _dtypes.float64):
        raise NotImplementedError(f"histogram: not implemented for dtype {input.dtype} (a floating point input "
                                  "is expected)")
    values = input.numpy(force=True).reshape(-1)
    dt = values.dtype
    if isinstance(bins, Tensor):
        if range is not None:
            raise TypeError("histogram(): range cannot be given with a tensor of bin edges (the edges are the range)")
        if bins.ndim != 1:
            raise RuntimeError(f"histogram: bins tensor should have one dimension, but got {bins.ndim} dimensions")
        if bins.numel() < 2:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins.numel() - 1} for dimension 0")
        if bins.dtype != input.dtype:
            raise RuntimeError(f"histogram: input tensor and bins tensors should have the same dtype, but got "
                               f"input with dtype {input.dtype} and bins with dtype {bins.dtype}")
        edges = np.array(bins.numpy(force=True), dtype=dt)
    else:
        if isinstance(bins, builtins.bool) or not isinstance(bins, numbers.Integral):
            raise TypeError(f"histogram(): argument 'bins' must be an int or a 1-d Tensor, got "
                            f"{type(bins).__name__}")
        if bins <= 0:
            raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
        edges = _linspace(*_histogram_range(values, range), int(bins) + 1, dt)
    w = _histogram_weight(input, weight)
    inside = (values >= edges[0]) & (values <= edges[-1])
    position = np.minimum(np.searchsorted(edges, values[inside], side="right") - 1, len(edges) - 2)
    hist = np.bincount(position, weights=None if w is None else w[inside], minlength=len(edges) - 1).astype(dt)
    if density:
        hist = hist / dt.type(hist.sum(dtype=np.float64)) / np.diff(edges)
    return histogram_result(_factories._leaf(hist, False, input.device), _factories._leaf(edges, False, input.device))


def _histogram_range(values, range):   # noqa: A002
    if range is None:
        lo, hi = (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)
    else:
        if isinstance(range, Tensor) or not isinstance(range, (list, tuple)) or len(range) != 2:
            raise TypeError(f"histogram(): range must be a pair of numbers (min, max), got {range!r}")
        lo, hi = (float(v) for v in range)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise RuntimeError(f"histogram: range [{lo}, {hi}] is not finite")
    if lo > hi:
        raise RuntimeError(f"histogram: min should not exceed max, but got min {lo} max {hi}")
    return (lo - 0.5, hi + 0.5) if lo == hi else (lo, hi)


def _linspace(start, end, steps, dt):
    """PyTorch's linspace in dtype ``dt``, bit for bit: step = (end - start) / (steps - 1), then
    fma(step, i, start) for the first half and fma(-step, steps - 1 - i, end) for the second, so
    both ends are exact. A fused multiply-add rounds once; float64 gets it from _fma, a float32
    product is exact in float64 already."""
    start, end = dt.type(start), dt.type(end)
    step = (end - start) / dt.type(steps - 1)
    i = np.arange(steps, dtype=np.float64)
    s, e, h = np.float64(start), np.float64(end), np.float64(step)
    if dt == np.float64:
        forward, backward = _fma(h, i, s), _fma(-h, steps - 1 - i, e)
    else:
        forward, backward = s + h * i, e - h * (steps - 1 - i)
    return np.where(i < steps // 2, forward, backward).astype(dt)


def _fma(a, b, c):
    """a * b + c in float64 with (almost always) a single rounding: the product split exactly
    into p + err (Dekker's two-product), p + c into s + t (Knuth's two-sum), then s + (t + err)."""
    ah, bh = (134217729.0 * v - (134217729.0 * v - v) for v in (a, b))   # the upper halves (2**27 + 1)
    al, bl, p = a - ah, b - bh, a * b
    err = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    s = p + c
    bb = s - p
    return s + (((p - (s - bb)) + (c - bb)) + err)


def _histogram_weight(input, weight):
    if weight is None:
        return None
    if not isinstance(weight, Tensor):
        raise TypeError(f"histogram(): argument 'weight' must be Tensor, not {type(weight).__name__}")
    if tuple(weight.shape) != tuple(input.shape):
        raise RuntimeError(f"histogram: if weight tensor is provided it should have the same shape as the input "
                           f"tensor, but got input with shape {list(input.shape)} and weight with shape "
                           f"{list(weight.shape)}")
    if weight.dtype != input.dtype:
        raise RuntimeError(f"histogram: if weight tensor is provided, input tensor and weight tensor should have the "
                           f"same dtype, but got input({input.dtype}), and weight({weight.dtype})")
    return weight.numpy(force=True).reshape(-1)


# factories ----------------------------------------------------------------------------------
class Poisson(Function):
    """y ~ Poisson(rates), drawn before the op (so the draw comes from the caller's generator).
    A sample is a step function of the rate, so dy/drate = 0 almost everywhere; PyTorch
    returns that zero gradient rather than none, and so does this."""

    @staticmethod
    def forward(ctx, rates, draws):
        return draws

    @staticmethod
    def backward(ctx, g):
        return g * 0, None


def poisson(input, generator=None):
    """A sample of Poisson(rate) for each element of ``input`` (non-negative rates), in its
    shape, dtype and device."""
    if not isinstance(input, Tensor):
        raise TypeError(f"poisson(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"poisson: not implemented for dtype {input.dtype} (floating point rates are "
                                  "expected)")
    rates = np.asarray(input.detach().double().numpy(force=True))
    if not (rates >= 0).all():
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative (and not NaN)")
    try:
        draws = np.asarray(numpy_generator(generator).poisson(rates))
    except ValueError as exc:   # NumPy's limit, near 2**63, where the count no longer fits an int64
        raise RuntimeError(f"poisson: rate too large to draw from ({exc}); the largest rate is "
                           f"{float(rates.max())}") from None
    sample = _factories._leaf(draws.astype(np.float64), False, input.device).to(input.dtype)
    return Poisson.apply(input, sample) if input.requires_grad else sample


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None):
    """Integers drawn uniformly from [low, high) in ``input``'s shape (and dtype and device unless
    given): ``randint_like(input, high)`` or ``randint_like(input, low, high)``."""
    check_layout(layout, "randint_like")
    if high is None:
        low, high = 0, low
    (low,), (high,) = as_ints((low,), "randint_like", "low"), as_ints((high,), "randint_like", "high")
    dt = input.dtype if dtype is None else _dtypes.to_dtype(dtype)
    kind = np.dtype(dt).kind if np.dtype(dt).kind != "V" else "f"   # V: bfloat16
    if requires_grad and kind != "f":
        raise RuntimeError(f"randint_like: only floating point tensors can require gradients, got dtype {dt}")
    if not low < high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if kind in "iub":
        lo, hi = (0, 1) if kind == "b" else (np.iinfo(dt).min, np.iinfo(dt).max)
        if low < lo or high - 1 > hi:
            raise RuntimeError(f"randint_like: [{low}, {high}) is out of bounds for dtype {dt} "
                               f"(which holds {lo} to {hi})")
    data = numpy_generator(generator).integers(low, high, tuple(input.shape))
    return _factories._leaf(data.astype(dt), requires_grad, input.device if device is None else device)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """A tensor of shape ``size`` whose elements lie ``stride`` elements apart (zeros: PyTorch
    leaves them uninitialised, md.empty gives zeros). On the CPU the strides are kept (the array
    views a buffer as large as they need, so ``.stride()`` reports them). On the GPU they are
    only validated: minidl's device arrays are created contiguous, and no op's values depend on
    the layout, only its speed."""
    check_layout(layout, "empty_strided")
    if not isinstance(size, (tuple, list, Size)) or not isinstance(stride, (tuple, list, Size)):
        raise TypeError(f"empty_strided(): arguments 'size' and 'stride' must be tuples of ints, got "
                        f"{type(size).__name__} and {type(stride).__name__}")
    size, stride = as_ints(size, "empty_strided", "size"), as_ints(stride, "empty_strided", "stride")
    if len(size) != len(stride):
        raise RuntimeError(f"dimensionality of sizes ({len(size)}) must match dimensionality of strides "
                           f"({len(stride)})")
    _factories._check_size(size)
    if builtins.any(s < 0 for s in stride):
        raise RuntimeError(f"empty_strided: strides must be non-negative, got strides={list(stride)} for "
                           f"sizes={list(size)}")
    dt = np.dtype(_dtypes.DEFAULT_FLOAT if dtype is None else _dtypes.to_dtype(dtype))
    storage = 0 if 0 in size else 1 + builtins.sum((n - 1) * s for n, s in zip(size, stride))
    check_allocation("empty_strided", (storage,), dt)
    array = np.lib.stride_tricks.as_strided(np.zeros(storage, dt), size, tuple(s * dt.itemsize for s in stride))
    return _factories._leaf(array, requires_grad, device)


# process-wide settings ----------------------------------------------------------------------
def get_default_device():
    """md.device("cpu"): where the factories put a tensor when no device is given."""
    return _md().device("cpu")


def set_default_device(device):
    """Accepts the CPU (or None, PyTorch's way to reset): minidl's factories take the CPU unless
    told otherwise, each with ``device="cpu"`` in its signature, so a process-wide GPU default
    would have to reach every one of them; pass ``device="cuda"`` or call ``.cuda()`` instead."""
    if device is None or _md().device(device).type == "cpu":
        return
    raise NotImplementedError(f"set_default_device({str(device)!r}): minidl's factories always default to the CPU; "
                              f"pass device={str(device)!r} to them, or move tensors with .to({str(device)!r})")


BOTH = {"is_complex": is_complex, "histogram": histogram}

MODULE_ONLY = {
    "asarray": asarray, "broadcast_shapes": broadcast_shapes, "broadcast_tensors": broadcast_tensors,
    "concat": concat, "concatenate": concat, "trapezoid": trapezoid, "trapz": trapz,
    "cumulative_trapezoid": cumulative_trapezoid, "gradient": gradient, "poisson": poisson,
    "randint_like": randint_like, "empty_strided": empty_strided, "set_printoptions": set_printoptions,
    "get_default_device": get_default_device, "set_default_device": set_default_device,
}

METHODS_ONLY = {}
