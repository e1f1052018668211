"""What the ops' ``differentiable_backward`` methods share: the Tensor-level forms of the array
helpers their ``backward`` uses (autograd/higher_order.py runs them, recording a graph).

Masks, index arrays and shapes are constants of a backward (a ReLU's mask does not move under
an infinitesimal change of x), so they stay arrays; only what depends smoothly on the inputs
and on the output gradients is computed with differentiable ops.
"""
import math

from ..autograd import function as _function


def constant(array):
    """An array as a Tensor outside the graph."""
    return _function.Tensor._wrap(array, None, 0)


def sum_to(g, shape):
    """unbroadcast for a Tensor: g summed over the axes broadcasting added or stretched, so
    that it has ``shape``."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and g.shape[i + lead] != 1)
    if axes:
        g = g.sum(dim=axes, keepdim=True)
    return g.reshape(shape)


def keep_where(mask, g):
    """g where ``mask`` (a bool array broadcasting against g), else 0, exactly 0 even where g is
    NaN, as the array backwards' ``where(mask, g, 0)``."""
    from .indexing import Where
    return Where.apply(mask, g, 0.0)


def rows(t):
    """(..., n) -> (M, n) for a Tensor, M the product of the leading dims."""
    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1])


def needed(ctx, grads):
    """``grads`` with None where the forward argument needs no gradient."""
    return tuple(g if n else None for g, n in zip(grads, ctx.needs_input_grad))
