"""Negative log-likelihood losses of a distribution's parameters, with PyTorch's semantics:
poisson_nll_loss (a Poisson rate, or its log) and gaussian_nll_loss (a mean and a variance).

Both are elementwise over the broadcast of their operands and reduced by "none", "sum" or
"mean" (sum / number of elements; an empty mean is nan). With r the reduction's factor (1 or
1/n) each operand's gradient is r times the partial derivative stated in its class, summed
back over broadcast dims.
"""
import math

import numpy as np

from ..autograd.op_function import Function
from ..backends import namespace_of
from ..tensor.dtype import check_same_dtype
from ..tensor.tensor import Tensor
from ._broadcast import unbroadcast
from .unary import _floating
from ._higher_order import constant, keep_where, sum_to
from .loss_pointwise import PointwiseLoss, _check_reduction, _legacy, _operands, pointwise_differentiable_backward

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _stirling(xp, y):
    """Stirling's approximation of log(y!), y log y - y + log(2 pi y) / 2, where y > 1 and 0
    elsewhere (PyTorch masks it there: log(y!) is 0 at y = 0 and 1 and the series is poor below)."""
    big = y > 1
    ys = xp.where(big, y, 2.0)
    return xp.where(big, ys * xp.log(ys) - ys + 0.5 * xp.log(2 * math.pi * ys), 0.0)


def _stirling_grad(xp, y):
    """d/dy of ``_stirling``: log y + 1 / (2 y) where y > 1, 0 where 0 < y <= 1, and nan where
    y <= 0, as PyTorch's: it masks the term after computing it, so the chain rule through the
    masked y log y meets 0 * log(0) there."""
    ys = xp.where(y > 1, y, 2.0)
    return xp.where(y > 1, xp.log(ys) + 0.5 / ys, xp.where(y > 0, 0.0, np.nan))


class PoissonNLL(PointwiseLoss):
    """For a Poisson rate lambda and a count y, -log P(y | lambda) = lambda - y log lambda + log(y!).

    log_input (x = log lambda): f = e**x - y x;  df/dx = e**x - y,  df/dy = -x.
    otherwise (x = lambda):     f = x - y log(x + eps);  df/dx = 1 - y / (x + eps),  df/dy = -log(x + eps).
    ``full`` adds log(y!) by Stirling's approximation (``_stirling``) to f and its derivative
    (``_stirling_grad``) to df/dy; without it the loss is the NLL up to a constant in x."""

    @staticmethod
    def loss(xp, x, y, log_input, full, eps):
        f = xp.exp(x) - y * x if log_input else x - y * xp.log(x + eps)
        return f + _stirling(xp, y) if full else f

    @staticmethod
    def partials(xp, x, y, log_input, full, eps):
        if log_input:
            dx, dy = xp.exp(x) - y, -x
        else:
            dx, dy = 1 - y / (x + eps), -xp.log(x + eps)
        return dx, (dy + _stirling_grad(xp, y) if full else dy)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        def partials(x, y, log_input, full, eps):
            if log_input:
                dx, dy = x.exp() - y, -x
            else:
                dx, dy = 1 - y / (x + eps), -(x + eps).log()
            if full:     # _stirling_grad on Tensors: log y + 1 / (2 y) where y > 1 (the rest constants)
                a = y._data
                big = a > 1
                ys = keep_where(big, y) + constant(np.where(big, 0.0, 2.0).astype(a.dtype))
                rest = np.where(big, 0.0, np.where(a > 0, 0.0, np.nan)).astype(a.dtype)
                dy = dy + keep_where(big, ys.log() + 0.5 / ys) + constant(rest)
            return dx, dy
        return pointwise_differentiable_backward(ctx, inputs, g, partials)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """As ``torch.nn.functional.poisson_nll_loss``: ``input`` is the rate (its log with
    ``log_input``), ``target`` the observed counts; shapes broadcast."""
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    x, y = _operands("poisson_nll_loss", _floating(input), target)   # integer rates: float32, as PyTorch
    return PoissonNLL.apply(x, y, None, reduction, bool(log_input), bool(full), float(eps))


class GaussianNLL(Function):
    """For a mean x, a sample y and a variance v (clamped: c = max(v, eps)), the negative log
    likelihood without its constant:

        l = (log c + (x - y)**2 / c) / 2            (+ log(2 pi) / 2 with ``full``)
        dl/dx = (x - y) / c,   dl/dy = -(x - y) / c,   dl/dv = (1 / c - (x - y)**2 / c**2) / 2

    The clamp is outside the graph, as PyTorch's (it clamps a clone under no_grad): dl/dv is
    the derivative at c and passes to v whole, also where v < eps."""

    @staticmethod
    def forward(ctx, x, y, v, eps, full, reduction):
        xp = namespace_of(x)
        c = xp.maximum(v, eps)
        d = x - y
        l = 0.5 * (xp.log(c) + d * d / c)
        if full:
            l = l + _HALF_LOG_2PI
        l = l.astype(x.dtype, copy=False)
        ctx.save_for_backward(d, c)
        ctx.args = (reduction, l.size, [np.shape(a) for a in (x, y, v)], l.shape)
        if reduction == "none":
            return l
        total = l.sum()
        if reduction == "mean":
            with np.errstate(divide="ignore", invalid="ignore"):
                total = total / l.size   # an empty mean is nan, as PyTorch's
        return xp.asarray(total, dtype=x.dtype)

    @staticmethod
    def backward(ctx, g):
        d, c = ctx.saved_tensors
        reduction, n, shapes, full = ctx.args
        xp = namespace_of(d)
        r = g / n if reduction == "mean" else g
        dx = r * d / c
        grads = [dx, -dx, r * 0.5 * (1 / c - d * d / (c * c))]
        out = [unbroadcast(xp.broadcast_to(gr, full).astype(d.dtype, copy=False), shape) if need else None
               for gr, shape, need in zip(grads, shapes, ctx.needs_input_grad)]
        return tuple(out) + (None, None, None)

    @staticmethod
    def differentiable_backward(ctx, inputs, g):
        """backward on Tensors: c = v shifted by the constant max(v, eps) - v (the clamp outside the graph)."""
        d_arr, c_arr = ctx.saved_tensors
        reduction, n, shapes, full = ctx.args
        x, y, v = inputs[:3]
        d = x - y
        c = v + constant((c_arr - v._data).astype(c_arr.dtype))
        r = g / n if reduction == "mean" else g
        dx = r * d / c
        grads = [dx, -dx, r * 0.5 * (1 / c - d * d / (c * c))]
        out = [sum_to(gr.expand(*full), shape) if need else None
               for gr, shape, need in zip(grads, shapes, ctx.needs_input_grad)]
        return tuple(out) + (None, None, None)


def _gaussian_var(var, input):
    """``var`` checked as PyTorch checks it and shaped to broadcast against the input: the
    input's shape (heteroscedastic); the input's shape without its last dim, or with one dim of
    size 1 where the input's is larger (homoscedastic along that dim); or a non-negative float."""
    op = "gaussian_nll_loss"
    if isinstance(var, (float, int)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        from ..tensor.factories import full_like
        return full_like(input, float(var))
    if not isinstance(var, Tensor):
        raise TypeError(f"{op}: expected var to be a Tensor or a float, got {type(var).__name__}")
    if var.dtype.kind not in "fV":
        var = var.to(input.dtype)
    check_same_dtype(op, [("input", input), ("var", var)])
    if bool((var._data < 0).any()):
        raise ValueError("var has negative entry/entries")
    ishape, vshape = tuple(input.shape), tuple(var.shape)
    if vshape != ishape:
        if ishape[:-1] == vshape:
            from .shape import unsqueeze
            var = unsqueeze(var, -1)
        elif not (len(ishape) == len(vshape) and sum(b for a, b in zip(ishape, vshape) if a != b) == 1):
            raise ValueError(f"var is of incorrect size: expected the input's shape {list(ishape)}, that shape "
                             f"without its last dim, or with one dim of size 1; got {list(vshape)}")
    return var


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """As ``torch.nn.functional.gaussian_nll_loss``: ``input`` holds the means, ``target``
    the samples, ``var`` the variances (the input's shape, one dim short of it or of size 1 in
    one dim, or a float); variances below ``eps`` are clamped to it (see ``GaussianNLL``)."""
    op = "gaussian_nll_loss"
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected input to be a Tensor, got {type(input).__name__}")
    if input.dtype.kind not in "fV":
        raise RuntimeError(f"{op}: expected a floating point input, got dtype {input.dtype}")
    if not isinstance(target, Tensor):
        raise TypeError(f"{op}: expected target to be a Tensor, got {type(target).__name__}")
    if target.dtype.kind not in "fV":
        target = target.to(input.dtype)
    check_same_dtype(op, [("input", input), ("target", target)])
    v = _gaussian_var(var, input)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not valid; expected one of 'none', 'mean', 'sum'")
    try:
        np.broadcast_shapes(tuple(input.shape), tuple(target.shape), tuple(v.shape))
    except ValueError:
        raise RuntimeError(f"{op}: input of shape {list(input.shape)}, target of shape {list(target.shape)} and "
                           f"var of shape {list(v.shape)} do not broadcast") from None
    return GaussianNLL.apply(input, target, v, float(eps), bool(full), reduction)
