"""Products and running reductions along a dim: prod, cumsum, cumprod, logsumexp, logcumsumexp."""
import numpy as np

from ..autograd.op_function import Function
from ._broadcast import normalize_dim, normalize_dims
from ..tensor.dtype import DtypeNotImplementedError, int64
from ._higher_order import constant
from ._quiet import quiet
from .indexing import Where
from .unary import _floating


def _exclusive_products(x, axis):
    """prod_{k != i} x_k along ``axis`` for every i, without dividing (exact with zeros):
    the product of everything before i times everything after it."""
    ones = np.ones_like(np.take(x, [0], axis=axis))
    but_last = (slice(None),) * axis + (slice(0, -1),)
    before = np.cumprod(np.concatenate([ones, x[but_last]], axis=axis), axis=axis)
    rev = np.flip(x, axis)
    after = np.flip(np.cumprod(np.concatenate([ones, rev[but_last]], axis=axis), axis=axis), axis)
    return before * after


def _exclusive_products_tensor(x, axis):
    """_exclusive_products of a Tensor, with recorded ops (cumprods of x shifted by one, each way)."""
    from .join import cat
    n = x.shape[axis]
    one = constant(np.ones(x.shape[:axis] + (1,) + x.shape[axis + 1:], dtype=x.dtype))
    before = cat([one, x.narrow(axis, 0, n - 1)], axis).cumprod(axis)
    after = cat([one, x.flip(axis).narrow(axis, 0, n - 1)], axis).cumprod(axis).flip(axis)
    return before * after


def _reversed_cumsum(g, axis):
    """sum_{i >= j} g_i along axis, for a Tensor."""
    return g.flip(axis).cumsum(axis).flip(axis)


class Prod(Function):
    """y = prod_i x_i along ``axis`` (None: all);  dy/dx_i = prod_{k != i} x_k."""

    @staticmethod
    def forward(ctx, x, axis, keepdim):
        ctx.save_for_backward(x)
        ctx.axis, ctx.keepdim = axis, keepdim
        return np.prod(x, axis=axis, keepdims=keepdim, dtype=x.dtype if x.dtype.kind in "biu" else None)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        if ctx.axis is None:
            flat = x.reshape(-1)
            others = _exclusive_products(flat, 0).reshape(x.shape) if flat.size else x
            return g * others, None, None
        gk = g if ctx.keepdim else np.expand_dims(g, ctx.axis)
        others = _exclusive_products(x, ctx.axis) if x.shape[ctx.axis] else x
        return gk * others, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        if ctx.axis is None:
            flat = x.reshape(-1)
            others = _exclusive_products_tensor(flat, 0).reshape(x.shape) if flat.numel() else x
            return g * others, None, None
        gk = g if ctx.keepdim else g.unsqueeze(ctx.axis)
        others = _exclusive_products_tensor(x, ctx.axis) if x.shape[ctx.axis] else x
        return gk * others, None, None


def _accumulated(scan, x, axis):
    """np.cumsum / np.cumprod (or another scan) of x along axis: integers in their own dtype (cumsum
    and cumprod bring them to int64 first unless a ``dtype=`` says otherwise, as PyTorch), float16
    and bfloat16 accumulated in float32 and rounded once (a running sum in 8 bits of significand
    would lose every small term), float32 and float64 in their own dtype."""
    if x.dtype.kind not in "fV":
        return scan(x, axis=axis, dtype=x.dtype)
    if x.dtype.itemsize == 2:
        return scan(x, axis=axis, dtype=np.float32).astype(x.dtype)
    return scan(x, axis=axis, dtype=x.dtype)


class Cumsum(Function):
    """y_i = sum_{j <= i} x_j;  dL/dx_j = sum_{i >= j} g_i (a reversed cumulative sum)."""

    @staticmethod
    def forward(ctx, x, axis):
        ctx.axis = axis
        return _accumulated(np.cumsum, x, axis)

    @staticmethod
    def backward(ctx, g):
        return np.flip(np.cumsum(np.flip(g, ctx.axis), axis=ctx.axis), ctx.axis), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return _reversed_cumsum(g, ctx.axis), None


class Cumprod(Function):
    """y_i = prod_{j <= i} x_j;  dL/dx_j = sum_{i >= j} g_i prod_{k <= i, k != j} x_k.

    Without zeros that is (reversed cumsum of g * y)_j / x_j; with a zero along the dim the
    sum is formed term by term (quadratic in the dim's length, exact)."""

    @staticmethod
    def forward(ctx, x, axis):
        y = _accumulated(np.cumprod, x, axis)
        ctx.save_for_backward(x, y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        axis = ctx.axis
        if (x != 0).all():
            return np.flip(np.cumsum(np.flip(g * y, axis), axis=axis), axis) / x, None
        xm, gm = np.moveaxis(x, axis, 0), np.moveaxis(g, axis, 0)
        dx = np.zeros_like(xm)
        for j in range(xm.shape[0]):
            without = xm.copy()
            without[j] = 1
            dx[j] = (gm[j:] * np.cumprod(without, axis=0)[j:]).sum(axis=0)
        return np.moveaxis(dx, 0, axis), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        """backward's two forms on Tensors; with zeros, dL/dx_j = sum_{i >= j} g_i cumprod(x with
        x_j = 1)_i, one cumprod per j."""
        from .join import stack
        x = inputs[0]
        axis = ctx.axis
        if (x._data != 0).all():
            return _reversed_cumsum(g * Cumprod.apply(x, axis), axis) / x, None
        n = x.shape[axis]
        parts = []
        for j in range(n):
            unit = np.zeros(n, dtype=x.dtype)
            unit[j] = 1
            unit = constant(unit.reshape((n,) + (1,) * (x.ndim - axis - 1)))
            without = Cumprod.apply(x * (1 - unit) + unit, axis)
            parts.append((g * without).narrow(axis, j, n - j).sum(axis))
        return stack(parts, axis), None


class LogSumExp(Function):
    """y = ln sum_i e**x_i along ``axes`` (shifted by the max, so nothing overflows);
    dy/dx_i = e**(x_i - y), the softmax. A row of -inf (a fully masked one) gives -inf and NaN
    gradients, without NumPy's warnings, as PyTorch."""

    @staticmethod
    def forward(ctx, x, axes, keepdim):
        m = np.max(x, axis=axes, keepdims=True) if x.size else np.zeros((1,) * x.ndim, x.dtype)
        m = np.where(np.isfinite(m), m, 0)
        with quiet():   # ln 0 = -inf
            y = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
        ctx.save_for_backward(x, y)
        ctx.axes = axes
        return y if keepdim else np.squeeze(y, axis=axes)

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gk = g.reshape(y.shape)
        with quiet():   # -inf - (-inf) = NaN
            return gk * np.exp(x - y), None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        y = LogSumExp.apply(x, ctx.axes, True)
        return g.reshape(y.shape) * (x - y).exp(), None, None


class LogCumSumExp(Function):
    """y_i = ln sum_{j <= i} e**x_j along ``axis`` (np.logaddexp.accumulate: no overflow, and no
    underflow of the small terms beside a large one).

    dL/dx_j = sum_{i >= j} g_i e**(x_j - y_i). Formed in the log domain so that nothing
    overflows: with g split into its positive and negative parts,
        dL/dx_j = e**(x_j + r+_j) - e**(x_j + r-_j),  r+-_j = ln sum_{i >= j} g+-_i e**(-y_i),
    r computed by the same accumulation run backwards along the dim."""

    @staticmethod
    def forward(ctx, x, axis):
        y = _accumulated(np.logaddexp.accumulate, x, axis) if x.size else x.copy()
        ctx.save_for_backward(x, y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        axis = ctx.axis
        if not x.size:
            return g.copy(), None

        def reversed_log_sum(part):
            with np.errstate(divide="ignore"):
                terms = np.log(part) - y
            return np.flip(np.logaddexp.accumulate(np.flip(terms, axis), axis=axis), axis)

        with np.errstate(over="ignore", invalid="ignore"):
            plus = np.exp(x + reversed_log_sum(np.maximum(g, 0)))
            minus = np.exp(x + reversed_log_sum(np.maximum(-g, 0)))
        return (plus - minus).astype(x.dtype, copy=False), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        """dL/dx_j = sum_{i >= j} g_i e**(x_j - y_i) on Tensors, as an (n, n) weight matrix per row
        (every weight <= 1, since y_i >= x_j for i >= j: nothing overflows; quadratic in the dim's
        length, where backward's log-domain scan is linear)."""
        x = inputs[0]
        if not x.numel():
            return g * 1, None
        axis = ctx.axis
        xl = x.movedim(axis, -1)
        yl = LogCumSumExp.apply(x, axis).movedim(axis, -1)
        n = x.shape[axis]
        later = np.tril(np.ones((n, n), dtype=bool))                    # [i, j]: i >= j
        expo = Where.apply(later, xl.unsqueeze(-2) - yl.unsqueeze(-1), -np.inf)
        dx = (g.movedim(axis, -1).unsqueeze(-1) * expo.exp()).sum(-2)
        return dx.movedim(-1, axis), None


def logcumsumexp(x, dim):
    """log(cumsum(exp(x))) along ``dim``, for floating tensors only (PyTorch has no integer version,
    though its logsumexp promotes integers)."""
    if x.dtype.kind not in "fV":
        raise DtypeNotImplementedError(f'"logcumsumexp" is not implemented for {x.dtype} tensors (as PyTorch: '
                                       "floating point only)")
    if x.ndim == 0:
        return LogCumSumExp.apply(x.reshape(1), 0).reshape(())
    return LogCumSumExp.apply(x, normalize_dim(dim, x.ndim, "logcumsumexp"))


def _dtype_arg(x, dtype):
    """x in ``dtype``; without one, bool and integer tensors in int64 (PyTorch's prod, cumsum and
    cumprod accumulate them there) and others in their own dtype."""
    if dtype is None:
        return x.to(int64) if x.dtype.kind in "biu" and x.dtype != int64 else x
    return x.to(dtype)


def prod(x, dim=None, keepdim=False, *, dtype=None):
    """The product over ``dim`` (all elements if None). Bool and integer tensors multiply in int64
    unless ``dtype`` says otherwise (``dtype=md.bool``: whether all are non-zero), as PyTorch."""
    x = _dtype_arg(x, dtype)
    axis = None if dim is None else normalize_dim(dim, x.ndim, "prod")
    if axis is not None and x.ndim == 0:
        axis = None
    return Prod.apply(x, axis, keepdim)


def cumsum(x, dim, *, dtype=None):
    x = _dtype_arg(x, dtype)
    if x.ndim == 0:
        return Cumsum.apply(x.reshape(1), 0).reshape(())
    return Cumsum.apply(x, normalize_dim(dim, x.ndim, "cumsum"))


def cumprod(x, dim, *, dtype=None):
    x = _dtype_arg(x, dtype)
    if x.ndim == 0:
        return Cumprod.apply(x.reshape(1), 0).reshape(())
    return Cumprod.apply(x, normalize_dim(dim, x.ndim, "cumprod"))


def logsumexp(x, dim, keepdim=False):
    x = _floating(x)
    return LogSumExp.apply(x, normalize_dims(dim, x.ndim, "logsumexp"), keepdim)
