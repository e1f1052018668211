"""Reductions over one or more dims: sum, mean, var, std, p-norms, max/min, and argmax (not
differentiable).

The backward of a reduction spreads dL/dout back over the reduced axes: it reshapes g
to the ``keepdim`` shape so that it broadcasts against the input.
"""
import builtins
import warnings

import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ._broadcast import normalize_dim, normalize_dims
from ._higher_order import constant, keep_where


def _keepdim_shape(shape, axes):
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _spread(g, shape, axes):
    """g (reduced over ``axes``) copied back over them to ``shape``.

    Written as an assignment into a fresh array rather than ``broadcast_to``: for small
    tensors NumPy's broadcast_to costs several microseconds of Python, and a fresh array is
    one the engine may hand to a leaf without copying it again."""
    out = namespace_of(g).empty(shape, dtype=g.dtype)
    out[...] = g.reshape(_keepdim_shape(shape, axes))
    return out


def _mean(x, axes, keepdim):
    if x.dtype.itemsize == 2 and type(x) is np.ndarray and x.dtype.kind in "fV":
        # float16/bfloat16 accumulated in float32 (the cuda reductions already do)
        return x.mean(axis=axes, dtype=np.float32, keepdims=keepdim).astype(x.dtype)
    if x.dtype.itemsize < 4:
        return x.mean(axis=axes, keepdims=keepdim)
    # sum / N is what x.mean computes, minus several microseconds of Python around it
    return x.sum(axis=axes, keepdims=keepdim) / _count(x.shape, axes)


def _count(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


class Sum(Function):
    """out = sum_i x_i over ``axes``;  dL/dx_i = g (the same for every summed element)."""

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.shape, ctx.axes = x.shape, axes
        if x.dtype.itemsize == 2 and type(x) is np.ndarray and x.dtype.kind in "fV":
            # float16/bfloat16 summed in float32, as PyTorch (the cuda reductions already do)
            return x.sum(axis=axes, dtype=np.float32, keepdims=keepdim).astype(x.dtype)
        if x.dtype.kind in "biu":   # in x's own dtype (NumPy would widen int8/int32 to int64, bool to a count):
            return x.sum(axis=axes, dtype=x.dtype, keepdims=keepdim)   # sum(dtype=...) picked it, as PyTorch
        return x.sum(axis=axes, keepdims=keepdim)

    @staticmethod
    def backward(ctx, g):
        return _spread(g, ctx.shape, ctx.axes), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return g.reshape(_keepdim_shape(ctx.shape, ctx.axes)).expand(ctx.shape), None, None


class Mean(Function):
    """out = (1/N) sum_i x_i;  dL/dx_i = g / N."""

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        ctx.shape, ctx.axes = x.shape, axes
        return _mean(x, axes, keepdim)

    @staticmethod
    def backward(ctx, g):
        return _spread(g / _count(ctx.shape, ctx.axes), ctx.shape, ctx.axes), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        n = _count(ctx.shape, ctx.axes)
        return (g / n).reshape(_keepdim_shape(ctx.shape, ctx.axes)).expand(ctx.shape), None, None


class Var(Function):
    """out = sum_i (x_i - m)**2 / (N - c), m the mean, c the correction (1: unbiased, the default).

    dL/dx_i = g * 2 (x_i - m) / (N - c): the term through m vanishes because
    sum_i (x_i - m) = 0.
    """

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        d, v = _deviation(ctx, x, axes, correction)
        ctx.save_for_backward(d)
        return _reduced(ctx, v, keepdim)

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        g = g.reshape(_keepdim_shape(d.shape, ctx.axes))
        with np.errstate(divide="ignore", invalid="ignore"):   # N <= c: NaN, as the forward's 0 / 0
            dx = g * (_ratio(2, ctx.denom) * d)
        return (dx if dx.dtype == ctx.dtype else dx.astype(ctx.dtype)), None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        d = x - x.mean(dim=ctx.axes, keepdim=True)
        return g.reshape(_keepdim_shape(x.shape, ctx.axes)) * d * _ratio(2, ctx.denom), None, None, None


class Std(Function):
    """out = sqrt(var(x)), var as above with N - c degrees of freedom.

    dL/dx_i = g * (x_i - m) / ((N - c) * out), and 0 where out = 0 (every x_i equal), the
    subgradient PyTorch picks: there 1 / out is infinite but every (x_i - m) is 0.
    """

    @staticmethod
    def forward(ctx, x, axes, correction, keepdim):
        d, v = _deviation(ctx, x, axes, correction)
        out = namespace_of(v).sqrt(v)
        ctx.save_for_backward(d, out)
        return _reduced(ctx, out, keepdim)

    @staticmethod
    def backward(ctx, g):
        d, out = ctx.saved_tensors
        xp = namespace_of(g)
        g = g.reshape(out.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = xp.where(out == 0, 0, g / (out * ctx.denom))
            dx = scale * d
        return (dx if dx.dtype == ctx.dtype else dx.astype(ctx.dtype)), None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        d = x - x.mean(dim=ctx.axes, keepdim=True)
        out = ((d * d).sum(dim=ctx.axes, keepdim=True) / ctx.denom).sqrt()
        zero = out._data == 0
        safe = keep_where(~zero, out) + constant(zero.astype(out._data.dtype))     # 1 where out = 0
        scale = keep_where(~zero, g.reshape(out.shape) / (safe * ctx.denom))
        return scale * d, None, None, None


class VectorNorm(Function):
    """out = (sum_i |x_i|**p)**(1/p) over ``axes``, for a finite p > 0.

    dL/dx_i = g * sign(x_i) |x_i|**(p-1) / out**(p-1)   (p = 2: g * x_i / out),
    and 0 where out = 0 or x_i = 0: the subgradient PyTorch picks where |x|**(p-1) / out**(p-1)
    has no limit (an all-zero x, or p < 1 at x_i = 0).
    """

    @staticmethod
    def forward(ctx, x, axes, p, keepdim):
        xp = namespace_of(x)
        out = xp.sqrt((x * x).sum(axis=axes, keepdims=True)) if p == 2 else \
            ((xp.abs(x) ** p).sum(axis=axes, keepdims=True)) ** (1.0 / p)
        ctx.p = p
        ctx.save_for_backward(x, out)
        return out if keepdim else out.reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))

    @staticmethod
    def backward(ctx, g):
        x, out = ctx.saved_tensors
        xp = namespace_of(g)
        g = g.reshape(out.shape)
        p = ctx.p
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if p == 2:
                dx = xp.where(out == 0, 0, g / out) * x
            elif p == 1:
                dx = g * xp.sign(x)
            else:
                dx = xp.where(out == 0, 0, g / out ** (p - 1)) * xp.sign(x) * xp.abs(x) ** (p - 1)
                dx = xp.where(x == 0, 0, dx)
        return (dx if dx.dtype == x.dtype else dx.astype(x.dtype)), None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        p = ctx.p
        out_shape = ctx.saved_tensors[1].shape     # keepdim: 1 on the reduced axes (a size-1 axis sums to itself)
        sign = constant(namespace_of(x._data).sign(x._data))
        if p == 1:
            return g.reshape(out_shape) * sign, None, None, None
        out = VectorNorm.apply(x, tuple(i for i, n in enumerate(out_shape) if n == 1), p, True)
        g = g.reshape(out_shape)
        zero = out._data == 0
        safe = keep_where(~zero, out) + constant(zero.astype(out._data.dtype))     # 1 where out = 0
        if p == 2:
            return keep_where(~zero, g / safe) * x, None, None, None
        dx = keep_where(~zero, g / safe ** (p - 1)) * sign * x.abs() ** (p - 1)
        return keep_where(x._data != 0, dx), None, None, None


def _deviation(ctx, x, axes, correction):
    """(d, v): d = x - mean over ``axes`` and v = sum d**2 / (N - c) in the keepdim shape, both in
    float32 for float16/bfloat16 inputs; ctx keeps the dtype, axes and N - c for backward."""
    ctx.dtype, ctx.axes = x.dtype, axes
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":   # float16/bfloat16: computed in float32
        x = x.astype(np.float32)
    d = x - _mean(x, axes, True)  # two passes: stable for large means
    ctx.denom = builtins.max(_count(x.shape, axes) - correction, 0)
    with np.errstate(divide="ignore", invalid="ignore"):   # N <= c: NaN or inf; _var_args warned
        return d, (d * d).sum(axis=axes, keepdims=True) / ctx.denom


def _reduced(ctx, out, keepdim):
    """A keepdim-shaped result in the input's dtype and, without keepdim, the reduced shape."""
    if not keepdim:
        out = out.reshape(tuple(n for i, n in enumerate(out.shape) if i not in ctx.axes))
    return out if out.dtype == ctx.dtype else out.astype(ctx.dtype)


def _ratio(a, b):
    """a / b for numbers, b = 0 giving inf (a > 0) as float division would, not an exception."""
    return a / b if b else float("inf")


class Max(Function):
    """out = max_i x_i.  The gradient goes to the maximal elements, split evenly between
    ties (as torch.amax): dL/dx_i = g * [x_i == out] / (number of maxima)."""

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        return _extremum(ctx, x, x.max(axis=axes, keepdims=True), axes, keepdim)

    @staticmethod
    def backward(ctx, g):
        (is_max,) = ctx.saved_tensors
        g = g.reshape(_keepdim_shape(is_max.shape, ctx.axes))
        with np.errstate(divide="ignore", invalid="ignore"):   # a NaN extremum equals nothing: NaN, as PyTorch
            return g * is_max / is_max.sum(axis=ctx.axes, keepdims=True), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (is_max,) = ctx.saved_tensors
        share = is_max / is_max.sum(axis=ctx.axes, keepdims=True)
        return g.reshape(_keepdim_shape(is_max.shape, ctx.axes)) * constant(share.astype(g.dtype)), None, None


class Min(Max):
    """out = min_i x_i, the gradient split between the minimal elements as Max's. (Not -max(-x):
    negation wraps around for unsigned and the lowest signed integer, and bools have none.)"""

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        return _extremum(ctx, x, x.min(axis=axes, keepdims=True), axes, keepdim)

    backward = staticmethod(Max.backward)
    differentiable_backward = staticmethod(Max.differentiable_backward)


def _extremum(ctx, x, out, axes, keepdim):
    """Max's and Min's forward from the keepdim-shaped ``out``: the mask of the elements equal to it
    saved for backward."""
    ctx.save_for_backward(x == out)
    ctx.axes = axes
    return out if keepdim else out.reshape(tuple(n for i, n in enumerate(x.shape) if i not in axes))


def sum(x, dim=None, keepdim=False):
    return Sum.apply(x, normalize_dims(dim, x.ndim, "sum"), keepdim)


def mean(x, dim=None, keepdim=False):
    if x.dtype.kind != "f":
        raise RuntimeError(f"mean: expected a floating point tensor, got dtype {x.dtype}")
    return Mean.apply(x, normalize_dims(dim, x.ndim, "mean"), keepdim)


def var(x, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """Variance with N - correction degrees of freedom; ``correction`` (PyTorch's newer keyword)
    takes precedence over ``unbiased`` (correction 1 if True, 0 if False)."""
    return Var.apply(x, *_var_args("var", x, dim, unbiased, correction), keepdim)


def std(x, dim=None, unbiased=True, keepdim=False, *, correction=None):
    """sqrt(var(x, ...)), with its own backward (0 where the deviation is 0, see Std)."""
    return Std.apply(x, *_var_args("std", x, dim, unbiased, correction), keepdim)


def _var_args(op, x, dim, unbiased, correction):
    if x.dtype.kind != "f":
        raise RuntimeError(f"{op}: expected a floating point tensor, got dtype {x.dtype}")
    if correction is None:
        correction = int(bool(unbiased))
    elif isinstance(correction, bool) or not isinstance(correction, (int, float, np.integer, np.floating)) \
            or not correction >= 0:
        raise TypeError(f"{op}: correction must be a number >= 0, got {correction!r}")
    axes = normalize_dims(dim, x.ndim, op)
    if _count(x.shape, axes) - correction <= 0:
        # PyTorch's warning (the result is NaN or inf), in place of NumPy's "invalid value in divide"
        warnings.warn(f"{op}(): degrees of freedom is <= 0. Correction should be strictly less than the reduction "
                      "factor (input numel divided by output numel).", UserWarning, stacklevel=5)
    return axes, correction


def vector_norm(x, p, dim=None, keepdim=False):
    """(sum |x|**p)**(1/p) over ``dim`` (all elements if None), finite p > 0 (see VectorNorm)."""
    return VectorNorm.apply(x, normalize_dims(dim, x.ndim, "norm"), float(p), keepdim)


def _check_nonempty(op, x, dim, axes, all_error=RuntimeError):
    """An empty tensor has a max (argmax...) along a dim of non-zero length, an empty result, as
    PyTorch; over all elements, or along a dim of length 0, there is none: PyTorch raises
    RuntimeError (max/min) or IndexError (argmax/argmin) for the first, IndexError for the second."""
    if x.numel() != 0:
        return
    if dim is None:
        raise all_error(f"{op}: expected a non-empty tensor, or a dim to reduce, got shape {list(x.shape)}")
    for a in axes:
        if x.shape[a] == 0:
            raise IndexError(f"{op}: expected reduction dim {a} to have non-zero size, got shape {list(x.shape)}")


def max(x, dim=None, keepdim=False, _op="max"):
    axes = normalize_dims(dim, x.ndim, _op)
    _check_nonempty(_op, x, dim, axes)
    return (Min if _op == "min" else Max).apply(x, axes, keepdim)


def min(x, dim=None, keepdim=False):
    return max(x, dim, keepdim, _op="min")


def argmax(x, dim=None, keepdim=False, _op="argmax"):
    """The index of the (first) largest element, over all elements (dim None) or along ``dim``.
    Bool tensors have none, as in PyTorch."""
    Tensor = _op_function.Tensor
    data = x._data
    if data.dtype.kind == "b":
        raise RuntimeError(f"{_op}(): does not support bool input")
    find = data.argmin if _op == "argmin" else data.argmax
    if dim is None:
        _check_nonempty(_op, x, dim, (), all_error=IndexError)
        out = find()
        return Tensor._wrap(out.reshape((1,) * data.ndim) if keepdim else out, None, 0)
    dim = normalize_dim(dim, builtins.max(data.ndim, 1), _op)   # a 0-d tensor takes dim 0 or -1, as PyTorch
    _check_nonempty(_op, x, dim, (dim,) if data.ndim else ())
    if data.ndim == 0:
        return Tensor._wrap(data.reshape(1).argmax(axis=0), None, 0)
    return Tensor._wrap(find(axis=dim, keepdims=keepdim), None, 0)


def argmin(x, dim=None, keepdim=False):
    return argmax(x, dim, keepdim, _op="argmin")
