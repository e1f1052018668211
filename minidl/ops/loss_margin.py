"""Margin and logistic losses for classification, with PyTorch's semantics: soft_margin_loss,
multilabel_soft_margin_loss, multi_margin_loss, multilabel_margin_loss and
triplet_margin_with_distance_loss.

soft_margin_loss, multi_margin_loss and multilabel_margin_loss are one Function each, with
the backward below; multilabel_soft_margin_loss and triplet_margin_with_distance_loss are
written as PyTorch writes them, compositions of recorded ops, so their weight, target and
(user-given) distance get the chain rule's gradients. In the two multi-class hinges a term
counts only where it is strictly positive (z > 0), as in PyTorch's kernels; the triplet hinge is
``clamp(min=0)``, whose gradient passes at 0, as PyTorch's ``clamp_min``. Reductions: "none"
(per sample), "sum", "mean" (sum / number of samples; an empty mean is nan).

The class targets are checked on the host (a device target is copied there first: every index is
in range before any kernel reads with it); the hinges compute in the input's array namespace, so
on its device, the target's class picked out by comparison with the class numbers.
"""
import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..autograd.grad_mode import is_grad_enabled
from ..tensor.dtype import check_same_dtype
from ..tensor.tensor import Tensor
from .activation_elementwise import logsigmoid
from .distance import _floating_operands, pairwise_distance
from .elementwise_math import minimum
from .loss_pointwise import PointwiseLoss, _check_reduction, _legacy, _operands, _sigmoid, _softplus


def _reduced(loss, reduction):
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _reduced_array(loss, reduction):
    """The per-sample losses (an array) reduced: the mean of none is NaN, without a warning."""
    if reduction == "none":
        return loss
    xp = namespace_of(loss)
    with np.errstate(invalid="ignore"):
        if loss.size == 0:   # no kernel for an empty reduction: 0 for the sum, NaN for the mean
            return xp.full((), 0 if reduction == "sum" else np.nan, dtype=loss.dtype)
        return xp.asarray(loss.sum() if reduction == "sum" else loss.mean()).astype(loss.dtype, copy=False)


def _per_sample(xp, g, n, reduction):
    """The gradient of each sample's loss from the reduced loss's gradient g."""
    if reduction == "none":
        return g
    return xp.broadcast_to(g / n if reduction == "mean" else g, (n,))


def _no_grad_for(op, name, t):
    """PyTorch's refusal of a gradient its kernel does not compute (a target, a class weight)."""
    if isinstance(t, Tensor) and t.requires_grad and is_grad_enabled():
        raise RuntimeError(f"The function '{op}' is not differentiable with respect to argument '{name}'. This "
                           f"input cannot have requires_grad True.")


# soft margin -----------------------------------------------------------------------------

class SoftMargin(PointwiseLoss):
    """The logistic loss of a margin y x, y = +1 or -1: f = log(1 + e**(-y x)) = softplus(-y x);
    df/dx = -y sigmoid(-y x). The target is a constant (PyTorch refuses one that requires grad)."""

    @staticmethod
    def loss(xp, x, y):
        return _softplus(xp, -y * x)

    @staticmethod
    def partials(xp, x, y):
        return -y * _sigmoid(xp, -y * x), None


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """As ``torch.nn.functional.soft_margin_loss``: mean (or sum) of log(1 + exp(-y x)) with
    labels y in {1, -1}; ``target`` broadcasts to the input's shape."""
    op = "soft_margin_loss"
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, y = _operands(op, input, target)
    if np.broadcast_shapes(tuple(x.shape), tuple(y.shape)) != tuple(x.shape):
        raise RuntimeError(f"{op}: output with shape {list(x.shape)} doesn't match the broadcast shape "
                           f"{list(np.broadcast_shapes(tuple(x.shape), tuple(y.shape)))} of input and target")
    _no_grad_for(op, "target", y)
    return SoftMargin.apply(x, y, None, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """As ``torch.nn.functional.multilabel_soft_margin_loss``: a binary logistic loss per class
    on the last dim, l = -(y log s(x) + (1 - y) log s(-x)) (s the sigmoid), times ``weight``
    (broadcast), averaged over the C classes: one loss per sample. Composed of logsigmoid and
    arithmetic, so dl/dx = w (s(x) - y) / C, dl/dy = w (log s(-x) - log s(x)) / C and
    dl/dw = l / C."""
    op = "multilabel_soft_margin_loss"
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, y = _operands(op, input, target)
    if x.ndim == 0:
        raise RuntimeError(f"{op}: expected an input with a class dim, (C,) or (N, C), got a 0-d tensor")
    loss = -(y * logsigmoid(x) + (1 - y) * logsigmoid(-x))
    if weight is not None:
        if not isinstance(weight, Tensor):
            raise TypeError(f"{op}: expected weight to be a Tensor or None, got {type(weight).__name__}")
        check_same_dtype(op, [("input", x), ("weight", weight)])
        loss = loss * weight
    return _reduced(loss.sum(-1) / x.shape[-1], reduction)


# multi-class margin ----------------------------------------------------------------------

class MultiMargin(Function):
    """The multi-class hinge loss of Weston and Watkins. For a sample x (C,) of class y, with
    z_i = margin - x_y + x_i and h_i = z_i**p where z_i > 0 and i != y (else 0):

        l = w_y sum_i h_i / C            (w_y = 1 without class weights)
        dl/dx_i = w_y p z_i**(p - 1) / C   for the active i,    dl/dx_y = -sum_i dl/dx_i

    (PyTorch's kernel weighs z**p, not (w_y z)**p as its documentation writes.)"""

    @staticmethod
    def forward(ctx, x, t, w, p, margin, reduction):
        xp = namespace_of(x)
        n, C = x.shape
        ctx.args = (p, reduction)
        if n == 0:   # nothing to gather or sum
            ctx.save_for_backward(x, None, None, None)
            return _reduced_array(xp.zeros(0, x.dtype), reduction)
        is_target = xp.arange(C)[None, :] == t[:, None]             # (n, C): the sample's class
        x_t = xp.take_along_axis(x, t[:, None], axis=1)               # (n, 1)
        z = margin - x_t + x
        active = (z > 0) & ~is_target
        h = xp.where(active, z if p == 1 else z * z, 0)
        wt = w[t] if w is not None else xp.ones(n, x.dtype)
        loss = (wt * h.sum(1) / C).astype(x.dtype, copy=False)
        ctx.save_for_backward(z, active, is_target, wt)
        return _reduced_array(loss, reduction)

    @staticmethod
    def backward(ctx, g):
        z, active, is_target, wt = ctx.saved_tensors
        p, reduction = ctx.args
        xp = namespace_of(g)
        n, C = z.shape
        if n == 0:
            return xp.zeros((0, C), z.dtype), None, None, None, None, None
        coef = (_per_sample(xp, g, n, reduction) * wt / C)[:, None]
        dx = xp.where(active, coef * (1 if p == 1 else 2 * z), 0)
        dx = xp.where(is_target, -dx.sum(1, keepdims=True), dx)    # dl/dx_y = -sum_i dl/dx_i
        return dx.astype(z.dtype, copy=False), None, None, None, None, None


def _class_targets(op, input, target, shape_msg, expect_shape, n_classes, low=0):
    """An integer target as a host int64 array, checked: on the input's device, shape and values in
    [low, n_classes)."""
    if isinstance(target, Tensor):
        if target.device != input.device:
            raise RuntimeError(f"{op}: expected all tensors to be on the same device, but found input on "
                               f"{input.device} and target on {target.device}")
        t = target._data if namespace_of(target._data) is np else target.detach().cpu()._data
    else:
        t = np.asarray(target)
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"{op}: expected a target of integer class indices (int64), got dtype {t.dtype}")
    if not expect_shape(t.shape):
        raise RuntimeError(shape_msg.format(target=list(t.shape)))
    if t.size and (t.min() < low or t.max() >= n_classes):
        bad = t[(t < low) | (t >= n_classes)].reshape(-1)[0]
        raise RuntimeError(f"{op}: target out of range: expected values in [{low}, {n_classes}), got {int(bad)}")
    return t.astype(np.int64, copy=False)


def _class_input(op, input):
    """A floating (C,) or (N, C) input with C > 0 (N may be 0), as PyTorch's margin kernels take."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected input to be a Tensor, got {type(input).__name__}")
    if input.dtype.kind != "f":
        raise NotImplementedError(f"\"{op}\" not implemented for '{input.dtype}': expected a floating point input")
    if not (input.ndim == 1 and input.shape[0] > 0 or input.ndim == 2 and input.shape[1] > 0):
        raise RuntimeError(f"{op}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """As ``torch.nn.functional.multi_margin_loss``: ``input`` (N, C) or (C,) holds class
    scores, ``target`` the class of each sample ((N,), or a 0-d or (1,) for one sample);
    ``weight`` (C,) weighs each sample's loss by its class. See ``MultiMargin``."""
    op = "multi_margin_loss"
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    if p != 1 and p != 2:
        raise ValueError(f"only p == 1 and p == 2 supported, got p={p}")
    if weight is not None and (not isinstance(weight, Tensor) or weight.ndim != 1):
        raise ValueError(f"weight must be one-dimensional, got "
                         f"{f'{weight.ndim}D' if isinstance(weight, Tensor) else type(weight).__name__}")
    _class_input(op, input)
    n = input.shape[0] if input.ndim == 2 else 1
    C = input.shape[-1]
    t = _class_targets(op, input, target, f"{op}: target tensor should be 1-D with size equal to the number of input "
                                   f"samples (batch size). Expected target size [{n}], but got {{target}}. Input "
                                   f"has shape {list(input.shape)}.",
                       lambda s: len(s) <= 1 and int(np.prod(s)) == n, C)
    w = None
    if weight is not None:
        if tuple(weight.shape) != (C,):
            raise RuntimeError(f"{op}: inconsistent weight size, expected {C} but got {list(weight.shape)}")
        check_same_dtype(op, [("input", input), ("weight", weight)])
        _no_grad_for(op, "weight", weight)
        if weight.device != input.device:
            raise RuntimeError(f"{op}: expected all tensors to be on the same device, but found input on "
                               f"{input.device} and weight on {weight.device}")
        w = weight._data
    x = input if input.ndim == 2 else input.reshape(1, C)
    xp = namespace_of(input._data)
    loss = MultiMargin.apply(x, t.reshape(-1) if xp is np else xp.asarray(t.reshape(-1)), w, int(p), float(margin),
                             reduction)
    return loss.reshape(t.shape) if reduction == "none" else loss


class MultiLabelMargin(Function):
    """The multi-label hinge loss: for a sample x (C,) whose target classes are J (the target's
    entries before its first -1, each counted as often as it is listed) and I the classes not
    in J, with z_ji = 1 - x_j + x_i:

        l = sum_{j in J} sum_{i in I} max(0, z_ji) / C
        dl/dx_i = #{j : z_ji > 0} / C  (i in I),    dl/dx_j = -#{i : z_ji > 0} / C  (j in J)

    Computed for all pairs at once: counts (N, C) of each class in J, an (N, C, C) mask of the
    active pairs (j, i)."""

    @staticmethod
    def forward(ctx, x, counts, reduction):
        xp = namespace_of(x)
        n, C = x.shape
        ctx.args = (reduction, x.dtype)
        if n == 0:
            ctx.save_for_backward(xp.zeros((0, C, C), x.dtype))
            return _reduced_array(xp.zeros(0, x.dtype), reduction)
        others = counts == 0
        z = 1 - x[:, :, None] + x[:, None, :]                       # z[n, j, i]
        m = xp.where((z > 0) & others[:, None, :], counts[:, :, None], 0)
        loss = ((m * z).sum((1, 2)) / C).astype(x.dtype, copy=False)
        ctx.save_for_backward(m)
        return _reduced_array(loss, reduction)

    @staticmethod
    def backward(ctx, g):
        (m,) = ctx.saved_tensors
        reduction, dtype = ctx.args
        xp = namespace_of(g)
        n, C, _ = m.shape
        if n == 0:
            return xp.zeros((0, C), dtype), None, None
        G = m * (_per_sample(xp, g, n, reduction) / C)[:, None, None]
        return (G.sum(1) - G.sum(2)).astype(dtype, copy=False), None, None


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """As ``torch.nn.functional.multilabel_margin_loss``: ``target`` (the input's shape, (C,)
    or (N, C)) lists each sample's classes, padded with -1 (the first -1 ends the list; what
    follows it is ignored). See ``MultiLabelMargin``."""
    op = "multilabel_margin_loss"
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    _class_input(op, input)
    C = input.shape[-1]
    t = _class_targets(op, input, target, f"{op}: inconsistent target size: {{target}} for input of size: "
                                   f"{list(input.shape)}", lambda s: tuple(s) == tuple(input.shape), C, low=-1)
    rows = t.reshape(-1, C)
    listed = np.cumprod(rows >= 0, axis=1).astype(bool)          # before the first -1
    counts = np.zeros(rows.shape, dtype=input.dtype)
    r, c = np.nonzero(listed)
    np.add.at(counts, (r, rows[r, c]), 1)
    xp = namespace_of(input._data)
    counts = counts if xp is np else xp.asarray(counts)
    x = input if input.ndim == 2 else input.reshape(1, C)
    loss = MultiLabelMargin.apply(x, counts, reduction)
    return loss.reshape(()) if reduction == "none" and input.ndim == 1 else loss


# triplets with any distance --------------------------------------------------------------

def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """As ``torch.nn.functional.triplet_margin_with_distance_loss``: l = max(0, margin +
    d(a, pos) - d(a, neg)) with d = ``distance_function`` (pairwise_distance by default, any
    callable on two Tensors that returns one distance per sample); ``swap`` uses
    min(d(a, neg), d(pos, neg)) as the negative distance. The distance's own ops carry the
    gradient; the hinge passes dl/dd(a, pos) = 1 and dl/dd(a, neg) = -1 where it is >= 0."""
    op = "triplet_margin_with_distance_loss"
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    _floating_operands(op, [("anchor", anchor), ("positive", positive), ("negative", negative)])
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, distance(positive, negative))
    return _reduced((margin + d_pos - d_neg).clamp(min=0), reduction)
