"""What the ops' ``differentiable_backward`` methods share: the Tensor-level forms of the array
helpers their ``backward`` uses (autograd/higher_order.py runs them, recording a graph).

Masks, index arrays and shapes are constants of a backward (a ReLU's mask does not move under
an infinitesimal change of x), so they stay arrays; only what depends smoothly on the inputs
and on the output gradients is computed with differentiable ops.
"""
import math

from ..autograd import op_function as _op_function


def constant(array):
    """An array as a Tensor outside the graph."""
    return _op_function.Tensor._wrap(array, None, 0)


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


def scatter_to_indices(g, idx, spatial):
    """The max pools' backward for a Tensor g (N, C, *out): dx (N, C, *spatial) with each
    g[n, c, o] added at the flat position idx[n, c, o] of its plane (an int array; -1 sends
    nothing). A scatter-add (index_put with accumulate), so dL/dg is the gather dx[idx]."""
    from ..backends import namespace_of
    from .index_put import IndexPutAccumulate
    xp = namespace_of(idx)
    N, C = g.shape[:2]
    L, S = math.prod(g.shape[2:]), math.prod(spatial)
    valid = idx >= 0
    if not bool(valid.all()):
        g = keep_where(valid, g)
        idx = xp.where(valid, idx, 0)
    rows = xp.broadcast_to(xp.arange(N * C).reshape(N * C, 1), (N * C, L))
    zeros = constant(xp.zeros((N * C, S), dtype=g.dtype))
    dx = IndexPutAccumulate.apply(zeros, g.reshape(N * C, L), (rows, idx.reshape(N * C, L)))
    return dx.reshape((N, C) + tuple(spatial))


def _masked_mean(t, dims, weight, count):
    """mean of t over ``dims`` (kept), or with a 0/1 ``weight`` Tensor the mean over its ones."""
    if weight is None:
        return t.mean(dim=dims, keepdim=True)
    return (t * weight).sum(dim=dims, keepdim=True) / count


def norm_statistics(x, dims, eps, centered=True, weight=None, count=None):
    """(xhat, rstd) of a norm, recomputed from the Tensor x with recorded ops (so that they move
    with x): mean and biased variance over ``dims`` (or the mean square, ``centered=False``:
    RMSNorm), rstd = (var + eps)^(-1/2), xhat = (x - mean) rstd. ``weight``, a constant 0/1 Tensor
    broadcasting against x, and ``count``, its number of ones per group, restrict the statistics
    to the positions it marks (masked BatchNorm)."""
    xc = x - _masked_mean(x, dims, weight, count) if centered else x
    rstd = (_masked_mean(xc * xc, dims, weight, count) + eps) ** -0.5
    return xc * rstd, rstd


def norm_input_grad(d, xhat, rstd, dims, centered=True, weight=None, count=None):
    """The norms' closed-form dL/dx for d = dL/dxhat, as Tensors:
    rstd (d - mean(d) - xhat mean(d xhat)) over ``dims`` (no mean(d) term for ``centered=False``);
    ``weight`` and ``count`` as in norm_statistics (d is expected to be 0 off the mask)."""
    out = d - xhat * _masked_mean(d * xhat, dims, weight, count)
    if centered:
        out = out - _masked_mean(d, dims, weight, count)
    return out * rstd


def channel_sum(t, shape):
    """t (N, C, *) summed over every dim but 1, as a Tensor of ``shape`` (a per-channel parameter's)."""
    dims = (0,) + tuple(range(2, t.ndim))
    return t.sum(dim=dims).reshape(shape)


def along_axis_index(idx, axis):
    """The full index tuple that picks what ``take_along_axis(a, idx, axis)`` picks: idx on
    ``axis``, a broadcasting arange on every other dim."""
    xp = _namespace_of(idx)
    out = []
    for d, n in enumerate(idx.shape):
        shape = [1] * idx.ndim
        shape[d] = n
        out.append(idx if d == axis else xp.arange(n).reshape(shape))
    return tuple(out)


def add_at(g, index, shape):
    """zeros(shape) with the Tensor g added at ``index`` (an index tuple; a position named twice
    gets both): the index_put with accumulate whose gradient in g is the gather g[index]."""
    from .index_put import IndexPutAccumulate
    zeros = constant(_namespace_of(g._data).zeros(tuple(shape), dtype=g.dtype))
    return IndexPutAccumulate.apply(zeros, g, index)


def into_zeros(t, shape):
    """The Tensor t written at the start of every dim of zeros(shape) (t's shape fits inside)."""
    if tuple(t.shape) == tuple(shape):
        return t
    from .scatter_views import SliceScatter
    crop = tuple(slice(0, n) for n in t.shape) + (Ellipsis,)
    zeros = constant(_namespace_of(t._data).zeros(tuple(shape), dtype=t.dtype))
    return SliceScatter.apply(zeros, t, lambda a: a[crop])


def view_scatter_grads(ctx, g):
    """The view scatters' (select/slice_scatter) gradients as Tensors: dL/dx = g with its view
    zeroed (a scatter of zeros into g), dL/dsrc = the view of g."""
    nx, ns = ctx.needs_input_grad[:2]
    gx = gs = None
    if nx:
        view = ctx.where(g)
        zeros = constant(_namespace_of(g._data).zeros(tuple(view.shape), dtype=g.dtype))
        gx = type(ctx).apply(g, zeros, ctx.where)
    if ns:
        gs = ctx.where(g)
    return gx, gs, None


def _namespace_of(a):
    from ..backends import namespace_of
    return namespace_of(a)
