"""Losses that are a function of one input element and one target element, then reduced:
binary_cross_entropy (on probabilities and on logits), l1_loss, smooth_l1_loss, huber_loss
and kl_div, with PyTorch's semantics.

Each loss is l_k = w_k f(x_k, y_k) over the broadcast of input x and target y (w an optional
elementwise weight, 1 if none), reduced by "none" (l itself), "sum", "mean" (sum / number of
elements) or, for kl_div, "batchmean" (sum / x.shape[0]). With r the reduction's factor
(1 for "sum", 1/n for the means), the gradients are

    dL/dx_k = r w_k df/dx (x_k, y_k),     dL/dy_k = r w_k df/dy (x_k, y_k),

summed back over broadcast dims. Each class below states f and its two partials.
The weights of the binary cross entropies (``weight``, ``pos_weight``) are constants here: they
get no gradient (PyTorch refuses one that requires it). The ``weight`` of l1_loss, mse_loss and
huber_loss is PyTorch's newer, composed one: a Tensor of the input's shape multiplying the
unreduced loss with recorded ops (so it gets dL/dw_k = r f(x_k, y_k)), and "mean" is
sum(w l) / sum(w) for l1_loss and mse_loss but sum(w l) / n for huber_loss, as PyTorch's.
"""
import warnings

import numpy as np

from ..autograd.op_function import Function
from ..autograd.grad_mode import is_grad_enabled
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ..tensor.tensor import Tensor
from ._broadcast import unbroadcast
from ._higher_order import constant, keep_where, sum_to


class PointwiseLoss(Function):
    """The shared forward and backward; subclasses define ``loss`` (f) and ``partials``
    (df/dx, df/dy), both on arrays, with the loss's constants as extra arguments."""

    @staticmethod
    def loss(xp, x, y, *params):
        raise NotImplementedError

    @staticmethod
    def partials(xp, x, y, *params):
        raise NotImplementedError

    @classmethod
    def forward(cls, ctx, x, y, weight, reduction, *params):
        xp = namespace_of(x)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            l = cls.loss(xp, x, y, *params)
        if weight is not None:
            l = l * weight
        l = l.astype(x.dtype, copy=False)
        ctx.save_for_backward(x, y, weight)
        ctx.args = (reduction, params, np.shape(y), l.shape)
        ctx.count = (l.shape[0] if l.ndim else 1) if reduction == "batchmean" else l.size
        if reduction == "none":
            return l
        total = l.sum()
        if reduction != "sum":
            with np.errstate(divide="ignore", invalid="ignore"):
                total = total / ctx.count   # an empty mean is nan, as PyTorch's
        return xp.asarray(total, dtype=x.dtype)

    @classmethod
    def backward(cls, ctx, g):
        x, y, weight = ctx.saved_tensors
        reduction, params, y_shape, full = ctx.args
        xp = namespace_of(x)
        with np.errstate(divide="ignore", invalid="ignore"):   # an empty mean's count is 0
            r = g if reduction in ("none", "sum") else g / ctx.count
        if weight is not None:
            r = r * weight
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            dx, dy = cls.partials(xp, x, y, *params)
        need_x, need_y = ctx.needs_input_grad[:2]
        gx = unbroadcast(xp.broadcast_to(r * dx, full).astype(x.dtype), x.shape) if need_x else None
        gy = unbroadcast(xp.broadcast_to(r * dy, full).astype(x.dtype), y_shape) if need_y else None
        return (gx, gy, None, None) + (None,) * len(params)


def pointwise_differentiable_backward(ctx, inputs, g, partials):
    """PointwiseLoss.backward on Tensors, for the subclasses' ``differentiable_backward``:
    ``partials(x, y, *params)`` gives (df/dx, df/dy) as Tensors of the input and target Tensors
    (the arrays saved, as constants, where an operand was not a Tensor); the weight is a constant."""
    x_arr, y_arr, weight = ctx.saved_tensors
    reduction, params, y_shape, full = ctx.args
    x = inputs[0] if inputs[0] is not None else constant(x_arr)
    y = inputs[1] if inputs[1] is not None else constant(y_arr)
    r = g if reduction in ("none", "sum") else g / ctx.count
    if weight is not None:
        r = r * constant(weight)
    dx, dy = partials(x, y, *params)
    need_x, need_y = ctx.needs_input_grad[:2]
    gx = sum_to((r * dx).expand(*full), x.shape) if need_x else None
    gy = sum_to((r * dy).expand(*full), y_shape) if need_y else None
    return (gx, gy, None, None) + (None,) * len(params)


def _softplus_tensor(z):
    """softplus(z) = log(1 + e**z) = -log s(-z) for a Tensor, with LogSigmoid's stable form."""
    from .activation_elementwise import LogSigmoid
    return -LogSigmoid.apply(-z)


def _log_clamped(xp, a):
    # PyTorch clamps each log at -100, so a probability of exactly 0 or 1 gives a finite loss
    return xp.maximum(xp.log(a), -100.0)


class BinaryCrossEntropy(PointwiseLoss):
    """f = -(y log x + (1 - y) log(1 - x)), each log clamped at -100;
    df/dx = (x - y) / max(x (1 - x), 1e-12),   df/dy = log(1 - x) - log x = -logit(x), with the
    logs not clamped (PyTorch's target gradient: +inf at x = 0, -inf at x = 1)."""

    @staticmethod
    def loss(xp, x, y):
        return -(y * _log_clamped(xp, x) + (1 - y) * _log_clamped(xp, 1 - x))

    @staticmethod
    def partials(xp, x, y):
        return (x - y) / xp.maximum(x * (1 - x), 1e-12), xp.log1p(-x) - xp.log(x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        return pointwise_differentiable_backward(
            ctx, inputs, g, lambda x, y: ((x - y) / (x * (1 - x)).clamp(min=1e-12), (-x).log1p() - x.log()))


def _softplus(xp, z):
    return xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))


def _sigmoid(xp, z):
    e = xp.exp(-xp.abs(z))   # never overflows
    return xp.where(z >= 0, 1 / (1 + e), e / (1 + e))


class BinaryCrossEntropyWithLogits(PointwiseLoss):
    """With s = sigmoid and softplus(z) = log(1 + e**z) (so log s(x) = -softplus(-x) and
    log(1 - s(x)) = -softplus(x)), and pos_weight p (1 if none):
    f = p y softplus(-x) + (1 - y) softplus(x);
    df/dx = (1 - y) s(x) - p y s(-x),   df/dy = p softplus(-x) - softplus(x)."""

    @staticmethod
    def loss(xp, x, y, pos_weight):
        p = 1.0 if pos_weight is None else pos_weight
        return p * y * _softplus(xp, -x) + (1 - y) * _softplus(xp, x)

    @staticmethod
    def partials(xp, x, y, pos_weight):
        p = 1.0 if pos_weight is None else pos_weight
        return (1 - y) * _sigmoid(xp, x) - p * y * _sigmoid(xp, -x), p * _softplus(xp, -x) - _softplus(xp, x)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        def partials(x, y, pos_weight):
            p = 1.0 if pos_weight is None else constant(pos_weight)
            return ((1 - y) * x.sigmoid() - p * y * (-x).sigmoid(),
                    p * _softplus_tensor(-x) - _softplus_tensor(x))
        return pointwise_differentiable_backward(ctx, inputs, g, partials)


def _sign(xp, d):
    """sign(d) with PyTorch's sign(nan) = 0 (NumPy's is nan)."""
    return xp.where(d != d, 0, xp.sign(d))


class L1(PointwiseLoss):
    """f = |x - y|;  df/dx = sign(x - y) (0 at x = y and where x - y is nan, as PyTorch),
    df/dy = -df/dx."""

    @staticmethod
    def loss(xp, x, y):
        return xp.abs(x - y)

    @staticmethod
    def partials(xp, x, y):
        s = _sign(xp, x - y)
        return s, -s

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        def partials(x, y):
            s = constant(_sign(np, x._data - y._data).astype(x.dtype))
            return s, -s
        return pointwise_differentiable_backward(ctx, inputs, g, partials)


class SmoothL1(PointwiseLoss):
    """With d = x - y: f = d**2 / (2 beta) where |d| < beta, |d| - beta / 2 elsewhere
    (beta = 0 is l1_loss, with its gradient 0 at a nan d); df/dx = d / beta where |d| < beta, sign(d)
    elsewhere;  df/dy = -df/dx."""

    @staticmethod
    def loss(xp, x, y, beta):
        d = xp.abs(x - y)
        return d if beta == 0 else xp.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)

    @staticmethod
    def partials(xp, x, y, beta):
        d = x - y
        s = _sign(xp, d) if beta == 0 else xp.where(xp.abs(d) < beta, d / beta, xp.sign(d))
        return s, -s

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        def partials(x, y, beta):
            d = x - y
            a = d._data
            if beta == 0:
                s = constant(_sign(np, a).astype(x.dtype))
            else:
                near = np.abs(a) < beta
                s = keep_where(near, d / beta) + constant(np.where(near, 0, np.sign(a)).astype(x.dtype))
            return s, -s
        return pointwise_differentiable_backward(ctx, inputs, g, partials)


class Huber(PointwiseLoss):
    """With d = x - y: f = d**2 / 2 where |d| < delta, delta (|d| - delta / 2) elsewhere
    (= delta * smooth_l1 with beta = delta); df/dx = clamp(d, -delta, delta);  df/dy = -df/dx."""

    @staticmethod
    def loss(xp, x, y, delta):
        d = xp.abs(x - y)
        return xp.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta))

    @staticmethod
    def partials(xp, x, y, delta):
        s = xp.clip(x - y, -delta, delta)
        return s, -s

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        def partials(x, y, delta):
            s = (x - y).clamp(-delta, delta)
            return s, -s
        return pointwise_differentiable_backward(ctx, inputs, g, partials)


class KLDiv(PointwiseLoss):
    """x holds log-probabilities, y probabilities (or log-probabilities with log_target).
    f = y (log y - x), 0 where y = 0;  df/dx = -y,  df/dy = log y + y / y - x, which is nan at
    y = 0 (PyTorch's: the 0 / 0 of the derivative of its xlogy(y, y)).
    log_target: f = e**y (y - x);  df/dx = -e**y,  df/dy = e**y (y - x + 1)."""

    @staticmethod
    def loss(xp, x, y, log_target):
        if log_target:
            return xp.exp(y) * (y - x)
        return xp.where(y == 0, 0, y * xp.log(xp.where(y == 0, 1, y))) - y * x

    @staticmethod
    def partials(xp, x, y, log_target):
        if log_target:
            e = xp.exp(y)
            return -e, e * (y - x + 1)
        return -y, xp.log(y) + y / y - x

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        def partials(x, y, log_target):
            if log_target:
                e = y.exp()
                return -e, e * (y - x + 1)
            return -y, y.log() + y / y - x
        return pointwise_differentiable_backward(ctx, inputs, g, partials)


# functional entry points -----------------------------------------------------------------

_REDUCTIONS = ("none", "mean", "sum")


def _check_reduction(reduction, allowed=_REDUCTIONS):
    if reduction not in allowed:
        raise ValueError(f"{reduction} is not a valid value for reduction; expected one of "
                         f"{', '.join(repr(r) for r in allowed)}")


def _warn_legacy(size_average, reduce):
    """PyTorch's UserWarning for the deprecated flags, naming the reduction they stand for."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "none" if not reduce else ("mean" if size_average else "sum")
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
                  UserWarning, stacklevel=4)


def _legacy(size_average, reduce, reduction):
    """PyTorch's deprecated size_average / reduce flags, mapped to a reduction as PyTorch maps them."""
    if size_average is None and reduce is None:
        return reduction
    _warn_legacy(size_average, reduce)
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def _operands(op, input, target, same_shape=None):
    """The input's and target's arrays as the op needs them: a floating input, a target of
    the same dtype (integer or bool targets are converted, as PyTorch promotes them), and
    shapes that broadcast (or that are equal, with ``same_shape`` naming PyTorch's message)."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected input to be a Tensor, got {type(input).__name__}")
    if input.dtype.kind != "f":
        raise RuntimeError(f"{op}: expected a floating point input, got dtype {input.dtype}")
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}: expected target to be a Tensor, got {type(target).__name__}")
    if target.dtype.kind != "f":
        target = target.to(input.dtype)
    check_same_dtype(op, [("input", input), ("target", target)])
    if same_shape is not None:
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(same_shape.format(target=list(target.shape), input=list(input.shape)))
    else:
        _broadcastable(op, "target", target.shape, input.shape)
    return input, target


def _floating_target(op, target):
    """The binary cross entropies take probabilities as targets: an integer or bool target is
    PyTorch's RuntimeError, not promoted (its kernels want the input's floating dtype)."""
    if isinstance(target, Tensor) and target.dtype.kind not in "fV":
        raise RuntimeError(f"{op}: expected a floating point target (probabilities, e.g. target.float()), got dtype "
                           f"{target.dtype}")


def warn_if_broadcast(input, target):
    """PyTorch's warning for the regression losses: a (N, 1) input against an (N,) target
    broadcasts to (N, N) and trains on the wrong loss without failing."""
    si, st = tuple(np.shape(getattr(input, "_data", input))), tuple(np.shape(getattr(target, "_data", target)))
    if si != st:
        warnings.warn(f"Using a target size ({list(st)}) that is different to the input size ({list(si)}). This "
                      "will likely lead to incorrect results due to broadcasting. Please ensure they have the "
                      "same size.", UserWarning, stacklevel=3)


def _broadcastable(op, name, shape, to):
    try:
        np.broadcast_shapes(tuple(shape), tuple(to))
    except ValueError:
        raise RuntimeError(f"{op}: {name} of shape {list(shape)} does not broadcast with input of shape "
                           f"{list(to)}") from None


def _weight_array(op, name, weight, input, shape=None):
    """A constant weight's array, checked to broadcast to ``shape`` (default: the input's)
    without enlarging it, in the input's dtype. The op gives it no gradient, so a weight that
    requires one (with grad mode on) is refused, as PyTorch refuses it."""
    if weight is None:
        return None
    if not isinstance(weight, Tensor):
        raise TypeError(f"{op}: expected {name} to be a Tensor or None, got {type(weight).__name__}")
    if weight.requires_grad and is_grad_enabled():
        raise RuntimeError(f"The function '{op}' is not differentiable with respect to argument '{name}'. "
                           "This input cannot have requires_grad True.")
    shape = tuple(input.shape) if shape is None else shape
    try:
        ok = np.broadcast_shapes(tuple(weight.shape), shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise RuntimeError(f"{op}: expected {name} broadcastable to the input's shape {list(shape)}, "
                           f"got {name} of shape {list(weight.shape)}")
    check_same_dtype(op, [("input", input), (name, weight)])
    return weight.detach()._data


def elementwise_weight(op, weight, input):
    """The ``weight`` of l1_loss, mse_loss and huber_loss (None or a Tensor of the input's
    shape exactly: PyTorch's ValueError for any other, a broadcastable one included)."""
    if weight is None:
        return None
    if not isinstance(weight, Tensor):
        raise TypeError(f"{op}: expected weight to be a Tensor or None, got {type(weight).__name__}")
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"Weights and input must have the same size: {op} got weight of shape "
                         f"{list(weight.shape)} for input of shape {list(input.shape)}")
    check_same_dtype(op, [("input", input), ("weight", weight)])
    return weight


def weighted_reduction(loss, weight, reduction, mean_over_weights):
    """The unreduced ``loss`` (a Tensor) times ``weight``, reduced with recorded ops: "none"
    w l, "sum" sum(w l), "mean" sum(w l) / sum(w) with ``mean_over_weights`` (l1_loss,
    mse_loss), else sum(w l) / n (huber_loss), as PyTorch's."""
    weighted = loss * weight
    if reduction == "none":
        return weighted
    if reduction == "sum" or mean_over_weights:
        total = weighted.sum()
        return total / weight.sum() if reduction == "mean" else total
    return weighted.mean()


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """As ``torch.nn.functional.binary_cross_entropy``: ``input`` holds probabilities in
    [0, 1], ``target`` has its shape; ``weight`` rescales each element (broadcast)."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    _floating_target("binary_cross_entropy", target)
    x, y = _operands("binary_cross_entropy", input, target,
                     same_shape="Using a target size ({target}) that is different to the input size ({input}) "
                                "is deprecated. Please ensure they have the same size.")
    w = _weight_array("binary_cross_entropy", "weight", weight, x)
    data = x._data
    if type(data) is np.ndarray and data.size and not ((data >= 0) & (data <= 1)).all():
        bad = data[~((data >= 0) & (data <= 1))].reshape(-1)[0]
        raise RuntimeError(f"binary_cross_entropy: all elements of input should be between 0 and 1, got {bad}")
    return BinaryCrossEntropy.apply(x, y, w, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """As ``torch.nn.functional.binary_cross_entropy_with_logits``: sigmoid and binary cross
    entropy in one stable op. ``pos_weight`` weighs the positive term, broadcast along the
    last dim (one weight per class for a multi-label (N, C) input)."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    op = "binary_cross_entropy_with_logits"
    _floating_target(op, target)
    x, y = _operands(op, input, target, same_shape="Target size ({target}) must be the same as input size ({input})")
    w = _weight_array(op, "weight", weight, x)
    p = _weight_array(op, "pos_weight", pos_weight, x)
    return BinaryCrossEntropyWithLogits.apply(x, y, w, reduction, p)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """As ``torch.nn.functional.l1_loss``: mean (or sum) of |input - target|; ``weight`` (the
    input's shape) weighs each element, and "mean" is then sum(w |d|) / sum(w)."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, y = _operands("l1_loss", input, target)
    warn_if_broadcast(x, y)
    w = elementwise_weight("l1_loss", weight, x)
    if w is not None:
        return weighted_reduction(L1.apply(x, y, None, "none"), w, reduction, True)
    return L1.apply(x, y, None, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """As ``torch.nn.functional.smooth_l1_loss``: quadratic within ``beta`` of the target, linear beyond."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss does not support negative values for beta; expected beta >= 0, "
                           f"got {beta}")
    x, y = _operands("smooth_l1_loss", input, target)
    warn_if_broadcast(x, y)
    return SmoothL1.apply(x, y, None, reduction, float(beta))


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """As ``torch.nn.functional.huber_loss``: quadratic within ``delta`` of the target, then
    linear with slope ``delta``; ``weight`` (the input's shape) rescales each element, and
    "mean" is then sum(w l) / n."""
    _check_reduction(reduction)
    if not delta > 0:
        raise RuntimeError(f"huber_loss does not support non-positive values for delta; expected delta > 0, "
                           f"got {delta}")
    x, y = _operands("huber_loss", input, target)
    warn_if_broadcast(x, y)
    w = elementwise_weight("huber_loss", weight, x)
    if w is not None:
        return weighted_reduction(Huber.apply(x, y, None, "none", float(delta)), w, reduction, False)
    return Huber.apply(x, y, None, reduction, float(delta))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """As ``torch.nn.functional.kl_div``: ``input`` holds log-probabilities; ``target``
    probabilities (log-probabilities with ``log_target``). ``reduction="batchmean"`` divides
    the sum by the batch size, which is the KL divergence per sample; "mean" divides by the
    number of elements, as PyTorch's (which warns about it). Integer targets are refused, as
    PyTorch's."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction, _REDUCTIONS + ("batchmean",))
    if isinstance(target, Tensor) and target.dtype.kind in "biu":
        raise RuntimeError(f"kl_div: Integral inputs not supported (got a target of dtype {target.dtype})")
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    x, y = _operands("kl_div", input, target)
    return KLDiv.apply(x, y, None, reduction, bool(log_target))
