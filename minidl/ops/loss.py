"""Losses with PyTorch's semantics: cross_entropy (fused log-softmax + NLL), nll_loss, mse_loss.

Inputs are (N, C) or (N, C, d1, d2, ...) with the classes on dim 1 (or unbatched (C,)).

cross_entropy with class-index targets y, class weights w (1 if none), smoothing e, C classes:
with logp = log_softmax(x, dim=1) and p = softmax(x), each non-ignored element k has

    l_k = (1 - e) * (-w[y_k] logp[k, y_k]) + (e / C) * (-sum_c w[c] logp[k, c])

"mean" divides sum_k l_k by sum_k w[y_k] over non-ignored k (PyTorch's weighted mean, used
for both terms), "sum" sums, "none" returns l. Since d logp_c / dx_j = delta_cj - p_j,

    dl_k/dx_kj = (1 - e) w[y_k] (p_kj - delta_{j, y_k}) + (e / C) (W p_kj - w[j]),   W = sum_c w[c]

which for w = 1 is softmax minus the smoothed one-hot target. Ignored elements get 0.

With class-probability targets t (same shape as x), t <- (1 - e) t + e / C and
l_k = -sum_c w[c] t[k, c] logp[k, c]; "mean" divides by the number of elements N*d1*...;
dl_k/dx_kj = p_kj sum_c w[c] t[k, c] - w[j] t[k, j],  dl_k/dt[k, c] = -(1 - e) w[c] logp[k, c].
"""
import numpy as np

from ..autograd import op_function as _op_function
from ..autograd.op_function import Function
from ..backends import namespace_of
from ._broadcast import unbroadcast
from ._higher_order import constant, keep_where, sum_to
from ._kernel_switch import LAYER
from ._quiet import quiet
from .loss_pointwise import _legacy, elementwise_weight, warn_if_broadcast, weighted_reduction
from .low_precision import float32_compute
from .shape_error import ShapeError
from .softmax import Softmax

REDUCTIONS = ("mean", "sum", "none")


class LossArgumentError(RuntimeError, ValueError):
    """A loss argument out of its range (PyTorch raises RuntimeError; minidl's checks grew
    from NumPy's ValueError, which its callers expect, so this is both)."""


class TargetDtypeError(RuntimeError, TypeError):
    """Class-index targets of a dtype other than int64 or uint8: PyTorch's RuntimeError
    ("expected target dtype to be Long or Byte"), and a TypeError, the wrong type of operand."""


_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.uint8))   # PyTorch's Long and Byte


def _log_softmax(x, xp):
    shifted = x - x.max(axis=1, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=1, keepdims=True))


def _class_shape(a, ndim):
    """a (C,) reshaped to broadcast along dim 1 of an ndim-D array."""
    return a.reshape((1, -1) + (1,) * (ndim - 2))


def _reduce_scale(g, reduction, denom):
    """The per-element factor dL/dl_k of the reduction."""
    if reduction == "none":
        return g
    return g / denom if reduction == "mean" else g


def _class_rows(x):
    """x (N, C, d1, ...) as (M, C) rows of logits, one per element (a copy unless x is 2-D)."""
    if x.ndim == 2:
        return x
    xp = namespace_of(x)
    last = (0,) + tuple(range(2, x.ndim)) + (1,)
    return xp.ascontiguousarray(xp.transpose(x, last)).reshape(-1, x.shape[1])


def _unrow(rows, shape):
    """The inverse of _class_rows: (M, C) rows back to an (N, C, d1, ...) array."""
    if len(shape) == 2:
        return rows
    n = len(shape)
    back = (0, n - 1) + tuple(range(1, n - 1))
    return namespace_of(rows).transpose(rows.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],)), back)


def cross_entropy_forward_reference(x, t, weight, ignore_index, smoothing):
    """Per row k of the logits x (M, C), with class index t_k: (l_k, logp_k, w_k), where
    logp_k = log_softmax(x_k) (M, C), w_k = w[t_k] (1 without weights; 0 where t_k is ignored)
    and l_k the module docstring's loss, exactly 0 where ignored."""
    xp = namespace_of(x)
    C = x.shape[1]
    logp = _log_softmax(x, xp)
    valid = t != ignore_index
    tc = xp.where(valid, t, 0)
    wt = (weight[tc] * valid) if weight is not None else valid.astype(x.dtype)
    loss = -(1.0 - smoothing) * wt * xp.take_along_axis(logp, tc[:, None], axis=1)[:, 0]
    if smoothing:
        wl = logp * weight if weight is not None else logp
        loss = loss - (smoothing / C) * wl.sum(axis=1)
    return xp.where(valid, loss, 0), logp, wt   # an ignored element adds exactly 0 (even with -inf logits)


def cross_entropy_backward_reference(logp, t, wt, weight, ignore_index, smoothing, r):
    """dL/dx for the rows of cross_entropy_forward_reference, r_k = dL/dl_k (M,):
    dx_kj = a_k (p_kj - [j = t_k]) + b_k (W p_kj - w_j), p = exp(logp), a_k = (1 - e) r_k w_k,
    b_k = e r_k / C, both 0 where t_k is ignored (so such a row's gradient is exactly 0,
    whatever r_k is)."""
    xp = namespace_of(logp)
    C = logp.shape[1]
    valid = t != ignore_index
    with np.errstate(invalid="ignore"):
        a = xp.where(valid, (1.0 - smoothing) * r * wt, 0)     # weight of (p - onehot)
        b = xp.where(valid, (smoothing / C) * r, 0)            # weight of (W p - w)
    wsum = weight.sum() if weight is not None else C
    dx = xp.exp(logp) * (a + b * wsum)[:, None]
    if smoothing:
        dx = dx - b[:, None] * (weight if weight is not None else 1.0)
    tc = xp.where(valid, t, 0)[:, None]
    xp.put_along_axis(dx, tc, xp.take_along_axis(dx, tc, axis=1) - a[:, None], axis=1)
    return dx.astype(logp.dtype, copy=False)


CROSS_ENTROPY = LAYER.kernels(("cross_entropy_forward", "cross_entropy_backward"), __name__,
                              cpu="minidl.kernels.cpu.cross_entropy")


@float32_compute   # float16/bfloat16 inputs: computed in float32, rounded once (low_precision.py)
class CrossEntropy(Function):
    """Fused log-softmax + NLL over class indices, one row of logits per element (the
    module docstring's math; ``cross_entropy_forward_reference`` and its kernels)."""

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, reduction, label_smoothing):
        xp = namespace_of(x)
        ctx.impl = CROSS_ENTROPY.select(x)
        rows = _class_rows(x)
        t = target.reshape(-1).copy()   # saved: the caller may change its targets before backward
        loss, logp, wt = ctx.impl.cross_entropy_forward(rows, t, weight, ignore_index, label_smoothing)
        denom = wt.sum()
        ctx.save_for_backward(logp, t, wt, weight)   # log-softmax, not x: x may change after forward
        ctx.args = (reduction, label_smoothing, denom, ignore_index, x.shape)
        if reduction == "none":
            return loss.reshape(target.shape).astype(x.dtype, copy=False)
        total = loss.sum()
        with np.errstate(invalid="ignore", divide="ignore"):
            out = total / denom if reduction == "mean" else total
        if reduction == "mean" and label_smoothing:   # nothing counts: nan, as the 0/0 of the NLL term (PyTorch),
            out = xp.where(denom == 0, np.nan, out)    # not the smoothing term's x/0 = inf
        return xp.asarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        logp, t, wt, weight = ctx.saved_tensors
        reduction, eps, denom, ignore_index, shape = ctx.args
        xp = namespace_of(logp)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = _reduce_scale(g, reduction, denom)
        r = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(r, dtype=logp.dtype).reshape(-1), t.shape))
        dx = ctx.impl.cross_entropy_backward(logp, t, wt, weight, ignore_index, eps, r)
        return _unrow(dx, shape), None, None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x = inputs[0]
        _, t, wt, weight = ctx.saved_tensors
        reduction, eps, denom, ignore_index, shape = ctx.args
        xp = namespace_of(wt)
        C = shape[1]
        t_shape = (shape[0],) + tuple(shape[2:])
        valid = (t != ignore_index).reshape(t_shape)
        r = g / float(denom) if reduction == "mean" else g
        a = keep_where(valid, (1.0 - eps) * r * constant(wt.reshape(t_shape)))     # weight of (p - onehot)
        coef = a
        if eps:
            b = keep_where(valid, (eps / C) * r)                                     # weight of (W p - w)
            coef = a + b * float(weight.sum() if weight is not None else C)
        dx = Softmax.apply(x, 1) * coef.unsqueeze(1)
        if eps:
            dx = dx - b.unsqueeze(1) * (constant(_class_shape(weight, len(shape))) if weight is not None else 1.0)
        onehot = xp.zeros(shape, dtype=wt.dtype)
        xp.put_along_axis(onehot, xp.where(valid, t.reshape(t_shape), 0)[:, None], 1, axis=1)
        return dx - constant(onehot) * a.unsqueeze(1), None, None, None, None, None


@float32_compute   # float16/bfloat16 inputs: computed in float32, rounded once (low_precision.py)
class CrossEntropyProbs(Function):
    """Cross entropy against class probabilities; see the module docstring."""

    @staticmethod
    def forward(ctx, x, target, weight, reduction, label_smoothing):
        xp = namespace_of(x)
        C = x.shape[1]
        logp = _log_softmax(x, xp)
        t = target * (1.0 - label_smoothing) + label_smoothing / C if label_smoothing else target
        wb = _class_shape(weight, x.ndim) if weight is not None else 1.0
        with np.errstate(invalid="ignore"):   # a -inf logit with probability 0: nan, as PyTorch's, unwarned
            loss = -(logp * t * wb).sum(axis=1)
        denom = x.size // C if x.size else 0
        ctx.save_for_backward(logp, t, weight)
        ctx.args = (reduction, label_smoothing, denom)
        if reduction == "none":
            return loss.astype(x.dtype, copy=False)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = loss.sum() / denom if reduction == "mean" else loss.sum()
        return xp.asarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        logp, t, weight = ctx.saved_tensors
        reduction, eps, denom = ctx.args
        xp = namespace_of(logp)
        r = xp.expand_dims(xp.asarray(_reduce_scale(g, reduction, denom)), 1) if reduction == "none" \
            else _reduce_scale(g, reduction, denom)
        wb = _class_shape(weight, logp.ndim) if weight is not None else 1.0
        tw = t * wb
        nx, nt = ctx.needs_input_grad[:2]
        dx = dt = None
        with np.errstate(invalid="ignore"):
            if nx:
                dx = (r * (xp.exp(logp) * tw.sum(axis=1, keepdims=True) - tw)).astype(logp.dtype, copy=False)
            if nt:
                dt = (-(1.0 - eps) * r * logp * wb).astype(logp.dtype, copy=False)
        return dx, dt, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        x, target = inputs[:2]
        _, _, weight = ctx.saved_tensors
        reduction, eps, denom = ctx.args
        logp = x.log_softmax(1)
        t = target * (1.0 - eps) + eps / x.shape[1] if eps else target
        r = g.unsqueeze(1) if reduction == "none" else (g / denom if reduction == "mean" else g)
        wb = constant(_class_shape(weight, x.ndim)) if weight is not None else 1.0
        tw = t * wb
        nx, nt = ctx.needs_input_grad[:2]
        dx = r * (logp.exp() * tw.sum(1, keepdim=True) - tw) if nx else None
        dt = -(1.0 - eps) * r * logp * wb if nt else None
        return dx, dt, None, None, None


class NLLLoss(Function):
    """l_k = -w[y_k] x[k, y_k] over non-ignored k, reduced as cross_entropy's NLL term;
    dl_k/dx[k, j] = -w[y_k] delta_{j, y_k}."""

    @staticmethod
    def forward(ctx, x, target, weight, ignore_index, reduction):
        xp = namespace_of(x)
        valid = target != ignore_index
        t = xp.where(valid, target, 0)[:, None]
        wt = (weight[t[:, 0]] * valid) if weight is not None else valid.astype(x.dtype)
        loss = xp.where(valid, -wt * xp.take_along_axis(x, t, axis=1)[:, 0], 0)
        denom = wt.sum()
        ctx.save_for_backward(t, wt, valid)
        ctx.args = (x.shape, x.dtype, reduction, denom)
        if reduction == "none":
            return loss.astype(x.dtype, copy=False)
        with np.errstate(invalid="ignore", divide="ignore"):
            out = loss.sum() / denom if reduction == "mean" else loss.sum()
        return xp.asarray(out, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        t, wt, valid = ctx.saved_tensors
        shape, dtype, reduction, denom = ctx.args
        xp = namespace_of(wt)
        with np.errstate(invalid="ignore", divide="ignore"):
            r = _reduce_scale(g, reduction, denom)
            picked = xp.where(valid, -r * wt, 0)   # ignored elements get exactly 0, as in CrossEntropy
        dx = xp.zeros(shape, dtype=dtype)
        xp.put_along_axis(dx, t, xp.expand_dims(picked, 1).astype(dtype), axis=1)
        return dx, None, None, None, None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        t, wt, valid = ctx.saved_tensors
        shape, dtype, reduction, denom = ctx.args
        xp = namespace_of(wt)
        r = g / float(denom) if reduction == "mean" else g
        picked = keep_where(valid, -r * constant(wt))
        onehot = xp.zeros(shape, dtype=dtype)
        xp.put_along_axis(onehot, t, 1, axis=1)
        return constant(onehot) * picked.unsqueeze(1), None, None, None, None


class MSELoss(Function):
    """l = (a - b)**2 elementwise (broadcast), reduced;  dl/da = 2 (a - b) r,  dl/db = -2 (a - b) r."""

    @staticmethod
    def forward(ctx, a, b, reduction):
        xp = namespace_of(a if hasattr(a, "shape") else b)
        ctx.shapes = (np.shape(a), np.shape(b))
        ctx.reduction = reduction
        with quiet():   # inf - inf, an overflowing square, an empty mean's 0 / 0: NaN or inf, unwarned as PyTorch's
            d = a - b
            sq = d * d
            ctx.save_for_backward(d)
            if reduction == "none":
                return sq
            return xp.asarray(sq.sum() / sq.size if reduction == "mean" else sq.sum(), dtype=sq.dtype)

    @staticmethod
    def backward(ctx, g):
        (d,) = ctx.saved_tensors
        r = g / d.size if ctx.reduction == "mean" else g
        gd = (2 * d * r).astype(d.dtype, copy=False)
        na, nb = ctx.needs_input_grad[:2]
        return (unbroadcast(gd, ctx.shapes[0]) if na else None), (unbroadcast(-gd, ctx.shapes[1]) if nb else None), None

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        (d,) = ctx.saved_tensors
        a, b = inputs[:2]
        if a is not None and b is not None:
            diff = a - b
        else:          # one operand is an array: d, plus the other's (zero) variation
            t = a if a is not None else b
            diff = constant(d) + (t - constant(t._data)) * (1 if a is not None else -1)
        r = g / d.size if ctx.reduction == "mean" else g
        gd = 2 * diff * r
        na, nb = ctx.needs_input_grad[:2]
        return (sum_to(gd, ctx.shapes[0]) if na else None), (sum_to(-gd, ctx.shapes[1]) if nb else None), None


# functional entry points -----------------------------------------------------------------

def _check_reduction(reduction, op):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")


def _raw(a):
    return getattr(a, "_data", a)


def _index_target(input, target, op, ignore_index):
    """target as an integer array of the input's shape without dim 1, checked."""
    t = _raw(target)
    if not hasattr(t, "dtype"):
        t = np.asarray(t)
    if t.dtype not in _INDEX_DTYPES:   # int32 too: PyTorch takes Long or Byte only
        raise TargetDtypeError(f"{op}: expected class-index targets of dtype int64 (or uint8), or class "
                               f"probabilities of the input's shape {list(input.shape)}, got dtype {t.dtype} and "
                               f"shape {list(t.shape)}")
    expected = (input.shape[0],) + tuple(input.shape[2:])
    if tuple(t.shape) != expected:
        raise ShapeError(f"{op}: expected target of shape {list(expected)} for input of shape {list(input.shape)}, "
                         f"got {list(t.shape)}")
    C = input.shape[1]
    bad = (t != ignore_index) & ((t < 0) | (t >= C))
    if type(t) is not np.ndarray:   # checked where t lives, reported at the next read (no round trip)
        from ..backends import device_of, get
        get(device_of(t)).assert_all(~bad, IndexError, f"{op}: a target is out of bounds for {C} classes "
                                                       f"(checked on device {device_of(t)!r})")
    elif bad.any():
        raise IndexError(f"{op}: target {int(t[bad].reshape(-1)[0])} is out of bounds for {C} classes")
    return t.astype(np.int64, copy=False)


def _weight(weight, C, op):
    if weight is None:
        return None
    w = _raw(weight)
    if tuple(w.shape) != (C,):
        raise ShapeError(f"{op}: weight must have shape [{C}] (one per class), got {list(w.shape)}")
    return w


def _floating_input(input, op):
    """PyTorch's NotImplementedError for integer or bool logits (its log_softmax and NLL
    kernels exist for floating dtypes only)."""
    if getattr(input, "dtype", None) is not None and np.dtype(input.dtype).kind not in "fV":
        raise NotImplementedError(f"\"{op}\" not implemented for '{input.dtype}': expected a floating point input")


def _batch(input, target, op):
    """Unbatched (C,) input with a scalar target -> (1, C) and (1,)."""
    if input.ndim == 1:
        from .shape import unsqueeze
        t = _raw(target)
        t = np.asarray(t) if not hasattr(t, "dtype") else t
        if t.dtype.kind in "fV":   # V: bfloat16
            return unsqueeze(input, 0), (unsqueeze(target, 0) if hasattr(target, "_data") else t[None]), True
        return unsqueeze(input, 0), t.reshape(1), True
    if input.ndim < 2:
        raise LossArgumentError(f"{op}: expected input of shape (C,), (N, C) or (N, C, d1, ...), got "
                                f"{list(input.shape)}")
    return input, target, False


def _unbatch_loss(loss, reduction, unbatched):
    if unbatched and reduction == "none":
        from .shape import squeeze
        return squeeze(loss, 0)
    return loss


def _same_float_dtype(x, target):
    """Logits and class probabilities of different floating dtypes, both cast to PyTorch's
    promotion of the two (float32 logits with float64 probabilities give a float64 loss; with
    float16 ones, a float32 loss)."""
    t = _raw(target)
    if t.dtype == x.dtype:
        return x, target
    from .._namespace_arrange import promote_types
    to = promote_types(x.dtype, t.dtype)
    if not hasattr(target, "_data"):
        from ..tensor.factories import tensor
        target = tensor(t)
    return (x if x.dtype == to else x.to(to)), (target if target.dtype == to else target.to(to))


def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0, *,
                  size_average=None, reduce=None):
    """As ``torch.nn.functional.cross_entropy``: ``target`` holds class indices (an int64
    Tensor, ndarray or list, shape (N, d1, ...)) or class probabilities (input's shape).
    PyTorch's deprecated ``size_average`` and ``reduce`` are taken by keyword (and map to a
    reduction as PyTorch maps them)."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise LossArgumentError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    _floating_input(input, "cross_entropy")
    x, target, unbatched = _batch(input, target, "cross_entropy")
    C = x.shape[1]
    t = _raw(target)
    if hasattr(t, "dtype") and t.dtype.kind in "fV":
        if tuple(t.shape) != tuple(x.shape):
            raise ShapeError(f"cross_entropy: class-probability target must have the input's shape "
                             f"{list(x.shape)}, got {list(t.shape)}")
        x, target = _same_float_dtype(x, target)
        w = _weight(weight, C, "cross_entropy")
        loss = CrossEntropyProbs.apply(x, target, w, reduction, float(label_smoothing))
    else:
        w = _weight(weight, C, "cross_entropy")
        t = _index_target(x, target, "cross_entropy", ignore_index)
        loss = CrossEntropy.apply(x, t, w, int(ignore_index), reduction, float(label_smoothing))
    return _unbatch_loss(loss, reduction, unbatched)


def nll_loss(input, target, weight=None, ignore_index=-100, reduction="mean", *, size_average=None, reduce=None):
    """As ``torch.nn.functional.nll_loss``: ``input`` holds log-probabilities on dim 1
    (``size_average`` and ``reduce`` by keyword, as cross_entropy)."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction, "nll_loss")
    _floating_input(input, "nll_loss")
    x, target, unbatched = _batch(input, target, "nll_loss")
    w = _weight(weight, x.shape[1], "nll_loss")
    t = _index_target(x, target, "nll_loss", ignore_index)
    return _unbatch_loss(NLLLoss.apply(x, t, w, int(ignore_index), reduction), reduction, unbatched)


def _mse_dtypes(input, target):
    """PyTorch's dtypes for mse_loss: an integer (or bool) operand with a floating one takes
    the floating one's dtype (an int64 target with float32 input is a float32 loss, where
    NumPy would promote to float64); two integer operands are its NotImplementedError."""
    kinds = [np.dtype(a.dtype).kind if isinstance(a, _op_function.Tensor) else None for a in (input, target)]
    if all(k is not None and k not in "fVc" for k in kinds):
        raise NotImplementedError(f"\"mse_loss\" not implemented for '{input.dtype}': expected a floating point input "
                                  f"or target")
    if None in kinds or all(k in "fVc" for k in kinds):
        return input, target
    if kinds[0] in "fVc":
        return input, target.to(input.dtype)
    return input.to(target.dtype), target


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """As ``torch.nn.functional.mse_loss``; shapes must be equal or broadcast. ``weight`` (the
    input's shape) weighs each squared error, and "mean" is then sum(w d**2) / sum(w)."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction, "mse_loss")
    try:
        np.broadcast_shapes(np.shape(_raw(input)), np.shape(_raw(target)))
    except ValueError:
        raise ShapeError(f"mse_loss: input shape {list(np.shape(_raw(input)))} and target shape "
                         f"{list(np.shape(_raw(target)))} do not broadcast") from None
    warn_if_broadcast(input, target)
    input, target = _mse_dtypes(input, target)
    if weight is not None:
        w = elementwise_weight("mse_loss", weight, input)
        return weighted_reduction(MSELoss.apply(input, target, "none"), w, reduction, True)
    return MSELoss.apply(input, target, reduction)
